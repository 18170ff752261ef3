// Issue 19's time series on the real `gpupool server`: the newest point of
// each pool's series equals GET /v1/pools and /v1/nodes at the same moment
// (a quiescent pool: no agent, jobs placed and staying), a tenant's token
// sees only its own tenant's series and no GPU series, and bad parameters
// are 400s naming their field.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <thread>

#include "tests/run_binary.h"
#include "tests/server_process.h"

namespace gpupool::testing {
namespace {

using nlohmann::json;

constexpr const char* kConfig = R"(name: series
engine: {heartbeat_timeout: 0s}
pools:
  - name: a100
    models: [A100-80GB]
  - name: h100
    models: [H100]
cluster:
  nodes:
    - {count: 2, model: A100-80GB, gpus: 8, cpu_cores: 64, memory_gib: 512}
    - {count: 1, model: H100, gpus: 4, cpu_cores: 64, memory_gib: 512}
server:
  tick: 200ms
)";

class ServerTimeSeriesTest : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = MakeTempDir();
    const std::string config = root_ + "/config.yaml";
    std::ofstream(config) << kConfig;
    server_ = std::make_unique<ServerProcess>(root_ + "/data", std::vector<std::string>{"--config", config});
    ASSERT_TRUE(server_->Start()) << server_->log();
    admin_ = server_->admin_token();
    for (auto [name, token] : {std::pair{"team-a", &token_a_}, {"team-b", &token_b_}}) {
      auto t = Http(*server_, "POST", "/v1/tenants", admin_,
                    json{{"name", name}, {"quota", {{"a100", {{"guaranteed_gpus", 4}, {"limit_gpus", 4}}}}}});
      ASSERT_EQ(t.status, 201) << t.text;
      *token = t.body["token"];
    }
    // team-a: 3 GPUs running, and a job of 2 that waits on its limit of 4.
    for (auto [token, gpus] : {std::pair{&token_a_, 3}, {&token_a_, 2}, {&token_b_, 1}}) {
      auto s = Http(*server_, "POST", "/v1/jobs", *token, json{{"name", "w"}, {"kind", "training"}, {"gpus", gpus}});
      ASSERT_EQ(s.status, 201) << s.text;
    }
    for (int i = 0; i < 100; ++i) {
      // Running, and in the capacity of the engine summary that follows them.
      auto running = Http(*server_, "GET", "/v1/jobs?state=running", admin_);
      auto pools = Http(*server_, "GET", "/v1/pools", admin_);
      if (running.body["jobs"].size() == 2 && pools.body["pools"][0]["capacity"]["allocated_gpus"] == 4.0) return;
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    FAIL() << "the jobs did not start";
  }
  void TearDown() override {
    server_.reset();
    std::filesystem::remove_all(root_);
  }

  std::unique_ptr<ServerProcess> server_;
  std::string root_, admin_, token_a_, token_b_;
};

TEST_F(ServerTimeSeriesTest, TheNewestPointEqualsThePoolsAndNodesOfTheSameMoment) {
  const auto pools = Http(*server_, "GET", "/v1/pools", admin_);
  const auto nodes = Http(*server_, "GET", "/v1/nodes", admin_);
  const auto series = Http(*server_, "GET", "/v1/timeseries/pools?minutes=5", admin_);
  ASSERT_EQ(series.status, 200) << series.text;
  // Quiescent: the pools read the same after the series as before.
  ASSERT_EQ(Http(*server_, "GET", "/v1/pools", admin_).body, pools.body);
  EXPECT_EQ(series.body["points"], 5);
  EXPECT_EQ(series.body["step_s"], 60);
  ASSERT_EQ(series.body["series"].size(), pools.body["pools"].size());
  for (size_t i = 0; i < pools.body["pools"].size(); ++i) {
    const json& p = pools.body["pools"][i];
    const json& s = series.body["series"][i];
    ASSERT_EQ(s["pool"], p["name"]);
    ASSERT_EQ(s["total_gpus"].size(), 5u);
    for (const char* f : {"total_gpus", "allocated_gpus", "reserved_gpus"}) {
      EXPECT_EQ(s[f].back(), p["capacity"][f]) << p["name"] << " " << f;
    }
    EXPECT_EQ(s["nodes"].back(), p["nodes"]);
    int node_count = 0;
    double node_gpus = 0;
    for (const json& n : nodes.body["nodes"]) {
      if (n["pool"] != p["name"]) continue;
      ++node_count;
      node_gpus += n["gpus"].get<double>();
    }
    EXPECT_EQ(s["nodes"].back(), node_count);
    EXPECT_EQ(s["total_gpus"].back(), node_gpus);
    // No agent reports utilization: what is allocated is idle.
    EXPECT_EQ(s["busy_gpus"].back(), 0.0);
    EXPECT_EQ(s["idle_gpus"].back(), p["capacity"]["allocated_gpus"]);
  }
  const json& a100 = series.body["series"][0];
  EXPECT_EQ(a100["allocated_gpus"].back(), 4.0);
  EXPECT_EQ(a100["queued_jobs"].back(), 1);
  const auto tenants = Http(*server_, "GET", "/v1/timeseries/tenants?pool=a100&minutes=1", admin_);
  ASSERT_EQ(tenants.status, 200) << tenants.text;
  ASSERT_EQ(tenants.body["series"].size(), 2u);
  EXPECT_EQ(tenants.body["series"][0]["tenant"], "team-a");
  EXPECT_EQ(tenants.body["series"][0]["used_gpus"][0], 3.0);
  EXPECT_EQ(tenants.body["series"][0]["queued_jobs"][0], 1);
  const auto usage = Http(*server_, "GET", "/v1/tenants/team-b", admin_);
  EXPECT_EQ(tenants.body["series"][1]["used_gpus"][0], usage.body["usage"]["a100"]["used_gpus"]);
}

TEST_F(ServerTimeSeriesTest, ATenantSeesOnlyItsOwnSeries) {
  const auto own = Http(*server_, "GET", "/v1/timeseries/tenants", token_b_);
  ASSERT_EQ(own.status, 200) << own.text;
  ASSERT_EQ(own.body["series"].size(), 1u);
  EXPECT_EQ(own.body["series"][0]["tenant"], "team-b");
  EXPECT_EQ(own.body["points"], 1440);
  const auto other = Http(*server_, "GET", "/v1/timeseries/tenants?tenant=team-a", token_b_);
  EXPECT_EQ(other.status, 403) << other.text;
  EXPECT_EQ(other.body["error"]["field"], "tenant");
  EXPECT_EQ(other.text.find("team-a\",\"used"), std::string::npos);
  const auto pools = Http(*server_, "GET", "/v1/timeseries/pools", token_b_);
  ASSERT_EQ(pools.status, 200) << pools.text;
  EXPECT_TRUE(pools.body["series"][0].contains("allocated_gpus"));
  EXPECT_FALSE(pools.body["series"][0].contains("queued_jobs"));
  EXPECT_FALSE(pools.body["series"][0].contains("busy_gpus"));
  const std::string node = Http(*server_, "GET", "/v1/nodes", admin_).body["nodes"][0]["name"];
  EXPECT_EQ(Http(*server_, "GET", "/v1/timeseries/gpus?node=" + node, token_b_).status, 403);
  EXPECT_EQ(Http(*server_, "GET", "/v1/timeseries/gpus?node=" + node, admin_).status, 200);
  EXPECT_EQ(Http(*server_, "GET", "/v1/timeseries/pools", "").status, 401);
}

TEST_F(ServerTimeSeriesTest, BadParametersAre400sNamingTheField) {
  const std::pair<const char*, const char*> cases[] = {
      {"/v1/timeseries/pools?minutes=0", "minutes"},       {"/v1/timeseries/pools?minutes=1441", "minutes"},
      {"/v1/timeseries/pools?minutes=x", "minutes"},       {"/v1/timeseries/pools?pool=nope", "pool"},
      {"/v1/timeseries/tenants?tenant=nope", "tenant"},    {"/v1/timeseries/tenants?pool=nope", "pool"},
      {"/v1/timeseries/gpus", "node"},                     {"/v1/timeseries/gpus?node=nope", "node"},
      {"/v1/timeseries/gpus?node=x&minutes=61", "minutes"},
  };
  for (auto [path, field] : cases) {
    const auto r = Http(*server_, "GET", path, admin_);
    EXPECT_EQ(r.status, 400) << path << ": " << r.text;
    EXPECT_EQ(r.body["error"]["field"], field) << path << ": " << r.text;
  }
}

}  // namespace
}  // namespace gpupool::testing
