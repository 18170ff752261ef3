// The preemption planner on states built by a real Engine
// (tests/engine_harness.h); the Engine's own preemption scenarios are in
// src/engine/engine_test.cc.
#include "src/engine/preemption.h"

#include <gtest/gtest.h>

#include "tests/engine_harness.h"

namespace gpupool {
namespace {

using namespace std::chrono_literals;
using testing::EngineHarness;

Policy BestFit() {
  auto spec = FindPolicy("BestFit");
  EXPECT_TRUE(spec.has_value());
  auto p = BuildPolicy(*spec, PluginDeps{});
  EXPECT_TRUE(p.has_value()) << (p ? "" : p.error().message);
  return std::move(*p);
}

EngineConfig Config() {
  EngineConfig c;
  c.policy = "BestFit";
  return c;
}

// A pending job of tenant t that is not in the state (the planner reads only
// its id and spec).
Job Pending(const EngineHarness& h, TenantId t, int gpus, int32_t priority, int replicas = 1) {
  Job j;
  j.id = 1000;
  j.state = JobState::kPending;
  j.spec = h.Spec(t, gpus);
  j.spec.priority = priority;
  j.spec.replicas = replicas;
  j.spec.demand.allowed_pools = 1;
  return j;
}

struct OneNode {
  EngineHarness h{Config()};
  PoolId pool = h.Pool("gpu");
  NodeIndex node = h.Node("n0");
  TenantId a = h.Tenant("a", pool, 8, 8);
  JobId Run(int gpus, int32_t priority, Duration checkpoint) {
    JobSpec s = h.Spec(a, gpus);
    s.priority = priority;
    s.checkpoint_duration = checkpoint;
    const JobId id = h.Submit(s);
    EXPECT_EQ(h.state(id), JobState::kRunning);
    return id;
  }
};

TEST(PreemptionTest, TheLowestPriorityCheapestOwnWorkMakesRoom) {
  OneNode f;
  const JobId cheap = f.Run(2, 0, 10s);
  const JobId dear = f.Run(2, 0, 60s);
  const JobId higher = f.Run(4, 1, 10s);
  const Job j = Pending(f.h, f.a, 2, /*priority=*/5);
  const auto plan = PlanPreemption(f.h.engine->state(), BestFit(), j, f.pool, /*within=*/true, f.h.now);
  ASSERT_TRUE(plan.has_value());
  ASSERT_EQ(plan->victims.size(), 1u);
  EXPECT_EQ(plan->victims[0].job->id, cheap);
  EXPECT_EQ(plan->victims[0].reason, PreemptReason::kPriority);
  EXPECT_EQ(plan->nodes, std::set<NodeIndex>{f.node});
  (void)dear;
  (void)higher;
}

TEST(PreemptionTest, WorkOfTheSameOrHigherPriorityIsNeverAVictim) {
  OneNode f;
  f.Run(4, 3, 10s);
  f.Run(4, 5, 10s);
  const Job j = Pending(f.h, f.a, 2, /*priority=*/3);
  EXPECT_FALSE(PlanPreemption(f.h.engine->state(), BestFit(), j, f.pool, true, f.h.now).has_value());
}

TEST(PreemptionTest, AJobThatFitsAlreadyNeedsNoPlan) {
  OneNode f;
  f.Run(4, 0, 10s);
  const Job j = Pending(f.h, f.a, 2, /*priority=*/5);
  EXPECT_FALSE(PlanPreemption(f.h.engine->state(), BestFit(), j, f.pool, true, f.h.now).has_value());
}

TEST(PreemptionTest, EachReplicaOfAGangGetsItsOwnRoom) {
  EngineHarness h(Config());
  const PoolId pool = h.Pool("gpu");
  const NodeIndex n0 = h.Node("n0");
  const NodeIndex n1 = h.Node("n1");
  const TenantId a = h.Tenant("a", pool, 16, 16);
  std::vector<JobId> low;
  for (int i = 0; i < 2; ++i) low.push_back(h.Submit(h.Spec(a, 8)));
  const Job j = Pending(h, a, 8, /*priority=*/5, /*replicas=*/2);
  const auto plan = PlanPreemption(h.engine->state(), BestFit(), j, pool, true, h.now);
  ASSERT_TRUE(plan.has_value());
  ASSERT_EQ(plan->victims.size(), 2u);
  EXPECT_EQ((std::set<JobId>{plan->victims[0].job->id, plan->victims[1].job->id}), (std::set<JobId>{low[0], low[1]}));
  EXPECT_EQ(plan->nodes, (std::set<NodeIndex>{n0, n1}));
  // The planner decides nothing.
  EXPECT_EQ(h.state(low[0]), JobState::kRunning);
  EXPECT_TRUE(h.Of<PreemptionStarted>().empty());
}

TEST(PreemptionTest, APipelineWaitsForRoomInsteadOfPreempting) {
  OneNode f;
  f.Run(8, 0, 10s);
  Job j = Pending(f.h, f.a, 1, /*priority=*/5);
  j.spec.stages = {testing::Whole(1, 1000), testing::Whole(1, 1000)};
  j.spec.replicas = 2;
  EXPECT_FALSE(PlanPreemption(f.h.engine->state(), BestFit(), j, f.pool, true, f.h.now).has_value());
}

}  // namespace
}  // namespace gpupool
