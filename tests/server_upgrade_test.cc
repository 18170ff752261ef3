// Upgrades: the current server on a data directory written by the release
// before issue 14 (tests/fixtures/data-v4: engine snapshot version 4,
// read-model snapshot version 3, task specs without image, shm_gib and
// network). Everything is still there, the new fields take their defaults,
// new jobs get them, and a clean restart (which writes the current
// snapshot versions) keeps both.
#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <map>
#include <string>
#include <thread>

#include "src/api/tenant_ids.h"
#include "tests/run_binary.h"
#include "tests/server_process.h"

namespace gpupool::testing {
namespace {

using nlohmann::json;

const std::string kFixtures = std::string(GPUPOOL_SOURCE_DIR) + "/tests/fixtures/";

class ServerUpgradeTest : public ::testing::Test {
 protected:
  virtual std::string Fixture() const { return kFixtures + "data-v4"; }
  void SetUp() override {
    root_ = MakeTempDir();
    const std::string data = root_ + "/data";
    std::filesystem::create_directories(data);
    for (const char* f : {"gpupool.db", "admin.token"}) {
      std::filesystem::copy_file(Fixture() + "/" + f, data + "/" + f);
      std::filesystem::permissions(data + "/" + f, std::filesystem::perms::owner_read | std::filesystem::perms::owner_write);
    }
    // The embedded default configuration, as the fixture was written with.
    server_ = std::make_unique<ServerProcess>(data);
    ASSERT_TRUE(server_->Start()) << server_->log();
    admin_ = server_->admin_token();
  }
  void TearDown() override {
    server_.reset();
    if (!root_.empty()) std::filesystem::remove_all(root_);
  }

  json Get(const std::string& path) {
    auto r = Http(*server_, "GET", path, admin_);
    EXPECT_EQ(r.status, 200) << path << ": " << r.text;
    return r.body;
  }

  // The old job as the fixture's README says it was submitted.
  void ExpectTheOldJobs() {
    std::vector<std::string> tenants;
    const json list = Get("/v1/tenants");
    for (const json& t : list["tenants"]) tenants.push_back(t["name"]);
    EXPECT_EQ(tenants, (std::vector<std::string>{"team-a", "team-b"}));
    const json nodes = Get("/v1/nodes")["nodes"];
    ASSERT_EQ(nodes.size(), 1u);
    EXPECT_EQ(nodes[0]["name"], "node-1");
    const json one = Get("/v1/jobs/1");
    EXPECT_EQ(one["state"], "running") << one.dump();
    const json& r = one["request"];
    EXPECT_EQ(r["command"], json({"sh", "-c", "echo hello; sleep 1000"}));
    EXPECT_EQ(r["env"], json({{"FOO", "bar"}}));
    EXPECT_EQ(r["working_dir"], "/tmp");
    EXPECT_EQ(r["checkpoint_signal"], "SIGUSR2");
    EXPECT_EQ(r["checkpoint_timeout"], "30s");
    EXPECT_EQ(r["stop_grace"], "5s");
    // The new fields at their defaults: not shown.
    EXPECT_FALSE(r.contains("image")) << r.dump();
    EXPECT_FALSE(r.contains("shm_gib")) << r.dump();
    EXPECT_FALSE(r.contains("network")) << r.dump();
    EXPECT_EQ(Get("/v1/jobs/2")["state"], "rejected");
    const json three = Get("/v1/jobs/3");
    EXPECT_EQ(three["state"], "pending");
    EXPECT_EQ(three["request"]["command"], json({"python3", "train.py"}));
  }

  // Registers node-1's agent (as a current agent with containers) and
  // returns the reply: the node's desired tasks, from the Engine's state.
  json RegisterNode1() {
    if (node_token_.empty()) {
      auto t = Http(*server_, "POST", "/v1/nodes/node-1/token", admin_);
      EXPECT_EQ(t.status, 201) << t.text;
      node_token_ = t.body.value("token", "");
    }
    json gpus = json::array();
    for (int i = 0; i < 2; ++i) {
      gpus.push_back({{"index", i}, {"uuid", "GPU-" + std::to_string(i)}, {"model", "A100-80GB"}, {"memory_mib", 81920}});
    }
    auto r = Http(*server_, "POST", "/v1/agent/register", node_token_,
                  json{{"node", "node-1"}, {"backend", "fake"}, {"cpu_milli", 16000}, {"memory_mib", 65536},
                       {"gpus", gpus}, {"isolation", "container"}});
    EXPECT_EQ(r.status, 200) << r.text;
    return r.body;
  }
  static const json* Order(const json& reply, int64_t job) {
    for (const json& t : reply["tasks"]) {
      if (t["job"] == job) return &t;
    }
    return nullptr;
  }

  std::string root_, admin_, node_token_;
  std::unique_ptr<ServerProcess> server_;
};

TEST_F(ServerUpgradeTest, AVersion4DataDirectoryLoadsAndKeepsWorking) {
  ASSERT_NO_FATAL_FAILURE(ExpectTheOldJobs());

  // The embedded configuration has no default_image: a new job that runs a
  // command must name its image.
  const json job = {{"name", "new"},      {"tenant", "team-b"}, {"gpus", 1},
                    {"cpu_cores", 2},     {"memory_gib", 3},    {"command", {"sleep", "1000"}}};
  auto refused = Http(*server_, "POST", "/v1/jobs", admin_, job);
  EXPECT_EQ(refused.status, 400) << refused.text;
  EXPECT_EQ(refused.body["error"]["field"], "image") << refused.text;
  EXPECT_NE(refused.body["error"]["message"].get<std::string>().find("no image given and the server has no default_image"),
            std::string::npos)
      << refused.text;
  json with_image = job;
  with_image["image"] = "host";
  with_image["shm_gib"] = 2;
  with_image["network"] = "isolated";
  auto created = Http(*server_, "POST", "/v1/jobs", admin_, with_image);
  ASSERT_EQ(created.status, 201) << created.text;
  const int64_t id = created.body["id"];
  EXPECT_EQ(created.body["state"], "running") << created.text;  // team-b's guarantee: GPU 1 of node-1
  EXPECT_EQ(created.body["request"]["image"], "host");
  EXPECT_EQ(created.body["request"]["shm_gib"], 2.0);
  EXPECT_EQ(created.body["request"]["network"], "isolated");

  // The Engine's state (loaded from the version 4 snapshot) gives the agent
  // its orders: the old job with the defaults, the new one with its container.
  auto expect_orders = [&](const json& reply) {
    const json* old = Order(reply, 1);
    ASSERT_NE(old, nullptr) << reply.dump();
    EXPECT_FALSE(old->contains("image")) << old->dump();
    EXPECT_FALSE(old->contains("network_isolated")) << old->dump();
    EXPECT_EQ((*old)["memory_mib"], 2048);
    EXPECT_EQ((*old)["uid"], TenantUidRange(0).first);  // team-a
    EXPECT_EQ((*old)["task"]["command"], json({"sh", "-c", "echo hello; sleep 1000"}));
    const json* fresh = Order(reply, id);
    ASSERT_NE(fresh, nullptr) << reply.dump();
    EXPECT_EQ((*fresh)["image"], "host");
    EXPECT_EQ((*fresh)["shm_mib"], 2048);
    EXPECT_EQ((*fresh)["network_isolated"], true);
    EXPECT_EQ((*fresh)["memory_mib"], 3072);
    EXPECT_EQ((*fresh)["cpu_milli"], 2000);
    EXPECT_EQ((*fresh)["uid"], TenantUidRange(1).first);  // team-b
    EXPECT_EQ((*fresh)["uid_count"], TenantUidRange(1).second);
  };
  expect_orders(RegisterNode1());
  const json node = Get("/v1/nodes")["nodes"][0];
  EXPECT_EQ(node["agent"]["isolation"], "container") << node.dump();

  // A clean stop writes the current snapshot versions; they load again.
  ASSERT_EQ(server_->Stop(), 0) << server_->log();
  ASSERT_TRUE(server_->Start()) << server_->log();
  ASSERT_NO_FATAL_FAILURE(ExpectTheOldJobs());
  const json again = Get("/v1/jobs/" + std::to_string(id));
  EXPECT_EQ(again["request"]["image"], "host");
  EXPECT_EQ(again["request"]["shm_gib"], 2.0);
  EXPECT_EQ(again["request"]["network"], "isolated");
  expect_orders(RegisterNode1());
}

// The release before the issue 15 Engine rules (tests/fixtures/data-v6:
// engine snapshot version 6, two tenants' MPS shares on one GPU, a MIG
// share charged as asked).
class ServerUpgradeV6Test : public ServerUpgradeTest {
 protected:
  std::string Fixture() const override { return kFixtures + "data-v6"; }
  void ExpectTheV6Jobs() {
    for (int id : {1, 2, 3}) EXPECT_EQ(Get("/v1/jobs/" + std::to_string(id))["state"], "running") << id;
    EXPECT_EQ(Get("/v1/jobs/3")["request"]["sharing"], "mig");
  }
  json Gpus() { return Get("/v1/nodes")["nodes"][0]["gpu"]; }
};

TEST_F(ServerUpgradeV6Test, AVersion6DataDirectoryLoadsAndItsMpsGpuHealsToOneTenant) {
  ASSERT_NO_FATAL_FAILURE(ExpectTheV6Jobs());
  json gpus = Gpus();
  ASSERT_EQ(gpus.size(), 2u) << gpus.dump();
  EXPECT_EQ(gpus[0]["mode"], "mps");
  EXPECT_EQ(gpus[0]["free_milli"], 400) << "both tenants' shares are still there";
  EXPECT_EQ(gpus[1]["mode"], "mig");
  EXPECT_EQ(gpus[1]["free_milli"], 700) << "the old MIG share keeps the charge it was placed with";
  EXPECT_EQ(gpus[0]["healthy"], true);

  // GPU 0 serves two tenants (allowed then): no new MPS share goes there.
  const json share = {{"name", "new-mps"}, {"tenant", "team-a"}, {"gpu_fraction", 0.2}, {"sharing", "mps"},
                      {"gpu_memory_gib", 4},  {"cpu_cores", 1},      {"memory_gib", 1},
                      {"image", "host"},      {"command", {"sleep", "1000"}}};
  auto created = Http(*server_, "POST", "/v1/jobs", admin_, share);
  ASSERT_EQ(created.status, 201) << created.text;
  const int64_t id = created.body["id"];
  EXPECT_EQ(created.body["state"], "pending") << created.text;
  // Once team-b's share is gone, GPU 0 serves team-a only, and takes it.
  auto cancelled = Http(*server_, "DELETE", "/v1/jobs/2", admin_);
  ASSERT_EQ(cancelled.status, 200) << cancelled.text;
  EXPECT_EQ(Get("/v1/jobs/" + std::to_string(id))["state"], "running");
  // A new MIG share is charged its slices: 3/7 of a GPU (team-b's: team-a
  // is at its guarantee, which the pool's capacity bounds).
  json mig = share;
  mig["name"] = "new-mig";
  mig["tenant"] = "team-b";
  mig["sharing"] = "mig";
  mig["gpu_fraction"] = 0.3;
  mig["gpu_memory_gib"] = 10;
  auto placed = Http(*server_, "POST", "/v1/jobs", admin_, mig);
  ASSERT_EQ(placed.status, 201) << placed.text;
  EXPECT_EQ(placed.body["state"], "running") << placed.text;

  // The node view follows at the server's next summary (within a tick).
  json before;
  for (int i = 0; i < 100; ++i) {
    before = Gpus();
    if (before[1]["free_milli"] == 700 - 428) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  EXPECT_EQ(before[1]["free_milli"], 700 - 428) << before.dump();
  // A clean stop writes version 7; it loads again, the same.
  ASSERT_EQ(server_->Stop(), 0) << server_->log();
  ASSERT_TRUE(server_->Start()) << server_->log();
  EXPECT_EQ(Gpus(), before);
  EXPECT_EQ(Gpus()[1]["free_milli"], 700 - 428);
  EXPECT_EQ(Get("/v1/jobs/" + std::to_string(id))["state"], "running");
}

// The release before the learned workload (tests/fixtures/data-v7: engine
// snapshot version 7, without the learner's section).
class ServerUpgradeV7Test : public ServerUpgradeTest {
 protected:
  std::string Fixture() const override { return kFixtures + "data-v7"; }
};

TEST_F(ServerUpgradeV7Test, AVersion7DataDirectoryLoadsLearnsAndRestartsTheSame) {
  const json share = Get("/v1/jobs/1"), whole = Get("/v1/jobs/2");
  EXPECT_EQ(share["state"], "running") << share.dump();
  EXPECT_EQ(share["request"]["sharing"], "time-slice");
  EXPECT_EQ(whole["state"], "running") << whole.dump();
  EXPECT_EQ(Get("/v1/nodes")["nodes"][0]["free_gpus"], 0.5);  // half of the shared GPU
  // New arrivals are learned from (the learner starts from its prior) and
  // placed as before: team-a's second half share joins the first GPU.
  const json half = {{"name", "new-share"}, {"tenant", "team-a"}, {"kind", "online-inference"},
                     {"gpu_fraction", 0.5},   {"sharing", "time-slice"}, {"gpu_memory_gib", 10},
                     {"cpu_cores", 2},        {"memory_gib", 4},         {"image", "host"},
                     {"command", {"sleep", "1000"}}};
  auto created = Http(*server_, "POST", "/v1/jobs", admin_, half);
  ASSERT_EQ(created.status, 201) << created.text;
  EXPECT_EQ(created.body["state"], "running") << created.text;
  const int64_t id = created.body["id"];
  // A clean stop writes version 8 (with what was learned); it loads again.
  ASSERT_EQ(server_->Stop(), 0) << server_->log();
  ASSERT_TRUE(server_->Start()) << server_->log();
  for (int64_t job : {int64_t{1}, int64_t{2}, id}) {
    EXPECT_EQ(Get("/v1/jobs/" + std::to_string(job))["state"], "running") << job;
  }
}

// The release before named tokens (tests/fixtures/data-schema-v1: the
// SQLite journal's schema version 1, tokens stored as plain SHA-256).
class ServerUpgradeSchemaV1Test : public ServerUpgradeTest {
 protected:
  std::string Fixture() const override { return kFixtures + "data-schema-v1"; }
  static json OldTokens() {
    std::ifstream in(kFixtures + "data-schema-v1/tokens.json");
    return json::parse(in, nullptr, false);
  }
};

TEST_F(ServerUpgradeSchemaV1Test, TokensOfTheEarlierReleaseKeepWorkingUntilRevokedAndTheRevocationLasts) {
  const json old = OldTokens();
  ASSERT_TRUE(old.is_object());
  const std::string tenant = old["team-a"], node = old["node/node-1"];
  EXPECT_EQ(Http(*server_, "GET", "/v1/tenants/team-a", tenant).status, 200);
  EXPECT_NE(Http(*server_, "POST", "/v1/agent/heartbeat", node, json{{"node", "node-1"}}).status, 401);
  std::map<std::string, json> listed;  // by name
  const json tokens = Get("/v1/tokens")["tokens"];
  for (const json& t : tokens) listed[t["name"]] = t;
  ASSERT_EQ(listed.size(), 2u);
  EXPECT_EQ(listed["initial"]["tenant"], "team-a");
  EXPECT_EQ(listed["initial"]["legacy"], true);
  EXPECT_EQ(listed["node"]["node"], "node-1");
  EXPECT_EQ(listed["node"]["role"], "node");
  // The old events have no actor; a new request's have.
  EXPECT_TRUE(Get("/v1/audit")["entries"].empty());
  ASSERT_EQ(Http(*server_, "PUT", "/v1/tenants/team-a/quota", tenant, json{{"pool", "default"}, {"guaranteed_gpus", 1}}).status, 403);
  auto quota = Http(*server_, "PUT", "/v1/tenants/team-a/quota", admin_, json{{"pool", "default"}, {"guaranteed_gpus", 2}});
  ASSERT_EQ(quota.status, 200) << quota.text;
  const json audit = Get("/v1/audit")["entries"];
  ASSERT_EQ(audit.size(), 1u) << audit.dump();
  EXPECT_EQ(audit[0]["actor"], "admin");
  // The tenant makes a new token, then revokes its old one.
  auto fresh = Http(*server_, "POST", "/v1/tokens", tenant, json{{"name", "rotated"}});
  ASSERT_EQ(fresh.status, 201) << fresh.text;
  const std::string id = listed["initial"]["id"];
  ASSERT_EQ(Http(*server_, "DELETE", "/v1/tokens/" + id, fresh.body["token"]).status, 200);
  EXPECT_EQ(Http(*server_, "GET", "/v1/tenants/team-a", tenant).status, 401);
  ASSERT_EQ(server_->Stop(), 0) << server_->log();
  ASSERT_TRUE(server_->Start()) << server_->log();
  EXPECT_EQ(Http(*server_, "GET", "/v1/tenants/team-a", tenant).status, 401);
  EXPECT_EQ(Http(*server_, "GET", "/v1/tenants/team-a", fresh.body["token"]).status, 200);
  EXPECT_NE(Http(*server_, "POST", "/v1/agent/heartbeat", node, json{{"node", "node-1"}}).status, 401);
}

// The release before operators' node commands (tests/fixtures/data-v8:
// engine snapshot version 8 without cordons, read-model snapshot version 7
// with usage but without cordons).
class ServerUpgradeV8Test : public ServerUpgradeTest {
 protected:
  std::string Fixture() const override { return kFixtures + "data-v8"; }
  // The cancelled job 3's GPU-seconds, as the old read model accounted them.
  double Job3GpuSeconds() { return Get("/v1/jobs/3")["usage"].value("gpu_seconds", -1.0); }
};

TEST_F(ServerUpgradeV8Test, AVersion8DataDirectoryLoadsTakesCordonsAndRestartsTheSame) {
  EXPECT_EQ(Get("/v1/jobs/1")["state"], "running");
  EXPECT_EQ(Get("/v1/jobs/2")["state"], "running");
  EXPECT_EQ(Get("/v1/jobs/3")["state"], "cancelled");
  const json nodes = Get("/v1/nodes")["nodes"];
  ASSERT_EQ(nodes.size(), 2u) << nodes.dump();
  for (const json& n : nodes) EXPECT_TRUE(n["cordons"].empty()) << n.dump();
  // The old read model's usage is still there: job 3 held a GPU for about 3 s.
  const double used = Job3GpuSeconds();
  EXPECT_GE(used, 2.0);
  EXPECT_LE(used, 10.0);
  // The new command works on the old state, and a clean stop keeps it.
  auto c = Http(*server_, "POST", "/v1/nodes/node-2/cordon", admin_, json{{"reason", "upgrade test"}});
  ASSERT_EQ(c.status, 200) << c.text;
  ASSERT_EQ(server_->Stop(), 0) << server_->log();
  ASSERT_TRUE(server_->Start()) << server_->log();
  const json node2 = Get("/v1/nodes/node-2");
  EXPECT_EQ(node2["condition"], "cordoned") << node2.dump();
  EXPECT_EQ(Get("/v1/jobs/1")["state"], "running");
  EXPECT_EQ(Get("/v1/jobs/2")["state"], "running");
  EXPECT_EQ(Job3GpuSeconds(), used);
}

}  // namespace
}  // namespace gpupool::testing
