// The daemon's command node provider end to end (SCALE-1): a real
// `gpupool server` with a scaling pool and tiny thresholds, whose create and
// delete scripts (written here) record their environment. Queued work
// makes it scale out, the created node joins and takes the work; idle, it
// drains and removes the node and the delete script runs; a failing script
// shows in ScaleOutFailed; a restart fails what the provider never answered.
#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <functional>
#include <thread>

#include "tests/run_binary.h"
#include "tests/server_process.h"

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

class ProviderServer {
 public:
  ProviderServer(const std::string& root, const std::string& config_text) : root_(root) {
    std::ofstream(root + "/config.yaml") << config_text;
    server_ = std::make_unique<ServerProcess>(root + "/data", std::vector<std::string>{"--config", root + "/config.yaml"});
  }
  bool Start() {
    if (!server_->Start()) return false;
    admin_ = server_->admin_token();
    return true;
  }
  ServerProcess& server() { return *server_; }
  // A tenant with up to 4 GPUs of pool gpu; returns its token.
  std::string Tenant() {
    auto t = Http(*server_, "POST", "/v1/tenants", admin_,
                  json{{"name", "team"}, {"quota", {{"gpu", {{"guaranteed_gpus", 0}, {"limit_gpus", 4}}}}}});
    EXPECT_EQ(t.status, 201) << t.text;
    return t.body.value("token", "");
  }
  int64_t Submit(const std::string& token, const std::string& name) {
    auto s = Http(*server_, "POST", "/v1/jobs", token, json{{"name", name}, {"gpus", 1}});
    EXPECT_EQ(s.status, 201) << s.text;
    return s.body.value("id", int64_t{-1});
  }
  json Events() { return Http(*server_, "GET", "/v1/events?since=0&limit=10000", admin_).body["events"]; }
  std::vector<json> EventsOf(const std::string& type) {
    std::vector<json> out;
    for (const json& e : Events()) {
      if (e["type"] == type) out.push_back(e);
    }
    return out;
  }
  std::optional<json> Node(const std::string& name) {
    const HttpResult r = Http(*server_, "GET", "/v1/nodes", admin_);
    for (const json& n : r.body["nodes"]) {
      if (n["name"] == name) return n;
    }
    return std::nullopt;
  }
  // Polls `done` every 50 ms for up to 15 s.
  static bool WaitFor(const std::function<bool()>& done) {
    const auto deadline = std::chrono::steady_clock::now() + 15s;
    while (std::chrono::steady_clock::now() < deadline) {
      if (done()) return true;
      std::this_thread::sleep_for(50ms);
    }
    return done();
  }
  const std::string& admin() const { return admin_; }

 private:
  std::string root_, admin_;
  std::unique_ptr<ServerProcess> server_;
};

TEST(ServerProviderTest, QueuedWorkCreatesANodeAndIdleNodesAreDeleted) {
  const std::string root = MakeTempDir();
  const std::string created = root + "/created.log", deleted = root + "/deleted.log";
  const std::string create = WriteScript(
      root, "create-node.sh",
      "echo \"pool=$GPUPOOL_POOL node=$GPUPOOL_NODE rack=$GPUPOOL_RACK warm=$GPUPOOL_WARM\" >> " + created);
  const std::string remove =
      WriteScript(root, "delete-node.sh", "echo \"pool=$GPUPOOL_POOL node=$GPUPOOL_NODE\" >> " + deleted);
  ProviderServer s(root, Config(create, remove));
  ASSERT_TRUE(s.Start()) << s.server().log();
  const std::string token = s.Tenant();
  const int64_t first = s.Submit(token, "first");
  const int64_t second = s.Submit(token, "second");  // waits: base-0 has one GPU

  // The autoscaler asks, the script creates gpu-auto-0, it joins and takes the waiting job.
  ASSERT_TRUE(ProviderServer::WaitFor([&] {
    auto n = s.Node("gpu-auto-0");
    return n && (*n)["free_gpus"].get<double>() == 0.0;
  })) << s.server().log();
  EXPECT_EQ(Http(s.server(), "GET", "/v1/jobs/" + std::to_string(second), token).body["state"], "running");
  EXPECT_EQ((*s.Node("gpu-auto-0"))["rack"], "gpu-auto-rack-0");
  EXPECT_EQ(ReadTextFile(created), "pool=gpu node=gpu-auto-0 rack=gpu-auto-rack-0 warm=0\n");
  const auto requested = s.EventsOf("ScaleOutRequested");
  ASSERT_EQ(requested.size(), 1u);
  EXPECT_EQ(requested[0]["nodes"], 1);
  bool provisioned = false;
  for (const json& e : s.EventsOf("NodeAdded")) provisioned = provisioned || e["node"] == "gpu-auto-0";
  EXPECT_TRUE(provisioned);
  EXPECT_TRUE(s.EventsOf("ScaleOutFailed").empty());

  // Idle: one node drains and is removed (the newest of two empty ones), and deleted.
  for (int64_t id : {first, second}) {
    EXPECT_EQ(Http(s.server(), "DELETE", "/v1/jobs/" + std::to_string(id), token).status, 200);
  }
  ASSERT_TRUE(ProviderServer::WaitFor([&] { return !ReadTextFile(deleted).empty(); })) << s.server().log();
  EXPECT_EQ(ReadTextFile(deleted), "pool=gpu node=gpu-auto-0\n");
  EXPECT_EQ((*s.Node("gpu-auto-0"))["condition"], "removed");
  EXPECT_EQ(s.EventsOf("NodeRemoved").size(), 1u);

  // Across a restart: the removed node stays removed; nothing is left to fail.
  EXPECT_EQ(s.server().Stop(), 0);
  ASSERT_TRUE(s.Start()) << s.server().log();
  EXPECT_EQ((*s.Node("gpu-auto-0"))["condition"], "removed");
  EXPECT_EQ((*s.Node("base-0"))["condition"], "ready");
  std::this_thread::sleep_for(300ms);
  EXPECT_TRUE(s.EventsOf("ScaleOutFailed").empty());
  EXPECT_EQ(s.server().Stop(), 0);
  std::filesystem::remove_all(root);
}

TEST(ServerProviderTest, AFailingCreateScriptShowsInScaleOutFailed) {
  const std::string root = MakeTempDir();
  const std::string create =
      WriteScript(root, "create-node.sh", "echo \"asking for $GPUPOOL_NODE\"; echo 'quota exceeded in zone-1' >&2; exit 3");
  ProviderServer s(root, Config(create, "true", "1h"));
  ASSERT_TRUE(s.Start()) << s.server().log();
  const std::string token = s.Tenant();
  s.Submit(token, "first");
  const int64_t second = s.Submit(token, "second");
  ASSERT_TRUE(ProviderServer::WaitFor([&] { return !s.EventsOf("ScaleOutFailed").empty(); })) << s.server().log();
  const auto failed = s.EventsOf("ScaleOutFailed");
  ASSERT_EQ(failed.size(), 1u);
  EXPECT_EQ(failed[0]["nodes"], 1);
  EXPECT_EQ(failed[0]["reason"], "create-node.sh exited 3: asking for gpu-auto-0 | quota exceeded in zone-1");
  EXPECT_FALSE(s.Node("gpu-auto-0").has_value());
  EXPECT_EQ(Http(s.server(), "GET", "/v1/jobs/" + std::to_string(second), token).body["state"], "pending");
  EXPECT_EQ(s.server().Stop(), 0);
  std::filesystem::remove_all(root);
}

TEST(ServerProviderTest, ARestartFailsWhatTheProviderNeverAnswered) {
  const std::string root = MakeTempDir();
  // The first call hangs (and says who it is); later calls succeed.
  const std::string create = WriteScript(root, "create-node.sh",
                                         "if [ -f " + root + "/pid ]; then exit 0; fi\necho $$ > " + root +
                                             "/pid.tmp && mv " + root + "/pid.tmp " + root + "/pid\nsleep 60");
  ProviderServer s(root, Config(create, "true", "0s"));
  ASSERT_TRUE(s.Start()) << s.server().log();
  const std::string token = s.Tenant();
  s.Submit(token, "first");
  const int64_t second = s.Submit(token, "second");
  ASSERT_TRUE(ProviderServer::WaitFor([&] { return !ReadTextFile(root + "/pid").empty(); })) << s.server().log();
  s.server().Kill();
  // The hanging script runs in the process group the server made for it: end it.
  const pid_t script = std::stoi(ReadTextFile(root + "/pid"));
  const pid_t group = ::getpgid(script);
  ASSERT_GT(group, 1);
  ::kill(-group, SIGKILL);

  ASSERT_TRUE(s.Start()) << s.server().log();
  ASSERT_TRUE(ProviderServer::WaitFor([&] {
    auto n = s.Node("gpu-auto-0");
    return n && (*n)["free_gpus"].get<double>() == 0.0;
  })) << s.server().log();
  const auto failed = s.EventsOf("ScaleOutFailed");
  ASSERT_EQ(failed.size(), 1u);
  EXPECT_EQ(failed[0]["reason"], "server restarted before the provider answered");
  EXPECT_EQ(s.EventsOf("ScaleOutRequested").size(), 2u);  // asked again after the restart
  EXPECT_EQ(Http(s.server(), "GET", "/v1/jobs/" + std::to_string(second), token).body["state"], "running");
  EXPECT_EQ(s.server().Stop(), 0);
  std::filesystem::remove_all(root);
}

TEST(ServerProviderTest, ConfigurationErrorsNameTheField) {
  const std::string root = MakeTempDir();
  auto run = [&](const std::string& name, const std::string& text) {
    std::ofstream(root + "/" + name) << text;
    return RunGpupool({"server", "--data", root + "/data-" + name, "--listen", "127.0.0.1:0", "--config",
                       root + "/" + name});
  };
  std::string valid = Config("/bin/true", "/bin/true");

  // scaling without a provider: nothing would create the nodes.
  std::string text = valid.substr(0, valid.find("  provider:"));
  auto r = run("no-provider.yaml", text);
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.err.find("no-provider.yaml:"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("scaling: needs server.provider"), std::string::npos) << r.err;

  // provider without create.
  text = valid;
  text.replace(text.find("    create: /bin/true\n"), 22, "");
  r = run("no-create.yaml", text);
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.err.find("server.provider.create: required"), std::string::npos) << r.err;

  // A bad timeout, an unknown key.
  text = valid;
  text.replace(text.find("timeout: 20s"), 12, "timeout: soon");
  r = run("timeout.yaml", text);
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.err.find("server.provider.timeout: expected a duration"), std::string::npos) << r.err;
  text = valid;
  text.replace(text.find("    timeout: 20s"), 16, "    retries: 3");
  r = run("retries.yaml", text);
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.err.find("server.provider.retries: unknown key 'retries'"), std::string::npos) << r.err;

  // The simulated provider model stays simulation-only.
  r = run("sim-provider.yaml", valid + "provider: {cold_start: 5m}\n");
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.err.find("unknown key 'provider'"), std::string::npos) << r.err;

  // regions (TOPO-2) are accepted; users may name tenants the API creates later.
  std::ofstream(root + "/regions.yaml") << "name: r\npools:\n  - name: p\nregions:\n  table:\n"
                                           "    - {name: region-1, price_per_gpu_hour: 2, latency_ms: {eu: 10}}\n"
                                           "  users:\n    - {tenant: later, at: eu, latency_budget_ms: 50}\n";
  ServerProcess regions(root + "/data-regions", {"--config", root + "/regions.yaml"});
  EXPECT_TRUE(regions.Start()) << regions.log();
  EXPECT_EQ(regions.Stop(), 0);
  std::filesystem::remove_all(root);
}

}  // namespace
}  // namespace gpupool::testing
