// Integration tests of `gpupool server`: the real binary on loopback, real
// HTTP, a temporary data directory.
#include <gtest/gtest.h>

#include <algorithm>

#include <filesystem>
#include <fstream>
#include <set>

#include "tests/run_binary.h"
#include "tests/server_process.h"

namespace gpupool::testing {
namespace {

using nlohmann::json;

// The nodes have no agents: failure detection is off.
constexpr const char* kConfig = R"(name: test
engine: {heartbeat_timeout: 0s}
node_classes:
  - name: nvlink
    gpu: {interconnect_gbps: 900}
requirements:
  - name: nvlink
    min: {interconnect_gbps: 600}
pools:
  - name: h100
    models: [H100]
  - name: a100
    models: [A100-80GB]
cluster:
  nodes:
    - {count: 2, model: H100, gpus: 8, cpu_cores: 96, memory_gib: 1024, attributes: nvlink}
    - {count: 2, model: A100-80GB, gpus: 8, cpu_cores: 64, memory_gib: 512}
server:
  tick: 200ms
  max_body_bytes: 65536
)";

std::string WriteConfig(const std::string& dir) {
  const std::string path = dir + "/config.yaml";
  std::ofstream(path) << kConfig;
  return path;
}

class ServerApiTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    root_ = MakeTempDir();
    server_ = new ServerProcess(root_ + "/data", {"--config", WriteConfig(root_)});
    ASSERT_TRUE(server_->Start()) << server_->log();
    admin_ = server_->admin_token();
    auto a = Http(*server_, "POST", "/v1/tenants", admin_,
                  json{{"name", "team-a"}, {"quota", {{"h100", {{"guaranteed_gpus", 8}, {"limit_gpus", 16}}}}}});
    ASSERT_EQ(a.status, 201) << a.text;
    token_a_ = a.body["token"];
    auto b = Http(*server_, "POST", "/v1/tenants", admin_,
                  json{{"name", "team-b"}, {"quota", {{"a100", {{"guaranteed_gpus", 4}, {"limit_gpus", 8}}}}}});
    ASSERT_EQ(b.status, 201) << b.text;
    token_b_ = b.body["token"];
  }
  static void TearDownTestSuite() {
    delete server_;
    std::filesystem::remove_all(root_);
  }
  static int64_t LastSeq() { return Http(*server_, "GET", "/healthz", "").body["last_seq"]; }

  static inline ServerProcess* server_ = nullptr;
  static inline std::string root_, admin_, token_a_, token_b_;
};

TEST_F(ServerApiTest, HealthAndMetricsNeedNoToken) {
  auto h = Http(*server_, "GET", "/healthz", "");
  EXPECT_EQ(h.status, 200);
  EXPECT_EQ(h.body["status"], "ok");
  auto m = Http(*server_, "GET", "/metrics", "");
  EXPECT_EQ(m.status, 200);
  for (const char* name : {"gpupool_queue_length", "gpupool_scheduler_placements_total",
                           "gpupool_scheduler_preemptions_total", "gpupool_scheduler_decision_seconds_bucket",
                           "gpupool_quota_guaranteed_gpus{pool=\"h100\",tenant=\"team-a\"} 8",
                           "gpupool_pool_capacity_gpus{kind=\"total\",pool=\"h100\"} 16",
                           "gpupool_gpu_memory_booked_mib{", "gpupool_gpu_memory_unbooked_mib{",
                           "# TYPE gpupool_gpu_reported_utilization_percent gauge", "Hostname=\"h100-0\""}) {
    EXPECT_NE(m.text.find(name), std::string::npos) << name;
  }
  // Bookings are not device readings: no DCGM exporter names on the server.
  EXPECT_EQ(m.text.find("DCGM_FI_"), std::string::npos);
}

TEST_F(ServerApiTest, SubmitGetListCancel) {
  auto s = Http(*server_, "POST", "/v1/jobs", token_a_,
                json{{"name", "train"}, {"gpus", 8}, {"requirement", "nvlink"}, {"checkpointable", true},
                     {"checkpoint_interval", "10m"}, {"priority", "high"}});
  ASSERT_EQ(s.status, 201) << s.text;
  const int64_t id = s.body["id"];
  EXPECT_EQ(s.body["tenant"], "team-a");
  EXPECT_EQ(s.body["state"], "running");
  EXPECT_EQ(s.body["pool"], "h100");
  ASSERT_EQ(s.body["placements"].size(), 1u);
  EXPECT_EQ(s.body["placements"][0]["gpus"].size(), 8u);
  EXPECT_EQ(s.body["request"]["priority"], 1000);
  EXPECT_EQ(s.body["request"]["requirement"], "nvlink");

  auto g = Http(*server_, "GET", "/v1/jobs/" + std::to_string(id), token_a_);
  ASSERT_EQ(g.status, 200);
  EXPECT_EQ(g.body["state"], "running");
  // Another tenant sees nothing: 404, never 403.
  EXPECT_EQ(Http(*server_, "GET", "/v1/jobs/" + std::to_string(id), token_b_).status, 404);
  EXPECT_EQ(Http(*server_, "DELETE", "/v1/jobs/" + std::to_string(id), token_b_).status, 404);
  auto lb = Http(*server_, "GET", "/v1/jobs", token_b_);
  ASSERT_EQ(lb.status, 200);
  for (const json& j : lb.body["jobs"]) EXPECT_EQ(j["tenant"], "team-b");

  auto la = Http(*server_, "GET", "/v1/jobs?state=running", token_a_);
  ASSERT_EQ(la.status, 200);
  bool found = false;
  for (const json& j : la.body["jobs"]) found = found || j["id"] == id;
  EXPECT_TRUE(found);

  auto c = Http(*server_, "DELETE", "/v1/jobs/" + std::to_string(id), token_a_);
  ASSERT_EQ(c.status, 200) << c.text;
  EXPECT_EQ(c.body["state"], "cancelled");
  EXPECT_EQ(Http(*server_, "DELETE", "/v1/jobs/" + std::to_string(id), token_a_).status, 409);
  EXPECT_EQ(Http(*server_, "GET", "/v1/jobs/" + std::to_string(id), token_a_).body["state"], "cancelled");
}

TEST_F(ServerApiTest, PendingJobSaysWhyItWaits) {
  // team-b may use at most 8 A100s: a 16-GPU gang waits (or is rejected as too big).
  auto big = Http(*server_, "POST", "/v1/jobs", token_b_, json{{"name", "too-big"}, {"gpus", 8}, {"replicas", 3}});
  ASSERT_EQ(big.status, 201) << big.text;
  auto g = Http(*server_, "GET", "/v1/jobs/" + big.body["id"].dump(), token_b_);
  ASSERT_EQ(g.status, 200);
  if (g.body["state"] == "pending") {
    ASSERT_TRUE(g.body.contains("waiting")) << g.text;
    EXPECT_FALSE(g.body["waiting"].get<std::string>().empty());
    // The structured form: team-b's 8-GPU limit in a100 is too small for 24 GPUs.
    ASSERT_TRUE(g.body.contains("waiting_reasons")) << g.text;
    const json& pools = g.body["waiting_reasons"]["pools"];
    ASSERT_FALSE(pools.empty()) << g.text;
    bool quota = false;
    for (const json& p : pools) quota = quota || (p["pool"] == "a100" && p["reason"] == "quota_exhausted");
    EXPECT_TRUE(quota) << g.text;
  } else {
    EXPECT_EQ(g.body["state"], "rejected");
    EXPECT_FALSE(g.body["reason"].get<std::string>().empty());
  }
  Http(*server_, "DELETE", "/v1/jobs/" + big.body["id"].dump(), token_b_);
}

TEST_F(ServerApiTest, WaitingReasonsCountTheNodesFailingEachCheck) {
  // Two jobs take 90 of the 96 cores of each H100 node; a third needing 10
  // cores is within quota but fits no node until one of them ends.
  std::vector<std::string> ids;
  for (const char* name : {"cpu-a", "cpu-b"}) {
    auto s = Http(*server_, "POST", "/v1/jobs", token_a_, json{{"name", name}, {"gpus", 1}, {"cpu_cores", 90}});
    ASSERT_EQ(s.status, 201) << s.text;
    ASSERT_EQ(s.body["state"], "running") << s.text;
    ids.push_back(s.body["id"].dump());
  }
  auto c = Http(*server_, "POST", "/v1/jobs", token_a_, json{{"name", "cpu-c"}, {"gpus", 1}, {"cpu_cores", 10}});
  ASSERT_EQ(c.status, 201) << c.text;
  ids.push_back(c.body["id"].dump());
  auto g = Http(*server_, "GET", "/v1/jobs/" + c.body["id"].dump(), token_a_);
  ASSERT_EQ(g.body["state"], "pending") << g.text;
  const json& pools = g.body["waiting_reasons"]["pools"];
  ASSERT_EQ(pools.size(), 1u) << g.text;
  EXPECT_EQ(pools[0]["pool"], "h100");
  EXPECT_EQ(pools[0]["reason"], "no_fitting_node");
  EXPECT_EQ(pools[0]["nodes_by_check"].value("cpu", 0), 2) << g.text;
  EXPECT_EQ(g.body["waiting_reasons"]["victims_pending"], 0);
  for (const std::string& id : ids) Http(*server_, "DELETE", "/v1/jobs/" + id, token_a_);
}

TEST_F(ServerApiTest, AdminSubmitsForATenantAndFiltersByTenant) {
  EXPECT_EQ(Http(*server_, "POST", "/v1/jobs", admin_, json{{"name", "x"}}).body["error"]["field"], "tenant");
  auto s = Http(*server_, "POST", "/v1/jobs", admin_,
                json{{"name", "svc"}, {"tenant", "team-b"}, {"gpu_fraction", 0.25}, {"gpu_memory_gib", 10},
                     {"sharing", "mps"}, {"kind", "online-inference"}});
  ASSERT_EQ(s.status, 201) << s.text;
  EXPECT_EQ(s.body["tenant"], "team-b");
  auto l = Http(*server_, "GET", "/v1/jobs?tenant=team-b&limit=1000", admin_);
  ASSERT_EQ(l.status, 200);
  for (const json& j : l.body["jobs"]) EXPECT_EQ(j["tenant"], "team-b");
  EXPECT_EQ(Http(*server_, "GET", "/v1/jobs?tenant=team-b", token_a_).status, 403);
  EXPECT_EQ(Http(*server_, "GET", "/v1/jobs?tenant=nobody", admin_).status, 400);
  Http(*server_, "DELETE", "/v1/jobs/" + s.body["id"].dump(), admin_);
}

TEST_F(ServerApiTest, JobsListNewestFirstInPagesWithBefore) {
  std::vector<int64_t> ids;
  for (int i = 0; i < 5; ++i) {
    auto s = Http(*server_, "POST", "/v1/jobs", i % 2 ? token_a_ : token_b_,
                  json{{"name", "n" + std::to_string(i)}, {"gpu_fraction", 0.25}, {"gpu_memory_gib", 10},
                       {"sharing", "mps"}, {"kind", "online-inference"}});
    ASSERT_EQ(s.status, 201) << s.text;
    ids.push_back(s.body["id"]);
  }
  std::vector<int64_t> seen;
  json before = nullptr;
  for (int page = 0; page < 10; ++page) {
    const std::string q = "/v1/jobs?order=newest&limit=2" + (before.is_null() ? "" : "&before=" + before.dump());
    auto l = Http(*server_, "GET", q, admin_);
    ASSERT_EQ(l.status, 200) << l.text;
    for (const json& j : l.body["jobs"]) seen.push_back(j["id"]);
    before = l.body["next_before"];
    if (before.is_null()) break;
  }
  ASSERT_GE(seen.size(), ids.size());
  EXPECT_TRUE(std::is_sorted(seen.rbegin(), seen.rend())) << json(seen).dump();
  EXPECT_EQ(seen.front(), ids.back());
  // A tenant's own, newest first.
  auto mine = Http(*server_, "GET", "/v1/jobs?order=newest", token_a_);
  ASSERT_EQ(mine.status, 200);
  ASSERT_FALSE(mine.body["jobs"].empty());
  EXPECT_EQ(mine.body["jobs"][0]["id"], ids[3]);
  for (const json& j : mine.body["jobs"]) EXPECT_EQ(j["tenant"], "team-a");
  for (const char* bad : {"/v1/jobs?order=up", "/v1/jobs?order=newest&after=2", "/v1/jobs?before=2",
                          "/v1/jobs?order=newest&before=0"}) {
    auto r = Http(*server_, "GET", bad, admin_);
    EXPECT_EQ(r.status, 400) << bad << ": " << r.text;
  }
}

TEST_F(ServerApiTest, AuthorizationOfEveryEndpoint) {
  struct Case {
    std::string method, path;
    std::optional<json> body;
    bool tenant_allowed;
  };
  const json job{{"name", "auth-probe"}, {"gpus", 0}, {"kind", "cpu"}};
  const std::vector<Case> cases = {
      {"GET", "/v1/tenants", std::nullopt, false},
      {"POST", "/v1/tenants", json{{"name", "auth-t"}}, false},
      {"GET", "/v1/tenants/team-a", std::nullopt, true},  // its own
      {"PUT", "/v1/tenants/team-a/quota", json{{"pool", "h100"}, {"guaranteed_gpus", 8}, {"limit_gpus", 16}}, false},
      {"POST", "/v1/jobs", job, true},
      {"GET", "/v1/jobs", std::nullopt, true},
      {"GET", "/v1/nodes", std::nullopt, false},
      {"POST", "/v1/nodes", json{{"name", "auth-node"}, {"model", "A100-80GB"}, {"gpus", 1}, {"cpu_cores", 8}, {"memory_gib", 32}},
       false},
      {"GET", "/v1/pools", std::nullopt, true},
      {"GET", "/v1/regions", std::nullopt, true},
      {"PUT", "/v1/regions", json{{"policy", "off"}}, false},  // what the configuration has: no region order
      {"GET", "/v1/events", std::nullopt, false},
      {"GET", "/v1/export", std::nullopt, false},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.method + " " + c.path);
    EXPECT_EQ(Http(*server_, c.method, c.path, "", c.body).status, 401);
    EXPECT_EQ(Http(*server_, c.method, c.path, "gpt_0000000000000000000000000000000000000000", c.body).status, 401);
    const int tenant = Http(*server_, c.method, c.path, token_a_, c.body).status;
    if (c.tenant_allowed) {
      EXPECT_LT(tenant, 300);
    } else {
      EXPECT_EQ(tenant, 403);
    }
    const int admin = Http(*server_, c.method, c.path, admin_, c.body).status;
    if (c.method == "POST" && c.path == "/v1/jobs") {
      EXPECT_EQ(admin, 400);  // the admin must name the tenant
    } else {
      EXPECT_LT(admin, 300);
    }
  }
  // A tenant reading another tenant: 404.
  EXPECT_EQ(Http(*server_, "GET", "/v1/tenants/team-b", token_a_).status, 404);
  EXPECT_EQ(Http(*server_, "GET", "/v1/jobs/999999", admin_).status, 404);
}

TEST_F(ServerApiTest, TenantTokensAreStoredOnlyAsHashes) {
  auto t = Http(*server_, "POST", "/v1/tenants", admin_, json{{"name", "hash-check"}});
  ASSERT_EQ(t.status, 201);
  const std::string token = t.body["token"];
  EXPECT_EQ(Http(*server_, "GET", "/v1/tenants/hash-check", token).status, 200);
  for (const auto& entry : std::filesystem::directory_iterator(server_->data_dir())) {
    std::ifstream in(entry.path(), std::ios::binary);
    const std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    EXPECT_EQ(bytes.find(token), std::string::npos) << entry.path();
    EXPECT_EQ(bytes.find(token.substr(4)), std::string::npos) << entry.path();
  }
  EXPECT_EQ(Http(*server_, "POST", "/v1/tenants", admin_, json{{"name", "hash-check"}}).status, 409);
}

TEST_F(ServerApiTest, QuotaChangesShowInTheTenant) {
  auto q = Http(*server_, "PUT", "/v1/tenants/team-b/quota", admin_,
                json{{"pool", "a100"}, {"guaranteed_gpus", 2}, {"limit_gpus", 8}, {"weight", 2}});
  ASSERT_EQ(q.status, 200) << q.text;
  EXPECT_EQ(q.body["quota"]["a100"]["guaranteed_gpus"], 2.0);
  EXPECT_EQ(q.body["quota"]["a100"]["weight"], 2.0);
  auto g = Http(*server_, "GET", "/v1/tenants/team-b", token_b_);
  EXPECT_EQ(g.body["quota"]["a100"]["guaranteed_gpus"], 2.0);
  EXPECT_EQ(Http(*server_, "PUT", "/v1/tenants/nobody/quota", admin_, json{{"pool", "a100"}}).status, 404);
  Http(*server_, "PUT", "/v1/tenants/team-b/quota", admin_,
       json{{"pool", "a100"}, {"guaranteed_gpus", 4}, {"limit_gpus", 8}});
}

TEST_F(ServerApiTest, NodesPoolsAndEvents) {
  auto n = Http(*server_, "POST", "/v1/nodes", admin_,
                json{{"name", "h100-extra"}, {"model", "H100"}, {"gpus", 4}, {"cpu_cores", 48}, {"memory_gib", 512},
                     {"class", "nvlink"}, {"rack", "r9"}});
  ASSERT_EQ(n.status, 201) << n.text;
  EXPECT_EQ(n.body["pool"], "h100");
  EXPECT_EQ(n.body["gpu"].size(), 4u);
  EXPECT_EQ(Http(*server_, "POST", "/v1/nodes", admin_,
                 json{{"name", "h100-extra"}, {"model", "H100"}, {"gpus", 4}, {"cpu_cores", 48}, {"memory_gib", 512}})
                .status,
            409);
  auto nodes = Http(*server_, "GET", "/v1/nodes", admin_);
  ASSERT_EQ(nodes.status, 200);
  EXPECT_GE(nodes.body["nodes"].size(), 5u);
  auto pools = Http(*server_, "GET", "/v1/pools", token_a_);
  ASSERT_EQ(pools.status, 200);
  ASSERT_EQ(pools.body["pools"].size(), 2u);
  EXPECT_EQ(pools.body["pools"][0]["name"], "h100");
  EXPECT_EQ(pools.body["pools"][0]["capacity"]["total_gpus"], 20.0);
  EXPECT_EQ(pools.body["pools"][0]["nodes"], 3);
  // The event stream, paged.
  auto e1 = Http(*server_, "GET", "/v1/events?since=0&limit=3", admin_);
  ASSERT_EQ(e1.status, 200);
  ASSERT_EQ(e1.body["events"].size(), 3u);
  EXPECT_EQ(e1.body["events"][0]["seq"], 1);
  EXPECT_EQ(e1.body["next_since"], 3);
  auto e2 = Http(*server_, "GET", "/v1/events?since=3&limit=2", admin_);
  EXPECT_EQ(e2.body["events"][0]["seq"], 4);
  EXPECT_EQ(Http(*server_, "GET", "/v1/events?since=-1", admin_).status, 400);
  EXPECT_EQ(Http(*server_, "GET", "/v1/events?limit=100000", admin_).status, 400);
}

// Every field of every request body: a clear 400 naming the field, and
// nothing journaled.
TEST_F(ServerApiTest, BadInputNamesTheFieldAndJournalsNothing) {
  struct Case {
    std::string method, path;
    json body;
    std::string field;
  };
  auto job = [](json extra) {
    json j{{"name", "bad"}};
    for (auto& [k, v] : extra.items()) j[k] = v;
    return j;
  };
  const std::vector<Case> cases = {
      {"POST", "/v1/jobs", json{{"gpus", 1}}, "name"},
      {"POST", "/v1/jobs", job({{"name", 7}}), "name"},
      {"POST", "/v1/jobs", job({{"name", ""}}), "name"},
      {"POST", "/v1/jobs", job({{"name", std::string(300, 'x')}}), "name"},
      {"POST", "/v1/jobs", job({{"tenant", 5}}), "tenant"},
      {"POST", "/v1/jobs", job({{"tenant", "team-b"}}), "tenant"},
      {"POST", "/v1/jobs", job({{"kind", "serving"}}), "kind"},
      {"POST", "/v1/jobs", job({{"priority", "urgent"}}), "priority"},
      {"POST", "/v1/jobs", job({{"priority", 1e9}}), "priority"},
      {"POST", "/v1/jobs", job({{"priority", true}}), "priority"},
      {"POST", "/v1/jobs", job({{"replicas", 0}}), "replicas"},
      {"POST", "/v1/jobs", job({{"replicas", 100000}}), "replicas"},
      {"POST", "/v1/jobs", job({{"replicas", 1.5}}), "replicas"},
      {"POST", "/v1/jobs", job({{"gpus", -1}}), "gpus"},
      {"POST", "/v1/jobs", job({{"gpus", 17}}), "gpus"},
      {"POST", "/v1/jobs", job({{"gpus", "2"}}), "gpus"},
      {"POST", "/v1/jobs", job({{"gpu_fraction", 0}}), "gpu_fraction"},
      {"POST", "/v1/jobs", job({{"gpu_fraction", 1.5}}), "gpu_fraction"},
      {"POST", "/v1/jobs", job({{"gpu_fraction", "half"}}), "gpu_fraction"},
      {"POST", "/v1/jobs", job({{"gpus", 1}, {"gpu_fraction", 0.5}}), "gpu_fraction"},
      {"POST", "/v1/jobs", job({{"gpu_memory_gib", -1}, {"gpu_fraction", 0.5}}), "gpu_memory_gib"},
      {"POST", "/v1/jobs", job({{"gpu_memory_gib", 10}, {"gpus", 2}}), "gpu_memory_gib"},
      {"POST", "/v1/jobs", job({{"gpu_memory_gib", 1e12}, {"gpu_fraction", 0.5}}), "gpu_memory_gib"},
      {"POST", "/v1/jobs", job({{"sharing", "vgpu"}}), "sharing"},
      {"POST", "/v1/jobs", job({{"sharing", "mig"}, {"gpus", 2}}), "sharing"},
      {"POST", "/v1/jobs", job({{"cpu_cores", -1}}), "cpu_cores"},
      {"POST", "/v1/jobs", job({{"cpu_cores", "four"}}), "cpu_cores"},
      {"POST", "/v1/jobs", job({{"cpu_cores", 1e300}}), "cpu_cores"},
      {"POST", "/v1/jobs", job({{"memory_gib", -5}}), "memory_gib"},
      {"POST", "/v1/jobs", job({{"gpu_models", "H100"}}), "gpu_models"},
      {"POST", "/v1/jobs", job({{"gpu_models", {"H1000"}}}), "gpu_models[0]"},
      {"POST", "/v1/jobs", job({{"gpu_models", {1}}}), "gpu_models[0]"},
      {"POST", "/v1/jobs", job({{"pools", {"h100", "nope"}}}), "pools[1]"},
      {"POST", "/v1/jobs", job({{"pools", {"h100", "h100"}}}), "pools[1]"},
      {"POST", "/v1/jobs", job({{"requirement", "infiniband"}}), "requirement"},
      {"POST", "/v1/jobs", job({{"checkpointable", "yes"}}), "checkpointable"},
      {"POST", "/v1/jobs", job({{"checkpointable", true}, {"checkpoint_interval", "soon"}}), "checkpoint_interval"},
      {"POST", "/v1/jobs", job({{"checkpoint_interval", "10m"}}), "checkpoint_interval"},
      {"POST", "/v1/jobs", job({{"checkpointable", true}, {"checkpoint_duration", 30}}), "checkpoint_duration"},
      {"POST", "/v1/jobs", job({{"deadline", "tomorrow"}}), "deadline"},
      {"POST", "/v1/jobs", job({{"deadline", 12345}}), "deadline"},
      {"POST", "/v1/jobs", job({{"deadline", "2030-02-30T00:00:00Z"}}), "deadline"},
      {"POST", "/v1/jobs", job({{"deadline", "2030-01-01T00:00:00Z"}, {"deadline_after", "1h"}}), "deadline_after"},
      {"POST", "/v1/jobs", job({{"deadline_after", "0s"}}), "deadline_after"},
      {"POST", "/v1/jobs", job({{"expected_duration", "1 hour"}}), "expected_duration"},
      {"POST", "/v1/jobs", job({{"stages", "all"}}), "stages"},
      {"POST", "/v1/jobs", job({{"stages", json::array()}}), "stages"},
      {"POST", "/v1/jobs", job({{"stages", {{{"gpu_fraction", 0.5}}}}, {"gpus", 1}}), "gpus"},
      {"POST", "/v1/jobs", job({{"stages", {{{"gpu_fraction", 0.5}, {"colour", "red"}}}}}), "stages[0].colour"},
      {"POST", "/v1/jobs", job({{"stages", {{{"gpu_fraction", 0.5}, {"sharing", "auto"}}}}}), "stages[0].sharing"},
      {"POST", "/v1/jobs", job({{"stages", {{{"gpus", 0}}}}}), "stages[0].gpus"},
      {"POST", "/v1/jobs", job({{"foo", 1}}), "foo"},
      {"POST", "/v1/jobs", json::array({1, 2}), "body"},  // not an object
      {"POST", "/v1/tenants", json{{"quota", json::object()}}, "name"},
      {"POST", "/v1/tenants", json{{"name", "Bad_Name"}}, "name"},
      {"POST", "/v1/tenants", json{{"name", 3}}, "name"},
      {"POST", "/v1/tenants", json{{"name", "ok-name"}, {"extra", 1}}, "extra"},
      {"POST", "/v1/tenants", json{{"name", "ok-name"}, {"quota", 5}}, "quota"},
      {"POST", "/v1/tenants", json{{"name", "ok-name"}, {"quota", {{"nope", json::object()}}}}, "quota.nope"},
      {"POST", "/v1/tenants", json{{"name", "ok-name"}, {"quota", {{"h100", {{"guaranteed_gpus", -1}}}}}},
       "quota.h100.guaranteed_gpus"},
      {"POST", "/v1/tenants",
       json{{"name", "ok-name"}, {"quota", {{"h100", {{"guaranteed_gpus", 4}, {"limit_gpus", 2}}}}}},
       "quota.h100.limit_gpus"},
      {"POST", "/v1/tenants", json{{"name", "ok-name"}, {"quota", {{"h100", {{"weight", 0}}}}}}, "quota.h100.weight"},
      {"POST", "/v1/tenants", json{{"name", "ok-name"}, {"quota", {{"h100", {{"reserved", "no"}}}}}},
       "quota.h100.reserved"},
      {"POST", "/v1/tenants", json{{"name", "ok-name"}, {"quota", {{"h100", {{"gpus", 1}}}}}}, "quota.h100.gpus"},
      // More guarantee than the pool has GPUs: refused before the tenant exists.
      {"POST", "/v1/tenants", json{{"name", "ok-name"}, {"quota", {{"h100", {{"guaranteed_gpus", 1000}}}}}}, "quota.h100"},
      {"PUT", "/v1/tenants/team-a/quota", json{{"pool", "h100"}, {"guaranteed_gpus", 1000}}, "guaranteed_gpus"},
      {"PUT", "/v1/tenants/team-a/quota", json{{"guaranteed_gpus", 1}}, "pool"},
      {"PUT", "/v1/tenants/team-a/quota", json{{"pool", "nope"}}, "pool"},
      {"PUT", "/v1/tenants/team-a/quota", json{{"pool", "h100"}, {"guaranteed_gpus", "8"}}, "guaranteed_gpus"},
      {"PUT", "/v1/tenants/team-a/quota", json{{"pool", "h100"}, {"limit_gpus", -2}}, "limit_gpus"},
      {"PUT", "/v1/tenants/team-a/quota", json{{"pool", "h100"}, {"weight", -1}}, "weight"},
      {"PUT", "/v1/tenants/team-a/quota", json{{"pool", "h100"}, {"reserved", 1}}, "reserved"},
      {"PUT", "/v1/tenants/team-a/quota", json{{"pool", "h100"}, {"x", 1}}, "x"},
      {"POST", "/v1/nodes", json{{"cpu_cores", 8}, {"memory_gib", 8}}, "name"},
      {"POST", "/v1/nodes", json{{"name", "n"}, {"memory_gib", 8}}, "cpu_cores"},
      {"POST", "/v1/nodes", json{{"name", "n"}, {"cpu_cores", 0}, {"memory_gib", 8}}, "cpu_cores"},
      {"POST", "/v1/nodes", json{{"name", "n"}, {"cpu_cores", 8}}, "memory_gib"},
      {"POST", "/v1/nodes", json{{"name", "n"}, {"cpu_cores", 8}, {"memory_gib", 8}, {"gpus", 4}}, "model"},
      {"POST", "/v1/nodes", json{{"name", "n"}, {"cpu_cores", 8}, {"memory_gib", 8}, {"gpus", 4}, {"model", "X1"}}, "model"},
      {"POST", "/v1/nodes", json{{"name", "n"}, {"cpu_cores", 8}, {"memory_gib", 8}, {"gpus", 99}, {"model", "H100"}}, "gpus"},
      {"POST", "/v1/nodes", json{{"name", "n"}, {"cpu_cores", 8}, {"memory_gib", 8}, {"model", "H100"}}, "gpus"},
      {"POST", "/v1/nodes", json{{"name", "n"}, {"cpu_cores", 8}, {"memory_gib", 8}, {"class", "nope"}}, "class"},
      {"POST", "/v1/nodes", json{{"name", "n"}, {"cpu_cores", 8}, {"memory_gib", 8}, {"rack", 1}}, "rack"},
      {"POST", "/v1/nodes", json{{"name", "n"}, {"cpu_cores", 8}, {"memory_gib", 8}, {"zone", 1}}, "zone"},
      {"POST", "/v1/nodes", json{{"name", "n"}, {"cpu_cores", 8}, {"memory_gib", 8}, {"region", 1}}, "region"},
      {"POST", "/v1/nodes", json{{"name", "n"}, {"cpu_cores", 8}, {"memory_gib", 8}, {"ip", "x"}}, "ip"},
  };
  const int64_t before = LastSeq();
  for (const Case& c : cases) {
    SCOPED_TRACE(c.method + " " + c.path + " " + c.body.dump());
    const std::string& token = c.path == "/v1/jobs" ? token_a_ : admin_;
    auto r = Http(*server_, c.method, c.path, token, c.body);
    EXPECT_EQ(r.status, 400) << r.text;
    EXPECT_EQ(r.body["error"]["code"], "invalid_argument") << r.text;
    EXPECT_EQ(r.body["error"].value("field", ""), c.field) << r.text;
    EXPECT_FALSE(r.body["error"]["message"].get<std::string>().empty());
  }
  // Malformed JSON and oversized bodies.
  auto m = HttpRaw(*server_, "POST", "/v1/jobs", token_a_, "{\"name\": \"x\",");
  EXPECT_EQ(m.status, 400);
  EXPECT_EQ(m.body["error"]["field"], "body");
  auto big = HttpRaw(*server_, "POST", "/v1/jobs", token_a_, "{\"name\": \"" + std::string(70000, 'x') + "\"}");
  EXPECT_EQ(big.status, 400);
  EXPECT_EQ(big.body["error"]["field"], "body");
  EXPECT_EQ(Http(*server_, "GET", "/v1/jobs?limit=0", token_a_).body["error"]["field"], "limit");
  EXPECT_EQ(Http(*server_, "GET", "/v1/jobs?state=done", token_a_).body["error"]["field"], "state");
  EXPECT_EQ(Http(*server_, "GET", "/v1/nope", token_a_).status, 404);
  // Nothing was journaled (the tick's control loops may not emit either:
  // nothing is idle, lent or failing here).
  EXPECT_EQ(LastSeq(), before);
}

TEST(ServerRestartTest, AcknowledgedWorkSurvivesSigtermAndSigkill) {
  const std::string root = MakeTempDir();
  ServerProcess server(root + "/data", {"--config", WriteConfig(root)});
  ASSERT_TRUE(server.Start()) << server.log();
  const std::string admin = server.admin_token();
  auto t = Http(server, "POST", "/v1/tenants", admin,
                json{{"name", "team-a"}, {"quota", {{"h100", {{"guaranteed_gpus", 8}, {"limit_gpus", 16}}}}}});
  ASSERT_EQ(t.status, 201);
  const std::string token = t.body["token"];
  std::vector<int64_t> ids;
  for (int i = 0; i < 5; ++i) {
    auto s = Http(server, "POST", "/v1/jobs", token, json{{"name", "j" + std::to_string(i)}, {"gpus", 4}});
    ASSERT_EQ(s.status, 201);
    ids.push_back(s.body["id"]);
  }
  EXPECT_EQ(server.Stop(), 0);
  ASSERT_TRUE(server.Start()) << server.log();
  EXPECT_EQ(Http(server, "GET", "/v1/tenants/team-a", token).status, 200);  // the token survives
  for (int64_t id : ids) EXPECT_EQ(Http(server, "GET", "/v1/jobs/" + std::to_string(id), token).status, 200);
  auto more = Http(server, "POST", "/v1/jobs", token, json{{"name", "after-restart"}, {"gpus", 1}});
  ASSERT_EQ(more.status, 201);
  EXPECT_GT(more.body["id"].get<int64_t>(), ids.back());
  server.Kill();
  ASSERT_TRUE(server.Start()) << server.log();
  EXPECT_EQ(Http(server, "GET", "/v1/jobs/" + more.body["id"].dump(), token).body["name"], "after-restart");
  auto list = Http(server, "GET", "/v1/jobs?limit=1000", admin);
  EXPECT_EQ(list.body["jobs"].size(), 6u);
  server.Stop();
  std::filesystem::remove_all(root);
}

TEST(ServerStartTest, BadFlagsAndConfigAreClearErrors) {
  const std::string root = MakeTempDir();
  auto r = RunGpupool({"server", "--data", root + "/d", "--listen", "nonsense"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("--listen"), std::string::npos) << r.err;
  std::ofstream(root + "/bad.yaml") << "name: x\npools:\n  - name: p\n    models: [Z80]\n";
  r = RunGpupool({"server", "--data", root + "/d", "--config", root + "/bad.yaml"});
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.err.find("bad.yaml:4"), std::string::npos) << r.err;
  std::ofstream(root + "/w.yaml") << "name: x\npools:\n  - name: p\nworkload: []\n";
  r = RunGpupool({"server", "--data", root + "/d", "--config", root + "/w.yaml"});
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.err.find("workload"), std::string::npos) << r.err;
  std::filesystem::remove_all(root);
}

TEST(ServerStartTest, ConfigurationThatWouldChangeStoredMeaningsIsRefused) {
  const std::string root = MakeTempDir();
  const std::string config = WriteConfig(root);
  {
    ServerProcess server(root + "/data", {"--config", config});
    ASSERT_TRUE(server.Start()) << server.log();
    EXPECT_EQ(server.Stop(), 0);
  }
  // Requirements renamed: events name them by position.
  std::string text = kConfig;
  text.replace(text.find("- name: nvlink\n    min"), 14, "- name: infiniband");
  std::ofstream(root + "/renamed.yaml") << text;
  auto r = RunGpupool({"server", "--data", root + "/data", "--listen", "127.0.0.1:0", "--config", root + "/renamed.yaml"});
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.err.find("cannot change once the server has state"), std::string::npos) << r.err;
  // Pools changed.
  text = kConfig;
  text.replace(text.find("- name: a100"), 12, "- name: b200");
  std::ofstream(root + "/pools.yaml") << text;
  r = RunGpupool({"server", "--data", root + "/data", "--listen", "127.0.0.1:0", "--config", root + "/pools.yaml"});
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.err.find("pools cannot change"), std::string::npos) << r.err;
  // Simulation-only sections are refused.
  std::ofstream(root + "/faults.yaml") << "name: x\nengine: {heartbeat_timeout: 30s}\npools:\n  - name: p\n"
                                         "faults:\n  - {node: n, at: 1h}\n";
  r = RunGpupool({"server", "--data", root + "/other", "--listen", "127.0.0.1:0", "--config", root + "/faults.yaml"});
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.err.find("faults"), std::string::npos) << r.err;
  // The original configuration still works.
  ServerProcess again(root + "/data", {"--config", config});
  EXPECT_TRUE(again.Start()) << again.log();
  again.Stop();
  std::filesystem::remove_all(root);
}

}  // namespace
}  // namespace gpupool::testing
