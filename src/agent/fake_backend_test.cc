#include "src/agent/fake_backend.h"

#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <thread>

#include "src/agent/executor.h"

namespace gpupool {
namespace {

TEST(FakeBackendTest, ParsesSpecsWithStableDistinctUuids) {
  auto four = ParseFakeGpus("4xH100", "node-1");
  ASSERT_TRUE(four.has_value()) << four.error().message;
  ASSERT_EQ(four->size(), 4u);
  EXPECT_EQ((*four)[2].model, "H100");
  EXPECT_EQ((*four)[2].memory_mib, 81920);
  EXPECT_EQ((*four)[2].nvlink_peers, (std::vector<int>{0, 1, 3}));
  EXPECT_NE((*four)[0].uuid, (*four)[1].uuid);
  EXPECT_EQ((*four)[0].uuid.rfind("GPU-", 0), 0u);
  EXPECT_EQ(ParseFakeGpus("4xH100", "node-1")->at(3).uuid, (*four)[3].uuid);  // stable
  EXPECT_NE(ParseFakeGpus("4xH100", "node-2")->at(3).uuid, (*four)[3].uuid);  // per node
  auto list = ParseFakeGpus("T4,T4", "n");
  ASSERT_TRUE(list.has_value());
  EXPECT_EQ(list->size(), 2u);
  EXPECT_TRUE((*list)[0].nvlink_peers.empty());  // PCIe cards
  for (const char* bad : {"", "0xH100", "17xH100", "4xNoSuch", "H100,A10", "x"}) {
    auto r = ParseFakeGpus(bad, "n");
    ASSERT_FALSE(r.has_value()) << bad;
    EXPECT_EQ(r.error().message.rfind("--fake-gpus", 0), 0u) << r.error().message;
  }
}

TEST(FakeBackendTest, ABusyTaskLooksBusyAndASleepingOneIdle) {
  auto gpus = ParseFakeGpus("2xA100-80GB", "n");
  ASSERT_TRUE(gpus.has_value());
  FakeBackend b(*gpus);
  const std::string log = (std::filesystem::temp_directory_path() / ("fake-" + std::to_string(getpid()))).string();
  LaunchSpec busy{{"sh", "-c", "while :; do :; done"}, {}, {}, "", log};
  LaunchSpec idle{{"sleep", "30"}, {}, {}, "", log};
  auto pb = ChildProcess::Spawn(busy);
  auto pi = ChildProcess::Spawn(idle);
  ASSERT_TRUE(pb.has_value() && pi.has_value());
  const std::vector<TaskProbe> probes = {{"busy", pb->pid(), {0}}, {"idle", pi->pid(), {1}}};
  (void)b.SampleTasks(probes);  // the first call sets the marks
  std::this_thread::sleep_for(std::chrono::milliseconds(600));
  const auto u = b.SampleTasks(probes);
  pb->Signal(SIGKILL);
  pi->Signal(SIGKILL);
  while (!pb->Poll()) std::this_thread::sleep_for(std::chrono::milliseconds(5));
  while (!pi->Poll()) std::this_thread::sleep_for(std::chrono::milliseconds(5));
  std::filesystem::remove(log);
  EXPECT_GT(u.at("busy").util_pct, 30);  // one spinning core (shared with the rest of a loaded machine)
  EXPECT_LT(u.at("idle").util_pct, 5);
  auto s = b.Sample();
  ASSERT_TRUE(s.has_value());
  EXPECT_GT((*s)[0].util_pct, 30);  // the busy task's GPU
  EXPECT_LT((*s)[1].util_pct, 5);
}

TEST(FakeBackendTest, RecordsScrubs) {
  auto gpus = ParseFakeGpus("2xH100", "n");
  const std::string file = (std::filesystem::temp_directory_path() / ("scrubs-" + std::to_string(getpid()))).string();
  FakeBackend b(*gpus, file);
  auto r = b.Scrub(1, "");
  ASSERT_TRUE(r.has_value());
  EXPECT_EQ(r->bytes, int64_t{81920} << 20);
  ASSERT_EQ(b.Scrubs().size(), 1u);
  EXPECT_EQ(b.Scrubs()[0].gpu, 1);
  EXPECT_FALSE(b.Scrub(2, "").has_value());
  EXPECT_TRUE(std::filesystem::file_size(file) > 0);
  std::filesystem::remove(file);
}

}  // namespace
}  // namespace gpupool
