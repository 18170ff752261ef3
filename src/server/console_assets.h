// The web console's static files, embedded in the binary at build time
// (cmake/embed_console.cmake generates ConsoleAssets() from the files under
// src/server/console/; nothing is read from disk at run time, so the
// console works offline and from a package install).
#pragma once

#include <span>
#include <string_view>

namespace gpupool {

struct ConsoleAsset {
  std::string_view name;          // the file name under src/server/console/, e.g. "app.js"
  std::string_view content_type;  // e.g. "text/javascript; charset=utf-8"
  std::string_view etag;          // a strong validator, quoted: the first 16 hex digits of the SHA-256
  std::string_view bytes;
};

// Every embedded file, sorted by name.
std::span<const ConsoleAsset> ConsoleAssets();

}  // namespace gpupool
