#include "src/cli/parse.h"

#include <charconv>

namespace gpupool {
namespace {

Result<uint64_t> ParseU64(std::string_view flag, std::string_view text) {
  if (text.empty()) {
    return InvalidArgument(std::string(flag) + ": expected a non-negative integer, got nothing (seeds are >= 0)");
  }
  uint64_t v = 0;
  auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (text.empty() || ec != std::errc() || ptr != text.data() + text.size()) {
    return InvalidArgument(std::string(flag) + ": expected a non-negative integer, got '" + std::string(text) + "'");
  }
  return v;
}

}  // namespace

Result<std::vector<std::string>> ParseNameList(std::string_view flag, std::string_view text) {
  std::vector<std::string> out;
  size_t start = 0;
  while (true) {
    const size_t comma = text.find(',', start);
    const std::string_view item = text.substr(start, comma == std::string_view::npos ? comma : comma - start);
    if (item.empty()) return InvalidArgument(std::string(flag) + ": empty item in '" + std::string(text) + "'");
    out.emplace_back(item);
    if (comma == std::string_view::npos) break;
    start = comma + 1;
  }
  return out;
}

Result<std::vector<uint64_t>> ParseSeedList(std::string_view flag, std::string_view text) {
  GP_ASSIGN_OR_RETURN(auto items, ParseNameList(flag, text));
  std::vector<uint64_t> seeds;
  for (const std::string& item : items) {
    const size_t dash = item.find('-');
    if (dash == std::string::npos) {
      GP_ASSIGN_OR_RETURN(auto v, ParseU64(flag, item));
      seeds.push_back(v);
    } else {
      GP_ASSIGN_OR_RETURN(auto lo, ParseU64(flag, std::string_view(item).substr(0, dash)));
      GP_ASSIGN_OR_RETURN(auto hi, ParseU64(flag, std::string_view(item).substr(dash + 1)));
      if (hi < lo) return InvalidArgument(std::string(flag) + ": range '" + item + "' runs backwards");
      if (hi - lo >= 10000) return InvalidArgument(std::string(flag) + ": range '" + item + "' is too long");
      for (uint64_t k = 0; k <= hi - lo; ++k) seeds.push_back(lo + k);  // no wrap when hi == UINT64_MAX
    }
    if (seeds.size() > 10000) return InvalidArgument(std::string(flag) + ": more than 10000 seeds");
  }
  return seeds;
}

}  // namespace gpupool
