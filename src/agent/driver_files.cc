#include "src/agent/driver_files.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <set>

namespace gpupool {
namespace {

namespace fs = std::filesystem;

bool IsDriverLibrary(const std::string& name) {
  for (const char* prefix : {"libcuda.so", "libcudadebugger.so", "libnvidia-", "libnvcuvid.so", "libnvoptix.so"}) {
    if (name.rfind(prefix, 0) == 0) return name.find(".so") != std::string::npos;
  }
  return false;
}

bool Under(const fs::path& path, const fs::path& dir) {
  auto [d, p] = std::mismatch(dir.begin(), dir.end(), path.begin(), path.end());
  return d == dir.end();
}

}  // namespace

std::vector<BindMount> FindDriverFiles(const std::string& root) {
  std::vector<BindMount> out;
  std::set<fs::path> seen_dirs;
  std::error_code ec;
  for (const char* dir : {"/usr/lib/x86_64-linux-gnu", "/usr/lib/aarch64-linux-gnu", "/usr/lib64", "/usr/lib",
                          "/lib/x86_64-linux-gnu", "/lib/aarch64-linux-gnu", "/lib64"}) {
    const fs::path canonical = fs::canonical(root + dir, ec);
    if (ec || !seen_dirs.insert(canonical).second) continue;
    std::vector<std::string> names;
    for (const fs::directory_entry& e : fs::directory_iterator(canonical, ec)) {
      const std::string name = e.path().filename().string();
      if (IsDriverLibrary(name) && !e.is_directory(ec)) names.push_back(name);
    }
    std::sort(names.begin(), names.end());
    for (const std::string& name : names) {
      if (out.size() >= kMaxDriverFiles) return out;
      out.push_back(BindMount{root + dir + "/" + name, std::string(dir) + "/" + name, /*read_only=*/true});
    }
  }
  for (const char* bin : {"nvidia-smi", "nvidia-debugdump", "nvidia-cuda-mps-control", "nvidia-cuda-mps-server"}) {
    for (const char* dir : {"/usr/bin", "/bin"}) {
      const std::string path = std::string(dir) + "/" + bin;
      if (out.size() < kMaxDriverFiles && fs::is_regular_file(root + path, ec)) {
        out.push_back(BindMount{root + path, path, /*read_only=*/true});
        break;
      }
    }
  }
  return out;
}

std::vector<BindMount> MakeFileMountPoints(const std::string& rootfs, const std::vector<BindMount>& binds) {
  std::vector<BindMount> out;
  std::error_code ec;
  const fs::path top = fs::canonical(rootfs, ec);
  if (ec) return out;
  for (const BindMount& b : binds) {
    const fs::path parent = fs::weakly_canonical(top / fs::path(b.path).relative_path().parent_path(), ec);
    if (ec || !Under(parent, top)) continue;
    fs::create_directories(parent, ec);
    if (ec) continue;
    const fs::path file = parent / fs::path(b.path).filename();
    if (!fs::exists(fs::symlink_status(file, ec))) {
      const int fd = ::open(file.c_str(), O_WRONLY | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0644);
      if (fd < 0) continue;
      ::close(fd);
    } else if (fs::is_symlink(fs::symlink_status(file, ec))) {
      continue;  // the image's own link: binding over it would follow it
    }
    out.push_back(b);
  }
  return out;
}

std::vector<BindMount> MakeDirMountPoints(const std::string& rootfs, const std::vector<BindMount>& binds) {
  std::vector<BindMount> out;
  std::error_code ec;
  const fs::path top = fs::canonical(rootfs, ec);
  if (ec) return out;
  for (const BindMount& b : binds) {
    const fs::path dir = top / fs::path(b.path).relative_path();
    const fs::path resolved = fs::weakly_canonical(dir, ec);
    if (ec || !Under(resolved, top) || resolved != dir.lexically_normal()) continue;  // a link on the way
    fs::create_directories(dir, ec);
    if (!ec && fs::is_directory(fs::symlink_status(dir, ec))) out.push_back(b);
  }
  return out;
}

}  // namespace gpupool
