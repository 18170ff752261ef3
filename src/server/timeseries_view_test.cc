// The time series as the server records them (ServerCore::RecordSeries,
// Observe) and answers them (SeriesAnswer), on a core in this process with
// a stepped clock: values against GET /v1/pools's view of the same moment,
// busy and idle from heartbeats, queue lengths, a removed node's GPUs
// dropped, who sees what, and bad parameters.
#include "src/server/timeseries_view.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <shared_mutex>

#include "src/server/testing/test_server.h"
#include "src/server/views.h"
#include "tests/run_binary.h"

namespace gpupool {
namespace {

using namespace std::chrono_literals;
using nlohmann::json;

// Two nodes of 4 GPUs; a: 2 GPUs guaranteed; b: up to 2 GPUs.
constexpr const char* kConfig = R"(name: series
engine:
  heartbeat_timeout: 0s
  reclaim: {idle_below_pct: 50}
pools:
  - name: gpu
cluster:
  nodes:
    - {count: 2, model: H100, gpus: 4, cpu_cores: 32, memory_gib: 256}
server:
  tick: 1s
)";

JobSpec Gpus(int32_t n) {
  JobSpec s;
  s.name = "work";
  s.demand = Demand{1000, 1024, n, kMilliPerGpu};
  return s;
}

class TimeSeriesViewTest : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = testing::MakeTempDir();
    server_ = std::make_unique<TestServer>(env_, ServerOptions{.data_dir = root_ + "/data", .config_text = kConfig});
    ASSERT_TRUE(server_->Start().has_value());
    for (auto [t, g] : {std::pair{"a", 2000}, {"b", 0}}) {
      CreateTenantCmd tenant{t, MintToken(t, "initial", kRoleTenant).record, {{"gpu", Quota{g, 2000}}}};
      ASSERT_FALSE(server_->Call(tenant).error.has_value());
    }
    for (auto [t, n] : {std::pair{"a", 2}, {"b", 2}, {"b", 2}}) {  // b's second waits on its limit
      ASSERT_FALSE(server_->Call(SubmitJobCmd{t, Gpus(n)}).error.has_value());
    }
    ASSERT_TRUE(server_->Advance(2s, 1s));
  }
  void TearDown() override {
    server_.reset();
    std::filesystem::remove_all(root_);
  }
  ServerCore& core() { return server_->core(); }
  // Utilization `busy_pct` on the GPUs that a's job (id 1) holds, 0 elsewhere.
  void HeartbeatAll(double busy_pct) {
    const ReadModel& m = core().read_model();
    std::shared_lock lock(m.mu());
    for (size_t n = 0; n < m.nodes().size(); ++n) {
      std::vector<GpuSample> gpus;
      for (int g = 0; g < m.nodes()[n].spec.gpu_count; ++g) {
        GpuSample s{.index = g, .memory_used_mib = 100 * g, .memory_total_mib = 81920, .temperature_c = 40 + g};
        for (const PlacedReplica& r : m.job(1)->placements) {
          if (r.node == static_cast<NodeIndex>(n) && (r.gpus >> g & 1)) s.util_pct = busy_pct;
        }
        gpus.push_back(s);
      }
      core().agent_status().Heartbeat(m.nodes()[n].spec.name, gpus, ToMillis(env_.Now()));
    }
  }
  bool Answer(SeriesScope scope, const SeriesParams& q, const std::string& tenant, json* out, ApiError* err) {
    core().RecordSeries(true);
    const ReadModel& m = core().read_model();
    std::shared_lock lock(m.mu());
    return SeriesAnswer(scope, q, tenant, m, core().timeseries(), env_.Now(), out, err);
  }
  json Ok(SeriesScope scope, const SeriesParams& q, const std::string& tenant = "") {
    json out;
    ApiError err;
    EXPECT_TRUE(Answer(scope, q, tenant, &out, &err)) << err.message;
    return out;
  }
  ApiError Bad(SeriesScope scope, const SeriesParams& q, const std::string& tenant = "") {
    json out;
    ApiError err;
    EXPECT_FALSE(Answer(scope, q, tenant, &out, &err)) << out.dump();
    return err;
  }

  std::string root_;
  TestEnv env_;
  std::unique_ptr<TestServer> server_;
};

TEST_F(TimeSeriesViewTest, TheNewestPointIsWhatThePoolViewShows) {
  HeartbeatAll(90);
  ASSERT_TRUE(server_->Advance(1s, 1s));  // heartbeats show from the next summary (a tick) on
  const json s = Ok(SeriesScope::kPools, {.minutes = "3"});
  ASSERT_EQ(s["points"], 3);
  ASSERT_EQ(s["step_s"], 60);
  ASSERT_EQ(s["series"].size(), 1u);
  const json& p = s["series"][0];
  json view;
  {
    std::shared_lock lock(core().read_model().mu());
    view = PoolView(0, core().read_model());
  }
  EXPECT_EQ(p["pool"], "gpu");
  EXPECT_EQ(p["total_gpus"].back(), view["capacity"]["total_gpus"]);
  EXPECT_EQ(p["allocated_gpus"].back(), view["capacity"]["allocated_gpus"]);
  EXPECT_EQ(p["reserved_gpus"].back(), view["capacity"]["reserved_gpus"]);
  EXPECT_EQ(p["nodes"].back(), view["nodes"]);
  EXPECT_EQ(p["total_gpus"].back(), 8.0);
  EXPECT_EQ(p["allocated_gpus"].back(), 4.0);
  EXPECT_EQ(p["busy_gpus"].back(), 2.0);  // a's GPUs at 90 % (>= idle_below_pct 50)
  EXPECT_EQ(p["idle_gpus"].back(), 2.0);  // b's, at 0 %
  EXPECT_EQ(p["queued_jobs"].back(), 1);
  EXPECT_TRUE(p["total_gpus"][0].is_null());  // before the server started
  // Below the threshold, a's GPUs are idle too.
  HeartbeatAll(10);
  ASSERT_TRUE(server_->Advance(1s, 1s));
  const json later = Ok(SeriesScope::kPools, {.minutes = "1"});
  EXPECT_EQ(later["series"][0]["busy_gpus"].back(), 0.0);
  EXPECT_EQ(later["series"][0]["idle_gpus"].back(), 4.0);
}

TEST_F(TimeSeriesViewTest, MinutesOfServerTimeMakePointsAndTenantsSeeTheirOwn) {
  ASSERT_TRUE(server_->Advance(3min, 1s));
  const json t = Ok(SeriesScope::kTenants, {.minutes = "4"});
  ASSERT_EQ(t["series"].size(), 2u);
  EXPECT_EQ(t["series"][0]["tenant"], "a");
  EXPECT_EQ(t["series"][1]["tenant"], "b");
  for (int i = 0; i < 4; ++i) {
    EXPECT_EQ(t["series"][0]["used_gpus"][i], 2.0) << i;
    EXPECT_EQ(t["series"][1]["used_gpus"][i], 2.0) << i;
    EXPECT_EQ(t["series"][1]["queued_jobs"][i], 1) << i;
  }
  // A tenant: its own series only, the pools without busy, idle and queue.
  const json own = Ok(SeriesScope::kTenants, {}, "b");
  ASSERT_EQ(own["series"].size(), 1u);
  EXPECT_EQ(own["series"][0]["tenant"], "b");
  EXPECT_EQ(own["points"], kSeriesMinutes);
  const json pools = Ok(SeriesScope::kPools, {}, "b");
  EXPECT_TRUE(pools["series"][0].contains("allocated_gpus"));
  EXPECT_FALSE(pools["series"][0].contains("busy_gpus"));
  EXPECT_FALSE(pools["series"][0].contains("queued_jobs"));
  const ApiError e = Bad(SeriesScope::kTenants, {.tenant = "a"}, "b");
  EXPECT_EQ(e.http_status, 403);
  EXPECT_EQ(e.field, "tenant");
}

TEST_F(TimeSeriesViewTest, ARemovedNodesGpusAreDropped) {
  HeartbeatAll(90);
  ASSERT_TRUE(server_->Advance(1s, 1s));
  std::string idle_node;
  {
    const ReadModel& m = core().read_model();
    std::shared_lock lock(m.mu());
    const NodeIndex busy = m.job(1)->placements[0].node;
    for (const NodeRecord& n : m.nodes()) {
      if (n.spec.name != m.nodes()[busy].spec.name && idle_node.empty()) idle_node = n.spec.name;
    }
  }
  const json before = Ok(SeriesScope::kGpus, {.node = idle_node});
  ASSERT_EQ(before["series"].size(), 4u);
  EXPECT_EQ(before["points"], kGpuMinutes);
  EXPECT_EQ(before["series"][3]["temperature_c"].back(), 43);
  EXPECT_EQ(before["series"][3]["memory_used_mib"].back(), 300);
  NodeOpCmd remove{.op = NodeOpCmd::Op::kRemove, .node = idle_node, .force = true};
  ASSERT_FALSE(server_->Call(remove).error.has_value());
  ASSERT_TRUE(server_->Advance(2s, 1s));
  EXPECT_EQ(Ok(SeriesScope::kGpus, {.node = idle_node})["series"].size(), 0u);
}

TEST_F(TimeSeriesViewTest, BadParametersNameTheirField) {
  struct Case {
    SeriesScope scope;
    SeriesParams q;
    const char* field;
  };
  const Case cases[] = {
      {SeriesScope::kPools, {.minutes = "0"}, "minutes"},
      {SeriesScope::kPools, {.minutes = "1441"}, "minutes"},
      {SeriesScope::kPools, {.minutes = "ten"}, "minutes"},
      {SeriesScope::kPools, {.minutes = "-5"}, "minutes"},
      {SeriesScope::kPools, {.minutes = "99999999999999"}, "minutes"},
      {SeriesScope::kGpus, {.node = "x", .minutes = "61"}, "minutes"},
      {SeriesScope::kPools, {.pool = "nope"}, "pool"},
      {SeriesScope::kTenants, {.tenant = "nope"}, "tenant"},
      {SeriesScope::kGpus, {}, "node"},
      {SeriesScope::kGpus, {.node = "nope"}, "node"},
  };
  for (const Case& c : cases) {
    const ApiError e = Bad(c.scope, c.q);
    EXPECT_EQ(e.http_status, 400) << c.field;
    EXPECT_EQ(e.field, c.field) << e.message;
  }
}

}  // namespace
}  // namespace gpupool
