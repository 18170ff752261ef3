#include "src/agent/jitter.h"

#include <cstdint>

namespace gpupool {

std::chrono::milliseconds Jittered(std::chrono::milliseconds d, std::minstd_rand& rng) {
  const int64_t spread = d.count() / 5;
  if (spread <= 0) return d;
  return d - std::chrono::milliseconds(static_cast<int64_t>(rng() % static_cast<uint64_t>(spread + 1)));
}

}  // namespace gpupool
