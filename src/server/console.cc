#include "src/server/console.h"

#include <string>

#include <nlohmann/json.hpp>

namespace gpupool {
namespace {

const ConsoleAsset* Find(std::string_view name) {
  for (const ConsoleAsset& a : ConsoleAssets()) {
    if (a.name == name) return &a;
  }
  return nullptr;
}

// Whether an If-None-Match header value (a list of quoted tags, or *) names `etag`.
bool Matches(std::string_view header, std::string_view etag) {
  if (header == "*") return true;
  size_t at = 0;
  while ((at = header.find(etag, at)) != std::string_view::npos) {
    const bool starts = at == 0 || header[at - 1] == ' ' || header[at - 1] == ',' || header[at - 1] == '/';
    const size_t end = at + etag.size();
    if (starts && (end == header.size() || header[end] == ',' || header[end] == ' ')) return true;
    at = end;
  }
  return false;
}

}  // namespace

void ServeConsole(const http::Request& req, http::Response& res) {
  res.headers.emplace_back("Content-Security-Policy", std::string(kConsoleCsp));
  res.headers.emplace_back("X-Content-Type-Options", "nosniff");
  res.headers.emplace_back("Referrer-Policy", "no-referrer");
  res.headers.emplace_back("X-Frame-Options", "DENY");
  const std::string_view name = req.captures.empty() ? std::string_view("index.html") : req.captures[0];
  const ConsoleAsset* a = Find(name);
  if (a == nullptr) {
    const nlohmann::json err{{"code", "not_found"}, {"message", "no console file '" + std::string(name.substr(0, 64)) + "'"}};
    res.status = 404;
    res.content_type = "application/json";
    res.body = nlohmann::json{{"error", err}}.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
    return;
  }
  res.headers.emplace_back("Cache-Control", "no-cache");
  res.headers.emplace_back("ETag", std::string(a->etag));
  if (Matches(req.Header("If-None-Match"), a->etag)) {
    res.status = 304;
    return;
  }
  res.status = 200;
  res.content_type = std::string(a->content_type);
  res.body = std::string(a->bytes);
}

}  // namespace gpupool
