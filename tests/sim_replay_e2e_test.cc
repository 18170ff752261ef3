// `gpupool sim replay` on a journal written by a real server with a real
// agent (fake GPUs, plain processes): the replay under the configuration in
// force reproduces the start times, it works while the server runs, it
// never changes the source files, and a tighter limit makes jobs wait longer.
#include <sys/stat.h>

#include <map>

#include "tests/agent_e2e_fixture.h"

namespace gpupool::testing {
namespace {

constexpr const char* kReplayConfig = R"(name: replay
engine:
  heartbeat_timeout: 3s
  policy: BestFit
pools:
  - name: gpu
server:
  tick: 100ms
  default_image: host
)";

// The same, but the tenant may hold one GPU instead of two.
constexpr const char* kTightConfig = R"(name: tight
engine:
  heartbeat_timeout: 3s
  policy: BestFit
pools:
  - name: gpu
tenants:
  - name: team
    quota: {gpu: {guaranteed_gpus: 0, limit_gpus: 1}}
server:
  tick: 100ms
  default_image: host
)";

// Each file's bytes and modification time (ns) under `dir`.
std::map<std::string, std::pair<std::string, int64_t>> FilesOf(const std::string& dir) {
  std::map<std::string, std::pair<std::string, int64_t>> out;
  for (const auto& e : std::filesystem::recursive_directory_iterator(dir)) {
    if (!e.is_regular_file()) continue;
    struct stat st {};
    ::stat(e.path().c_str(), &st);
    out[e.path().string()] = {ReadFile(e.path().string()), st.st_mtim.tv_sec * 1'000'000'000LL + st.st_mtim.tv_nsec};
  }
  return out;
}

class SimReplayE2eTest : public AgentE2eTest {
 protected:
  std::string Config() const override { return kReplayConfig; }
  std::vector<std::string> AgentFlags() const override { return {"--runtime", "process"}; }

  // Six one-GPU jobs of different lengths on two GPUs: some wait.
  void RunWorkload() {
    StartAgent("node-a", "2xH100");
    CreateTenant("team", 0, 2);
    std::vector<int64_t> ids;
    for (const char* secs : {"1", "2", "1", "1.5", "1", "0.5"}) {
      ids.push_back(Submit({{"name", std::string("sleep-") + secs}, {"tenant", "team"}, {"gpus", 1},
                            {"command", {"sleep", secs}}}));
    }
    for (const int64_t id : ids) ASSERT_TRUE(WaitState(id, "succeeded", std::chrono::seconds(30))) << Job(id).dump();
  }
  BinaryRun Replay(std::vector<std::string> extra) {
    std::vector<std::string> args = {"sim", "replay", "--from", root_ + "/data", "--current-config",
                                     root_ + "/config.yaml", "--json"};
    args.insert(args.end(), extra.begin(), extra.end());
    return RunGpupool(args);
  }
};

TEST_F(SimReplayE2eTest, ReplayInForceReproducesStartTimesWhileTheServerRunsAndLeavesTheSourceAlone) {
  RunWorkload();
  // While the server runs (its -wal and -shm open).
  const BinaryRun live = Replay({});
  ASSERT_EQ(live.exit_code, 0) << live.err;
  EXPECT_EQ(Http(*server_, "POST", "/v1/tenants", admin_, json{{"name", "after"}}).status, 201)
      << "the server still commits after a replay";

  agents_.clear();
  ASSERT_EQ(server_->Stop(), 0);
  const auto before = FilesOf(root_ + "/data");
  const BinaryRun r = Replay({"--report", root_ + "/replay.html"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(FilesOf(root_ + "/data"), before) << "the replay changed a file of the data directory";
  const json j = json::parse(r.out);
  const json& f = j["fidelity"];
  EXPECT_EQ(f["compared"], 6) << r.out;
  EXPECT_LE(f["start_error_max_s"].get<double>(), 0.25) << r.out;
  EXPECT_EQ(f["placement_differs"], 0) << r.out;
  EXPECT_EQ(f["order_differs"], 0) << r.out;
  EXPECT_EQ(f["started_in_one_only"], 0) << r.out;
  EXPECT_EQ(j["in_force"]["by_priority"].size(), 1u) << r.out;
  EXPECT_NE(ReadFile(root_ + "/replay.html").find("Fidelity"), std::string::npos);
}

TEST_F(SimReplayE2eTest, ATighterLimitMakesJobsWaitLonger) {
  RunWorkload();
  agents_.clear();
  ASSERT_EQ(server_->Stop(), 0);
  std::ofstream(root_ + "/tight.yaml") << kTightConfig;
  const BinaryRun r = Replay({"--config", root_ + "/tight.yaml"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const json j = json::parse(r.out);
  const double in_force = j["in_force"]["jobs"]["wait_s"]["mean"];
  const double tight = j["new"]["jobs"]["wait_s"]["mean"];
  EXPECT_GT(tight, in_force + 1.0) << r.out;
  // One at a time, the last jobs end after the journal does (the replay's horizon).
  EXPECT_LT(j["new"]["jobs"]["completed"].get<int>(), 6) << r.out;
  EXPECT_EQ(j["in_force"]["jobs"]["completed"], 6) << r.out;
}

}  // namespace
}  // namespace gpupool::testing
