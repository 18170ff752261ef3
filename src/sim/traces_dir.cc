#include "src/sim/traces_dir.h"

#include <cstdlib>
#include <filesystem>

namespace gpupool {

std::string TracesDir() {
  if (const char* env = std::getenv("GPUPOOL_TRACES"); env && *env) return env;
  for (const char* candidate : {"../shared/traces", "../../shared/traces"}) {
    if (std::filesystem::is_directory(candidate)) return candidate;
  }
  return "";
}

std::string TraceFile(const std::string& relative) {
  const std::string dir = TracesDir();
  if (dir.empty()) return "";
  const std::string path = dir + "/" + relative;
  return std::filesystem::exists(path) ? path : "";
}

}  // namespace gpupool
