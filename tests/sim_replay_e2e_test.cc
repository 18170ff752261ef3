// `gpupool sim replay` on a journal written by a real server with a real
// agent (fake GPUs, plain processes): the replay under the configuration in
// force reproduces the start times, it works while the server runs, it
// never changes the source files, and a tighter limit makes jobs wait longer.
#include <sys/stat.h>

#include <map>

#include "src/server/config_record.h"
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
                            {"command", {"sleep", secs}}, {"env", {{"SECRET_TOKEN", "hunter2"}}}}));
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

TEST_F(SimReplayE2eTest, TheJournalRecordsEachConfigurationSoTheReplayNeedsNoFile) {
  RunWorkload();
  agents_.clear();
  EXPECT_NE(server_->log().find("configuration in force"), std::string::npos) << server_->log();
  EXPECT_NE(server_->log().find(ConfigSha256(kReplayConfig)), std::string::npos) << "the log names the hash";
  ASSERT_EQ(server_->Stop(), 0);
  const BinaryRun r = RunGpupool({"sim", "replay", "--from", root_ + "/data", "--json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const json j = json::parse(r.out);
  EXPECT_NE(j["in_force_config"].get<std::string>().find("as recorded in the journal"), std::string::npos) << r.out;
  EXPECT_EQ(j["fidelity"]["compared"], 6) << r.out;
  EXPECT_LE(j["fidelity"]["start_error_max_s"].get<double>(), 0.25) << r.out;

  // A restart under another configuration: recorded, and the replay says
  // the history ran under two.
  std::string changed = kReplayConfig;
  changed.replace(changed.find("tick: 100ms"), 11, "tick: 200ms");
  std::ofstream(root_ + "/config.yaml") << changed;
  ASSERT_TRUE(server_->Start()) << server_->log();
  ASSERT_EQ(server_->Stop(), 0);
  const BinaryRun again = RunGpupool({"sim", "replay", "--from", root_ + "/data", "--json"});
  ASSERT_EQ(again.exit_code, 0) << again.err;
  const json k = json::parse(again.out);
  EXPECT_NE(k["in_force_config"].get<std::string>().find(ConfigSha256(changed).substr(0, 12)), std::string::npos)
      << again.out;
  EXPECT_NE(k["caveats"].dump().find("the configuration changed at"), std::string::npos) << again.out;
  std::ofstream(root_ + "/old.yaml") << kReplayConfig;
  const BinaryRun given = RunGpupool({"sim", "replay", "--from", root_ + "/data", "--current-config",
                                      root_ + "/old.yaml", "--json"});
  ASSERT_EQ(given.exit_code, 0) << given.err;
  EXPECT_NE(given.out.find("is not the configuration the journal records in force"), std::string::npos) << given.out;
}

// `gpupool config check`, as a CI step would run it: the same configuration
// passes, one that halves the tenant's limit breaks the default objectives
// (fewer of its jobs complete), and a custom SLO file is used.
TEST_F(SimReplayE2eTest, ConfigCheckPassesTheSameConfigurationAndFailsOneThatHurts) {
  RunWorkload();
  agents_.clear();
  ASSERT_EQ(server_->Stop(), 0);
  std::ofstream(root_ + "/same.yaml") << kReplayConfig;
  std::ofstream(root_ + "/tight.yaml") << kTightConfig;
  const BinaryRun same = RunGpupool({"config", "check", root_ + "/same.yaml", "--against", root_ + "/data"});
  EXPECT_EQ(same.exit_code, 0) << same.out << same.err;
  EXPECT_NE(same.out.find("every objective holds"), std::string::npos) << same.out;

  const BinaryRun tight = RunGpupool({"config", "check", root_ + "/tight.yaml", "--against", root_ + "/data",
                                      "--json"});
  EXPECT_EQ(tight.exit_code, 1) << tight.out << tight.err;
  const json j = json::parse(tight.out);
  EXPECT_FALSE(j["holds"].get<bool>());
  // One at a time, four of the six jobs end after the journal does.
  bool completed_broken = false;
  for (const json& rule : j["rules"]) {
    if (rule["rule"] == "completed" && !rule["holds"].get<bool>()) completed_broken = true;
  }
  EXPECT_TRUE(completed_broken) << j["rules"].dump(2);

  // An objective loose enough for the tight configuration holds.
  std::ofstream(root_ + "/slo.yaml") << "rules:\n  - {measure: wait_p95_s, max: 3600}\n";
  const BinaryRun loose = RunGpupool({"config", "check", root_ + "/tight.yaml", "--against", root_ + "/data",
                                      "--slo", root_ + "/slo.yaml"});
  EXPECT_EQ(loose.exit_code, 0) << loose.out << loose.err;
  const BinaryRun bad = RunGpupool({"config", "check", root_ + "/tight.yaml", "--against", root_ + "/data",
                                    "--slo", root_ + "/tight.yaml"});
  EXPECT_EQ(bad.exit_code, 2) << bad.err;
  EXPECT_NE(bad.err.find(root_ + "/tight.yaml:1:1: name: unknown key 'name'"), std::string::npos) << bad.err;
}

// The same replay from the running server's GET /v1/export, with the admin
// token: the same history, the configuration it records, and no job's
// environment value in what the server sends.
TEST_F(SimReplayE2eTest, ReplayFromTheServersExportMatchesTheDataDirectory) {
  RunWorkload();
  agents_.clear();
  std::ofstream(root_ + "/admin.token") << admin_;
  const BinaryRun url = RunGpupool({"sim", "replay", "--from", server_->url(), "--token-file", root_ + "/admin.token",
                                    "--json"});
  ASSERT_EQ(url.exit_code, 0) << url.err;
  const json j = json::parse(url.out);
  EXPECT_EQ(j["fidelity"]["compared"], 6) << url.out;
  EXPECT_LE(j["fidelity"]["start_error_max_s"].get<double>(), 0.25) << url.out;
  EXPECT_NE(j["in_force_config"].get<std::string>().find("as recorded in the journal"), std::string::npos);

  const auto page = Http(*server_, "GET", "/v1/export?since=0&limit=10000", admin_);
  ASSERT_EQ(page.status, 200) << page.text;
  EXPECT_EQ(page.text.find("hunter2"), std::string::npos) << "an environment value left the server";
  EXPECT_NE(page.text.find("SECRET_TOKEN"), std::string::npos) << "the names are kept";
  EXPECT_NE(page.text.find("\"config_text\""), std::string::npos);
  EXPECT_EQ(Http(*server_, "GET", "/v1/export?limit=0", admin_).status, 400);

  const BinaryRun no_token = RunGpupool({"sim", "replay", "--from", server_->url()});
  EXPECT_EQ(no_token.exit_code, 2);
  EXPECT_NE(no_token.err.find("/v1/export"), std::string::npos) << no_token.err;

  ASSERT_EQ(server_->Stop(), 0);
  const BinaryRun dir = RunGpupool({"sim", "replay", "--from", root_ + "/data", "--json"});
  ASSERT_EQ(dir.exit_code, 0) << dir.err;
  // The same jobs replay alike (the directory's journal goes on past the
  // export with the server's stop, and its lines keep their values).
  const json d = json::parse(dir.out);
  EXPECT_EQ(d["in_force"]["by_priority"], j["in_force"]["by_priority"]) << "the export and the directory replay alike";
  EXPECT_EQ(d["fidelity"]["compared"], j["fidelity"]["compared"]);
}

}  // namespace
}  // namespace gpupool::testing
