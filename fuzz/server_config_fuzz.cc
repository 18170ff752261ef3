// libFuzzer target: a server configuration file (ParseServerConfig).
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "src/server/server_config.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  (void)gpupool::ParseServerConfig(text, "fuzz.yaml", "/nonexistent-fuzz-dir");
  return 0;
}
