#include "src/base/install_paths.h"

#include <unistd.h>

#include <filesystem>

#include <gtest/gtest.h>

namespace gpupool {
namespace {

namespace fs = std::filesystem;

TEST(InstallPathsTest, ExecutableDirIsTheTestBinarysFolder) {
  const std::string dir = ExecutableDir();
  ASSERT_FALSE(dir.empty());
  EXPECT_TRUE(fs::exists(fs::path(dir) / "gpupool_tests"));
}

TEST(InstallPathsTest, FindsAHelperBesideTheBinaryAndNothingForAnUnknownName) {
  // The build puts gpupool-shim beside the test binary, as beside gpupool.
  const std::string shim = FindHelper("gpupool-shim", true);
  EXPECT_EQ(shim, (fs::path(ExecutableDir()) / "gpupool-shim").string());
  EXPECT_EQ(FindHelper("no-such-gpupool-helper", false), "");
}

TEST(InstallPathsTest, DataDirPrefersTheWorkingDirectoryThenFallsBackToTheNameItself) {
  const fs::path old = fs::current_path();
  const fs::path tmp = fs::temp_directory_path() / ("install-paths-" + std::to_string(::getpid()));
  fs::create_directories(tmp / "scenarios");
  fs::current_path(tmp);
  EXPECT_EQ(FindDataDir("scenarios"), "scenarios");
  EXPECT_EQ(FindDataDir("no-such-data-dir"), "no-such-data-dir");
  fs::current_path(old);
  fs::remove_all(tmp);
}

}  // namespace
}  // namespace gpupool
