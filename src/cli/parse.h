// Parsing of command-line values that CLI11 cannot type-check by itself.
// Errors name the flag and the problem.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "src/base/status.h"

namespace gpupool {

// "42-51" (inclusive range), "42,43,50", or "42"; combinations like
// "1-3,7". Fails on anything else, on a reversed range, or on more than
// 10,000 seeds.
Result<std::vector<uint64_t>> ParseSeedList(std::string_view flag, std::string_view text);

// "A,B,C" split on commas; empty items are an error.
Result<std::vector<std::string>> ParseNameList(std::string_view flag, std::string_view text);

}  // namespace gpupool
