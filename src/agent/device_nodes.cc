#include "src/agent/device_nodes.h"

#include <sys/stat.h>
#include <sys/sysmacros.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

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

namespace {

std::string MigAccessFile(const std::string& proc_dir, int gpu_minor, int gi, int ci) {
  std::string path = proc_dir + "/gpu" + std::to_string(gpu_minor) + "/mig/gi" + std::to_string(gi);
  if (ci >= 0) path += "/ci" + std::to_string(ci);
  return path + "/access";
}

Result<uint32_t> ReadDeviceFileMinor(const std::string& access_file) {
  std::ifstream in(access_file);
  if (!in) return NotFound(access_file + ": " + std::strerror(errno));
  std::string line;
  while (std::getline(in, line)) {
    constexpr std::string_view kKey = "DeviceFileMinor:";
    if (line.rfind(kKey, 0) != 0) continue;
    std::istringstream value(line.substr(kKey.size()));
    int64_t minor = -1;
    if (value >> minor && minor >= 0 && minor < (1 << 20)) return static_cast<uint32_t>(minor);
    break;
  }
  return InvalidArgument(access_file + ": no valid DeviceFileMinor line");
}

Status MakeNode(const std::string& path, uint32_t major_number, uint32_t minor_number) {
  if (StatDeviceNode(path, "")) return {};
  std::error_code ec;
  std::filesystem::remove(path, ec);
  if (::mknod(path.c_str(), S_IFCHR | 0666, makedev(major_number, minor_number)) != 0) {
    return IoError("mknod " + path + ": " + std::strerror(errno));
  }
  ::chmod(path.c_str(), 0666);
  return {};
}

}  // namespace

Result<std::vector<DeviceNode>> StatMigCapNodes(const std::string& proc_dir, const std::string& dev_dir,
                                                int gpu_minor, int gi, int ci) {
  std::vector<DeviceNode> out;
  for (int c : {-1, ci}) {
    const std::string access = MigAccessFile(proc_dir, gpu_minor, gi, c);
    auto minor_number = ReadDeviceFileMinor(access);
    if (!minor_number) return std::unexpected(minor_number.error());
    const std::string name = "nvidia-cap" + std::to_string(*minor_number);
    auto node = StatDeviceNode(dev_dir + "/" + name, std::string(kMigCapsDevDir) + "/" + name);
    if (!node) return NotFound(dev_dir + "/" + name + " (listed in " + access + ") is not a character device");
    out.push_back(*node);
  }
  return out;
}

Status MakeFakeMigCapNode(const std::string& proc_dir, const std::string& dev_dir, int gpu_minor, int gi, int ci) {
  std::error_code ec;
  std::filesystem::create_directories(dev_dir, ec);
  if (ec) return IoError(dev_dir + ": " + ec.message());
  const uint32_t minor_number = static_cast<uint32_t>(1 + gpu_minor * 1000 + gi * 20 + (std::max(ci, -1) + 1));
  const std::string access = MigAccessFile(proc_dir, gpu_minor, gi, ci);
  std::filesystem::create_directories(std::filesystem::path(access).parent_path(), ec);
  std::ofstream(access) << "DeviceFileMinor: " << minor_number << "\nDeviceFileMode: 292\nDeviceFileModify: 1\n";
  return MakeNode(dev_dir + "/nvidia-cap" + std::to_string(minor_number), kFakeCapsMajor, minor_number);
}

Status MakeFakeMigCapNodes(const std::string& proc_dir, const std::string& dev_dir, int gpu_minor, int gi,
                           int ci) {
  for (int c : {-1, ci}) GP_TRY(MakeFakeMigCapNode(proc_dir, dev_dir, gpu_minor, gi, c));
  return {};
}

Status RemoveFakeMigCapNode(const std::string& proc_dir, const std::string& dev_dir, int gpu_minor, int gi, int ci) {
  const std::string access = MigAccessFile(proc_dir, gpu_minor, gi, std::max(ci, -1));
  std::error_code ec;
  if (auto minor_number = ReadDeviceFileMinor(access)) {
    std::filesystem::remove(dev_dir + "/nvidia-cap" + std::to_string(*minor_number), ec);
    if (ec) return IoError(dev_dir + "/nvidia-cap" + std::to_string(*minor_number) + ": " + ec.message());
  }
  const auto dir = std::filesystem::path(access).parent_path();
  if (ci < 0) {
    std::filesystem::remove_all(dir, ec);
  } else {
    std::filesystem::remove(access, ec);
    std::error_code ignored;
    std::filesystem::remove(dir, ignored);  // empty by now
  }
  if (ec) return IoError(dir.string() + ": " + ec.message());
  return {};
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
    if (auto ok = MakeNode(dir + "/" + n.name, n.major, n.minor); !ok) return ok;
  }
  return {};
}

}  // namespace gpupool
