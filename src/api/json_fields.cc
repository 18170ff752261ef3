#include "src/api/json_fields.h"

#include <cmath>

#include "src/base/time_text.h"

namespace gpupool {

ApiError BadField(std::string field, std::string problem) {
  ApiError e;
  e.message = field.empty() ? problem : field + ": " + problem;
  e.field = std::move(field);
  return e;
}

ApiError MakeApiError(int http_status, std::string code, std::string message, std::string field) {
  ApiError e;
  e.http_status = http_status;
  e.code = std::move(code);
  e.message = std::move(message);
  e.field = std::move(field);
  return e;
}

std::string JsonTypeName(const nlohmann::json& j) {
  switch (j.type()) {
    case nlohmann::json::value_t::null: return "null";
    case nlohmann::json::value_t::object: return "an object";
    case nlohmann::json::value_t::array: return "a list";
    case nlohmann::json::value_t::string: return "a string";
    case nlohmann::json::value_t::boolean: return "a boolean";
    case nlohmann::json::value_t::number_integer:
    case nlohmann::json::value_t::number_unsigned: return "an integer";
    case nlohmann::json::value_t::number_float: return "a number";
    default: return "an unsupported value";
  }
}

bool FieldReader::Open(const nlohmann::json& j, std::string path, std::initializer_list<std::string_view> known,
                       FieldReader* out, ApiError* err, UnknownKeys unknown) {
  if (!j.is_object()) {
    // The top level (no path) is a request's whole body: name it, so that every 400 names its field.
    *err = BadField(path.empty() ? "body" : path, "expected an object, got " + JsonTypeName(j));
    return false;
  }
  for (const auto& [key, value] : j.items()) {
    if (unknown == UnknownKeys::kIgnore) break;
    bool found = false;
    for (std::string_view k : known) found = found || k == key;
    if (!found) {
      std::string list;
      for (std::string_view k : known) list += (list.empty() ? "" : ", ") + std::string(k);
      const std::string name = key.empty() ? "\"\"" : key;  // an empty key is still named
      const std::string p = path.empty() ? name : path + "." + name;
      *err = BadField(p, "unknown field (known: " + list + ")");
      return false;
    }
  }
  out->j_ = &j;
  out->path_ = std::move(path);
  return true;
}

const nlohmann::json* FieldReader::Find(std::string_view key) const {
  auto it = j_->find(key);
  return it == j_->end() ? nullptr : &*it;
}

bool FieldReader::Require(std::string_view key, ApiError* err) const {
  if (Has(key)) return true;
  *err = BadField(PathOf(key), "required");
  return false;
}

bool FieldReader::String(std::string_view key, std::string& out, size_t max_len, ApiError* err) const {
  const nlohmann::json* v = Find(key);
  if (!v) return true;
  if (!v->is_string()) {
    *err = BadField(PathOf(key), "expected a string, got " + JsonTypeName(*v));
    return false;
  }
  const std::string& s = v->get_ref<const std::string&>();
  if (s.size() > max_len) {
    *err = BadField(PathOf(key), "too long (at most " + std::to_string(max_len) + " characters)");
    return false;
  }
  out = s;
  return true;
}

bool FieldReader::Bool(std::string_view key, bool& out, ApiError* err) const {
  const nlohmann::json* v = Find(key);
  if (!v) return true;
  if (!v->is_boolean()) {
    *err = BadField(PathOf(key), "expected true or false, got " + JsonTypeName(*v));
    return false;
  }
  out = v->get<bool>();
  return true;
}

bool FieldReader::Int(std::string_view key, int64_t& out, int64_t lo, int64_t hi, ApiError* err) const {
  const nlohmann::json* v = Find(key);
  if (!v) return true;
  int64_t x = 0;
  if (v->is_number_integer()) {
    x = v->get<int64_t>();
  } else if (v->is_number_unsigned()) {
    const uint64_t u = v->get<uint64_t>();
    x = u > static_cast<uint64_t>(INT64_MAX) ? INT64_MAX : static_cast<int64_t>(u);
  } else if (v->is_number_float() && std::isfinite(v->get<double>()) && std::floor(v->get<double>()) == v->get<double>() &&
             std::fabs(v->get<double>()) < 9e15) {
    x = static_cast<int64_t>(v->get<double>());
  } else {
    *err = BadField(PathOf(key), "expected an integer, got " + JsonTypeName(*v));
    return false;
  }
  if (x < lo || x > hi) {
    *err = BadField(PathOf(key), "must be between " + std::to_string(lo) + " and " + std::to_string(hi) + " (got " +
                                     std::to_string(x) + ")");
    return false;
  }
  out = x;
  return true;
}

bool FieldReader::Number(std::string_view key, double& out, double lo, double hi, ApiError* err, bool lo_open,
                         bool hi_open) const {
  const nlohmann::json* v = Find(key);
  if (!v) return true;
  if (!v->is_number()) {
    *err = BadField(PathOf(key), "expected a number, got " + JsonTypeName(*v));
    return false;
  }
  const double x = v->get<double>();
  const bool below = lo_open ? !(x > lo) : !(x >= lo);
  const bool above = hi_open ? !(x < hi) : !(x <= hi);
  if (!std::isfinite(x) || below || above) {
    auto fmt = [](double d) {
      std::string s = nlohmann::json(d).dump();
      return s;
    };
    *err = BadField(PathOf(key), std::string("must be ") + (lo_open ? "> " : ">= ") + fmt(lo) + " and " +
                                     (hi_open ? "< " : "<= ") + fmt(hi) + " (got " + v->dump() + ")");
    return false;
  }
  out = x;
  return true;
}

bool FieldReader::StringList(std::string_view key, std::vector<std::string>& out, size_t max_items,
                             ApiError* err) const {
  const nlohmann::json* v = Find(key);
  if (!v) return true;
  if (!v->is_array()) {
    *err = BadField(PathOf(key), "expected a list of strings, got " + JsonTypeName(*v));
    return false;
  }
  if (v->size() > max_items) {
    *err = BadField(PathOf(key), "too many entries (at most " + std::to_string(max_items) + ")");
    return false;
  }
  out.clear();
  for (size_t i = 0; i < v->size(); ++i) {
    if (!(*v)[i].is_string()) {
      *err = BadField(PathOf(key) + "[" + std::to_string(i) + "]", "expected a string, got " + JsonTypeName((*v)[i]));
      return false;
    }
    out.push_back((*v)[i].get<std::string>());
  }
  return true;
}

bool FieldReader::DurationText(std::string_view key, Duration& out, ApiError* err) const {
  const nlohmann::json* v = Find(key);
  if (!v) return true;
  if (!v->is_string()) {
    *err = BadField(PathOf(key), "expected a duration string such as \"30s\", got " + JsonTypeName(*v));
    return false;
  }
  auto d = ParseDurationText(v->get_ref<const std::string&>());
  if (!d) {
    *err = BadField(PathOf(key), d.error().message);
    return false;
  }
  out = *d;
  return true;
}

}  // namespace gpupool
