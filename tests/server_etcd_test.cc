// The replicated server (issue 17) end to end: real `gpupool server`
// processes on a real etcd (one member on loopback; skipped when etcd is
// not installed). A server that takes over rebuilds the same state from
// etcd; a paused leader, once resumed, cannot append and stops; bad
// configuration stops the server at start-up with a clear message.
#include <signal.h>

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <thread>

#include "src/server/etcd_client.h"
#include "src/server/testing/etcd_cluster.h"
#include "tests/run_binary.h"
#include "tests/server_process.h"

namespace gpupool::testing {
namespace {

using nlohmann::json;

constexpr const char* kConfig = R"(name: ha
engine: {heartbeat_timeout: 0s}
pools:
  - name: h100
    models: [H100]
cluster:
  nodes:
    - {count: 2, model: H100, gpus: 8, cpu_cores: 96, memory_gib: 1024}
server:
  tick: 200ms
)";

class ServerEtcdTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (EtcdBinary().empty()) GTEST_SKIP() << kNoEtcdMessage;
    ASSERT_TRUE(etcd_.Start()) << etcd_.error();
    root_ = MakeTempDir();
    config_ = root_ + "/config.yaml";
    std::ofstream(config_) << kConfig;
  }
  void TearDown() override {
    if (!root_.empty()) std::filesystem::remove_all(root_);
  }

  // A server on the shared prefix; `token_file` empty: it makes its own.
  std::unique_ptr<ServerProcess> Server(const std::string& name, const std::string& token_file = "") {
    std::vector<std::string> args = {"--config", config_, "--etcd", etcd_.Endpoints(), "--etcd-prefix", "/gpupool/ha",
                                     "--lease-ttl", "2"};
    if (!token_file.empty()) args.insert(args.end(), {"--admin-token-file", token_file});
    return std::make_unique<ServerProcess>(root_ + "/" + name, args,
                                           "127.0.0.1:" + std::to_string(FreePort()));
  }

  EtcdCluster etcd_{1};
  std::string root_, config_;
};

TEST_F(ServerEtcdTest, AServerTakingOverRebuildsTheSameStateFromEtcd) {
  auto a = Server("a");
  ASSERT_TRUE(a->Start()) << a->log();
  const std::string admin = a->admin_token();
  auto t = Http(*a, "POST", "/v1/tenants", admin,
                json{{"name", "team-a"}, {"quota", {{"h100", {{"guaranteed_gpus", 8}, {"limit_gpus", 16}}}}}});
  ASSERT_EQ(t.status, 201) << t.text;
  const std::string token = t.body["token"];
  for (int i = 0; i < 3; ++i) {
    auto s = Http(*a, "POST", "/v1/jobs", token, json{{"name", "train-" + std::to_string(i)}, {"gpus", 4}});
    ASSERT_EQ(s.status, 201) << s.text;
  }
  const auto jobs_a = Http(*a, "GET", "/v1/jobs", token);
  ASSERT_EQ(jobs_a.status, 200);
  const int64_t seq_a = Http(*a, "GET", "/healthz", "").body["last_seq"];
  a->Kill();  // SIGKILL: its lease ends 2 s later, and the standby takes over

  // A fresh data directory: everything but the admin token comes from etcd.
  auto b = Server("b", root_ + "/a/admin.token");
  const auto t0 = std::chrono::steady_clock::now();
  ASSERT_TRUE(b->Start()) << b->log();
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(10));
  EXPECT_EQ(Http(*b, "GET", "/healthz", "").body["last_seq"], seq_a);
  const auto jobs_b = Http(*b, "GET", "/v1/jobs", token);  // the tenant's token hash is in etcd too
  ASSERT_EQ(jobs_b.status, 200) << jobs_b.text;
  EXPECT_EQ(jobs_b.body, jobs_a.body);
  auto s = Http(*b, "POST", "/v1/jobs", token, json{{"name", "after"}, {"gpus", 4}});
  ASSERT_EQ(s.status, 201) << s.text;
  EXPECT_EQ(s.body["state"], "running");  // the 12 GPUs of the first three are still held: 4 of 16 left
  EXPECT_EQ(Http(*b, "POST", "/v1/jobs", token, json{{"name", "full"}, {"gpus", 4}}).body["state"], "pending");
}

// HA-2: SIGSTOP the leader; a standby takes over after the lease TTL;
// SIGCONT the old one: its writes are refused with the new leader's URL,
// nothing of it reaches the journal, and it stops.
TEST_F(ServerEtcdTest, APausedLeaderResumedCannotAppendAndStops) {
  auto a = Server("a");
  ASSERT_TRUE(a->Start()) << a->log();
  const std::string admin = a->admin_token();
  auto t = Http(*a, "POST", "/v1/tenants", admin,
                json{{"name", "team-a"}, {"quota", {{"h100", {{"guaranteed_gpus", 8}, {"limit_gpus", 16}}}}}});
  ASSERT_EQ(t.status, 201) << t.text;
  const std::string token = t.body["token"];
  ASSERT_EQ(kill(a->pid(), SIGSTOP), 0);

  auto b = Server("b", root_ + "/a/admin.token");
  ASSERT_TRUE(b->Start()) << b->log();
  auto s = Http(*b, "POST", "/v1/jobs", token, json{{"name", "on-b"}, {"gpus", 4}});
  ASSERT_EQ(s.status, 201) << s.text;
  const int64_t seq_b = Http(*b, "GET", "/healthz", "").body["last_seq"];

  ASSERT_EQ(kill(a->pid(), SIGCONT), 0);
  auto refused = Http(*a, "POST", "/v1/jobs", token, json{{"name", "on-a"}, {"gpus", 4}});
  EXPECT_EQ(refused.status, 503) << refused.text;
  EXPECT_NE(refused.text.find("not the leader"), std::string::npos) << refused.text;
  EXPECT_NE(refused.text.find(b->url()), std::string::npos) << refused.text;
  std::this_thread::sleep_for(std::chrono::milliseconds(1500));
  EXPECT_NE(Http(*a, "GET", "/healthz", "").status, 200);  // it stopped
  const int code = a->Stop();
  EXPECT_TRUE(code == 70 || code == 75) << code << "\n" << a->log();
  EXPECT_NE(a->log().find("lost the leadership"), std::string::npos) << a->log();

  EXPECT_EQ(Http(*b, "GET", "/healthz", "").body["last_seq"], seq_b);
  const auto jobs = Http(*b, "GET", "/v1/jobs", token);
  ASSERT_EQ(jobs.status, 200);
  ASSERT_EQ(jobs.body["jobs"].size(), 1u) << jobs.text;
  EXPECT_EQ(jobs.body["jobs"][0]["name"], "on-b");
}

TEST_F(ServerEtcdTest, BadConfigurationStopsTheServerWithAClearMessage) {
  const std::string data = root_ + "/bad";
  auto unreachable = RunGpupool({"server", "--data", data, "--listen", "127.0.0.1:0", "--config", config_, "--etcd",
                                 "http://127.0.0.1:1"});
  EXPECT_EQ(unreachable.exit_code, 1);
  EXPECT_NE(unreachable.err.find("error: cannot reach etcd at http://127.0.0.1:1: "), std::string::npos)
      << unreachable.err;

  EtcdClient client(EtcdClientOptions{etcd_.EndpointList()});
  ASSERT_TRUE(client.Put("/theirs/registry/x", "y"));
  auto foreign = RunGpupool({"server", "--data", data, "--listen", "127.0.0.1:0", "--config", config_, "--etcd",
                             etcd_.Endpoints(), "--etcd-prefix", "/theirs"});
  EXPECT_EQ(foreign.exit_code, 1);
  EXPECT_NE(foreign.err.find("error: etcd /theirs: holds keys not written by gpupool (/theirs/registry/x"),
            std::string::npos)
      << foreign.err;

  auto flag = RunGpupool({"server", "--data", data, "--etcd", "127.0.0.1:2379"});
  EXPECT_EQ(flag.exit_code, 2);
  EXPECT_NE(flag.err.find("is not http://HOST:PORT"), std::string::npos) << flag.err;
}

TEST_F(ServerEtcdTest, AnotherClustersStateUnderThePrefixIsRefused) {
  auto a = Server("a");
  ASSERT_TRUE(a->Start()) << a->log();
  ASSERT_EQ(a->Stop(), 0);  // resigns: the next server leads at once
  const std::string other = root_ + "/other.yaml";
  std::ofstream(other) << "name: other\npools:\n  - name: a100\n    models: [A100-80GB]\n";
  auto run = RunGpupool({"server", "--data", root_ + "/o", "--listen", "127.0.0.1:0", "--config", other, "--etcd",
                         etcd_.Endpoints(), "--etcd-prefix", "/gpupool/ha", "--lease-ttl", "2"});
  EXPECT_EQ(run.exit_code, 1);
  EXPECT_NE(run.err.find("configuration pools [a100] differ from the pools of etcd /gpupool/ha at "), std::string::npos) << run.err;
}

}  // namespace
}  // namespace gpupool::testing
