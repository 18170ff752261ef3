// Crash tests of the server. In process (src/server/testing/): a whole
// ServerCore on the test Env, whose journal fails a commit, loses the batch
// being synced or "crashes" between the commit and the answer, on a
// stepped clock; after each crash a new core starts on the surviving
// journal and the checks of src/server/testing/invariants.h run: nothing
// acknowledged is lost or duplicated, the state equals a replay of the
// journal, no GPU is held twice. And one real process, killed with SIGKILL
// while clients submit, as a smoke test of the same through HTTP and
// SQLite.
#include <gtest/gtest.h>

#include <atomic>
#include <filesystem>
#include <fstream>
#include <future>
#include <map>
#include <mutex>
#include <thread>

#include "src/base/rng.h"
#include "src/server/testing/invariants.h"
#include "src/server/testing/test_server.h"
#include "tests/run_binary.h"
#include "tests/server_checks.h"
#include "tests/server_process.h"

namespace gpupool {
namespace {

using namespace std::chrono_literals;
using Fault = TestEnv::Fault;

// Four nodes of eight H100s; frequent snapshots, so that crashes fall
// between snapshots and their read-model twins too.
constexpr const char* kConfig = R"(name: crash
engine: {heartbeat_timeout: 0s}
pools:
  - name: gpu
cluster:
  nodes:
    - {count: 4, model: H100, gpus: 8, cpu_cores: 96, memory_gib: 1024}
server:
  tick: 100ms
  snapshot_every_events: 40
)";

// Whole GPUs or quarter shares, so that a GPU held twice would show.
JobSpec Job(const std::string& name, int i) {
  JobSpec s;
  s.name = name;
  s.demand = Demand{4000, 8192, 1 + i % 2, kMilliPerGpu};
  if (i % 3 == 0) {
    s.demand = Demand{4000, 8192, 1, 250};
    s.demand.mode = ShareMode::kTimeSlice;
    s.demand.gpu_memory_mib = 8192;
  }
  return s;
}

class ServerCrashTest : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = testing::MakeTempDir();
    server_ = std::make_unique<TestServer>(env_, ServerOptions{.data_dir = root_ + "/data", .config_text = kConfig});
    ASSERT_TRUE(server_->Start().has_value());
    CreateTenantCmd tenant{"crash", MintToken("crash", "initial", kRoleTenant).record, {{"gpu", Quota{32000, 32000}}}};
    ASSERT_FALSE(server_->Call(tenant).error.has_value());
  }
  void TearDown() override {
    server_.reset();
    std::filesystem::remove_all(root_);
  }

  // Submits job `name`; records it when acknowledged. Returns the reply, if any.
  std::optional<Reply> Submit(const std::string& name, int i) {
    std::optional<Reply> r = server_->TryCall(SubmitJobCmd{"crash", Job(name, i)});
    if (r && !r->error) acknowledged_.jobs[r->id] = name;
    return r;
  }
  // After a crash: a new core on the surviving journal, checked against a
  // replay and what callers were told before it starts (RestartChecked).
  void RestartAndCheck() {
    const Status ok = RestartChecked(*server_, env_, acknowledged_);
    ASSERT_TRUE(ok.has_value()) << ok.error().message;
  }
  // Stops the core cleanly and checks what it held (StopChecked).
  void StopAndCheck() {
    const Status ok = StopChecked(*server_, acknowledged_);
    EXPECT_TRUE(ok.has_value()) << ok.error().message;
  }
  int64_t LastSeq() { return *server_->core().journal().LastSeq(); }

  std::string root_;
  TestEnv env_;
  std::unique_ptr<TestServer> server_;
  Acknowledged acknowledged_;
};

TEST_F(ServerCrashTest, AFailedCommitAnswers503AndHaltsAndTheRestartHasNothingOfIt) {
  const int64_t before = LastSeq();
  env_.ArmCommitFault(1, Fault::kFailCommit);
  const std::optional<Reply> r = Submit("lost", 0);
  ASSERT_TRUE(r.has_value());
  ASSERT_TRUE(r->error.has_value());
  EXPECT_EQ(r->error->http_status, 503);
  ASSERT_NO_FATAL_FAILURE(RestartAndCheck());
  EXPECT_EQ(env_.halts(), std::vector<int>{70});  // the old core is gone: its writer has halted
  EXPECT_EQ(LastSeq(), before);
  const std::optional<Reply> next = Submit("next", 1);
  ASSERT_TRUE(next && !next->error);
  StopAndCheck();
}

TEST_F(ServerCrashTest, ACrashBeforeTheSyncLosesTheBatchNobodyHeardOf) {
  const int64_t before = LastSeq();
  env_.ArmCommitFault(1, Fault::kCrashBeforeCommit);
  EXPECT_FALSE(Submit("lost", 0).has_value());  // the caller's connection dropped
  EXPECT_TRUE(env_.halts().empty());
  ASSERT_NO_FATAL_FAILURE(RestartAndCheck());
  EXPECT_EQ(LastSeq(), before);
  EXPECT_EQ(server_->core().read_model().job(1), nullptr);
  StopAndCheck();
}

TEST_F(ServerCrashTest, ACrashBetweenCommitAndAnswerKeepsTheJobUnanswered) {
  env_.ArmCommitFault(1, Fault::kCrashAfterCommit);
  EXPECT_FALSE(Submit("kept", 0).has_value());
  ASSERT_NO_FATAL_FAILURE(RestartAndCheck());
  const JobRecord* j = server_->core().read_model().job(1);
  ASSERT_NE(j, nullptr);
  EXPECT_EQ(j->spec.name, "kept");
  EXPECT_EQ(j->state, JobState::kRunning);
  // The next job takes the next id: none is handed out twice.
  const std::optional<Reply> next = Submit("next", 1);
  ASSERT_TRUE(next && !next->error);
  EXPECT_EQ(next->id, 2);
  StopAndCheck();
}

TEST_F(ServerCrashTest, ACrashDuringTheSyncKeepsOrLosesTheWholeBatch) {
  // Three commands in one batch: all three jobs or none.
  server_->core().Stop();  // a fresh core, fed the whole batch at once below
  ASSERT_TRUE(server_->Restart(/*start=*/false).has_value());
  std::vector<std::future<Reply>> replies;
  for (int i = 0; i < 3; ++i) replies.push_back(server_->core().Execute(SubmitJobCmd{"crash", Job("j" + std::to_string(i), i)}));
  env_.ArmCommitFault(1, Fault::kCrashDuringCommit);
  server_->core().Start();
  for (auto& f : replies) EXPECT_THROW(f.get(), std::future_error);
  ASSERT_NO_FATAL_FAILURE(RestartAndCheck());
  int found = 0;
  for (JobId id = 1; id <= 3; ++id) found += server_->core().read_model().job(id) != nullptr;
  EXPECT_TRUE(found == 0 || found == 3) << found;
  StopAndCheck();
}

// A seeded schedule of every fault, at commits 1 to 3 from the moment each
// is armed, under bursts of concurrent submissions and cancellations, the
// clock moving between them (ticks, snapshots). After every crash and at
// the end: the checks.
TEST_F(ServerCrashTest, RepeatedFaultsUnderLoadLoseNothingAcknowledged) {
  Rng rng(21);
  constexpr Fault kFaults[] = {Fault::kFailCommit, Fault::kCrashBeforeCommit, Fault::kCrashDuringCommit,
                               Fault::kCrashAfterCommit};
  int64_t crashes = 0, next_name = 0;
  for (int round = 0; round < 24; ++round) {
    if (round % 2 == 0) env_.ArmCommitFault(1 + static_cast<int64_t>(rng.Below(3)), kFaults[round / 2 % 4]);
    std::vector<std::pair<std::string, std::future<Reply>>> submits;
    std::vector<std::pair<JobId, std::future<Reply>>> cancels;
    for (int i = 0; i < 12; ++i) {
      const std::string name = "j" + std::to_string(next_name++);
      submits.emplace_back(name, server_->core().Execute(SubmitJobCmd{"crash", Job(name, i)}));
    }
    for (const auto& [id, name] : acknowledged_.jobs) {
      if (rng.Below(4) == 0 && !acknowledged_.cancelled.contains(id)) {
        cancels.emplace_back(id, server_->core().Execute(CancelJobCmd{id, ""}));
      }
    }
    if (round % 7 == 3) server_->Crash();  // killed at any moment, not at a commit
    for (auto& [name, f] : submits) {
      try {
        if (Reply r = f.get(); !r.error) acknowledged_.jobs[r.id] = name;
      } catch (const std::future_error&) {  // no answer: the core died
      }
    }
    for (auto& [id, f] : cancels) {
      try {
        if (Reply r = f.get(); !r.error) acknowledged_.cancelled.insert(id);
      } catch (const std::future_error&) {
      }
    }
    if (env_.crashes() == crashes) server_->Advance(300ms, 100ms);  // ticks, snapshots: faults may fire there too
    if (env_.crashes() > crashes) {
      ASSERT_NO_FATAL_FAILURE(RestartAndCheck()) << "round " << round;
      crashes = env_.crashes();
    }
  }
  EXPECT_GE(crashes, 10);
  EXPECT_GT(acknowledged_.jobs.size(), 100u) << "the clients hardly got through";
  EXPECT_FALSE(acknowledged_.cancelled.empty());
  env_.DisarmCommitFault();
  StopAndCheck();
}

}  // namespace
}  // namespace gpupool

namespace gpupool::testing {
namespace {

using nlohmann::json;

// The real binary, killed with SIGKILL twice while clients submit: every
// acknowledged job is there afterwards, once, and no GPU is held twice.
TEST(ServerCrashProcessTest, AcknowledgedJobsSurviveSigkill) {
  const std::string root = MakeTempDir();
  std::ofstream(root + "/config.yaml") << kConfig;
  const int port = FreePort();
  ServerProcess server(root + "/data", {"--config", root + "/config.yaml"}, "127.0.0.1:" + std::to_string(port));
  ASSERT_TRUE(server.Start()) << server.log();
  const std::string admin = server.admin_token();
  auto t = Http(server, "POST", "/v1/tenants", admin,
                json{{"name", "crash"}, {"quota", {{"gpu", {{"guaranteed_gpus", 32}, {"limit_gpus", 32}}}}}});
  ASSERT_EQ(t.status, 201) << t.text;
  const std::string token = t.body["token"];

  std::atomic<bool> stop{false};
  std::mutex mu;
  std::map<std::string, int64_t> acknowledged;  // name -> id
  std::vector<std::thread> clients;
  for (int c = 0; c < 4; ++c) {
    clients.emplace_back([&, c] {
      for (int i = 0; !stop; ++i) {
        const std::string name = "c" + std::to_string(c) + "-" + std::to_string(i);
        const json body = i % 3 == 0 ? json{{"name", name}, {"gpu_fraction", 0.25}, {"gpu_memory_gib", 8},
                                            {"sharing", "time-slice"}}
                                     : json{{"name", name}, {"gpus", 1 + i % 2}};
        auto r = HttpTo("127.0.0.1", port, "POST", "/v1/jobs", token, body.dump());
        if (r.status == 201) {
          std::lock_guard lock(mu);
          acknowledged[name] = r.body["id"];
          if (i % 4 == 1) HttpTo("127.0.0.1", port, "DELETE", "/v1/jobs/" + r.body["id"].dump(), token, "");
        } else if (r.status == 0) {
          std::this_thread::sleep_for(std::chrono::milliseconds(5));
        } else {
          ADD_FAILURE() << "unexpected " << r.status << " " << r.text;
          return;
        }
      }
    });
  }
  for (int crash = 0; crash < 2; ++crash) {
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    server.Kill();
    ASSERT_TRUE(server.Start()) << server.log();
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  stop = true;
  for (auto& th : clients) th.join();
  server.Kill();
  ASSERT_TRUE(server.Start()) << server.log();

  EXPECT_GT(acknowledged.size(), 20u) << "the clients hardly got through";
  AcknowledgedJobs told;
  told.jobs = acknowledged;
  EXPECT_EQ(CheckAcknowledgedJobs(server, admin, told), "");
  EXPECT_EQ(CheckGpusHeldOnce(server, admin), "");
  server.Stop();
  std::filesystem::remove_all(root);
}

}  // namespace
}  // namespace gpupool::testing
