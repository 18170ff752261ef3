#include "src/config/traces_dir.h"

#include <cstdlib>
#include <filesystem>
#include <vector>

namespace gpupool {

std::string TracesDir(const std::string& near) {
  namespace fs = std::filesystem;
  if (const char* env = std::getenv("GPUPOOL_TRACES"); env && *env) return env;
  std::vector<std::string> candidates = {"../shared/traces", "../../shared/traces"};
  if (!near.empty()) candidates.push_back((fs::path(near) / "../../../shared/traces").lexically_normal().string());
  for (const std::string& c : candidates) {
    std::error_code ec;
    if (fs::is_directory(c, ec)) return c;
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
