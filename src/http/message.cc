#include "src/http/message.h"

#include <strings.h>

namespace gpupool::http {
namespace {

bool SameNoCase(std::string_view a, std::string_view b) {
  return a.size() == b.size() && ::strncasecmp(a.data(), b.data(), a.size()) == 0;
}

}  // namespace

std::string_view Request::Header(std::string_view name) const {
  for (const auto& [k, v] : headers) {
    if (SameNoCase(k, name)) return v;
  }
  return {};
}

bool Request::HasParam(std::string_view name) const {
  for (const auto& [k, v] : params) {
    if (k == name) return true;
  }
  return false;
}

std::string Request::Param(std::string_view name) const {
  for (const auto& [k, v] : params) {
    if (k == name) return v;
  }
  return {};
}

int DefaultStatus(LayerError e) {
  switch (e) {
    case LayerError::kNotFound: return 404;
    case LayerError::kMethodNotAllowed: return 405;
    case LayerError::kBodyTooLarge: return 413;
    case LayerError::kBadTransferEncoding: return 400;
    case LayerError::kBadContentLength: return 400;
    case LayerError::kBusy: return 503;
    case LayerError::kTimeout: return 504;
    case LayerError::kStopping: return 503;
    case LayerError::kInternal: return 500;
  }
  return 500;
}

std::string_view LayerErrorName(LayerError e) {
  switch (e) {
    case LayerError::kNotFound: return "not_found";
    case LayerError::kMethodNotAllowed: return "method_not_allowed";
    case LayerError::kBodyTooLarge: return "body_too_large";
    case LayerError::kBadTransferEncoding: return "bad_transfer_encoding";
    case LayerError::kBadContentLength: return "bad_content_length";
    case LayerError::kBusy: return "busy";
    case LayerError::kTimeout: return "timeout";
    case LayerError::kStopping: return "stopping";
    case LayerError::kInternal: return "internal";
  }
  return "error";
}

}  // namespace gpupool::http
