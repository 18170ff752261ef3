// libFuzzer target: a CLI job file (YAML or JSON, ParseJobFile).
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "src/client/job_file.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  (void)gpupool::ParseJobFile(text, "fuzz.yaml");
  return 0;
}
