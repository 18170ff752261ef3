// The command node provider (src/server/node_provider.h): real /bin/sh
// children, names past the existing nodes, nothing before the commit, the
// output's last lines in the failure reason, timeouts.
#include "src/server/node_provider.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "src/base/check.h"
#include "src/control/control_loops.h"
#include "src/engine/engine.h"
#include "tests/builders.h"

namespace gpupool {
namespace {

using namespace std::chrono_literals;

std::string TempDir() {
  std::string pattern = (std::filesystem::temp_directory_path() / "gpupool-provider-XXXXXX").string();
  GP_CHECK(::mkdtemp(pattern.data()) != nullptr);
  return pattern;
}

std::string ReadAll(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

std::string WriteScript(const std::string& dir, const std::string& name, const std::string& body) {
  const std::string path = dir + "/" + name;
  std::ofstream(path) << "#!/bin/sh\n" << body << "\n";
  std::filesystem::permissions(path, std::filesystem::perms::owner_all);
  return path;
}

constexpr const char* kServerConfig = R"(name: scaled
pools:
  - name: gpu
    models: [H100]
scaling:
  - pool: gpu
    node: {model: H100, gpus: 8, cpu_cores: 96, memory_gib: 1024}
regions:
  table:
    - {name: region-1, price_per_gpu_hour: 2}
server:
  provider:
    create: /opt/create-node.sh --fast
    delete: /opt/delete-node.sh
    timeout: 90s
)";

TEST(ServerConfigTest, ScalingRegionsAndTheProvider) {
  auto s = ParseServerConfig(kServerConfig, "cfg.yaml", ".");
  ASSERT_TRUE(s.has_value()) << s.error().message;
  EXPECT_EQ(s->server.provider.create, "/opt/create-node.sh --fast");
  EXPECT_EQ(s->server.provider.remove, "/opt/delete-node.sh");
  EXPECT_EQ(s->server.provider.timeout, 90s);
  ASSERT_EQ(s->engine.scaling.size(), 1u);
  EXPECT_EQ(s->engine.scaling[0].node.name_prefix, "gpu-auto");
  ASSERT_EQ(s->engine.regions.regions.size(), 1u);
  EXPECT_EQ(s->engine.regions.kind, RegionPolicy::Kind::kCostAware);

  auto error = [](std::string text, const std::string& from, const std::string& to) {
    text.replace(text.find(from), from.size(), to);
    auto r = ParseServerConfig(text, "cfg.yaml", ".");
    return r ? std::string("(parsed)") : r.error().message;
  };
  EXPECT_EQ(error(kServerConfig, "    timeout: 90s", "    timeout: 0s"),
            "cfg.yaml:15:14: server.provider.timeout: must be at least 1s");
  EXPECT_EQ(error(kServerConfig, "    create: /opt/create-node.sh --fast\n", ""),
            "cfg.yaml:13:5: server.provider.create: required");
  EXPECT_EQ(error(kServerConfig, "    create: /opt/create-node.sh --fast", "    create: \"\""),
            "cfg.yaml:13:13: server.provider.create: must not be empty");
  EXPECT_EQ(error(kServerConfig, std::string(kServerConfig).substr(std::string(kServerConfig).find("server:")),
                  "server:\n  tick: 1s\n"),
            "cfg.yaml:6:3: scaling: needs server.provider (the commands that create and delete nodes)");
}

TEST(RunCommandTest, ExitCodeAndTheOutputsLastLines) {
  const CommandOutcome o = RunCommand(*Env::Default(), "echo zero; echo one; echo two >&2; echo; echo three; echo four; echo five; exit 3",
                                      {}, 10s);
  EXPECT_FALSE(o.ok);
  EXPECT_EQ(o.exit_code, 3);
  EXPECT_FALSE(o.timed_out);
  EXPECT_EQ(o.output_tail, "one | two | three | four | five");  // the last 5 non-empty lines
  EXPECT_EQ(o.Describe(), "exited 3: one | two | three | four | five");
  EXPECT_TRUE(RunCommand(*Env::Default(), "true", {}, 10s).ok);
}

TEST(RunCommandTest, EnvironmentIsAddedToTheServers) {
  ::setenv("GPUPOOL_PROVIDER_TEST_INHERITED", "yes", 1);
  const CommandOutcome o =
      RunCommand(*Env::Default(), "printf '%s %s' \"$GPUPOOL_NODE\" \"$GPUPOOL_PROVIDER_TEST_INHERITED\"", {{"GPUPOOL_NODE", "n-1"}}, 10s);
  EXPECT_TRUE(o.ok) << o.Describe();
  EXPECT_EQ(o.output_tail, "n-1 yes");
}

TEST(RunCommandTest, KilledAtTheTimeoutWithWhatItStartedInTheBackground) {
  const auto t0 = std::chrono::steady_clock::now();
  const CommandOutcome o = RunCommand(*Env::Default(), "echo starting; sleep 30 & sleep 30", {}, 300ms);
  EXPECT_LT(std::chrono::steady_clock::now() - t0, 5s);
  EXPECT_FALSE(o.ok);
  EXPECT_TRUE(o.timed_out);
  EXPECT_EQ(o.Describe(), "timed out after 300ms: starting");
}

TEST(RunCommandTest, AMissingProgramIsAFailureNotACrash) {
  const CommandOutcome o = RunCommand(*Env::Default(), "/nonexistent/create-node.sh", {}, 10s);
  EXPECT_FALSE(o.ok);
  EXPECT_EQ(o.exit_code, 127);
  EXPECT_NE(o.Describe().find("exited 127"), std::string::npos) << o.Describe();
}

// An engine with a scaled pool "gpu" (template prefix "auto", 2 racks) and
// nodes auto-0 and auto-7 added by hand.
class ProviderTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = TempDir();
    EngineConfig config;
    config.policy = "BestFit";
    PoolScalingConfig c;
    c.pool = "gpu";
    c.rule.max_nodes = 8;
    c.node = NodeTemplate{"auto", 64000, 1 << 19, 8, *Catalog::Builtin().Find("H100"), 0, "r", "z", 2};
    config.scaling.push_back(c);
    scaling_ = config.scaling;
    config.workload_learning.prior = {testing::Whole(1, 1000)};
    auto e = CreateEngine(config, AttributeTable{});
    ASSERT_TRUE(e.has_value()) << e.error().message;
    engine_ = std::move(*e);
    const Engine::Sink sink = [](const Event&) {};
    pool_ = *engine_->AddPool("gpu", PoolSelector{}, {}, Instant{}, sink);
    for (const char* name : {"auto-0", "auto-7", "autox-12", "auto-rack-40"}) {
      NodeSpec spec{name, 64000, 1 << 19, 8, *Catalog::Builtin().Find("H100"), 0, 0};
      ASSERT_TRUE(engine_->AddNode(spec, "r", "z", "rack-0", Instant{}, sink).has_value());
    }
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  std::unique_ptr<CommandNodeProvider> Provider(CommandProviderSettings settings) {
    return std::make_unique<CommandNodeProvider>(
        *Env::Default(), std::move(settings), scaling_,
        [this](const CommandNodeProvider::Created& c) {
          std::lock_guard lock(mu_);
          created_.push_back(c);
        },
        [this](const CommandNodeProvider::Failed& f) {
          std::lock_guard lock(mu_);
          failed_.push_back(f);
        });
  }
  Event ScaleOut(int64_t seq, int32_t nodes) { return Event{seq, Instant{}, ScaleOutRequested{pool_, nodes, "test"}}; }

  std::string dir_;
  std::vector<PoolScalingConfig> scaling_;
  std::unique_ptr<Engine> engine_;
  PoolId pool_ = 0;
  std::mutex mu_;
  std::vector<CommandNodeProvider::Created> created_;
  std::vector<CommandNodeProvider::Failed> failed_;
};

TEST_F(ProviderTest, CreatesNodesNamedPastTheExistingOnesOnceTheRequestIsCommitted) {
  const std::string log = dir_ + "/env.log";
  const std::string create = WriteScript(
      dir_, "create-node.sh",
      "echo \"$GPUPOOL_POOL $GPUPOOL_NODE $GPUPOOL_RACK $GPUPOOL_WARM $GPUPOOL_GPUS $GPUPOOL_GPU_MODEL\" >> " + log);
  auto p = Provider({create, "", 10s});
  p->Plan(ScaleOut(5, 2), engine_->state());
  p->Committed(4);  // not yet durable: nothing runs
  std::this_thread::sleep_for(100ms);
  EXPECT_EQ(p->busy(), 2);
  EXPECT_EQ(ReadAll(log), "");
  p->Committed(5);
  p->Plan(ScaleOut(9, 1), engine_->state());  // the names handed out are not reused
  p->Committed(9);
  p->Stop();  // waits for the commands
  std::lock_guard lock(mu_);
  ASSERT_EQ(created_.size(), 3u);
  EXPECT_TRUE(failed_.empty());
  std::map<std::string, std::string> racks;
  for (const auto& c : created_) {
    EXPECT_EQ(c.pool, pool_);
    racks[c.name] = c.rack;
  }
  EXPECT_EQ(racks, (std::map<std::string, std::string>{
                       {"auto-8", "auto-rack-0"}, {"auto-9", "auto-rack-1"}, {"auto-10", "auto-rack-0"}}));
  const std::string lines = ReadAll(log);
  EXPECT_NE(lines.find("gpu auto-8 auto-rack-0 0 8 H100\n"), std::string::npos) << lines;
  EXPECT_NE(lines.find("gpu auto-10 auto-rack-0 0 8 H100\n"), std::string::npos) << lines;
}

TEST_F(ProviderTest, AFailedCreateGivesTheScriptAndItsLastLines) {
  const std::string create =
      WriteScript(dir_, "create-node.sh", "echo \"creating $GPUPOOL_NODE\"; echo 'no capacity in zone z' >&2; exit 3");
  auto p = Provider({create, "", 10s});
  p->Plan(ScaleOut(1, 1), engine_->state());
  p->Committed(1);
  p->Stop();
  std::lock_guard lock(mu_);
  EXPECT_TRUE(created_.empty());
  ASSERT_EQ(failed_.size(), 1u);
  EXPECT_EQ(failed_[0].pool, pool_);
  EXPECT_EQ(failed_[0].node, "auto-8");
  EXPECT_EQ(failed_[0].reason, "create-node.sh exited 3: creating auto-8 | no capacity in zone z");
}

TEST_F(ProviderTest, RemovedNodesAreDeletedAndStopDropsWhatIsNotCommitted) {
  const std::string log = dir_ + "/deleted.log";
  const std::string del = WriteScript(dir_, "delete-node.sh", "echo \"$GPUPOOL_POOL $GPUPOOL_NODE\" >> " + log + "; exit 1");
  auto p = Provider({"true", del, 10s});
  p->Plan(Event{3, Instant{}, NodeRemoved{1}}, engine_->state());
  p->Plan(Event{4, Instant{}, JobFinished{}}, engine_->state());  // ignored
  p->Plan(ScaleOut(5, 1), engine_->state());
  p->Committed(4);
  p->Stop();  // the scale-out at 5 was never committed: dropped
  EXPECT_EQ(ReadAll(log), "gpu auto-7\n");  // its failure is only logged
  std::lock_guard lock(mu_);
  EXPECT_TRUE(created_.empty());
  EXPECT_TRUE(failed_.empty());
  EXPECT_EQ(p->busy(), 0);
}

}  // namespace
}  // namespace gpupool
