#include "src/agent/device_nodes.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
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

TEST(DeviceNodesTest, MigCapabilityNodesComeFromTheDriversListing) {
  if (::geteuid() != 0) GTEST_SKIP() << "mknod needs root";
  const std::string dir = (fs::temp_directory_path() / ("gpupool-caps-" + std::to_string(::getpid()))).string();
  fs::create_directories(dir + "/proc/gpu0/mig/gi3/ci0");
  fs::create_directories(dir + "/dev");
  // The driver's format: the minor on its own line among others.
  std::ofstream(dir + "/proc/gpu0/mig/gi3/access") << "DeviceFileMinor: 30\nDeviceFileMode: 292\n";
  std::ofstream(dir + "/proc/gpu0/mig/gi3/ci0/access") << "DeviceFileMode: 292\nDeviceFileMinor: 31\n";
  auto none = StatMigCapNodes(dir + "/proc", dir + "/dev", 0, 3, 0);
  ASSERT_FALSE(none.has_value());  // listed, but no node
  EXPECT_NE(none.error().message.find("nvidia-cap30"), std::string::npos) << none.error().message;
  ASSERT_EQ(::mknod((dir + "/dev/nvidia-cap30").c_str(), S_IFCHR | 0600, makedev(kFakeCapsMajor, 30)), 0);
  ASSERT_EQ(::mknod((dir + "/dev/nvidia-cap31").c_str(), S_IFCHR | 0600, makedev(kFakeCapsMajor, 31)), 0);
  auto caps = StatMigCapNodes(dir + "/proc", dir + "/dev", 0, 3, 0);
  ASSERT_TRUE(caps.has_value()) << caps.error().message;
  ASSERT_EQ(caps->size(), 2u);
  EXPECT_EQ((*caps)[0].minor, 30u);
  EXPECT_EQ((*caps)[1].minor, 31u);
  EXPECT_EQ((*caps)[1].path, "/dev/nvidia-caps/nvidia-cap31");
  // A garbled listing or another instance: errors naming the file.
  std::ofstream(dir + "/proc/gpu0/mig/gi3/access") << "DeviceFileMinor: many\n";
  auto garbled = StatMigCapNodes(dir + "/proc", dir + "/dev", 0, 3, 0);
  ASSERT_FALSE(garbled.has_value());
  EXPECT_NE(garbled.error().message.find("gi3/access: no valid DeviceFileMinor"), std::string::npos);
  EXPECT_FALSE(StatMigCapNodes(dir + "/proc", dir + "/dev", 0, 4, 0).has_value());
  fs::remove_all(dir);
}

}  // namespace
}  // namespace gpupool
