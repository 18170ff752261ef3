#include "tests/http_fuzz_requests.h"

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <set>

namespace gpupool::testing {
namespace {

using nlohmann::json;
using Headers = std::vector<std::pair<std::string, std::string>>;

constexpr int kMaxDepth = 8;           // of a valid-ish body (the server refuses more than 64)
constexpr size_t kMaxMutations = 3;    // tree mutations per body
constexpr size_t kMaxPointers = 4096;  // values considered for a mutation
constexpr size_t kDescribeBytes = 512;

// --- drawing ------------------------------------------------------------------------

bool Chance(Rng& rng, double p) { return rng.Uniform() < p; }

template <class T>
const T& Pick(Rng& rng, const std::vector<T>& items) {
  return items[rng.Below(items.size())];
}

int64_t Between(Rng& rng, int64_t lo, int64_t hi) {
  if (hi <= lo) return lo;
  return lo + static_cast<int64_t>(rng.Below(static_cast<uint64_t>(hi - lo) + 1));
}

std::string Letters(Rng& rng, size_t n, const char* alphabet = "abcdefghijklmnopqrstuvwxyz0123456789") {
  const size_t k = std::char_traits<char>::length(alphabet);
  std::string s;
  for (size_t i = 0; i < n; ++i) s += alphabet[rng.Below(k)];
  return s;
}

std::string RandomBytes(Rng& rng, size_t n) {
  std::string s;
  for (size_t i = 0; i < n; ++i) s += static_cast<char>(rng.Below(256));
  return s;
}

// Percent-encodes everything but RFC 3986's unreserved characters.
std::string Encode(const std::string& s) {
  static const char* kHex = "0123456789ABCDEF";
  std::string out;
  for (unsigned char c : s) {
    if (std::isalnum(c) || c == '-' || c == '.' || c == '_' || c == '~') {
      out += static_cast<char>(c);
    } else {
      out += '%';
      out += kHex[c >> 4];
      out += kHex[c & 15];
    }
  }
  return out;
}

std::string Escaped(std::string_view s, size_t limit) {
  std::string out;
  for (size_t i = 0; i < s.size() && i < limit; ++i) {
    const auto c = static_cast<unsigned char>(s[i]);
    if (c == '\\') {
      out += "\\\\";
    } else if (c >= 0x20 && c < 0x7f) {
      out += static_cast<char>(c);
    } else if (c == '\n') {
      out += "\\n";
    } else if (c == '\r') {
      out += "\\r";
    } else {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\x%02x", c);
      out += buf;
    }
  }
  if (s.size() > limit) out += "... (" + std::to_string(s.size()) + " bytes in all)";
  return out;
}

// --- hostile values -------------------------------------------------------------------

// Values a field may get instead of what its schema says.
json HostileScalar(Rng& rng, const FuzzContext& ctx) {
  switch (rng.Below(24)) {
    case 0: return nullptr;
    case 1: return Chance(rng, 0.5);
    case 2: return 0;
    case 3: return -1;
    case 4: return -0.0;
    case 5: return 0.5;
    case 6: return 1e308;
    case 7: return -1e308;
    case 8: return 4.9e-324;
    case 9: return INT64_MAX;
    case 10: return INT64_MIN;
    case 11: return UINT64_MAX;
    case 12: return (int64_t{1} << 53) + 1;
    case 13: return "";
    case 14: return std::string(Between(rng, 1, 70000), 'x');
    case 15: return std::string("a\0b", 3);
    case 16: return "\u00e9\u6f22\U0001F642\u202e";
    case 17: return "../../../../etc/passwd";
    case 18: return "' OR 1=1; --";
    case 19: return "99999999999999999999999";
    case 20: return Pick(rng, std::vector<std::string>{ctx.tenant, ctx.other_tenant, ctx.node, "default", "H100"});
    case 21: return "30s";
    case 22: return "2026-13-45T99:99:99Z";
    default: return Letters(rng, Between(rng, 1, 300), "abcXYZ-_.~!*'();:@&=+$,/?#[] \t");
  }
}

json Nested(int depth, bool objects) {
  json v = 1;
  for (int i = 0; i < depth; ++i) v = objects ? json{{"a", std::move(v)}} : json::array({std::move(v)});
  return v;
}

json HostileContainer(Rng& rng) {
  switch (rng.Below(9)) {
    case 0: return json::array();
    case 1: return json::object();
    case 2: return Nested(static_cast<int>(Pick(rng, std::vector<int64_t>{8, 62, 63, 64, 65, 300})), false);
    case 3: return Nested(static_cast<int>(Pick(rng, std::vector<int64_t>{8, 62, 63, 64, 65, 300})), true);
    case 4: return json(std::vector<int>(Between(rng, 100, 20000), 0));
    case 5: {
      json o = json::object();
      for (int i = 0, n = static_cast<int>(Between(rng, 10, 3000)); i < n; ++i) o["k" + std::to_string(i)] = i;
      return o;
    }
    case 6: return json::array({nullptr, true, "x", 1.5, json::object()});
    case 7: return json(std::vector<std::string>(Between(rng, 10, 5000), "host"));
    default: return json::array({json::object({{"job", -1}}), json::object({{"index", 99999}})});
  }
}

// Raw JSON text that nlohmann's writer cannot produce: non-finite and
// overflowing numbers, bad escapes, invalid UTF-8, syntax slips.
const std::vector<std::string>& RawTokens() {
  static const std::vector<std::string> kTokens = {
      "1e999", "-1e999", "1E400", "-1e400", "1e-999", "4e-400", "NaN", "-NaN", "nan", "Infinity", "-Infinity",
      "inf", "-0", "-0.0", "0e0", "-0e-0", "00", "01", "-01", "+1", ".5", "5.", "1.e3", "1e", "1e+", "0x1F",
      "1_000", "123456789012345678901234567890", "-123456789012345678901234567890", "9223372036854775808",
      "-9223372036854775809", "18446744073709551616", "18446744073709551615", "1.7976931348623157e309",
      "2.2250738585072011e-308", "1" + std::string(400, '0'), "0." + std::string(400, '7'),
      "1e" + std::string(40, '9'), "tru", "nul", "True", "None", "undefined", "'single'", "\"unterminated",
      "\"\\ud800\"", "\"\\udc00\\ud800\"", "\"\\u00zz\"", "\"\\x41\"", "\"\xff\xfe\"", "\"\xc0\xaf\"",
      "\"\xed\xa0\x80\"", "\"\xf4\x90\x80\x80\"", "\"\xe2\x82\"", "\"a\tb\"", "\"a\nb\"", std::string("\"\0\"", 3),
      "/*c*/1", "1//c", "[1,]", "{\"a\":1,}", "[,1]", "{,}", "[1 2]", "{\"a\" 1}", "{1:2}", "\"\\u0000\"", "[",
      "{", "]", "}", ":", ",", "\"\\", "\"\\uD83D\\uDE00\""};
  return kTokens;
}

// --- tree mutations -------------------------------------------------------------------

void Pointers(const json& j, const json::json_pointer& at, std::vector<json::json_pointer>& out) {
  if (out.size() >= kMaxPointers) return;
  out.push_back(at);
  if (j.is_object()) {
    for (const auto& [k, v] : j.items()) Pointers(v, at / k, out);
  } else if (j.is_array()) {
    for (size_t i = 0; i < j.size() && i < 64; ++i) Pointers(j[i], at / i, out);
  }
}

// Markers that the text stage replaces: a value by a raw token, or a key by
// a key its object already has (a repeated key).
struct Markers {
  std::vector<std::string> tokens;         // "\u0001T<i>\u0001" -> tokens[i]
  std::vector<std::string> repeated_keys;  // "\u0001K<i>\u0001" -> repeated_keys[i]
};

std::string Marker(char kind, size_t i) { return std::string("\x01") + kind + std::to_string(i) + "\x01"; }

void MutateTree(Rng& rng, const FuzzContext& ctx, json& body, Markers& m) {
  std::vector<json::json_pointer> all;
  Pointers(body, json::json_pointer(), all);
  json::json_pointer at = Pick(rng, all);
  json& v = body[at];
  switch (rng.Below(9)) {
    case 0:
    case 1: v = HostileScalar(rng, ctx); break;
    case 2: v = HostileContainer(rng); break;
    case 3:  // a missing field
      if (!at.empty()) {
        const std::string last = at.back();
        json& parent = body[at.parent_pointer()];
        if (parent.is_object()) parent.erase(last);
        if (parent.is_array() && !parent.empty()) parent.erase(parent.begin());
      }
      break;
    case 4:  // an unknown field
      if (v.is_object()) v[Pick(rng, std::vector<std::string>{"zzz", "", "\u00e9", "NAME", "name ", "__proto__"})] = 1;
      break;
    case 5:
      m.tokens.push_back(Pick(rng, RawTokens()));
      v = Marker('T', m.tokens.size() - 1);
      break;
    case 6:  // a repeated key
      if (v.is_object() && !v.empty()) {
        m.repeated_keys.push_back(v.begin().key());
        v[Marker('K', m.repeated_keys.size() - 1)] = HostileScalar(rng, ctx);
      }
      break;
    case 7: v = json::array({v}); break;
    default: v = json{{"value", v}}; break;
  }
}

std::string ReplaceMarkers(std::string text, const Markers& m) {
  auto replace = [&text](const std::string& marker, const std::string& with) {
    // nlohmann writes U+0001 as \u0001.
    std::string quoted = "\"" + marker + "\"";
    std::string written;
    for (char c : quoted) written += c == '\x01' ? std::string("\\u0001") : std::string(1, c);
    const size_t at = text.find(written);
    if (at != std::string::npos) text.replace(at, written.size(), with);
  };
  for (size_t i = 0; i < m.tokens.size(); ++i) replace(Marker('T', i), m.tokens[i]);
  for (size_t i = 0; i < m.repeated_keys.size(); ++i) {
    replace(Marker('K', i), json(m.repeated_keys[i]).dump(-1, ' ', false, json::error_handler_t::replace));
  }
  return text;
}

// --- text mutations -------------------------------------------------------------------

std::string MutateText(Rng& rng, std::string text) {
  const size_t at = text.empty() ? 0 : rng.Below(text.size() + 1);
  static const std::vector<std::string> kBytes = {
      std::string(1, '\0'), "\xff", "\x80", "\xc3", "\xed\xa0\x80", "\"", "{", "}", "[", "]", "\\", ",", ":", "\x7f",
      "\r\n", " ", "\xef\xbb\xbf"};
  switch (rng.Below(6)) {
    case 0: return text.substr(0, at);  // cut short
    case 1: return text.insert(at, Pick(rng, kBytes));
    case 2:
      if (!text.empty()) text[rng.Below(text.size())] ^= static_cast<char>(1 << rng.Below(8));
      return text;
    case 3: return text + Pick(rng, std::vector<std::string>{"}", " x", std::string(1, '\0'), "{}", "\n\n", ",1"});
    case 4: return Pick(rng, std::vector<std::string>{"\xef\xbb\xbf", " \t\r\n", "\xfe\xff"}) + text;
    default: return text.insert(at, RandomBytes(rng, Between(rng, 1, 16)));
  }
}

// A whole body in place of the operation's: shapes, sizes and bytes.
std::string WholeBody(Rng& rng, const FuzzContext& ctx, const std::string& valid) {
  const auto max = static_cast<size_t>(ctx.max_body_bytes);
  auto padded = [&](size_t size) {
    std::string s = valid.empty() ? std::string("{}") : valid;
    if (s.size() < size) s.append(size - s.size(), ' ');
    return s;
  };
  switch (rng.Below(18)) {
    case 0: return "";
    case 1: return Pick(rng, std::vector<std::string>{"null", "true", "0", "-1", "\"text\"", "[]", "{}", "[{}]", " "});
    case 2: return std::string(Between(rng, 65, 200000), '[');
    case 3: {
      const int n = static_cast<int>(Between(rng, 60, 70));
      std::string s;
      for (int i = 0; i < n; ++i) s += "{\"a\":";
      return s + "1" + std::string(n, '}');
    }
    case 4: return std::string(static_cast<size_t>(Between(rng, 60, 70)), '[') + std::string(70, ']');
    case 5: return RandomBytes(rng, Between(rng, 1, 2048));
    case 6: return valid + std::string("\0garbage", 8);
    case 7: return padded(max);      // exactly the limit
    case 8: return padded(max + 1);  // one byte over
    case 9: return padded(max + Between(rng, 2, 3 * max));
    case 10: return "{\"name\":\"" + std::string(max > 20 ? max - 20 : 1, 'x') + "\"}";
    case 11: return "name=x&gpus=1";
    case 12: return "\x1f\x8b\x08\x00\x00\x00\x00\x00";
    case 13: {  // many keys
      std::string s = "{";
      for (int i = 0, n = static_cast<int>(Between(rng, 1000, 50000)); i < n; ++i) s += "\"k" + std::to_string(i) + "\":1,";
      s.back() = '}';
      return s;
    }
    case 14: return "[" + std::string(Between(rng, 1000, 100000), '1').insert(1, ",").substr(0, 20000) + "]";
    case 15: return std::string("{\"name\":\"") + "\xff\xfe\xfd" + "\"}";
    case 16: return "{\"name\":\"x\",\"name\":\"y\"}";
    default: return std::string(Between(rng, 1, 100000), ' ');
  }
}

// --- path and query values ------------------------------------------------------------

const std::vector<std::string>& HostileIds() {
  static const std::vector<std::string> kIds = {
      "0", "-1", "9223372036854775807", "9223372036854775808", "18446744073709551616", std::string(30, '9'),
      std::string(5000, '9'), "abc", "1.0", "1e3", "0x1", "+1", "%201", "%31", "1%00", "%2e%2e", "..", ".",
      "1;2", "1,2", "%ff", "%", "%zz", "%EF%BC%91", "0000000000000000001", "00000000000000000000001", "-0",
      "%2D1", "1%2F2", "NaN"};
  return kIds;
}

const std::vector<std::string>& HostileNames() {
  static const std::vector<std::string> kNames = {
      "..", ".", "%2e%2e", "%2e%2e%2f%2e%2e%2fetc%2fpasswd", "a%2Fb", "A", "UPPER", std::string(300, 'a'),
      std::string(64, 'a'), std::string(63, 'a'), std::string(254, 'a'), "-x", ".x", "%00", "%ff%fe", "%C3%A9",
      "name%20with%20space", "%2A", "x%3Fy", "x%23y", "%5C", "%252e", "0", "a.b", "a..b", "1", "%0d%0aX:1",
      std::string(2000, 'n')};
  return kNames;
}

const std::vector<std::string>& HostileQueryValues() {
  static const std::vector<std::string> kValues = {
      "", "0", "-1", "-0", "1001", "10001", "99999999999999999999", "9223372036854775807", "9223372036854775808",
      "-9223372036854775808", "abc", "1e3", "1.5", "%201", "+1", "%2B1", "0x10", "%00", "%ff", "%EF%BC%91",
      "1%00", "NaN", "null", "true", "pending,running", "PENDING", std::string(3000, 'x'), "%", "%zz", "1%202"};
  return kValues;
}

// Request targets that match no operation (each a valid request line).
const std::vector<std::string>& OddTargets() {
  static const std::vector<std::string> kTargets = {
      "/", "/v1", "/v1/", "/v1/jobs/", "//v1/jobs", "/v1//jobs", "/v1/jobs/../tenants", "/v1/./jobs", "/V1/JOBS",
      "/v1/jobs/1/logs/x", "/v1/agent", "/v1/agent/", "/v1/agent/unknown", "/healthz/", "/healthz/x",
      "/metrics/x", "/%2e%2e/%2e%2e/etc/passwd", "/v1/tenants/%2e%2e", "/%", "/%zz", "/%00", "/%ff",
      "/v1/jobs;x=1", "/v1/jobs#frag", "/v1/jobs?#", "/v1/jobs?&&=&", "/v1/nodes/x/token/y", "/v1/jobs/1/2/3",
      "/v1/tenants/a/quota/b", "/.git/config", "/v1/jobs/%2F", "/v1/regions/x", "/v2/jobs", "/v1/events/1",
      "/v1/pools/default", "/v1/jobs/1/logs/", "/v1/nodes/x/token/"};
  return kTargets;
}

// --- the document ----------------------------------------------------------------------

// Operations the server serves beyond docs/api/openapi.yaml: the agent
// protocol's watch and task reports (protocol 2, docs/agent.md), with
// schemas written here in the document's own dialect.
std::vector<RequestMaker::Operation> ExtraOperations() {
  const json node = {{"type", "string"}, {"maxLength", 253}};
  const json session = {{"type", "string"}, {"maxLength", 128}};
  const json watch = {{"type", "object"},
                      {"required", {"node", "session"}},
                      {"properties",
                       {{"protocol", {{"type", "integer"}, {"minimum", 1}, {"maximum", 1000}}},
                        {"node", node},
                        {"session", session},
                        {"incarnation", {{"type", "string"}, {"maxLength", 128}}},
                        {"revision", {{"type", "integer"}, {"minimum", 0}}},
                        {"wait_ms", {{"type", "integer"}, {"minimum", 0}, {"maximum", 1000}}}}}};
  const json report = {
      {"type", "object"},
      {"required", {"node", "session"}},
      {"properties",
       {{"protocol", {{"type", "integer"}, {"minimum", 1}, {"maximum", 1000}}},
        {"node", node},
        {"session", session},
        {"tasks", {{"type", "array"}, {"items", {{"$ref", "#/components/schemas/TaskReport"}}}}},
        {"scrubs", {{"type", "array"}, {"items", {{"$ref", "#/components/schemas/ScrubReport"}}}}},
        {"logs", {{"type", "array"}, {"items", {{"$ref", "#/components/schemas/LogChunk"}}}}}}}};
  return {RequestMaker::Operation{"POST", "/v1/agent/watch", watch, {}, {"node"}},
          RequestMaker::Operation{"POST", "/v1/agent/report", report, {}, {"node"}}};
}

std::string Upper(std::string s) {
  for (char& c : s) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return s;
}

}  // namespace

std::string FuzzRequest::Describe() const {
  const size_t head_end = bytes.find("\r\n\r\n");
  const std::string head = bytes.substr(0, head_end == std::string::npos || head_end == 0 ? kDescribeBytes : head_end);
  return "kind: " + kind + "\n  head: " + Escaped(head, 4096) + "\n  body (" + std::to_string(body.size()) +
         " bytes): " + Escaped(body, kDescribeBytes);
}

Result<RequestMaker> RequestMaker::FromOpenApi(json doc) {
  if (!doc.contains("paths") || !doc["paths"].is_object() || doc["paths"].empty()) {
    return InvalidArgument("the OpenAPI document has no paths");
  }
  RequestMaker m(std::move(doc));
  for (const auto& [path, item] : m.doc_["paths"].items()) {
    for (const std::string method : {"get", "put", "post", "delete", "patch", "head", "options"}) {
      if (!item.contains(method)) continue;
      const json& op = item[method];
      Operation o{Upper(method), path, nullptr, {}, {}};
      const json::json_pointer body("/requestBody/content/application~1json/schema");
      if (op.contains(body)) o.body_schema = op.at(body);
      for (const json& p : op.value("parameters", json::array())) {
        const json param = m.Resolve(p);
        if (param.value("in", "") == "query") o.query.push_back(Param{param.value("name", ""), param["schema"]});
      }
      for (const json& r : op.value("x-gpupool-roles", json::array())) o.roles.push_back(r.get<std::string>());
      m.ops_.push_back(std::move(o));
    }
  }
  for (Operation& o : ExtraOperations()) m.ops_.push_back(std::move(o));
  return m;
}

std::vector<std::string> RequestMaker::OperationNames() const {
  std::vector<std::string> out;
  for (const Operation& o : ops_) out.push_back(o.method + " " + o.path);
  return out;
}

json RequestMaker::Resolve(const json& schema) const {
  json node = schema;
  for (int hops = 0; node.is_object() && node.contains("$ref") && hops < 10; ++hops) {
    const std::string ref = node["$ref"].get<std::string>();
    if (!ref.starts_with("#/")) return json::object();
    const json::json_pointer p(ref.substr(1));
    if (!doc_.contains(p)) return json::object();
    node = doc_.at(p);
  }
  if (!node.is_object()) return json::object();
  json merged = node;
  merged.erase("allOf");
  merged["exclusive"] = json::array();  // lists of properties that must not all be present
  if (node.contains("not")) merged["exclusive"].push_back(node["not"].value("required", json::array()));
  for (const json& part : node.value("allOf", json::array())) {
    const json r = Resolve(part);
    for (const auto& [k, v] : r.items()) {
      if (k == "properties") {
        for (const auto& [pk, pv] : v.items()) merged["properties"][pk] = pv;
      } else if (k == "required") {
        for (const json& x : v) merged["required"].push_back(x);
      } else if (k == "exclusive") {
        for (const json& x : v) merged["exclusive"].push_back(x);
      } else if (!merged.contains(k)) {
        merged[k] = v;
      }
    }
  }
  return merged;
}

// --- valid-ish values -------------------------------------------------------------------

namespace {

const std::vector<std::string>& Durations() {
  static const std::vector<std::string> kDurations = {"30s", "1m", "1h30m", "500ms", "2d", "10m", "0s", "1.5h"};
  return kDurations;
}

// A string for the property `key` of `s`: a name the server knows when the
// key says what it names, else text within the schema's lengths.
std::string HintedString(Rng& rng, const FuzzContext& ctx, const json& s, const std::string& key) {
  auto known = [&](const std::vector<std::string>& names) { return names.empty() ? std::string("x") : Pick(rng, names); };
  const std::string pattern = s.value("pattern", "");
  if (s.value("format", "") == "date-time") return Pick(rng, std::vector<std::string>{"2031-01-01T00:00:00Z", "2026-11-29T12:00:00.000Z", "1970-01-01T00:00:00Z"});
  if (pattern.find("(ms|s|m|h|d)") != std::string::npos) return Pick(rng, Durations());
  if (key == "tenant") return known({ctx.tenant, ctx.other_tenant, ctx.tenant});
  if (key == "pool" || key == "pools") return known(ctx.pools);
  if (key == "model" || key == "gpu_models") return known(ctx.models);
  if (key == "node") return Chance(rng, 0.9) ? ctx.node : "other-" + Letters(rng, 4);
  if (key == "session") return Chance(rng, 0.9) ? ctx.session : Letters(rng, 16);
  if (key == "incarnation") return Chance(rng, 0.8) ? ctx.incarnation : Letters(rng, 16);
  if (key == "class") return known(ctx.node_classes);
  if (key == "requirement") return known(ctx.requirements);
  if (key == "labels" || key == "affinity" || key == "anti_affinity") return known(ctx.labels);
  if (key == "priority") return known(ctx.priorities);
  if (key == "image") return "host";
  if (key == "working_dir") return "/tmp";
  if (key == "command") return Pick(rng, std::vector<std::string>{"true", "sleep", "3600", "echo"});
  if (key == "uuid") return "GPU-" + Letters(rng, 8, "0123456789abcdef");
  if (key == "metrics_url") return "http://127.0.0.1:9400/metrics";
  if (key == "backend") return "fake";
  if (key == "location") return Pick(rng, std::vector<std::string>{"eu", "us"});
  if (key == "region") return "region-1";
  if (key == "zone") return "zone-1";
  if (key == "rack") return "rack-1";
  if (key == "data") return "line " + Letters(rng, 8) + "\n";
  if (key == "profile") return "1g.10gb";
  if (!pattern.empty() || key == "name") return "fz-" + Letters(rng, 10);  // a new tenant, node, job or region
  const int64_t lo = s.value("minLength", 0);
  const int64_t hi = std::min<int64_t>(s.value("maxLength", 12), lo + 12);
  return Letters(rng, static_cast<size_t>(Between(rng, lo, hi)));
}

// A number in the schema's range, mostly small, sometimes on a bound.
double NumberIn(Rng& rng, const json& s, bool integer) {
  double lo = s.contains("minimum") ? s["minimum"].get<double>() : (integer ? -5 : -5.0);
  double hi = s.contains("maximum") ? s["maximum"].get<double>() : lo + 100;
  if (s.value("exclusiveMinimum", false)) lo += integer ? 1 : 0.001;
  if (s.value("exclusiveMaximum", false)) hi -= integer ? 1 : 0.001;
  const double pick = rng.Uniform();
  if (pick < 0.15) return lo;
  if (pick < 0.25) return hi;
  const double small_hi = std::min(hi, lo + 16);
  const double x = lo + rng.Uniform() * (small_hi - lo);
  return integer ? std::floor(x) : x;
}

int64_t HintedInt(Rng& rng, const FuzzContext& ctx, const json& s, const std::string& key) {
  if (key == "job") return Pick(rng, std::vector<int64_t>{ctx.tenant_job, ctx.other_job, Between(rng, 1, 50)});
  // Small gangs mostly (they can be placed), sometimes anything in range.
  if ((key == "replicas" || key == "max_replicas") && Chance(rng, 0.9)) return Between(rng, 1, 3);
  if (key == "gpus" && Chance(rng, 0.9)) return Between(rng, 0, 2);
  if (key == "wait_ms") return Between(rng, 0, 200);
  return static_cast<int64_t>(NumberIn(rng, s, true));
}

}  // namespace

json RequestMaker::Valid(const json& schema, Rng& rng, const FuzzContext& ctx, const std::string& key,
                         int depth) const {
  const json s = Resolve(schema);
  if (depth > kMaxDepth) return "deep";
  for (const char* alt : {"oneOf", "anyOf"}) {
    if (s.contains(alt) && s[alt].is_array() && !s[alt].empty()) {
      return Valid(s[alt][rng.Below(s[alt].size())], rng, ctx, key, depth);
    }
  }
  if (s.contains("enum") && s["enum"].is_array() && !s["enum"].empty()) return s["enum"][rng.Below(s["enum"].size())];
  std::string type = s.value("type", "");
  if (type.empty() && (s.contains("properties") || s.contains("additionalProperties"))) type = "object";
  if (type == "object") {
    json out = json::object();
    std::set<std::string> required;
    for (const json& r : s.value("required", json::array())) required.insert(r.get<std::string>());
    const json properties = s.value("properties", json::object());
    // About three optional properties: more, in a schema of thirty, mostly draw ones that exclude each other.
    const double optional = std::min(0.3, 3.0 / std::max<double>(1, static_cast<double>(properties.size())));
    for (const auto& [name, sub] : properties.items()) {
      if (required.contains(name) || Chance(rng, optional)) out[name] = Valid(sub, rng, ctx, name, depth + 1);
    }
    for (const json& group : s.value("exclusive", json::array())) {  // drop one of properties that exclude each other
      bool all = !group.empty();
      for (const json& k : group) all = all && out.contains(k.get<std::string>());
      if (all) out.erase(group[rng.Below(group.size())].get<std::string>());
    }
    if (s.contains("additionalProperties") && s["additionalProperties"].is_object()) {
      for (int i = 0, n = static_cast<int>(rng.Below(3)); i < n; ++i) {
        std::string k = key == "quota" ? HintedString(rng, ctx, json::object(), "pool")
                        : key == "env" ? "FZ_" + Letters(rng, 4, "ABCDEFGH")
                                       : HintedString(rng, ctx, json::object(), "location");
        out[k] = Valid(s["additionalProperties"], rng, ctx, k, depth + 1);
      }
    }
    return out;
  }
  if (type == "array") {
    json out = json::array();
    const int64_t lo = s.value("minItems", 0);
    const int64_t n = Between(rng, lo, std::min<int64_t>(s.value("maxItems", 3), lo + 3));
    for (int64_t i = 0; i < n; ++i) {
      json item = Valid(s.value("items", json::object()), rng, ctx, key, depth + 1);
      if (item.is_object() && item.contains("index")) item["index"] = i;  // GPUs are listed by index from 0
      out.push_back(std::move(item));
    }
    return out;
  }
  if (type == "string") return HintedString(rng, ctx, s, key);
  if (type == "integer") return HintedInt(rng, ctx, s, key);
  if (type == "number") return NumberIn(rng, s, false);
  if (type == "boolean") return Chance(rng, 0.5);
  return Chance(rng, 0.5) ? json("x") : json(1);
}

// --- the parts of a request ---------------------------------------------------------------

std::string RequestMaker::PathOf(Rng& rng, const FuzzContext& ctx, const Operation& op) const {
  std::string out;
  size_t at = 0;
  while (at < op.path.size()) {
    const size_t open = op.path.find('{', at);
    if (open == std::string::npos) {
      out += op.path.substr(at);
      break;
    }
    const size_t close = op.path.find('}', open);
    out += op.path.substr(at, open - at);
    const std::string name = op.path.substr(open + 1, close - open - 1);
    const bool hostile = Chance(rng, 0.3);
    if (name == "id" && op.path.starts_with("/v1/tokens") && !ctx.spare_token_ids.empty() && !hostile) {
      out += Chance(rng, 0.7) ? Pick(rng, ctx.spare_token_ids) : Letters(rng, 16);
    } else if (name == "id") {
      out += hostile ? Pick(rng, HostileIds())
                     : std::to_string(Pick(rng, std::vector<int64_t>{ctx.tenant_job, ctx.other_job, 1, 2, 3, 1000}));
    } else if (name == "file") {  // GET /console/{file}: the console's files, and some it does not have
      out += hostile ? Pick(rng, HostileNames())
                     : Pick(rng, std::vector<std::string>{"app.js", "api.js", "console.css", "favicon.svg", "index.html",
                                                          "fz-" + Letters(rng, 6) + ".js"});
    } else if (op.path.starts_with("/v1/nodes")) {
      // Issuing a node's token revokes the node's earlier ones: never the
      // agent's own node; a removal takes only the doomed node.
      const std::string& node = op.method == "DELETE" ? ctx.doomed_node : ctx.spare_node;
      out += hostile ? Pick(rng, HostileNames()) : Pick(rng, std::vector<std::string>{node, "fz-" + Letters(rng, 6)});
    } else {
      out += hostile ? Pick(rng, HostileNames())
                     : Pick(rng, std::vector<std::string>{ctx.tenant, ctx.other_tenant, "fz-" + Letters(rng, 6)});
    }
    at = close + 1;
  }
  return out;
}

std::string RequestMaker::QueryOf(Rng& rng, const FuzzContext& ctx, const Operation& op) const {
  std::vector<std::string> args;
  for (const Param& p : op.query) {
    if (!Chance(rng, 0.5)) continue;
    std::string value;
    if (Chance(rng, 0.6)) {
      const json v = Valid(p.schema, rng, ctx, p.name, 0);
      value = Encode(v.is_string() ? v.get<std::string>() : v.dump());
    } else {
      value = Pick(rng, HostileQueryValues());
    }
    args.push_back(Encode(p.name) + "=" + value);
    if (Chance(rng, 0.05)) args.push_back(Encode(p.name) + "=" + Pick(rng, HostileQueryValues()));  // twice
  }
  if (Chance(rng, 0.1)) args.push_back(Letters(rng, 5) + "=" + Pick(rng, HostileQueryValues()));
  if (Chance(rng, 0.05)) {
    args.push_back(Pick(rng, std::vector<std::string>{"", "=", "limit", "limit=", "%zz=1", "a[]=1", "a=%00", "&&",
                                                     std::string(2000, 'q') + "=1"}));
  }
  if (args.empty()) return Chance(rng, 0.03) ? "?" : "";
  std::string q = "?";
  for (size_t i = 0; i < args.size(); ++i) q += (i ? "&" : "") + args[i];
  return q;
}

std::string RequestMaker::BodyOf(Rng& rng, const FuzzContext& ctx, const Operation& op) const {
  const auto known = ctx.known_bodies.find(op.method + " " + op.path);
  json body = known != ctx.known_bodies.end() && !known->second.empty() && Chance(rng, 0.5) ? Pick(rng, known->second)
              : op.body_schema.is_null()                          ? json::object()
                                                                  : Valid(op.body_schema, rng, ctx, "", 0);
  const std::string valid = body.dump();
  const double mode = rng.Uniform();
  if (mode < 0.25) return valid;
  if (mode < 0.33) return WholeBody(rng, ctx, valid);
  Markers markers;
  for (size_t i = 0, n = 1 + rng.Below(kMaxMutations); i < n; ++i) MutateTree(rng, ctx, body, markers);
  std::string text = ReplaceMarkers(body.dump(-1, ' ', false, json::error_handler_t::replace), markers);
  if (mode > 0.85) text = MutateText(rng, std::move(text));
  return text;
}

Headers RequestMaker::HeadersOf(Rng& rng, const FuzzContext& ctx, const Operation& op) const {
  Headers h;
  if (Chance(rng, 0.99)) h.emplace_back("Host", "127.0.0.1");
  const bool agent = std::find(op.roles.begin(), op.roles.end(), "node") != op.roles.end();
  // Each kind of token; the agent endpoints mostly get the node's.
  const double t = rng.Uniform();
  std::string token;
  if (agent && t < 0.5) {
    token = ctx.node_token;
  } else if (t < 0.35) {
    token = ctx.admin_token;
  } else if (t < 0.55) {
    token = ctx.tenant_token;
  } else if (t < 0.65) {
    token = ctx.other_token;
  } else if (t < 0.75) {
    token = ctx.node_token;
  } else if (t < 0.85) {
    token = "gpt_" + Letters(rng, 40, "0123456789abcdef");
  }
  if (!token.empty()) {
    const std::vector<std::string> forms = {
        "Bearer " + token, "Bearer " + token, "Bearer " + token, "bearer " + token, "BEARER " + token,
        "Bearer  " + token, "Bearer " + token + " ", "Bearer " + token + "x", "Bearer " + token.substr(1),
        "Basic " + token, token, "Bearer\t" + token};
    h.emplace_back("Authorization", Chance(rng, 0.8) ? forms[0] : Pick(rng, forms));
    if (Chance(rng, 0.02)) h.emplace_back("Authorization", "Bearer nope");
  } else if (t < 0.92) {
    h.emplace_back("Authorization", Pick(rng, std::vector<std::string>{
                                           "", "Bearer", "Bearer ", "Token x", "Bearer " + std::string(4000, 'a'),
                                           "Bearer \xff\xfe", "Bearer gpt_", "Basic dXNlcjpwYXNz", "Bearer %00"}));
  }
  const double ct = rng.Uniform();
  if (ct < 0.85) {
    h.emplace_back("Content-Type", "application/json");
  } else if (ct < 0.95) {
    h.emplace_back("Content-Type", Pick(rng, std::vector<std::string>{
                                         "text/plain", "application/xml", "application/json; charset=latin1",
                                         "multipart/form-data; boundary=x", "application/x-www-form-urlencoded",
                                         "", "*/*", std::string(2000, 'j'), "application/json\xff"}));
  }
  if (Chance(rng, 0.05)) {
    h.emplace_back("X-Request-Id", Pick(rng, std::vector<std::string>{std::string(200, 'r'), "id\xc3\x28", "",
                                                                      "a b c", std::string(128, 'r')}));
  }
  if (Chance(rng, 0.03)) h.emplace_back("Expect", "100-continue");
  if (Chance(rng, 0.03)) h.emplace_back("Content-Encoding", Pick(rng, std::vector<std::string>{"gzip", "br", "x"}));
  if (Chance(rng, 0.03)) h.emplace_back("X-" + Letters(rng, 8), Letters(rng, Between(rng, 0, 4000)));
  if (Chance(rng, 0.01)) {
    for (int i = 0; i < 100; ++i) h.emplace_back("X-Many-" + std::to_string(i), "v");
  }
  if (Chance(rng, 0.02)) h.emplace_back("Range", "bytes=0-1");
  return h;
}

namespace {

// Whether the HTTP library may close, without the first answer, a
// connection whose request is followed by `trailing` bytes that are no
// request. Two ways, both the library's: bytes beyond its buffer are
// refused with the connection closed while they are still arriving, and
// the reset that such a close sends may reach the client before it has
// read the answer (a close without lingering); and after a 100 Continue,
// bytes that are no request end the connection before the answer.
bool TrailingMayCutTheAnswer(const FuzzContext& ctx, const Headers& headers, size_t trailing) {
  for (const auto& [k, v] : headers) {
    if (k == "Expect") return true;
  }
  return static_cast<int64_t>(trailing) > ctx.max_header_bytes / 2;
}

}  // namespace

void RequestMaker::Frame(Rng& rng, const FuzzContext& ctx, const Headers& headers, FuzzRequest& r) const {
  std::string head = r.method + " " + r.target + " HTTP/1.1\r\n";
  for (const auto& [k, v] : headers) head += k + ": " + v + "\r\n";
  const std::string& body = r.body;
  const double f = rng.Uniform();
  if (f < 0.90) {  // honest
    if (!body.empty() || r.method == "POST" || r.method == "PUT") head += "Content-Length: " + std::to_string(body.size()) + "\r\n";
    r.bytes = head + "\r\n" + body;
  } else if (f < 0.93) {  // chunked, in pieces
    head += "Transfer-Encoding: chunked\r\n\r\n";
    std::string chunks;
    size_t at = 0;
    while (at < body.size()) {
      const size_t n = std::min<size_t>(body.size() - at, 1 + rng.Below(std::max<size_t>(body.size() / 3, 1)));
      char size[32];
      std::snprintf(size, sizeof size, "%zx", n);
      chunks += std::string(size) + (Chance(rng, 0.1) ? ";ext=1" : "") + "\r\n" + body.substr(at, n) + "\r\n";
      at += n;
    }
    r.bytes = head + chunks + "0\r\n\r\n";
    r.expect.may_close = true;  // a chunked body over the limit closes the connection
  } else if (f < 0.95 && !body.empty()) {  // claims less: the rest reads as a next request
    const size_t claimed = rng.Below(body.size());
    head += "Content-Length: " + std::to_string(claimed) + "\r\n";
    r.bytes = head + "\r\n" + body + "\r\n\r\n";
    r.expect.trailing = true;
    r.expect.may_close = TrailingMayCutTheAnswer(ctx, headers, body.size() - claimed);
    r.fresh_connection = true;
  } else if (f < 0.97) {  // claims more, then the client stops sending
    head += "Content-Length: " + std::to_string(body.size() + 1 + rng.Below(1000)) + "\r\n";
    r.bytes = head + "\r\n" + body;
    r.expect.incomplete = r.expect.may_close = true;
    r.fresh_connection = true;
  } else if (f < 0.985) {  // no length at all: a body reads as a next request
    r.bytes = head + "\r\n" + body + (body.empty() ? "" : "\r\n\r\n");
    r.expect.trailing = !body.empty();
    r.expect.may_close = r.expect.trailing && TrailingMayCutTheAnswer(ctx, headers, body.size());
    r.fresh_connection = true;
  } else {  // a length the library must refuse
    head += "Content-Length: " + Pick(rng, std::vector<std::string>{"-1", "abc", "99999999999999999999999", "1 2",
                                                                     "0x10", "+5", ""}) + "\r\n";
    if (Chance(rng, 0.5)) head += "Content-Length: " + std::to_string(body.size() + 1) + "\r\n";
    r.bytes = head + "\r\n" + body;
    r.expect.library_answers = r.expect.may_close = r.expect.trailing = true;
    r.fresh_connection = true;
  }
  // Over the limit: refused on its length, and the connection closes (with unread bytes, by a reset that
  // may overtake the answer).
  if (static_cast<int64_t>(body.size()) > ctx.max_body_bytes) r.expect.may_close = r.fresh_connection = true;
  // A head the library may find too large: its buffer is twice max_header_bytes, and the body's first
  // bytes share it.
  if (static_cast<int64_t>(head.size()) > ctx.max_header_bytes / 2) r.expect.library_answers = r.expect.may_close = true;
}

// --- the kinds of request ------------------------------------------------------------------

FuzzRequest RequestMaker::OperationRequest(Rng& rng, const FuzzContext& ctx, const Operation& op) const {
  FuzzRequest r;
  r.kind = op.method + " " + op.path;
  r.method = op.method;
  r.target = PathOf(rng, ctx, op) + QueryOf(rng, ctx, op);
  if (!op.body_schema.is_null() || Chance(rng, 0.1)) r.body = BodyOf(rng, ctx, op);
  Headers h = HeadersOf(rng, ctx, op);
  if (Chance(rng, 0.05)) {
    h.emplace_back("Connection", "close");
    r.fresh_connection = true;
  }
  Frame(rng, ctx, h, r);
  return r;
}

FuzzRequest RequestMaker::UndeclaredMethod(Rng& rng, const FuzzContext& ctx) const {
  static const std::vector<std::string> kMethods = {"GET",   "POST",    "PUT",      "DELETE", "PATCH",
                                                    "HEAD",  "OPTIONS", "TRACE",    "PROPFIND", "FOO",
                                                    "get",   "Post",    "M-SEARCH", std::string(100, 'A')};
  const Operation& op = Pick(rng, ops_);
  std::string method;
  for (int tries = 0; tries < 8; ++tries) {
    method = Pick(rng, kMethods);
    bool declared = false;
    for (const Operation& o : ops_) declared = declared || (o.path == op.path && o.method == method);
    if (!declared) break;
  }
  Operation as = op;
  as.method = method;
  FuzzRequest r = OperationRequest(rng, ctx, as);
  r.kind = "undeclared method on " + op.path;
  return r;
}

FuzzRequest RequestMaker::OddPath(Rng& rng, const FuzzContext& ctx) const {
  Operation op = Pick(rng, ops_);
  FuzzRequest r;
  r.kind = "odd path";
  r.method = Pick(rng, std::vector<std::string>{"GET", "POST", "PUT", "DELETE", "HEAD"});
  const double p = rng.Uniform();
  if (p < 0.7) {
    r.target = Pick(rng, OddTargets());
  } else if (p < 0.85) {  // many segments
    r.target = "/v1";
    for (int i = 0, n = static_cast<int>(Between(rng, 3, 60)); i < n; ++i) r.target += "/" + Letters(rng, 2);
  } else {  // long, under the header limit
    r.target = "/v1/jobs/" + Letters(rng, Between(rng, 100, ctx.max_header_bytes / 4));
  }
  op.method = r.method;
  if (r.method == "POST" || r.method == "PUT") r.body = BodyOf(rng, ctx, op);
  Frame(rng, ctx, HeadersOf(rng, ctx, op), r);
  return r;
}

// Requests the HTTP library itself must refuse (or may cut short): broken
// request lines and headers, versions, framing, sizes.
FuzzRequest RequestMaker::MalformedHttp(Rng& rng, const FuzzContext& ctx) const {
  FuzzRequest r;
  r.kind = "malformed HTTP";
  r.method = "GET";
  r.target = "/v1/jobs";
  r.expect.library_answers = r.expect.may_close = r.expect.trailing = true;
  r.fresh_connection = true;
  const std::string host = "Host: 127.0.0.1\r\n";
  const std::string auth = "Authorization: Bearer " + ctx.admin_token + "\r\n";
  const std::string big(static_cast<size_t>(ctx.max_header_bytes) * 2 + 100, 'h');
  const std::vector<std::string> kinds = {
      "GET /healthz\r\n\r\n",
      "GET /v1/jobs HTTP/1.2\r\n" + host + auth + "\r\n",
      "GET /v1/jobs HTTP/1.1x\r\n" + host + auth + "\r\n",
      "GET /v1/jobs HTTX/1.1\r\n" + host + auth + "\r\n",
      "GET /v1/jobs HTTP/1\r\n" + host + auth + "\r\n",
      "GET /v1/jobs http/1.1\r\n" + host + auth + "\r\n",
      "GET /v1/jobs HTTP/01.1\r\n" + host + auth + "\r\n",
      "GET /v1/jobs HTTP/1.10\r\n" + host + auth + "\r\n",
      "GET /v1/jobs HTTP/1.0\r\n" + auth + "\r\n",
      "GET  /v1/jobs HTTP/1.1\r\n" + host + auth + "\r\n",
      "GET /v1/jobs  HTTP/1.1\r\n" + host + auth + "\r\n",
      "GET\t/v1/jobs\tHTTP/1.1\r\n" + host + auth + "\r\n",
      "GET /v1 jobs HTTP/1.1\r\n" + host + auth + "\r\n",
      std::string("GET /v1/jo") + '\0' + "bs HTTP/1.1\r\n" + host + auth + "\r\n",
      "GET /v1/jobs\xff HTTP/1.1\r\n" + host + auth + "\r\n",
      "GET /v1/jobs HTTP/1.1\n" + std::string("Host: 127.0.0.1\n") + "\n",
      "GET /v1/jobs HTTP/1.1\r\n" + host + "Bad Header: x\r\n\r\n",
      "GET /v1/jobs HTTP/1.1\r\n" + host + "NoColon\r\n\r\n",
      "GET /v1/jobs HTTP/1.1\r\n" + host + " folded: x\r\n\r\n",
      "GET /v1/jobs HTTP/1.1\r\n" + host + "X: a\rb\r\n\r\n",
      "GET /v1/jobs HTTP/1.1\r\n" + host + ": empty-name\r\n\r\n",
      "GET /v1/jobs HTTP/1.1\r\n\r\n",
      "GET /" + big + " HTTP/1.1\r\n" + host + "\r\n",
      "GET /v1/jobs HTTP/1.1\r\n" + host + "X-Big: " + big + "\r\n\r\n",
      "\r\n\r\n",
      RandomBytes(rng, Between(rng, 1, 200)) + "\r\n\r\n",
      std::string("\x16\x03\x01\x00\xa5\x01\x00\x00\xa1\x03\x03", 11) + RandomBytes(rng, 64) + "\r\n\r\n",
      "POST /v1/jobs HTTP/1.1\r\n" + host + auth + "Content-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n",
      "POST /v1/jobs HTTP/1.1\r\n" + host + auth + "Transfer-Encoding: chunked\r\n\r\nzz\r\n{}\r\n0\r\n\r\n",
      "POST /v1/jobs HTTP/1.1\r\n" + host + auth + "Transfer-Encoding: chunked\r\n\r\nffffffffffffffffff\r\n{}\r\n0\r\n\r\n",
      "POST /v1/jobs HTTP/1.1\r\n" + host + auth + "Transfer-Encoding: chunked\r\n\r\n5\r\n{}\r\n0\r\n\r\n",
      "POST /v1/jobs HTTP/1.1\r\n" + host + auth + "Transfer-Encoding: gzip\r\n\r\n{}",
      "POST /v1/jobs HTTP/1.1\r\n" + host + auth + "Transfer-Encoding: chunked, chunked\r\n\r\n2\r\n{}\r\n0\r\n\r\n",
      "POST /v1/jobs HTTP/1.1\r\n" + host + auth + "Content-Length: 2\r\nContent-Length: 3\r\n\r\n{}",
      "GET http://127.0.0.1/v1/jobs HTTP/1.1\r\n" + host + auth + "\r\n",
      "GET v1/jobs HTTP/1.1\r\n" + host + auth + "\r\n",
      "OPTIONS * HTTP/1.1\r\n" + host + "\r\n",
      "CONNECT 127.0.0.1:80 HTTP/1.1\r\n" + host + "\r\n",
      "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n",
      "GET /v1/jobs HTTP/2.0\r\n" + host + auth + "\r\n",
      "GET /v1/jobs HTTP/0.9\r\n" + host + auth + "\r\n",
  };
  r.bytes = Pick(rng, kinds);
  r.body = "";
  // Empty lines before a request line are skipped (RFC 9112 2.2): the server waits for a request.
  r.expect.incomplete = r.bytes.find_first_not_of("\r\n") == std::string::npos;
  const std::string line = r.bytes.substr(0, r.bytes.find("\r\n"));
  const size_t version = line.rfind(" HTTP/");
  r.expect.other_http_version = version != std::string::npos && version + 6 < line.size() &&
                                std::isdigit(static_cast<unsigned char>(line[version + 6])) && line[version + 6] != '1';
  return r;
}

FuzzRequest RequestMaker::Make(Rng& rng, const FuzzContext& ctx) const {
  const double k = rng.Uniform();
  if (k < 0.06) return OddPath(rng, ctx);
  if (k < 0.12) return UndeclaredMethod(rng, ctx);
  if (k < 0.15) return MalformedHttp(rng, ctx);
  return OperationRequest(rng, ctx, Pick(rng, ops_));
}

}  // namespace gpupool::testing
