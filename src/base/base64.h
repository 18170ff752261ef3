// Base64 (RFC 4648, standard alphabet, with padding), as etcd's v3 JSON
// gateway writes keys and values.
#pragma once

#include <string>
#include <string_view>

#include "src/base/status.h"

namespace gpupool {

std::string Base64Encode(std::string_view bytes);
// Refuses anything but whole 4-character groups of the alphabet with at
// most two '=' at the end (the error names the offset of the first bad
// character).
Result<std::string> Base64Decode(std::string_view text);

}  // namespace gpupool
