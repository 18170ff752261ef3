#include "src/agent/driver_files.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

namespace gpupool {
namespace {

namespace fs = std::filesystem;

class DriverFilesTest : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = (fs::temp_directory_path() / ("gpupool-driver-" + std::to_string(::getpid()))).string();
    fs::remove_all(root_);
  }
  void TearDown() override { fs::remove_all(root_); }
  void Touch(const std::string& path) {
    fs::create_directories(fs::path(root_ + path).parent_path());
    std::ofstream(root_ + path) << "x";
  }
  std::string root_;
};

TEST_F(DriverFilesTest, FindsTheDriversLibrariesAndBinariesOnly) {
  Touch("/usr/lib/x86_64-linux-gnu/libcuda.so.550.54");
  Touch("/usr/lib/x86_64-linux-gnu/libnvidia-ml.so.550.54");
  Touch("/usr/lib/x86_64-linux-gnu/libc.so.6");
  Touch("/usr/lib/x86_64-linux-gnu/libnvidia-notes.txt");
  Touch("/usr/bin/nvidia-smi");
  Touch("/usr/bin/python3");
  fs::create_directories(root_ + "/lib");
  fs::create_symlink("usr/lib", root_ + "/lib64");  // merged /usr: one directory seen twice
  const std::vector<BindMount> files = FindDriverFiles(root_);
  std::vector<std::string> paths;
  for (const BindMount& b : files) {
    paths.push_back(b.path);
    EXPECT_EQ(b.host_path, root_ + b.path);
    EXPECT_TRUE(b.read_only);
  }
  EXPECT_EQ(paths, (std::vector<std::string>{"/usr/lib/x86_64-linux-gnu/libcuda.so.550.54",
                                             "/usr/lib/x86_64-linux-gnu/libnvidia-ml.so.550.54",
                                             "/usr/bin/nvidia-smi"}));
}

TEST_F(DriverFilesTest, ANodeWithoutTheDriverHasNone) {
  Touch("/usr/lib/x86_64-linux-gnu/libc.so.6");
  EXPECT_TRUE(FindDriverFiles(root_).empty());
}

TEST_F(DriverFilesTest, MountPointsAreMadeInsideTheImageOnly) {
  const std::string rootfs = root_ + "/image";
  fs::create_directories(rootfs + "/usr/lib");
  fs::create_symlink(root_ + "/outside", rootfs + "/lib");  // an absolute link out of the image
  const std::vector<BindMount> wanted = {{"/host/libcuda.so.1", "/usr/lib/x86_64-linux-gnu/libcuda.so.1", true},
                                         {"/host/libnvidia-ml.so.1", "/lib/libnvidia-ml.so.1", true}};
  const std::vector<BindMount> made = MakeFileMountPoints(rootfs, wanted);
  ASSERT_EQ(made.size(), 1u);
  EXPECT_EQ(made[0].path, "/usr/lib/x86_64-linux-gnu/libcuda.so.1");
  EXPECT_TRUE(fs::is_regular_file(rootfs + "/usr/lib/x86_64-linux-gnu/libcuda.so.1"));
  EXPECT_FALSE(fs::exists(root_ + "/outside"));
  EXPECT_EQ(MakeFileMountPoints(rootfs, wanted).size(), 1u);  // again: the file is kept
}

// Directories (the MPS daemon's, TaskLaunch::binds) likewise: made inside
// the image, never through a link out of it.
TEST_F(DriverFilesTest, DirectoryMountPointsAreMadeInsideTheImageOnly) {
  const std::string rootfs = root_ + "/image";
  fs::create_directories(rootfs + "/usr");
  fs::create_symlink(root_ + "/outside", rootfs + "/var");
  const std::vector<BindMount> wanted = {{"/w/mps/gpu0/pipe", "/srv/gpupool/mps/gpu0/pipe", false},
                                         {"/w/mps/gpu0/log", "/var/lib/gpupool/mps/gpu0/log", true}};
  const std::vector<BindMount> made = MakeDirMountPoints(rootfs, wanted);
  ASSERT_EQ(made.size(), 1u);
  EXPECT_EQ(made[0].path, "/srv/gpupool/mps/gpu0/pipe");
  EXPECT_TRUE(fs::is_directory(rootfs + "/srv/gpupool/mps/gpu0/pipe"));
  EXPECT_FALSE(fs::exists(root_ + "/outside"));
  EXPECT_EQ(MakeDirMountPoints(rootfs, wanted).size(), 1u);  // again: kept
}

}  // namespace
}  // namespace gpupool
