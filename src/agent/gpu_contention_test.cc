#include "src/agent/gpu_contention.h"

#include <gtest/gtest.h>
#include <sys/stat.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "tests/run_binary.h"

namespace gpupool {
namespace {

std::string Read(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

struct Fixture {
  std::string dir = testing::MakeTempDir();
  GpuContention contention{GpuContentionOptions{dir + "/contention"}};
  ~Fixture() { std::filesystem::remove_all(dir); }
};

GpuLoad Load(int gpu, std::vector<double> tasks, double device = -1, bool foreign = false) {
  return GpuLoad{gpu, std::move(tasks), device, foreign};
}

TEST(GpuContentionTest, CountsBusyTasksAndOthersWhoseWorkTheTasksDoNotExplain) {
  const GpuContentionOptions o;
  EXPECT_EQ(BusyConsumers(Load(0, {}), o), 0);
  EXPECT_EQ(BusyConsumers(Load(0, {100}), o), 1);
  EXPECT_EQ(BusyConsumers(Load(0, {100, 0, 4.9}), o), 1);  // idle tasks want nothing
  EXPECT_EQ(BusyConsumers(Load(0, {25, 5}), o), 2);
  EXPECT_EQ(BusyConsumers(Load(0, {-1, 50}), o), 2) << "a task not measured counts as busy";
  // Another process on the GPU: busy when the GPU does more than the tasks.
  EXPECT_EQ(BusyConsumers(Load(0, {50}, 95, true), o), 2);
  EXPECT_EQ(BusyConsumers(Load(0, {50}, 60, true), o), 1) << "within the margin: the task's own work";
  EXPECT_EQ(BusyConsumers(Load(0, {50}, 95, false), o), 1) << "no other process: a sampling difference";
  EXPECT_EQ(BusyConsumers(Load(0, {50}, -1, true), o), 2) << "GPU not measured: the other process counts";
}

TEST(GpuContentionTest, ContentionStartsAtOnceAndEndsAfterTwoQuietSamples) {
  Fixture f;
  EXPECT_TRUE(f.contention.contended(0)) << "never sampled: the safe side";
  ASSERT_TRUE(f.contention.Update({Load(0, {100})}, 1000, 15000));
  EXPECT_TRUE(f.contention.contended(0));
  EXPECT_EQ(Read(f.contention.FileOf(0)), "contended 16000\n");
  ASSERT_TRUE(f.contention.Update({Load(0, {100})}, 2000, 15000));
  EXPECT_FALSE(f.contention.contended(0));
  EXPECT_EQ(Read(f.contention.FileOf(0)), "uncontended 17000\n");
  ASSERT_TRUE(f.contention.Update({Load(0, {60, 40})}, 3000, 15000));
  EXPECT_TRUE(f.contention.contended(0));
  EXPECT_EQ(Read(f.contention.FileOf(0)), "contended 18000\n");
  ASSERT_TRUE(f.contention.Update({Load(0, {25})}, 4000, 15000));
  EXPECT_TRUE(f.contention.contended(0)) << "one quiet sample is not enough";
  ASSERT_TRUE(f.contention.Update({Load(0, {25, 70})}, 5000, 15000));
  ASSERT_TRUE(f.contention.Update({Load(0, {25})}, 6000, 15000));
  EXPECT_TRUE(f.contention.contended(0)) << "the quiet samples must be in a row";
  ASSERT_TRUE(f.contention.Update({Load(0, {25})}, 7000, 15000));
  EXPECT_FALSE(f.contention.contended(0));
  EXPECT_EQ(Read(f.contention.FileOf(0)), "uncontended 22000\n");
}

TEST(GpuContentionTest, EachGpuHasItsOwnDirectoryAndDecision) {
  Fixture f;
  for (int i = 0; i < 2; ++i) ASSERT_TRUE(f.contention.Update({Load(0, {90}), Load(3, {30, 30})}, 1000, 5000));
  EXPECT_EQ(f.contention.DirOf(3), f.dir + "/contention/gpu-3");
  EXPECT_EQ(f.contention.FileOf(3), f.dir + "/contention/gpu-3/state");
  EXPECT_EQ(Read(f.contention.FileOf(0)), "uncontended 6000\n");
  EXPECT_EQ(Read(f.contention.FileOf(3)), "contended 6000\n");
  EXPECT_FALSE(std::filesystem::exists(f.contention.DirOf(1)));
  struct stat st {};
  ASSERT_EQ(::stat(f.contention.FileOf(0).c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0644u) << "tasks read it under their own uids";
  EXPECT_FALSE(std::filesystem::exists(f.contention.FileOf(0) + ".tmp"));
}

TEST(GpuContentionTest, ClearRemovesTheFilesSoThatTheCapEnforcesShares) {
  Fixture f;
  ASSERT_TRUE(f.contention.Update({Load(0, {90}), Load(1, {})}, 1000, 5000));
  f.contention.Clear();
  EXPECT_FALSE(std::filesystem::exists(f.contention.FileOf(0)));
  EXPECT_FALSE(std::filesystem::exists(f.contention.FileOf(1)));
}

TEST(GpuContentionTest, AnUnwritableDirectoryAndABadValidityAreErrorsNamingThem) {
  Fixture f;
  std::ofstream(f.dir + "/blocker") << "a file where the directory should be";
  GpuContention blocked(GpuContentionOptions{f.dir + "/blocker"});
  auto r = blocked.Update({Load(0, {90}), Load(1, {})}, 1000, 5000);
  ASSERT_FALSE(r);
  EXPECT_NE(r.error().message.find(f.dir + "/blocker/gpu-0"), std::string::npos) << r.error().message;
  auto bad = f.contention.Update({Load(0, {})}, 1000, kMaxContentionValidMs + 1);
  ASSERT_FALSE(bad);
  EXPECT_NE(bad.error().message.find("valid_ms"), std::string::npos);
  EXPECT_FALSE(std::filesystem::exists(f.contention.FileOf(0)));
}

}  // namespace
}  // namespace gpupool
