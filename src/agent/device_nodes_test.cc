#include "src/agent/device_nodes.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

namespace gpupool {
namespace {

namespace fs = std::filesystem;

TEST(DeviceNodesTest, FakeNodesAreCharacterDevicesWithTheNvidiaNumbers) {
  if (::geteuid() != 0) GTEST_SKIP() << "mknod needs root";
  const std::string dir = (fs::temp_directory_path() / ("gpupool-dev-" + std::to_string(::getpid()))).string();
  ASSERT_TRUE(MakeFakeDeviceNodes(dir, 4));
  ASSERT_TRUE(MakeFakeDeviceNodes(dir, 4));  // again: kept as they are
  for (uint32_t i = 0; i < 4; ++i) {
    auto d = StatDeviceNode(dir + "/nvidia" + std::to_string(i), "/dev/nvidia" + std::to_string(i));
    ASSERT_TRUE(d.has_value()) << i;
    EXPECT_EQ(d->major, kNvidiaMajor);
    EXPECT_EQ(d->minor, i);
    EXPECT_EQ(d->path, "/dev/nvidia" + std::to_string(i));
  }
  const auto control = StatControlNodes(dir);
  ASSERT_EQ(control.size(), 3u);
  EXPECT_EQ(control[0].path, "/dev/nvidiactl");
  EXPECT_EQ(control[0].minor, kNvidiaCtlMinor);
  EXPECT_EQ(control[1].major, kFakeUvmMajor);
  EXPECT_NE(control[1].minor, control[2].minor);
  // No driver behind them: opening one fails with ENXIO (the devices
  // cgroup of a container turns that into EPERM for a denied one).
  errno = 0;
  EXPECT_LT(::open((dir + "/nvidia0").c_str(), O_RDWR), 0);
  EXPECT_EQ(errno, ENXIO);
  fs::remove_all(dir);
}

TEST(DeviceNodesTest, APlainFileIsNotADeviceNode) {
  const std::string file = (fs::temp_directory_path() / ("gpupool-notdev-" + std::to_string(::getpid()))).string();
  std::ofstream(file) << "x";
  EXPECT_FALSE(StatDeviceNode(file, "/dev/nvidia0").has_value());
  EXPECT_FALSE(StatDeviceNode(file + ".absent", "/dev/nvidia0").has_value());
  fs::remove(file);
}

}  // namespace
}  // namespace gpupool
