// libFuzzer target: the openb trace CSVs (node list and pod list).
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "src/config/alibaba_gpu_trace.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  const gpupool::Catalog& catalog = gpupool::Catalog::Builtin();
  (void)gpupool::ParseOpenbNodes(text, "nodes.csv", catalog);
  (void)gpupool::ParseOpenbPods(text, "pods.csv", catalog);
  return 0;
}
