// libFuzzer target: an engine snapshot (DecodeSnapshot), as read from a data
// directory at start-up: damaged bytes must give an error, never a crash.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "src/engine/snapshot.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view bytes(reinterpret_cast<const char*>(data), size);
  (void)gpupool::DecodeSnapshot(bytes, gpupool::LendingConfig{});
  return 0;
}
