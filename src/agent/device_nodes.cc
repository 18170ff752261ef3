#include "src/agent/device_nodes.h"

#include <sys/stat.h>
#include <sys/sysmacros.h>

#include <cerrno>
#include <cstring>
#include <filesystem>

namespace gpupool {

std::optional<DeviceNode> StatDeviceNode(const std::string& host_path, const std::string& path) {
  struct stat st {};
  if (::stat(host_path.c_str(), &st) != 0 || !S_ISCHR(st.st_mode)) return std::nullopt;
  return DeviceNode{host_path, path, major(st.st_rdev), minor(st.st_rdev)};
}

std::vector<DeviceNode> StatControlNodes(const std::string& dir) {
  std::vector<DeviceNode> out;
  for (const char* name : {"nvidiactl", "nvidia-uvm", "nvidia-uvm-tools"}) {
    if (auto d = StatDeviceNode(dir + "/" + name, std::string("/dev/") + name)) out.push_back(*d);
  }
  return out;
}

Status MakeFakeDeviceNodes(const std::string& dir, int count) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) return IoError(dir + ": " + ec.message());
  struct Node {
    std::string name;
    uint32_t major, minor;
  };
  std::vector<Node> nodes;
  for (int i = 0; i < count; ++i) nodes.push_back({"nvidia" + std::to_string(i), kNvidiaMajor, static_cast<uint32_t>(i)});
  nodes.push_back({"nvidiactl", kNvidiaMajor, kNvidiaCtlMinor});
  nodes.push_back({"nvidia-uvm", kFakeUvmMajor, 0});
  nodes.push_back({"nvidia-uvm-tools", kFakeUvmMajor, 1});
  for (const Node& n : nodes) {
    const std::string path = dir + "/" + n.name;
    if (StatDeviceNode(path, "")) continue;
    std::filesystem::remove(path, ec);
    if (::mknod(path.c_str(), S_IFCHR | 0666, makedev(n.major, n.minor)) != 0) {
      return IoError("mknod " + path + ": " + std::strerror(errno));
    }
    ::chmod(path.c_str(), 0666);
  }
  return {};
}

}  // namespace gpupool
