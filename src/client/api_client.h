// The HTTP side of the client: one call of the REST API (docs/api/openapi.yaml)
// at a time, JSON in and out, every failure as a value.
//
// Not thread-safe; one ApiClient per command. Calls block until the server
// answers or a timeout passes (connect 5 s, read and write 60 s).
#pragma once

#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

#include "src/base/status.h"
#include "src/client/client_config.h"

namespace httplib {
class Client;
}

namespace gpupool {

// Query parameters, in order; values are percent-encoded by the client.
using QueryParams = std::vector<std::pair<std::string, std::string>>;

class ApiClient {
 public:
  // Sends the config's token (when there is one) as `Authorization: Bearer`.
  explicit ApiClient(ClientConfig config);
  ~ApiClient();
  ApiClient(const ApiClient&) = delete;
  ApiClient& operator=(const ApiClient&) = delete;

  // Each returns the JSON object of a 2xx answer. Failures:
  // - the server's error body {"error": {"code", "message", "field"}}:
  //   "MESSAGE (field: FIELD)", or "MESSAGE" without a field; ErrorCode
  //   kInvalidArgument for 400, kNotFound for 404, kFailedPrecondition
  //   otherwise; a 401 adds where the token came from, or how to give one;
  // - no answer (refused, timed out, bad TLS): kIo, naming the address,
  //   where the address came from and how to set it;
  // - a 2xx answer that is not a JSON object, or an error answer without the
  //   error body: kIo, with the HTTP status.
  Result<nlohmann::json> Get(const std::string& path, const QueryParams& query = {});
  Result<nlohmann::json> Post(const std::string& path, const nlohmann::json& body);
  Result<nlohmann::json> Put(const std::string& path, const nlohmann::json& body);
  Result<nlohmann::json> Delete(const std::string& path);
  // A GET whose 2xx answer is text (e.g. job logs); failures as above.
  Result<std::string> GetText(const std::string& path, const QueryParams& query = {});

  const ClientConfig& config() const { return config_; }

 private:
  // raw: when given, a 2xx body is stored there as it is (not parsed).
  Result<nlohmann::json> Call(const std::string& method, const std::string& path, const nlohmann::json* body,
                              std::string* raw = nullptr);

  ClientConfig config_;
  std::unique_ptr<httplib::Client> http_;
};

// Percent-encodes one path segment or query value (RFC 3986 unreserved
// characters are kept).
std::string UrlEncode(std::string_view text);

// The message of an API error body, as ApiClient reports it; nullopt when
// `body` is not {"error": {"message": ...}}.
std::optional<std::string> ApiErrorMessage(const nlohmann::json& body);

}  // namespace gpupool
