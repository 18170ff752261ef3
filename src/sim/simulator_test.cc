// The simulator around the Engine: determinism, invariants under random
// workloads, and the accounting of a run.
#include "src/sim/simulator.h"

#include <gtest/gtest.h>

#include "src/sim/scenario_runner.h"

namespace gpupool {
namespace {

using namespace std::chrono_literals;

// Two teams on one A100 pool: training gangs (checkpointable, some high
// priority) and inference shares, with lognormal run times.
Scenario TwoTeams(uint64_t seed, double rate_per_hour = 20) {
  Scenario s;
  s.name = "two-teams";
  s.seed = seed;
  s.horizon = 12h;
  s.engine.policy = "best";
  s.nodes.push_back(ScenarioNodeGroup{8, "", "A100-80GB", 8, 128000, 1 << 20, "r", "z", 2, ""});
  s.pools.push_back(ScenarioPool{"a100", {"A100-80GB"}, {}, {}});
  s.tenants.push_back(ScenarioTenant{"research", {{"a100", ScenarioQuota{32, 64, 1, false}}}});
  s.tenants.push_back(ScenarioTenant{"product", {{"a100", ScenarioQuota{16, 64, 1, false}}}});
  JobTemplate train;
  train.name = "train";
  train.kind = JobKind::kTraining;
  train.priority = "normal";
  train.gpus = 4;
  train.cpu_milli = 16000;
  train.replicas = {1, 2};
  train.checkpointable = true;
  train.checkpoint_duration = 30s;
  train.duration = DurationModel{DurationModel::Kind::kLogNormal, 0s, 3600, 1.0, 1.0, 60s, 48h};
  JobTemplate urgent = train;
  urgent.name = "urgent";
  urgent.priority = "high";
  urgent.weight = 0.3;
  urgent.checkpointable = false;
  urgent.checkpoint_interval = 10min;
  JobTemplate serve;
  serve.name = "serve";
  serve.kind = JobKind::kOnlineInference;
  serve.priority = "normal";
  serve.gpus = 1;
  serve.gpu_milli = 250;
  serve.cpu_milli = 4000;
  serve.duration = DurationModel{DurationModel::Kind::kLogNormal, 0s, 1800, 1.0, 1.0, 60s, 48h};
  ArrivalProcess arrivals{ArrivalProcess::Kind::kPoisson, rate_per_hour, 0.5, 14, 0s, 10h};
  s.workloads.push_back(TenantWorkload{"research", arrivals, {train, urgent}});
  ArrivalProcess diurnal = arrivals;
  diurnal.kind = ArrivalProcess::Kind::kDiurnal;
  s.workloads.push_back(TenantWorkload{"product", diurnal, {serve, train}});
  return s;
}

TEST(SimulatorTest, SameScenarioSameSeedGivesTheSameEventLogByteForByte) {
  const Scenario s = TwoTeams(7);
  auto a = RunScenario(s, {});
  auto b = RunScenario(s, {});
  ASSERT_TRUE(a.has_value()) << a.error().message;
  ASSERT_TRUE(b.has_value());
  EXPECT_EQ(a->event_log_sha256, b->event_log_sha256);
  EXPECT_EQ(a->events, b->events);
  auto c = RunScenario(TwoTeams(8), {});
  ASSERT_TRUE(c.has_value());
  EXPECT_NE(a->event_log_sha256, c->event_log_sha256);
}

TEST(SimulatorTest, InvariantsHoldAfterEveryEventOverManySeeds) {
  int64_t preemptions = 0, completed = 0;
  for (uint64_t seed = 1; seed <= 12; ++seed) {
    RunOptions o;
    o.check_invariants = true;
    auto r = RunScenario(TwoTeams(seed, 40), o);
    ASSERT_TRUE(r.has_value()) << "seed " << seed << ": " << r.error().message;
    // No job lost or duplicated: every submitted job is rejected, completed or still there.
    EXPECT_EQ(r->all.submitted, r->all.rejected + r->all.completed + r->unfinished) << "seed " << seed;
    preemptions += r->preemptions;
    completed += r->all.completed;
  }
  EXPECT_GT(completed, 100);
  EXPECT_GT(preemptions, 0);  // the workload is contended enough to exercise preemption
}

TEST(SimulatorTest, ReportAccountsForTheRun) {
  auto r = RunScenario(TwoTeams(3), {});
  ASSERT_TRUE(r.has_value()) << r.error().message;
  EXPECT_GT(r->allocation_pct_mean, 0);
  EXPECT_LE(r->allocation_pct_mean, 100);
  EXPECT_EQ(r->by_tenant.size(), 2u);
  EXPECT_NEAR(r->by_tenant.at("research").entitlement_guaranteed_pct, 50.0, 1e-9);  // 32 of 64 GPUs
  EXPECT_NEAR(r->by_tenant.at("product").entitlement_guaranteed_pct, 25.0, 1e-9);
  EXPECT_EQ(r->by_priority.count("high"), 1u);
  EXPECT_EQ(r->allocation_series.size(), static_cast<size_t>(12 * 12 + 1));  // every 5 min over 12 h, and t=0
  EXPECT_EQ(r->event_log_sha256.size(), 64u);
  const auto j = ToJson(*r);
  EXPECT_TRUE(j.contains("event_log_sha256"));
  EXPECT_TRUE(j["by_priority"]["high"]["wait_s"].contains("p99"));
}

}  // namespace
}  // namespace gpupool
