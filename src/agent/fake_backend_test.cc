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

TEST(FakeBackendTest, MigModeAndAPreexistingLayoutComeFromTheSpec) {
  auto plain = ParseFakeGpus("2xH100", "n");
  ASSERT_TRUE(plain.has_value());
  EXPECT_FALSE((*plain)[0].mig_enabled);
  auto mig = ParseFakeGpus("H100:mig=3g.40gb@4/1g.10gb@0,H100:mig", "n");
  ASSERT_TRUE(mig.has_value()) << mig.error().message;
  ASSERT_EQ(mig->size(), 2u);
  EXPECT_TRUE((*mig)[0].mig_enabled);
  ASSERT_EQ((*mig)[0].mig.size(), 2u);  // by start
  EXPECT_EQ((*mig)[0].mig[0].profile, "1g.10gb");
  EXPECT_EQ((*mig)[0].mig[1].profile, "3g.40gb");
  EXPECT_EQ((*mig)[0].mig[1].start, 4);
  EXPECT_EQ((*mig)[0].mig[1].memory_mib, 40448);
  EXPECT_EQ((*mig)[0].mig[1].uuid.rfind("MIG-", 0), 0u);
  EXPECT_NE((*mig)[0].mig[0].uuid, (*mig)[0].mig[1].uuid);
  EXPECT_NE((*mig)[0].mig[0].gi_id, (*mig)[0].mig[1].gi_id);
  EXPECT_TRUE((*mig)[1].mig_enabled);
  EXPECT_TRUE((*mig)[1].mig.empty());
  EXPECT_TRUE(ParseFakeGpus("2xA100-80GB:mig", "n")->at(1).mig_enabled);
  for (const char* bad : {"T4:mig", "H100:mps", "H100:mig=3g.40gb@2", "H100:mig=3g.40gb@0/4g.40gb@0",
                          "H100:mig=9g.1gb@0", "H100:mig=3g.40gb", "H100:mig,A30:mig"}) {
    auto r = ParseFakeGpus(bad, "n");
    ASSERT_FALSE(r.has_value()) << bad;
    EXPECT_EQ(r.error().message.rfind("--fake-gpus", 0), 0u) << r.error().message;
  }
}

TEST(FakeBackendTest, CreatesAndDestroysMigInstancesAsTheDriverWould) {
  auto gpus = ParseFakeGpus("A100-80GB:mig=1g.10gb@4,A100-80GB", "n");
  ASSERT_TRUE(gpus.has_value()) << gpus.error().message;
  FakeBackend b(*gpus);
  auto made = b.CreateMigInstance(0, "3g.40gb", 0);
  ASSERT_TRUE(made.has_value()) << made.error().message;
  EXPECT_EQ(made->profile, "3g.40gb");
  EXPECT_EQ(made->start, 0);
  EXPECT_EQ(made->memory_mib, 40448);
  EXPECT_EQ(made->ci_id, 0);
  EXPECT_GE(made->gi_id, 1);
  EXPECT_NE(made->gi_id, (*gpus)[0].mig[0].gi_id);
  // Refusals in the driver's words.
  auto overlap = b.CreateMigInstance(0, "3g.40gb", 4);  // 1g.10gb sits at 4
  ASSERT_FALSE(overlap.has_value());
  EXPECT_NE(overlap.error().message.find("Insufficient Resources"), std::string::npos) << overlap.error().message;
  auto bad_start = b.CreateMigInstance(0, "2g.20gb", 1);
  ASSERT_FALSE(bad_start.has_value());
  EXPECT_NE(bad_start.error().message.find("Invalid Argument"), std::string::npos) << bad_start.error().message;
  EXPECT_NE(bad_start.error().message.find("0, 2, 4"), std::string::npos) << bad_start.error().message;
  EXPECT_FALSE(b.CreateMigInstance(0, "3g.20gb", 4).has_value());  // not an A100-80GB profile
  auto off = b.CreateMigInstance(1, "3g.40gb", 0);
  ASSERT_FALSE(off.has_value());
  EXPECT_NE(off.error().message.find("not in MIG mode"), std::string::npos) << off.error().message;
  ASSERT_EQ(b.ListMigInstances(0)->size(), 2u);
  EXPECT_EQ(b.Discover()->at(0).mig.size(), 2u);
  // Destroyed, its slices take another shape; a second instance gets a new UUID.
  ASSERT_TRUE(b.DestroyMigInstance(0, *made).has_value());
  EXPECT_EQ(b.DestroyMigInstance(0, *made).error().code, ErrorCode::kNotFound);
  auto again = b.CreateMigInstance(0, "3g.40gb", 0);
  ASSERT_TRUE(again.has_value());
  EXPECT_NE(again->uuid, made->uuid);
  const std::vector<std::string> want = {"create 0 3g.40gb@0 " + made->uuid, "destroy 0 3g.40gb@0 " + made->uuid,
                                         "create 0 3g.40gb@0 " + again->uuid};
  EXPECT_EQ(b.MigOps(), want);
}

TEST(FakeBackendTest, AGpuInMigModeIsScrubbedThroughItsInstances) {
  auto gpus = ParseFakeGpus("H100:mig=3g.40gb@4", "n");
  FakeBackend b(*gpus);
  auto whole = b.Scrub(0, "");
  ASSERT_FALSE(whole.has_value());
  EXPECT_NE(whole.error().message.find("MIG mode"), std::string::npos);
  auto one = b.Scrub(0, (*gpus)[0].mig[0].uuid);
  ASSERT_TRUE(one.has_value()) << one.error().message;
  EXPECT_EQ(one->bytes, int64_t{40448} << 20);
  EXPECT_EQ(b.Scrub(0, "MIG-none").error().code, ErrorCode::kNotFound);
}

TEST(FakeBackendTest, AMigInstanceHasCapabilityNodesWhileItExists) {
  if (::geteuid() != 0) GTEST_SKIP() << "mknod needs root";
  const std::string dir = (std::filesystem::temp_directory_path() / ("fake-caps-" + std::to_string(getpid()))).string();
  auto gpus = ParseFakeGpus("H100:mig", "n");
  FakeBackend b(*gpus, "", dir);
  auto made = b.CreateMigInstance(0, "2g.20gb", 2);
  ASSERT_TRUE(made.has_value()) << made.error().message;
  auto caps = b.MigDeviceNodes(0, *made);
  ASSERT_TRUE(caps.has_value()) << caps.error().message;
  ASSERT_EQ(caps->size(), 2u);
  for (const DeviceNode& n : *caps) EXPECT_TRUE(std::filesystem::exists(n.host_path)) << n.host_path;
  ASSERT_TRUE(b.DestroyMigInstance(0, *made).has_value());
  for (const DeviceNode& n : *caps) EXPECT_FALSE(std::filesystem::exists(n.host_path)) << n.host_path;
  EXPECT_FALSE(std::filesystem::exists(dir + "/proc-caps/gpu0/mig/gi" + std::to_string(made->gi_id)));
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace gpupool
