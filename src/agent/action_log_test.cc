#include "src/agent/action_log.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>

namespace gpupool {
namespace {

namespace fs = std::filesystem;

std::string Slurp(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

class ActionLogTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = (fs::temp_directory_path() / ("action-log-" + std::to_string(::getpid()))).string();
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  std::string dir_;
};

TEST_F(ActionLogTest, AppendsWholeLinesAfterWhatWasThere) {
  const std::string path = dir_ + "/agent.log";
  std::ofstream(path) << "old\n";
  {
    ActionLog log(path, 1 << 20);
    log.Append("one");
    log.Append("two");
    EXPECT_EQ(Slurp(path), "old\none\ntwo\n");  // visible before the log closes
  }
}

TEST_F(ActionLogTest, RotatesPastItsSizeKeepingOneOldFile) {
  const std::string path = dir_ + "/agent.log";
  ActionLog log(path, 10);
  log.Append("0123456789");  // 11 bytes: over the limit after this line
  log.Append("second");
  log.Append("third");
  EXPECT_EQ(Slurp(path + ".1"), "0123456789\n");
  EXPECT_EQ(Slurp(path), "second\nthird\n");
}

TEST_F(ActionLogTest, ReopensAFileSomeoneElseMovedAway) {
  const std::string path = dir_ + "/agent.log";
  ActionLog log(path, 1 << 20);
  log.Append("before");
  fs::rename(path, path + ".rotated");  // as logrotate does
  for (int i = 0; i < ActionLog::kRecheckLines; ++i) log.Append("line " + std::to_string(i));
  ASSERT_TRUE(fs::exists(path));
  EXPECT_NE(Slurp(path).find("line " + std::to_string(ActionLog::kRecheckLines - 1)), std::string::npos);
  EXPECT_EQ(Slurp(path + ".rotated").rfind("before\n", 0), 0u);
}

TEST_F(ActionLogTest, AFailureToOpenIsDroppedAndRetried) {
  const std::string path = dir_ + "/missing/agent.log";
  ActionLog log(path, 1 << 20);
  log.Append("lost");  // the directory does not exist yet: dropped, no crash
  fs::create_directories(dir_ + "/missing");
  log.Append("kept");
  EXPECT_EQ(Slurp(path), "kept\n");
}

}  // namespace
}  // namespace gpupool
