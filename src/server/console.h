// The web console (docs/console.md): GET / answers index.html and
// GET /console/{file} the other embedded files (src/server/console_assets.h).
// No token is needed for these static files; the pages read the API with
// the token the user signs in with (a Bearer header, kept in session storage).
//
// Every answer carries a strict Content-Security-Policy (scripts, styles,
// images and fetches from this origin only; no inline script or style, no
// framing), X-Content-Type-Options: nosniff, Referrer-Policy: no-referrer,
// and Cache-Control: no-cache with a strong ETag (a browser revalidates each
// load and gets 304 Not Modified while the binary is the same).
#pragma once

#include <string_view>

#include "src/http/message.h"
#include "src/server/console_assets.h"

namespace gpupool {

// The Content-Security-Policy of every console answer.
inline constexpr std::string_view kConsoleCsp =
    "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; "
    "object-src 'none'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'";

// Answers `req` (GET or HEAD of "/" or "/console/NAME"; captures[0] is NAME
// for the latter): 200 with the file, 304 when If-None-Match names its ETag,
// 404 (the API's JSON error) for a name that is not embedded.
void ServeConsole(const http::Request& req, http::Response& res);

}  // namespace gpupool
