// An HTTP/1.1 request and its answer as handlers of the HTTP layer see them
// (src/http/server.h). Plain values: no thread rules beyond a value's.
#pragma once

#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace gpupool::http {

struct Request {
  std::string method;  // as sent, upper case ("GET", "POST", ...)
  std::string path;    // without the query string, percent-decoding left to the handler
  std::string route;   // the matched route's name (Route::name); empty when none matched
  std::vector<std::string> captures;  // the path pattern's captures, in pattern order
  std::vector<std::pair<std::string, std::string>> headers;  // names as sent
  std::vector<std::pair<std::string, std::string>> params;   // the query's arguments, decoded, in order
  std::string body;         // at most the listener's max_body_bytes
  std::string remote_addr;  // the client's address, without its port

  // The first header of that name (case-insensitive); empty when absent.
  std::string_view Header(std::string_view name) const;
  bool HasParam(std::string_view name) const;
  // The first argument of that name; empty when absent.
  std::string Param(std::string_view name) const;
};

struct Response {
  int status = 200;
  std::string content_type = "text/plain; charset=utf-8";
  std::string body;
  std::vector<std::pair<std::string, std::string>> headers;  // added as given (no Content-Length: the layer sets it)
  bool close = false;  // close the connection once this answer is sent
};

// Answers the layer gives on its own (no handler ran, or none answered in
// time); Options::error_response turns one into a Response.
enum class LayerError {
  kNotFound,          // no route has that path (404)
  kMethodNotAllowed,  // a route has the path, none the method (405, with Allow)
  kBodyTooLarge,      // Content-Length or the streamed body passed max_body_bytes (413; closes)
  // The body's length is ambiguous (RFC 9112 section 6), refused before any of it is read (400; closes):
  kBadTransferEncoding,  // a Transfer-Encoding other than one `chunked`, or one beside a Content-Length
  kBadContentLength,     // Content-Length given twice with different values
  kBusy,              // the worker queue of the route's lane is full (503, with Retry-After)
  kTimeout,           // no answer within request_timeout (504)
  kStopping,          // the server is stopping (503)
  kInternal,          // a handler threw instead of answering (500)
};

int DefaultStatus(LayerError e);
std::string_view LayerErrorName(LayerError e);  // "not_found", "method_not_allowed", ...

}  // namespace gpupool::http
