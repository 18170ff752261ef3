#include "src/client/api_client.h"

#include "src/base/http_client.h"
#include "src/base/json_text.h"

#include <httplib.h>

namespace gpupool {
namespace {

std::string HowToSetAddress() {
  return "set the server address with --addr URL, the GPUPOOL_ADDR environment variable, or 'addr:' in "
         "~/.config/gpupool/config.yaml";
}

std::string HowToSetToken() {
  return "give a token with --token, --token-file, the GPUPOOL_TOKEN environment variable, or 'token:' / "
         "'token_file:' in ~/.config/gpupool/config.yaml";
}

}  // namespace

std::string UrlEncode(std::string_view text) {
  static constexpr char kHex[] = "0123456789ABCDEF";
  std::string out;
  for (unsigned char c : text) {
    if ((c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' || c == '_' ||
        c == '.' || c == '~') {
      out += static_cast<char>(c);
    } else {
      out += '%';
      out += kHex[c >> 4];
      out += kHex[c & 15];
    }
  }
  return out;
}

std::optional<std::string> ApiErrorMessage(const nlohmann::json& body) {
  if (!body.is_object()) return std::nullopt;
  auto e = body.find("error");
  if (e == body.end() || !e->is_object()) return std::nullopt;
  auto m = e->find("message");
  if (m == e->end() || !m->is_string()) return std::nullopt;
  std::string out = m->get<std::string>();
  auto f = e->find("field");
  if (f != e->end() && f->is_string() && !f->get<std::string>().empty()) {
    out += " (field: " + f->get<std::string>() + ")";
  }
  return out;
}

ApiClient::ApiClient(ClientConfig config)
    : config_(std::move(config)), http_(NewHttpClient(config_.addr.Url(), config_.tls)) {
  http_->set_connection_timeout(5, 0);
  http_->set_read_timeout(60, 0);
  http_->set_write_timeout(60, 0);
  if (!config_.token.empty()) http_->set_bearer_token_auth(config_.token);
}

ApiClient::~ApiClient() = default;

namespace {

std::string Target(const std::string& path, const QueryParams& query) {
  std::string target = path;
  char sep = '?';
  for (const auto& [k, v] : query) {
    target += sep + UrlEncode(k) + "=" + UrlEncode(v);
    sep = '&';
  }
  return target;
}

}  // namespace

Result<nlohmann::json> ApiClient::Get(const std::string& path, const QueryParams& query) {
  return Call("GET", Target(path, query), nullptr);
}

Result<std::string> ApiClient::GetText(const std::string& path, const QueryParams& query) {
  std::string text;
  GP_ASSIGN_OR_RETURN(auto r, Call("GET", Target(path, query), nullptr, &text));
  return text;
}

Result<nlohmann::json> ApiClient::Post(const std::string& path, const nlohmann::json& body) {
  return Call("POST", path, &body);
}

Result<nlohmann::json> ApiClient::Put(const std::string& path, const nlohmann::json& body) {
  return Call("PUT", path, &body);
}

Result<nlohmann::json> ApiClient::Delete(const std::string& path) { return Call("DELETE", path, nullptr); }

Result<nlohmann::json> ApiClient::Call(const std::string& method, const std::string& path, const nlohmann::json* body,
                                       std::string* raw) {
  const httplib::Headers headers = {{"Accept", raw ? "text/plain" : "application/json"}};
  const std::string text = body ? body->dump() : std::string();
  httplib::Result res = method == "GET"    ? http_->Get(path, headers)
                        : method == "POST" ? http_->Post(path, headers, text, "application/json")
                        : method == "PUT"  ? http_->Put(path, headers, text, "application/json")
                                           : http_->Delete(path, headers);
  const std::string url = config_.addr.Url();
  if (!res) {
    const std::string why = DescribeHttpFailure(*http_, res.error(), url, config_.tls);
    if (IsTlsFailure(res.error())) return IoError(why);  // reached, but not trusted: the address is right
    return IoError("cannot reach the gpupool server at " + url + " (" + config_.addr_source + "): " + why + "; " +
                   HowToSetAddress());
  }
  const int status = res->status;
  if (raw && status >= 200 && status < 300) {
    *raw = std::move(res->body);
    return nlohmann::json::object();
  }
  auto read = ParseJsonText(res->body);
  const nlohmann::json parsed = read ? std::move(*read) : nlohmann::json(nlohmann::json::value_t::discarded);
  if (status >= 200 && status < 300) {
    if (parsed.is_discarded() || !parsed.is_object()) {
      return IoError("the server at " + url + " answered " + method + " " + path + " with HTTP " +
                     std::to_string(status) + " but no JSON object");
    }
    return parsed;
  }
  auto message = parsed.is_discarded() ? std::nullopt : ApiErrorMessage(parsed);
  if (!message) {
    message = "the server at " + url + " answered " + method + " " + path + " with HTTP " + std::to_string(status) +
              " and no error body";
  }
  if (status == 401) {
    *message += config_.token.empty() ? "; no token was given: " + HowToSetToken()
                                      : "; the token came from " + config_.token_source;
  }
  const ErrorCode code = status == 400   ? ErrorCode::kInvalidArgument
                         : status == 404 ? ErrorCode::kNotFound
                                         : ErrorCode::kFailedPrecondition;
  return std::unexpected(Error{code, *message});
}

}  // namespace gpupool
