#include "src/client/json_yaml.h"

#include "src/base/yaml_documents.h"

#include <yaml-cpp/yaml.h>

#include <charconv>
#include <cmath>
#include <set>

namespace gpupool {
namespace {

constexpr int kMaxDepth = 64;

bool IsOneOf(std::string_view s, std::initializer_list<std::string_view> options) {
  for (auto o : options) {
    if (s == o) return true;
  }
  return false;
}

bool AllOf(std::string_view s, bool (*pred)(char)) {
  if (s.empty()) return false;
  for (char c : s) {
    if (!pred(c)) return false;
  }
  return true;
}
bool IsDigit(char c) { return c >= '0' && c <= '9'; }
bool IsOctal(char c) { return c >= '0' && c <= '7'; }
bool IsHex(char c) { return IsDigit(c) || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F'); }

// [-+]?(\.[0-9]+|[0-9]+(\.[0-9]*)?)([eE][-+]?[0-9]+)?
bool IsCoreFloat(std::string_view s) {
  size_t i = 0;
  if (i < s.size() && (s[i] == '-' || s[i] == '+')) ++i;
  size_t int_digits = 0, frac_digits = 0;
  while (i < s.size() && IsDigit(s[i])) ++i, ++int_digits;
  if (i < s.size() && s[i] == '.') {
    ++i;
    while (i < s.size() && IsDigit(s[i])) ++i, ++frac_digits;
  }
  if (int_digits == 0 && frac_digits == 0) return false;
  if (i < s.size() && (s[i] == 'e' || s[i] == 'E')) {
    ++i;
    if (i < s.size() && (s[i] == '-' || s[i] == '+')) ++i;
    size_t exp_digits = 0;
    while (i < s.size() && IsDigit(s[i])) ++i, ++exp_digits;
    if (exp_digits == 0) return false;
  }
  return i == s.size();
}

std::string Where(const std::string& file, const YAML::Mark& mark) {
  return file + ":" + std::to_string(mark.line + 1) + ":" + std::to_string(mark.column + 1) + ": ";
}

Result<nlohmann::json> ParseInteger(std::string_view s) {
  std::string_view digits = s;
  bool negative = false;
  if (!digits.empty() && (digits[0] == '-' || digits[0] == '+')) {
    negative = digits[0] == '-';
    digits.remove_prefix(1);
  }
  int base = 10;
  if (digits.starts_with("0o"))
    base = 8, digits.remove_prefix(2);
  else if (digits.starts_with("0x"))
    base = 16, digits.remove_prefix(2);
  uint64_t magnitude = 0;
  auto [ptr, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), magnitude, base);
  const uint64_t limit = negative ? uint64_t{1} << 63 : (uint64_t{1} << 63) - 1;
  if (digits.empty() || ec != std::errc() || ptr != digits.data() + digits.size() || magnitude > limit) {
    return InvalidArgument("integer '" + std::string(s) + "' is out of range");
  }
  if (negative) return nlohmann::json(magnitude == limit ? INT64_MIN : -static_cast<int64_t>(magnitude));
  return nlohmann::json(static_cast<int64_t>(magnitude));
}

Result<nlohmann::json> ParseFloat(std::string_view s) {
  std::string_view t = s;
  if (!t.empty() && t[0] == '+') t.remove_prefix(1);
  double v = 0;
  auto [ptr, ec] = std::from_chars(t.data(), t.data() + t.size(), v);
  if (ec != std::errc() || ptr != t.data() + t.size() || !std::isfinite(v)) {
    return InvalidArgument("number '" + std::string(s) + "' is out of range");
  }
  return nlohmann::json(v);
}

class Converter {
 public:
  explicit Converter(const std::string& file) : file_(file) {}

  Result<nlohmann::json> Convert(const YAML::Node& node, int depth) {
    if (depth > kMaxDepth) return Fail(node, "nested too deeply");
    switch (node.Type()) {
      case YAML::NodeType::Undefined:
      case YAML::NodeType::Null:
        return nlohmann::json(nullptr);
      case YAML::NodeType::Scalar:
        return Scalar(node);
      case YAML::NodeType::Sequence: {
        nlohmann::json out = nlohmann::json::array();
        for (const auto& item : node) {
          auto v = Convert(item, depth + 1);
          if (!v) return v;
          out.push_back(std::move(*v));
        }
        return out;
      }
      case YAML::NodeType::Map: {
        nlohmann::json out = nlohmann::json::object();
        std::set<std::string> seen;
        for (const auto& kv : node) {
          if (!kv.first.IsScalar()) return Fail(kv.first, "expected a name as key");
          const std::string key = kv.first.Scalar();
          if (!seen.insert(key).second) return Fail(kv.first, "duplicate key '" + key + "'");
          auto v = Convert(kv.second, depth + 1);
          if (!v) return v;
          out[key] = std::move(*v);
        }
        return out;
      }
    }
    return Fail(node, "unsupported YAML node");
  }

 private:
  std::unexpected<Error> Fail(const YAML::Node& at, const std::string& problem) const {
    return InvalidArgument(Where(file_, at.Mark()) + problem);
  }

  Result<nlohmann::json> Scalar(const YAML::Node& node) const {
    const std::string& tag = node.Tag();
    const std::string& text = node.Scalar();
    auto typed = [&](std::string_view want) -> Result<nlohmann::json> {
      auto v = PlainScalarToJson(text);
      if (!v) return Fail(node, v.error().message);
      const bool ok = (want == "int" && v->is_number_integer()) || (want == "float" && v->is_number()) ||
                      (want == "bool" && v->is_boolean()) || (want == "null" && v->is_null());
      if (!ok) return Fail(node, "'" + text + "' is not a valid !!" + std::string(want));
      if (want == "float") return nlohmann::json(v->get<double>());
      return v;
    };
    if (tag == "!" || tag == "tag:yaml.org,2002:str") return nlohmann::json(text);
    if (tag == "?" || tag.empty()) {
      auto v = PlainScalarToJson(text);
      if (!v) return Fail(node, v.error().message);
      return v;
    }
    if (tag == "tag:yaml.org,2002:int") return typed("int");
    if (tag == "tag:yaml.org,2002:float") return typed("float");
    if (tag == "tag:yaml.org,2002:bool") return typed("bool");
    if (tag == "tag:yaml.org,2002:null") return typed("null");
    return Fail(node, "unsupported tag '" + tag + "'");
  }

  const std::string& file_;
};

// Would a plain YAML scalar with this text read back as this string?
bool ReadsBackAsString(const std::string& s) {
  auto v = PlainScalarToJson(s);
  return v && v->is_string();
}

void Emit(YAML::Emitter& out, const nlohmann::json& j) {
  switch (j.type()) {
    case nlohmann::json::value_t::object:
      if (j.empty()) out << YAML::Flow;
      out << YAML::BeginMap;
      for (const auto& [key, value] : j.items()) {
        out << YAML::Key;
        if (!ReadsBackAsString(key)) out << YAML::DoubleQuoted;
        out << key << YAML::Value;
        Emit(out, value);
      }
      out << YAML::EndMap;
      break;
    case nlohmann::json::value_t::array:
      if (j.empty()) out << YAML::Flow;
      out << YAML::BeginSeq;
      for (const auto& item : j) Emit(out, item);
      out << YAML::EndSeq;
      break;
    case nlohmann::json::value_t::string: {
      const auto& s = j.get_ref<const std::string&>();
      if (!ReadsBackAsString(s)) out << YAML::DoubleQuoted;
      out << s;
      break;
    }
    case nlohmann::json::value_t::boolean:
      out << j.get<bool>();
      break;
    case nlohmann::json::value_t::number_integer:
      out << j.get<int64_t>();
      break;
    case nlohmann::json::value_t::number_unsigned:
      out << j.get<uint64_t>();
      break;
    case nlohmann::json::value_t::number_float:
      // nlohmann's shortest round-trip form ("0.25", "2.0", "1e-07"), which
      // YAML reads back as the same float.
      out << j.dump();
      break;
    default:
      out << YAML::Null;
      break;
  }
}

}  // namespace

Result<nlohmann::json> PlainScalarToJson(std::string_view s) {
  if (IsOneOf(s, {"", "~", "null", "Null", "NULL"})) return nlohmann::json(nullptr);
  if (IsOneOf(s, {"true", "True", "TRUE", "yes", "Yes", "YES", "on", "On", "ON"})) return nlohmann::json(true);
  if (IsOneOf(s, {"false", "False", "FALSE", "no", "No", "NO", "off", "Off", "OFF"})) return nlohmann::json(false);
  {
    std::string_view d = s;
    if (!d.empty() && (d[0] == '-' || d[0] == '+')) d.remove_prefix(1);
    if (AllOf(d, IsDigit)) return ParseInteger(s);
    if (s.size() > 2 && s.starts_with("0o") && AllOf(s.substr(2), IsOctal)) return ParseInteger(s);
    if (s.size() > 2 && s.starts_with("0x") && AllOf(s.substr(2), IsHex)) return ParseInteger(s);
  }
  if (IsCoreFloat(s)) return ParseFloat(s);
  {
    std::string_view t = s;
    if (!t.empty() && (t[0] == '-' || t[0] == '+')) t.remove_prefix(1);
    if (IsOneOf(t, {".inf", ".Inf", ".INF", ".nan", ".NaN", ".NAN"})) {
      return InvalidArgument("'" + std::string(s) + "' has no JSON form (numbers must be finite)");
    }
  }
  return nlohmann::json(std::string(s));
}

Result<nlohmann::json> YamlToJson(std::string_view text, const std::string& file) {
  try {
    const YamlDocuments docs = CountYamlDocuments(text);
    if (docs.stuck) return InvalidArgument(Where(file, *docs.stuck) + "malformed YAML: cannot read on from here");
    if (docs.count > 1) {
      return InvalidArgument(Where(file, *docs.second) + "expected one YAML document, found " +
                             std::to_string(docs.count));
    }
    if (docs.count == 0) return nlohmann::json(nullptr);
    return Converter(file).Convert(YAML::Load(std::string(text)), 0);
  } catch (const YAML::Exception& e) {
    return InvalidArgument(Where(file, e.mark) + "malformed YAML: " + e.msg);
  }
}

std::string JsonToYaml(const nlohmann::json& value) {
  YAML::Emitter out;
  out.SetIndent(2);
  Emit(out, value);
  std::string text = out.c_str();
  if (text.empty() || text.back() != '\n') text += '\n';
  return text;
}

}  // namespace gpupool
