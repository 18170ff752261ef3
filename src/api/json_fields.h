// Strict reading of JSON request bodies: every key known, every value of
// the right type and range. Errors name the field by its JSON path
// ("stages[1].cpu_cores") and say what was wrong; ApiError carries the
// path separately so that the HTTP layer can return it as `field`.
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <initializer_list>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "src/base/time.h"

namespace gpupool {

struct ApiError {
  int http_status = 400;
  std::string code = "invalid_argument";  // invalid_argument, unauthorized, forbidden, not_found, conflict, ...
  std::string message;
  std::string field;  // JSON path of the offending field; empty when none
  int64_t retry_after_s = 0;  // > 0: a refusal that will pass; the answer's Retry-After header
};

template <class T>
struct ApiResult {
  std::optional<T> value;
  ApiError error;
  bool ok() const { return value.has_value(); }
};

ApiError BadField(std::string field, std::string problem);
// Any other API error: e.g. MakeApiError(404, "not_found", "no job 7").
ApiError MakeApiError(int http_status, std::string code, std::string message, std::string field = "");

// A JSON object being read. Every accessor returns false after setting
// *err when the key is present but wrong; a missing key leaves `out` alone
// and returns true.
// What Open does with a key not in its list: the API's requests refuse it
// (a typo is an error); the agent protocol ignores it (a newer peer's
// field, src/api/agent_protocol.h).
enum class UnknownKeys { kRefuse, kIgnore };

class FieldReader {
 public:
  // Fails unless `j` is an object whose keys are all in `known` (with
  // kIgnore: unless `j` is an object). An empty `path` is the top level, a
  // request's whole body: a non-object there is an error naming `body`.
  static bool Open(const nlohmann::json& j, std::string path, std::initializer_list<std::string_view> known,
                   FieldReader* out, ApiError* err, UnknownKeys unknown = UnknownKeys::kRefuse);

  bool Has(std::string_view key) const { return j_->contains(key); }
  const nlohmann::json* Find(std::string_view key) const;
  std::string PathOf(std::string_view key) const { return path_.empty() ? std::string(key) : path_ + "." + std::string(key); }

  bool String(std::string_view key, std::string& out, size_t max_len, ApiError* err) const;
  bool Bool(std::string_view key, bool& out, ApiError* err) const;
  bool Int(std::string_view key, int64_t& out, int64_t lo, int64_t hi, ApiError* err) const;
  // A finite number in [lo, hi] (lo_open / hi_open exclude the bound).
  bool Number(std::string_view key, double& out, double lo, double hi, ApiError* err, bool lo_open = false,
              bool hi_open = false) const;
  bool StringList(std::string_view key, std::vector<std::string>& out, size_t max_items, ApiError* err) const;
  // A duration string such as "30s" or "1h30m" (src/base/time_text.h).
  bool DurationText(std::string_view key, Duration& out, ApiError* err) const;
  bool Require(std::string_view key, ApiError* err) const;

 private:
  const nlohmann::json* j_ = nullptr;
  std::string path_;
};

// The JSON type name of a value for messages: "a string", "an integer", ...
std::string JsonTypeName(const nlohmann::json& j);

}  // namespace gpupool
