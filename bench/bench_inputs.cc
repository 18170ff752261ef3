#include "bench/bench_inputs.h"

#include <cstdlib>
#include <filesystem>

namespace gpupool::bench {

std::string TraceDir() {
  if (const char* env = std::getenv("GPUPOOL_TRACES")) return env;
  for (const char* candidate : {"../shared/traces", "../../shared/traces"}) {
    if (std::filesystem::exists(std::string(candidate) + "/alibaba-gpu-2023/openb_pod_list_default.csv")) {
      return candidate;
    }
  }
  return "";
}

std::vector<TracePod> DefaultTracePods() {
  const std::string dir = TraceDir();
  if (dir.empty()) return {};
  auto pods = LoadOpenbPodsFile(dir + "/alibaba-gpu-2023/openb_pod_list_default.csv", Catalog::Builtin());
  return pods ? std::move(*pods) : std::vector<TracePod>{};
}

}  // namespace gpupool::bench
