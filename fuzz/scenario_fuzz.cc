// libFuzzer target: a scenario file (ParseScenario).
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "src/sim/scenario.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  (void)gpupool::ParseScenario(text, "fuzz.yaml", "/nonexistent-fuzz-dir");
  return 0;
}
