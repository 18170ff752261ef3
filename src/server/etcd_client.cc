#include "src/server/etcd_client.h"

#include "src/base/http_client.h"

#include <httplib.h>

#include <nlohmann/json.hpp>

#include "src/base/base64.h"

namespace gpupool {
namespace {

using nlohmann::json;

// The gateway writes int64 fields as strings and leaves out fields at their
// default (0, false, empty).
int64_t Int(const json& j, const char* name) {
  auto it = j.find(name);
  if (it == j.end()) return 0;
  if (it->is_number_integer()) return it->get<int64_t>();
  if (it->is_string()) {
    try {
      return std::stoll(it->get<std::string>());
    } catch (...) {
      return 0;
    }
  }
  return 0;
}

bool Bool(const json& j, const char* name) {
  auto it = j.find(name);
  return it != j.end() && it->is_boolean() && it->get<bool>();
}

Result<std::string> Bytes(const json& j, const char* name) {
  auto it = j.find(name);
  if (it == j.end()) return std::string();
  if (!it->is_string()) return IoError(std::string("etcd: field ") + name + " is not a string");
  auto decoded = Base64Decode(it->get<std::string>());
  if (!decoded) return IoError(std::string("etcd: field ") + name + ": " + decoded.error().message);
  return *decoded;
}

json RangeJson(const std::string& key, const std::string& range_end, int64_t limit, bool descending, bool keys_only,
               bool count_only) {
  json j = {{"key", Base64Encode(key)}};
  if (!range_end.empty()) j["range_end"] = Base64Encode(range_end);
  if (limit > 0) j["limit"] = std::to_string(limit);
  if (descending) {
    j["sort_order"] = "DESCEND";
    j["sort_target"] = "KEY";
  }
  if (keys_only) j["keys_only"] = true;
  if (count_only) j["count_only"] = true;
  return j;
}

Result<EtcdRangeResult> ParseRange(const json& j) {
  EtcdRangeResult out;
  if (auto h = j.find("header"); h != j.end() && h->is_object()) out.revision = Int(*h, "revision");
  out.more = Bool(j, "more");
  out.count = Int(j, "count");
  if (auto kvs = j.find("kvs"); kvs != j.end()) {
    if (!kvs->is_array()) return IoError("etcd: kvs is not a list");
    for (const json& kv : *kvs) {
      EtcdKeyValue v;
      GP_ASSIGN_OR_RETURN(v.key, Bytes(kv, "key"));
      GP_ASSIGN_OR_RETURN(v.value, Bytes(kv, "value"));
      v.create_revision = Int(kv, "create_revision");
      v.mod_revision = Int(kv, "mod_revision");
      v.version = Int(kv, "version");
      v.lease = Int(kv, "lease");
      out.kvs.push_back(std::move(v));
    }
  }
  return out;
}

json OpJson(const EtcdOp& op) {
  switch (op.kind) {
    case EtcdOp::Kind::kPut: {
      json p = {{"key", Base64Encode(op.key)}, {"value", Base64Encode(op.value)}};
      if (op.lease != 0) p["lease"] = std::to_string(op.lease);
      return json{{"request_put", p}};
    }
    case EtcdOp::Kind::kDeleteRange: {
      json d = {{"key", Base64Encode(op.key)}};
      if (!op.range_end.empty()) d["range_end"] = Base64Encode(op.range_end);
      return json{{"request_delete_range", d}};
    }
    case EtcdOp::Kind::kRange:
      return json{{"request_range", RangeJson(op.key, op.range_end, 0, false, false, false)}};
  }
  return json::object();
}

json CompareJson(const EtcdCompare& c) {
  static constexpr const char* kResults[] = {"EQUAL", "NOT_EQUAL", "LESS", "GREATER"};
  json j = {{"key", Base64Encode(c.key)}, {"result", kResults[static_cast<int>(c.result)]}};
  switch (c.target) {
    case EtcdCompare::Target::kCreateRevision:
      j["target"] = "CREATE";
      j["create_revision"] = std::to_string(c.number);
      break;
    case EtcdCompare::Target::kModRevision:
      j["target"] = "MOD";
      j["mod_revision"] = std::to_string(c.number);
      break;
    case EtcdCompare::Target::kVersion:
      j["target"] = "VERSION";
      j["version"] = std::to_string(c.number);
      break;
    case EtcdCompare::Target::kValue:
      j["target"] = "VALUE";
      j["value"] = Base64Encode(c.value);
      break;
    case EtcdCompare::Target::kLease:
      j["target"] = "LEASE";
      j["lease"] = std::to_string(c.number);
      break;
  }
  return j;
}

// A JSON body over this is refused before it is sent: the limit is on the
// decoded request, and base64 makes bytes 4/3 as long.
constexpr size_t kMaxBodyBytes = kEtcdMaxRequestBytes / 3 * 4 + 64 * 1024;

}  // namespace

EtcdOp EtcdOp::Put(std::string key, std::string value, int64_t lease) {
  EtcdOp op;
  op.kind = Kind::kPut;
  op.key = std::move(key);
  op.value = std::move(value);
  op.lease = lease;
  return op;
}

EtcdOp EtcdOp::Delete(std::string key, std::string range_end) {
  EtcdOp op;
  op.kind = Kind::kDeleteRange;
  op.key = std::move(key);
  op.range_end = std::move(range_end);
  return op;
}

EtcdOp EtcdOp::Get(std::string key) {
  EtcdOp op;
  op.kind = Kind::kRange;
  op.key = std::move(key);
  return op;
}

std::string PrefixEnd(const std::string& prefix) {
  std::string end = prefix;
  while (!end.empty()) {
    if (static_cast<unsigned char>(end.back()) < 0xff) {
      end.back() = static_cast<char>(static_cast<unsigned char>(end.back()) + 1);
      return end;
    }
    end.pop_back();
  }
  return std::string(1, '\0');
}

namespace {
// "http" or "https" when `url` is SCHEME://HOST:PORT (no path), else empty.
std::string EndpointScheme(const std::string& url) {
  for (const std::string scheme : {"http", "https"}) {
    if (!url.starts_with(scheme + "://")) continue;
    const std::string rest = url.substr(scheme.size() + 3);
    const size_t colon = rest.rfind(':');
    const bool port_ok = colon != std::string::npos && colon > 0 && colon + 1 < rest.size() &&
                         rest.find_first_not_of("0123456789", colon + 1) == std::string::npos &&
                         rest.find('/') == std::string::npos;
    return port_ok ? scheme : "";
  }
  return "";
}
}  // namespace

Result<std::vector<std::string>> ParseEtcdEndpoints(const std::string& text) {
  std::vector<std::string> out;
  std::string first_scheme;
  size_t start = 0;
  while (start <= text.size()) {
    const size_t comma = text.find(',', start);
    const std::string url = text.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
    const std::string scheme = EndpointScheme(url);
    if (scheme.empty()) {
      return InvalidArgument("--etcd: '" + url +
                             "' is not http://HOST:PORT or https://HOST:PORT (a list is URL,URL,...)");
    }
    if (first_scheme.empty()) first_scheme = scheme;
    if (scheme != first_scheme) {
      return InvalidArgument("--etcd: the endpoints mix http:// and https:// (one cluster serves one of them)");
    }
    out.push_back(url);
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  if (static_cast<int>(out.size()) > kEtcdMaxEndpoints) {
    return InvalidArgument("--etcd: at most " + std::to_string(kEtcdMaxEndpoints) + " endpoints");
  }
  return out;
}

struct EtcdClient::Connection {
  size_t endpoint = 0;
  std::unique_ptr<httplib::Client> http;
};

EtcdClient::EtcdClient(EtcdClientOptions options) : options_(std::move(options)) {}
EtcdClient::~EtcdClient() = default;

std::string EtcdClient::Describe() const {
  std::string out;
  for (const std::string& e : options_.endpoints) out += (out.empty() ? "" : ",") + e;
  return out;
}

std::unique_ptr<EtcdClient::Connection> EtcdClient::Take(size_t endpoint) {
  {
    std::lock_guard lock(mu_);
    for (auto it = idle_.begin(); it != idle_.end(); ++it) {
      if ((*it)->endpoint == endpoint) {
        auto c = std::move(*it);
        idle_.erase(it);
        return c;
      }
    }
  }
  auto c = std::make_unique<Connection>();
  c->endpoint = endpoint;
  c->http = NewHttpClient(options_.endpoints[endpoint], options_.tls);
  const auto ms = [](std::chrono::milliseconds d) { return std::pair{d.count() / 1000, (d.count() % 1000) * 1000}; };
  const auto [cs, cus] = ms(options_.connect_timeout);
  const auto [rs, rus] = ms(options_.request_timeout);
  c->http->set_connection_timeout(cs, cus);
  c->http->set_read_timeout(rs, rus);
  c->http->set_write_timeout(rs, rus);
  c->http->set_keep_alive(true);
  c->http->set_tcp_nodelay(true);
  return c;
}

void EtcdClient::Give(std::unique_ptr<Connection> c) {
  constexpr size_t kMaxIdle = 32;
  std::lock_guard lock(mu_);
  if (idle_.size() < kMaxIdle) idle_.push_back(std::move(c));
}

Result<std::string> EtcdClient::Post(const std::string& path, const std::string& body) {
  if (options_.endpoints.empty()) return InvalidArgument("etcd: no endpoints");
  if (body.size() > kMaxBodyBytes) {
    return InvalidArgument("etcd: request of " + std::to_string(body.size()) + " bytes to " + path +
                           " is over etcd's request limit");
  }
  size_t first;
  {
    std::lock_guard lock(mu_);
    first = current_;
  }
  std::string failures;
  const size_t n = options_.endpoints.size();
  for (size_t k = 0; k < n; ++k) {
    const size_t e = (first + k) % n;
    auto c = Take(e);
    httplib::Result r = c->http->Post(path, body, "application/json");
    if (!r) {
      failures += (failures.empty() ? "" : "; ") + options_.endpoints[e] + ": " +
                  DescribeHttpFailure(*c->http, r.error(), options_.endpoints[e], options_.tls);
      continue;  // the connection is dropped with `c`
    }
    {
      std::lock_guard lock(mu_);
      current_ = e;
    }
    std::string answer = std::move(r->body);
    const int status = r->status;
    Give(std::move(c));
    if (status != 200) {
      const json j = json::parse(answer, nullptr, false);
      std::string m = j.is_object() && j.contains("message") && j["message"].is_string()
                          ? j["message"].get<std::string>()
                          : answer.substr(0, 200);
      return IoError("etcd " + options_.endpoints[e] + path + ": HTTP " + std::to_string(status) + ": " + m);
    }
    return answer;
  }
  return IoError("etcd: no endpoint answered " + path + " (" + failures + ")");
}

namespace {
Result<json> ParseAnswer(const Result<std::string>& text, const std::string& path) {
  if (!text) return std::unexpected(text.error());
  json j = json::parse(*text, nullptr, false);
  if (!j.is_object()) return IoError("etcd " + path + ": the answer is not a JSON object");
  return j;
}
}  // namespace

Result<std::string> EtcdClient::Version() {
  GP_ASSIGN_OR_RETURN(json j, ParseAnswer(Post("/v3/maintenance/status", "{}"), "/v3/maintenance/status"));
  auto v = j.find("version");
  if (v == j.end() || !v->is_string()) return IoError("etcd: the status answer has no version");
  return v->get<std::string>();
}

Result<EtcdRangeResult> EtcdClient::Range(const EtcdRange& r) {
  const json body = RangeJson(r.key, r.range_end, r.limit, r.descending, r.keys_only, r.count_only);
  GP_ASSIGN_OR_RETURN(json j, ParseAnswer(Post("/v3/kv/range", body.dump()), "/v3/kv/range"));
  return ParseRange(j);
}

Result<int64_t> EtcdClient::Put(const std::string& key, const std::string& value, int64_t lease) {
  json body = {{"key", Base64Encode(key)}, {"value", Base64Encode(value)}};
  if (lease != 0) body["lease"] = std::to_string(lease);
  GP_ASSIGN_OR_RETURN(json j, ParseAnswer(Post("/v3/kv/put", body.dump()), "/v3/kv/put"));
  return j.contains("header") ? Int(j["header"], "revision") : 0;
}

Result<int64_t> EtcdClient::DeleteRange(const std::string& key, const std::string& range_end) {
  json body = {{"key", Base64Encode(key)}};
  if (!range_end.empty()) body["range_end"] = Base64Encode(range_end);
  GP_ASSIGN_OR_RETURN(json j, ParseAnswer(Post("/v3/kv/deleterange", body.dump()), "/v3/kv/deleterange"));
  return Int(j, "deleted");
}

Result<EtcdTxnResult> EtcdClient::Txn(const std::vector<EtcdCompare>& compares, const std::vector<EtcdOp>& success,
                                      const std::vector<EtcdOp>& failure) {
  if (static_cast<int>(std::max(success.size(), failure.size())) > kEtcdMaxTxnOps) {
    return InvalidArgument("etcd: a transaction of " + std::to_string(std::max(success.size(), failure.size())) +
                           " operations is over etcd's limit of " + std::to_string(kEtcdMaxTxnOps));
  }
  json body = {{"compare", json::array()}, {"success", json::array()}, {"failure", json::array()}};
  for (const EtcdCompare& c : compares) body["compare"].push_back(CompareJson(c));
  for (const EtcdOp& op : success) body["success"].push_back(OpJson(op));
  for (const EtcdOp& op : failure) body["failure"].push_back(OpJson(op));
  GP_ASSIGN_OR_RETURN(json j, ParseAnswer(Post("/v3/kv/txn", body.dump()), "/v3/kv/txn"));
  EtcdTxnResult out;
  out.succeeded = Bool(j, "succeeded");
  if (auto h = j.find("header"); h != j.end() && h->is_object()) out.revision = Int(*h, "revision");
  if (auto rs = j.find("responses"); rs != j.end() && rs->is_array()) {
    for (const json& r : *rs) {
      auto range = r.find("response_range");
      if (range == r.end()) {
        out.ranges.emplace_back();
        continue;
      }
      GP_ASSIGN_OR_RETURN(auto parsed, ParseRange(*range));
      out.ranges.push_back(std::move(parsed));
    }
  }
  return out;
}

Result<int64_t> EtcdClient::LeaseGrant(int64_t ttl_seconds) {
  const json body = {{"TTL", std::to_string(ttl_seconds)}, {"ID", "0"}};
  GP_ASSIGN_OR_RETURN(json j, ParseAnswer(Post("/v3/lease/grant", body.dump()), "/v3/lease/grant"));
  if (j.contains("error") && j["error"].is_string() && !j["error"].get<std::string>().empty()) {
    return IoError("etcd: lease grant: " + j["error"].get<std::string>());
  }
  const int64_t id = Int(j, "ID");
  if (id == 0) return IoError("etcd: lease grant answered no lease id");
  return id;
}

Result<int64_t> EtcdClient::LeaseKeepAlive(int64_t lease) {
  const json body = {{"ID", std::to_string(lease)}};
  // A stream on the gateway: one request, one answer line {"result": {...}}.
  GP_ASSIGN_OR_RETURN(std::string text, Post("/v3/lease/keepalive", body.dump()));
  const size_t nl = text.find('\n');
  const json j = json::parse(nl == std::string::npos ? text : text.substr(0, nl), nullptr, false);
  if (!j.is_object()) return IoError("etcd: the keepalive answer is not JSON");
  if (auto e = j.find("error"); e != j.end()) {
    return IoError("etcd: keepalive: " + (e->is_object() && e->contains("message") ? (*e)["message"].dump() : e->dump()));
  }
  auto r = j.find("result");
  if (r == j.end() || !r->is_object()) return IoError("etcd: the keepalive answer has no result");
  return Int(*r, "TTL");
}

Status EtcdClient::LeaseRevoke(int64_t lease) {
  const json body = {{"ID", std::to_string(lease)}};
  GP_ASSIGN_OR_RETURN(json j, ParseAnswer(Post("/v3/lease/revoke", body.dump()), "/v3/lease/revoke"));
  (void)j;
  return {};
}

}  // namespace gpupool
