// The daemon's command node provider end to end (SCALE-1). In process
// (src/server/testing/): a whole ServerCore on the test Env, with a scaling
// pool and tiny thresholds, whose create and delete "scripts" are functions
// that record their environment, on a stepped clock. Queued work makes it
// scale out, the created node joins and takes the work; idle, it drains and
// removes the node and the delete script runs; a failing or hanging script
// shows in ScaleOutFailed; a command starts only once its request is
// durable; a restart fails what the provider never answered. And one real
// process with real scripts, as a smoke test of the same through HTTP and
// /bin/sh.
#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <functional>
#include <shared_mutex>
#include <thread>

#include "src/server/testing/invariants.h"
#include "src/server/testing/test_server.h"
#include "src/server/views.h"
#include "tests/run_binary.h"
#include "tests/server_process.h"

namespace gpupool {
namespace {

using nlohmann::json;
using namespace std::chrono_literals;

// One H100 node "base-0" in pool gpu, scaled between 1 and 2 nodes: one
// queued job is enough to scale out, 1 s of low use to scale in.
std::string Config(const std::string& create, const std::string& remove, const std::string& cooldown = "0s") {
  return R"(name: provider-test
engine: {heartbeat_timeout: 0s}
pools:
  - name: gpu
    models: [H100]
cluster:
  nodes:
    - {count: 1, name_prefix: base, model: H100, gpus: 1, cpu_cores: 8, memory_gib: 64}
scaling:
  - pool: gpu
    node: {model: H100, gpus: 1, cpu_cores: 8, memory_gib: 64, racks: 2}
    min_nodes: 1
    max_nodes: 2
    max_step: 1
    scale_out: {queue_over: 0, for: 1s}
    scale_in: {utilization_below: 0.5, for: 1s, safety_window: 0s}
    cooldown: )" + cooldown + R"(
    max_actions_per_hour: 100
server:
  tick: 100ms
  provider:
    create: )" + create + R"(
    delete: )" + remove + R"(
    timeout: 20s
)";
}

class ServerProviderTest : public ::testing::Test {
 protected:
  void SetUp() override { root_ = testing::MakeTempDir(); }
  void TearDown() override {
    server_.reset();
    std::filesystem::remove_all(root_);
  }
  void Start(const std::string& config) {
    server_ = std::make_unique<TestServer>(env_, ServerOptions{.data_dir = root_ + "/data", .config_text = config});
    ASSERT_TRUE(server_->Start().has_value());
    CreateTenantCmd tenant{"team", MintToken("team", "initial", kRoleTenant).record, {{"gpu", Quota{0, 4000}}}};
    ASSERT_FALSE(server_->Call(tenant).error.has_value());
  }
  JobId Submit(const std::string& name) {
    JobSpec s;
    s.name = name;
    s.demand = Demand{4000, 8192, 1, kMilliPerGpu};
    const Reply r = server_->Call(SubmitJobCmd{"team", s});
    EXPECT_FALSE(r.error.has_value()) << r.error->message;
    return r.id;
  }
  // The journal's events of `type`, as their JSON lines.
  std::vector<json> EventsOf(const std::string& type) {
    std::vector<json> out;
    EXPECT_TRUE(server_->core()
                    .journal()
                    .ReadEvents(0, -1,
                                [&](const JournalEvent& e) {
                                  if (e.type == type) out.push_back(json::parse(e.json));
                                  return true;
                                })
                    .has_value());
    return out;
  }
  // The node as GET /v1/nodes shows it.
  std::optional<json> Node(const std::string& name) {
    const ReadModel& m = server_->core().read_model();
    std::shared_lock lock(m.mu());
    const auto id = m.node_id(name);
    if (!id) return std::nullopt;
    return NodeView(*id, m);
  }
  JobState StateOf(JobId id) {
    const ReadModel& m = server_->core().read_model();
    std::shared_lock lock(m.mu());
    return m.job(id)->state;
  }
  // Moves the clock by `d` in ticks; the provider's commands run and
  // their answers are applied at each.
  void Run(Duration d) {
    for (Duration t{}; t < d; t += 100ms) {
      ASSERT_TRUE(server_->Advance(100ms, 100ms));
      ASSERT_TRUE(server_->Settle());
    }
  }
  // Waits (up to 10 s of real time) until `n` programs were started: for
  // programs that hang, which Settle would wait for.
  void WaitForCalls(size_t n) {
    for (int i = 0; i < 10000 && env_.program_calls().size() < n; ++i) std::this_thread::sleep_for(1ms);
    ASSERT_EQ(env_.program_calls().size(), n);
  }
  std::vector<TestEnv::ProgramCall> CallsTo(const std::string& command) {
    std::vector<TestEnv::ProgramCall> out;
    for (const auto& c : env_.program_calls()) {
      if (c.argv.back() == command) out.push_back(c);
    }
    return out;
  }

  std::string root_;
  TestEnv env_;
  std::unique_ptr<TestServer> server_;
};

TEST_F(ServerProviderTest, QueuedWorkCreatesANodeAndIdleNodesAreDeleted) {
  env_.set_program([](const TestEnv::ProgramCall&) { return TestEnv::Exited(0); });
  ASSERT_NO_FATAL_FAILURE(Start(Config("/opt/create-node.sh", "/opt/delete-node.sh")));
  const JobId first = Submit("first");
  const JobId second = Submit("second");  // waits: base-0 has one GPU
  // The autoscaler asks at the next tick (a queue acts at once), the script
  // creates gpu-auto-0, it joins and takes the waiting job.
  Run(100ms);
  ASSERT_EQ(EventsOf("ScaleOutRequested").size(), 1u);
  EXPECT_EQ(EventsOf("ScaleOutRequested")[0]["nodes"], 1);
  const auto created = CallsTo("/opt/create-node.sh");
  ASSERT_EQ(created.size(), 1u);
  EXPECT_EQ(created[0].argv, (std::vector<std::string>{"/bin/sh", "-c", "/opt/create-node.sh"}));
  for (const auto& [var, value] : std::vector<std::pair<std::string, std::string>>{
           {"GPUPOOL_POOL", "gpu"}, {"GPUPOOL_NODE", "gpu-auto-0"}, {"GPUPOOL_RACK", "gpu-auto-rack-0"},
           {"GPUPOOL_GPU_MODEL", "H100"}, {"GPUPOOL_GPUS", "1"}, {"GPUPOOL_WARM", "0"}}) {
    EXPECT_EQ(created[0].Var(var), value) << var;
  }
  ASSERT_TRUE(Node("gpu-auto-0").has_value());
  EXPECT_EQ((*Node("gpu-auto-0"))["free_gpus"], 0.0);
  EXPECT_EQ((*Node("gpu-auto-0"))["rack"], "gpu-auto-rack-0");
  EXPECT_EQ(StateOf(second), JobState::kRunning);
  EXPECT_TRUE(EventsOf("ScaleOutFailed").empty());

  // Idle: one node drains and is removed (the newest of two empty ones), and deleted.
  for (JobId id : {first, second}) EXPECT_FALSE(server_->Call(CancelJobCmd{id, ""}).error.has_value());
  Run(1500ms);
  const auto deleted = CallsTo("/opt/delete-node.sh");
  ASSERT_EQ(deleted.size(), 1u);
  EXPECT_EQ(deleted[0].Var("GPUPOOL_NODE"), "gpu-auto-0");
  EXPECT_EQ(deleted[0].Var("GPUPOOL_POOL"), "gpu");
  EXPECT_EQ((*Node("gpu-auto-0"))["condition"], "removed");
  EXPECT_EQ(EventsOf("NodeRemoved").size(), 1u);

  // Across a restart: the removed node stays removed; nothing is left to fail.
  ASSERT_TRUE(server_->Restart().has_value());
  EXPECT_EQ((*Node("gpu-auto-0"))["condition"], "removed");
  EXPECT_EQ((*Node("base-0"))["condition"], "ready");
  Run(300ms);
  EXPECT_TRUE(EventsOf("ScaleOutFailed").empty());
  EXPECT_EQ(env_.program_calls().size(), 2u);
}

TEST_F(ServerProviderTest, AFailingCreateScriptShowsInScaleOutFailed) {
  env_.set_program([](const TestEnv::ProgramCall& call) {
    return TestEnv::Exited(3, "asking for " + call.Var("GPUPOOL_NODE") + " | quota exceeded in zone-1");
  });
  ASSERT_NO_FATAL_FAILURE(Start(Config("/opt/create-node.sh --zone 1", "true", "1h")));
  Submit("first");
  const JobId second = Submit("second");
  Run(100ms);
  const auto failed = EventsOf("ScaleOutFailed");
  ASSERT_EQ(failed.size(), 1u);
  EXPECT_EQ(failed[0]["nodes"], 1);
  EXPECT_EQ(failed[0]["reason"], "create-node.sh exited 3: asking for gpu-auto-0 | quota exceeded in zone-1");
  EXPECT_FALSE(Node("gpu-auto-0").has_value());
  EXPECT_EQ(StateOf(second), JobState::kPending);
}

TEST_F(ServerProviderTest, AScriptThatHangsIsKilledAtItsTimeout) {
  env_.set_program([this](const TestEnv::ProgramCall& call) { return env_.Hang(call); });
  ASSERT_NO_FATAL_FAILURE(Start(Config("/opt/create-node.sh", "true", "1h")));
  Submit("first");
  Submit("second");
  ASSERT_TRUE(server_->Advance(100ms, 100ms));
  ASSERT_NO_FATAL_FAILURE(WaitForCalls(1));
  env_.Advance(19s);
  ASSERT_TRUE(server_->Sync());
  EXPECT_TRUE(EventsOf("ScaleOutFailed").empty()) << "killed before its 20 s";
  env_.Advance(1s);
  ASSERT_TRUE(server_->Settle());
  const auto failed = EventsOf("ScaleOutFailed");
  ASSERT_EQ(failed.size(), 1u);
  EXPECT_EQ(failed[0]["reason"], "create-node.sh timed out after 20s");
}

// The request's event is lost in a crash before it is synced: the script
// never runs (nothing asked for it, as far as the journal knows), and the
// restarted server asks again.
TEST_F(ServerProviderTest, NothingRunsForARequestThatWasNeverDurable) {
  env_.set_program([](const TestEnv::ProgramCall&) { return TestEnv::Exited(0); });
  ASSERT_NO_FATAL_FAILURE(Start(Config("/opt/create-node.sh", "true")));
  Submit("first");
  const JobId second = Submit("second");
  env_.ArmCommitFault(1, TestEnv::Fault::kCrashBeforeCommit);  // the commit of the next tick's events
  EXPECT_FALSE(server_->Advance(100ms, 100ms));
  ASSERT_EQ(env_.crashes(), 1);
  EXPECT_TRUE(env_.program_calls().empty());
  ASSERT_TRUE(server_->Restart().has_value());
  EXPECT_TRUE(EventsOf("ScaleOutRequested").empty());
  Run(300ms);
  EXPECT_EQ(EventsOf("ScaleOutRequested").size(), 1u);
  EXPECT_EQ(CallsTo("/opt/create-node.sh").size(), 1u);
  EXPECT_EQ(StateOf(second), JobState::kRunning);
  EXPECT_TRUE(EventsOf("ScaleOutFailed").empty());
}

TEST_F(ServerProviderTest, ARestartFailsWhatTheProviderNeverAnswered) {
  // The first call hangs until the server dies; later calls succeed.
  env_.set_program([this](const TestEnv::ProgramCall& call) {
    return CallsTo("/opt/create-node.sh").size() == 1 ? env_.Hang(call) : TestEnv::Exited(0);
  });
  ASSERT_NO_FATAL_FAILURE(Start(Config("/opt/create-node.sh", "true")));
  Submit("first");
  const JobId second = Submit("second");
  ASSERT_TRUE(server_->Advance(100ms, 100ms));
  ASSERT_NO_FATAL_FAILURE(WaitForCalls(1));
  server_->Crash();
  ASSERT_TRUE(server_->Restart().has_value());
  Run(300ms);
  const auto failed = EventsOf("ScaleOutFailed");
  ASSERT_EQ(failed.size(), 1u);
  EXPECT_EQ(failed[0]["reason"], "server restarted before the provider answered");
  EXPECT_EQ(EventsOf("ScaleOutRequested").size(), 2u);  // asked again after the restart
  ASSERT_TRUE(Node("gpu-auto-0").has_value());
  EXPECT_EQ(StateOf(second), JobState::kRunning);
  server_->core().Stop();
  const Status replay = CheckEqualsReplay(server_->core(), server_->options());
  EXPECT_TRUE(replay.has_value()) << replay.error().message;
}

TEST_F(ServerProviderTest, ConfigurationErrorsNameTheField) {
  auto open = [&](const std::string& name, const std::string& text) -> std::string {
    std::ofstream(root_ + "/" + name) << text;
    auto core = ServerCore::Open(
        ServerOptions{.data_dir = root_ + "/data-" + name, .config_path = root_ + "/" + name, .env = &env_});
    return core ? "(opened)" : core.error().message;
  };
  const std::string valid = Config("/bin/true", "/bin/true");

  // scaling without a provider: nothing would create the nodes.
  std::string e = open("no-provider.yaml", valid.substr(0, valid.find("  provider:")));
  EXPECT_NE(e.find("no-provider.yaml:"), std::string::npos) << e;
  EXPECT_NE(e.find("scaling: needs server.provider"), std::string::npos) << e;

  // provider without create.
  std::string text = valid;
  text.replace(text.find("    create: /bin/true\n"), 22, "");
  e = open("no-create.yaml", text);
  EXPECT_NE(e.find("server.provider.create: required"), std::string::npos) << e;

  // A bad timeout, an unknown key.
  text = valid;
  text.replace(text.find("timeout: 20s"), 12, "timeout: soon");
  e = open("timeout.yaml", text);
  EXPECT_NE(e.find("server.provider.timeout: expected a duration"), std::string::npos) << e;
  text = valid;
  text.replace(text.find("    timeout: 20s"), 16, "    retries: 3");
  e = open("retries.yaml", text);
  EXPECT_NE(e.find("server.provider.retries: unknown key 'retries'"), std::string::npos) << e;

  // The simulated provider model stays simulation-only.
  e = open("sim-provider.yaml", valid + "provider: {cold_start: 5m}\n");
  EXPECT_NE(e.find("unknown key 'provider'"), std::string::npos) << e;

  // regions (TOPO-2) are accepted; users may name tenants the API creates later.
  EXPECT_EQ(open("regions.yaml", "name: r\npools:\n  - name: p\nregions:\n  table:\n"
                                 "    - {name: region-1, price_per_gpu_hour: 2, latency_ms: {eu: 10}}\n"
                                 "  users:\n    - {tenant: later, at: eu, latency_budget_ms: 50}\n"),
            "(opened)");
}

}  // namespace
}  // namespace gpupool

namespace gpupool::testing {
namespace {

using nlohmann::json;
using namespace std::chrono_literals;

std::string WriteScript(const std::string& dir, const std::string& name, const std::string& body) {
  const std::string path = dir + "/" + name;
  std::ofstream(path) << "#!/bin/sh\n" << body << "\n";
  std::filesystem::permissions(path, std::filesystem::perms::owner_all);
  return path;
}

// Polls `done` every 50 ms for up to 15 s.
bool WaitFor(const std::function<bool()>& done) {
  const auto deadline = std::chrono::steady_clock::now() + 15s;
  while (std::chrono::steady_clock::now() < deadline) {
    if (done()) return true;
    std::this_thread::sleep_for(50ms);
  }
  return done();
}

// The real binary with real scripts: queued work creates a node that joins
// and takes the job; idle, it is drained, removed and deleted.
TEST(ServerProviderProcessTest, RealScriptsCreateAndDeleteANode) {
  const std::string root = MakeTempDir();
  const std::string created = root + "/created.log", deleted = root + "/deleted.log";
  const std::string create = WriteScript(
      root, "create-node.sh",
      "echo \"pool=$GPUPOOL_POOL node=$GPUPOOL_NODE rack=$GPUPOOL_RACK warm=$GPUPOOL_WARM\" >> " + created);
  const std::string remove =
      WriteScript(root, "delete-node.sh", "echo \"pool=$GPUPOOL_POOL node=$GPUPOOL_NODE\" >> " + deleted);
  std::ofstream(root + "/config.yaml") << Config(create, remove);
  ServerProcess server(root + "/data", {"--config", root + "/config.yaml"});
  ASSERT_TRUE(server.Start()) << server.log();
  const std::string admin = server.admin_token();
  auto t = Http(server, "POST", "/v1/tenants", admin,
                json{{"name", "team"}, {"quota", {{"gpu", {{"guaranteed_gpus", 0}, {"limit_gpus", 4}}}}}});
  ASSERT_EQ(t.status, 201) << t.text;
  const std::string token = t.body["token"];
  std::vector<int64_t> ids;
  for (const char* name : {"first", "second"}) {
    auto s = Http(server, "POST", "/v1/jobs", token, json{{"name", name}, {"gpus", 1}});
    ASSERT_EQ(s.status, 201) << s.text;
    ids.push_back(s.body["id"]);
  }
  auto node = [&](const std::string& name) -> std::optional<json> {
    const HttpResult nodes = Http(server, "GET", "/v1/nodes", admin);
    for (const json& n : nodes.body["nodes"]) {
      if (n["name"] == name) return n;
    }
    return std::nullopt;
  };
  ASSERT_TRUE(WaitFor([&] {
    auto n = node("gpu-auto-0");
    return n && (*n)["free_gpus"].get<double>() == 0.0;
  })) << server.log();
  EXPECT_EQ(Http(server, "GET", "/v1/jobs/" + std::to_string(ids[1]), token).body["state"], "running");
  EXPECT_EQ(ReadTextFile(created), "pool=gpu node=gpu-auto-0 rack=gpu-auto-rack-0 warm=0\n");
  for (int64_t id : ids) EXPECT_EQ(Http(server, "DELETE", "/v1/jobs/" + std::to_string(id), token).status, 200);
  ASSERT_TRUE(WaitFor([&] { return !ReadTextFile(deleted).empty(); })) << server.log();
  EXPECT_EQ(ReadTextFile(deleted), "pool=gpu node=gpu-auto-0\n");
  EXPECT_EQ((*node("gpu-auto-0"))["condition"], "removed");
  EXPECT_EQ(server.Stop(), 0);
  std::filesystem::remove_all(root);
}

}  // namespace
}  // namespace gpupool::testing
