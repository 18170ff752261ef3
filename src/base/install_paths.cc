#include "src/base/install_paths.h"

#include <unistd.h>

#include <filesystem>
#include <vector>

namespace gpupool {

namespace fs = std::filesystem;

std::string ExecutableDir() {
  std::error_code ec;
  const fs::path self = fs::read_symlink("/proc/self/exe", ec);
  return ec ? std::string() : self.parent_path().string();
}

std::string FindHelper(std::string_view name, bool executable) {
  std::vector<fs::path> candidates;
  if (const std::string dir = ExecutableDir(); !dir.empty()) {
    const fs::path exe_dir(dir);
    candidates = {exe_dir / name, exe_dir.parent_path() / name, exe_dir.parent_path() / "lib" / "gpupool" / name};
  }
  candidates.push_back(fs::path("/usr/lib/gpupool") / name);
  const int mode = executable ? X_OK : R_OK;
  for (const fs::path& p : candidates) {
    std::error_code ec;
    if (fs::is_regular_file(p, ec) && ::access(p.c_str(), mode) == 0) return p.string();
  }
  return "";
}

std::string FindDataDir(std::string_view name) {
  std::vector<fs::path> candidates = {fs::path(name)};
  if (const std::string dir = ExecutableDir(); !dir.empty()) {
    candidates.push_back(fs::path(dir).parent_path() / "share" / "gpupool" / name);
  }
  candidates.push_back(fs::path("/usr/share/gpupool") / name);
  for (const fs::path& p : candidates) {
    std::error_code ec;
    if (fs::is_directory(p, ec)) return p.string();
  }
  return std::string(name);
}

}  // namespace gpupool
