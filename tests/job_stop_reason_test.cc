// Issue 16: a tenant sees why its job was preempted, reclaimed or
// interrupted, and when, in the job's view (GET /v1/jobs/{id}, `job get`),
// not only in the admin event stream; the reason survives a restart (the
// read model's snapshot, version 5) and equals a replay of the journal.
#include <gtest/gtest.h>

#include <filesystem>
#include <mutex>
#include <shared_mutex>

#include "src/server/testing/invariants.h"
#include "src/server/testing/test_server.h"
#include "src/server/views.h"
#include "tests/run_binary.h"

namespace gpupool {
namespace {

using namespace std::chrono_literals;

// One node of one GPU, so that a second job must take it from the first
// (tenant a's guarantee, lent whole once idle for a second, so that b can
// borrow it);
// a snapshot after every few events, so that the restart reads the reason
// from the snapshot.
constexpr const char* kConfig = R"(name: stops
engine:
  heartbeat_timeout: 0s
  lending: {enabled: true, window: 1s, threshold: 0.5, fraction: 1}
pools:
  - name: gpu
cluster:
  nodes:
    - {count: 1, model: H100, gpus: 1, cpu_cores: 16, memory_gib: 128}
server:
  tick: 100ms
  snapshot_every_events: 3
)";

JobSpec WholeGpu(const std::string& name, int32_t priority) {
  JobSpec s;
  s.name = name;
  s.priority = priority;
  s.demand = Demand{2000, 4096, 1, kMilliPerGpu};
  return s;
}

class JobStopReasonTest : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = testing::MakeTempDir();
    server_ = std::make_unique<TestServer>(env_, ServerOptions{.data_dir = root_ + "/data", .config_text = kConfig});
    ASSERT_TRUE(server_->Start().has_value());
    for (const char* t : {"a", "b"}) {
      CreateTenantCmd tenant{t, MintToken(t, "initial", kRoleTenant).record, {{"gpu", Quota{t[0] == 'a' ? 1000 : 0, 1000}}}};
      ASSERT_FALSE(server_->Call(tenant).error.has_value());
    }
  }
  void TearDown() override {
    server_.reset();
    std::filesystem::remove_all(root_);
  }
  JobId Submit(const std::string& tenant, JobSpec spec) {
    const Reply r = server_->Call(SubmitJobCmd{tenant, std::move(spec)});
    EXPECT_FALSE(r.error.has_value());
    EXPECT_TRUE(server_->Advance(1s, 100ms));
    return r.id;
  }
  nlohmann::json View(JobId id) {
    const ReadModel& m = server_->core().read_model();
    std::shared_lock lock(m.mu());
    const JobRecord* j = m.job(id);
    return j ? JobView(*j, m, server_->core().names()) : nlohmann::json();
  }

  std::string root_;
  TestEnv env_;
  std::unique_ptr<TestServer> server_;
};

TEST_F(JobStopReasonTest, APreemptedJobSaysWhyWhenAndByWhichOfItsTenantsJobs) {
  const JobId low = Submit("a", WholeGpu("low", 0));
  EXPECT_EQ(View(low)["state"], "running");
  EXPECT_FALSE(View(low).contains("last_stop"));
  const JobId high = Submit("a", WholeGpu("high", 10));
  const nlohmann::json v = View(low);
  ASSERT_TRUE(v.contains("last_stop")) << v.dump();
  EXPECT_EQ(v["last_stop"]["cause"], "preempted");
  EXPECT_EQ(v["last_stop"]["reason"], "priority");
  EXPECT_EQ(v["last_stop"]["by_job"], high);
  EXPECT_FALSE(v["last_stop"]["at"].get<std::string>().empty());
  EXPECT_EQ(v["state"], "pending");
  EXPECT_EQ(v["preemptions"], 1);

  // Restarted from a snapshot taken after the stop: the same.
  ASSERT_FALSE(server_->Call(SnapshotCmd{}).error.has_value());
  ASSERT_TRUE(server_->Restart(/*start=*/false).has_value());
  const Status replay = CheckEqualsReplay(server_->core(), server_->options());
  ASSERT_TRUE(replay.has_value()) << replay.error().message;
  server_->core().Start();
  ASSERT_TRUE(server_->Sync());
  EXPECT_EQ(View(low)["last_stop"], v["last_stop"]);
}

TEST_F(JobStopReasonTest, AnotherTenantsPreemptorIsNotNamed) {
  // b borrows a's idle guarantee; a takes it back.
  ASSERT_TRUE(server_->Advance(3s, 100ms));
  const JobId borrowed = Submit("b", WholeGpu("borrower", 0));
  EXPECT_EQ(View(borrowed)["state"], "running");
  Submit("a", WholeGpu("owner", 0));
  const nlohmann::json v = View(borrowed);
  ASSERT_TRUE(v.contains("last_stop")) << v.dump();
  EXPECT_EQ(v["last_stop"]["cause"], "preempted");
  EXPECT_EQ(v["last_stop"]["reason"], "guarantee-reclaim");
  EXPECT_FALSE(v["last_stop"].contains("by_job")) << v.dump();
}

}  // namespace
}  // namespace gpupool
