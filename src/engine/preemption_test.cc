// The preemption planner on states built by a real Engine
// (tests/engine_harness.h), and the guarantee rule for jobs a node failure
// interrupted (OPS-4 with QUOTA-1); the Engine's other preemption scenarios
// are in src/engine/engine_test.cc.
#include "src/engine/preemption.h"

#include <gtest/gtest.h>

#include <memory>
#include <string>

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

// Three 8-GPU nodes, two tenants with 8 guaranteed GPUs each (elastic
// capacity 24 - 16 = 8 GPUs); every node beats each 5 s and one silent for
// 15 s is down (the failure detector, src/control/failure_detection.h).
struct FailingPool {
  FailingPool() {
    config.policy = "BestFit";
    config.heartbeat_timeout = 15s;
    h = std::make_unique<EngineHarness>(config);
    pool = h->Pool("gpu");
    for (int n = 0; n < 3; ++n) h->Node("n" + std::to_string(n));
    a = h->Tenant("a", pool, 8, 24);
    b = h->Tenant("b", pool, 8, 24);
  }
  JobId Run(TenantId t, int gpus) {
    const JobId id = h->Submit(h->Spec(t, gpus));
    EXPECT_EQ(h->state(id), JobState::kRunning);
    return id;
  }
  NodeIndex NodeOf(JobId j) const { return h->job(j).placements.at(0).node; }
  // Every node but `dead` beats each 5 s for `d`, the Engine ticking after.
  void Beat(Duration d, NodeIndex dead = -1) {
    for (const Instant end = h->now + d; h->now < end;) {
      h->now += 5s;
      for (NodeIndex n = 0; n < 3; ++n) {
        if (n != dead) ASSERT_TRUE(h->engine->Heartbeat(n, h->now, h->sink).has_value());
      }
      h->engine->Tick(h->now, h->sink);
    }
  }
  EngineConfig config;
  std::unique_ptr<EngineHarness> h;
  PoolId pool = 0;
  TenantId a = -1, b = -1;
};

TEST(PreemptionTest, AnInterruptedJobWithinItsGuaranteeTakesBorrowedCapacityBack) {
  FailingPool f;
  f.Beat(5s);
  const JobId mine = f.Run(f.a, 8);      // all of a's guarantee
  const JobId kept = f.Run(f.b, 8);      // all of b's guarantee
  const JobId borrowed = f.Run(f.b, 8);  // b borrows the pool's elastic 8 GPUs
  ASSERT_FALSE(f.h->job(kept).borrowed);
  ASSERT_TRUE(f.h->job(borrowed).borrowed);
  // a's node goes silent: its job is interrupted and queued again, within
  // a's guarantee, in a pool with no free GPU (16 ready, all b's).
  const NodeIndex dead = f.NodeOf(mine);
  f.Beat(20s, dead);
  ASSERT_EQ(f.h->Of<JobInterrupted>().size(), 1u);
  EXPECT_EQ(f.h->Of<JobInterrupted>()[0].job, mine);
  // b's borrowed job is checkpointed to make room; b keeps its guarantee.
  const auto started = f.h->Of<PreemptionStarted>();
  ASSERT_EQ(started.size(), 1u);
  EXPECT_EQ(started[0].victim, borrowed);
  EXPECT_EQ(started[0].preemptor, mine);
  EXPECT_EQ(started[0].reason, PreemptReason::kGuaranteeReclaim);
  EXPECT_EQ(f.h->state(kept), JobState::kRunning);
  ASSERT_EQ(f.h->state(borrowed), JobState::kCheckpointing);
  ASSERT_TRUE(f.h->engine->CheckpointDone(borrowed, f.h->now, f.h->sink).has_value());
  EXPECT_EQ(f.h->state(mine), JobState::kRunning);
  EXPECT_EQ(f.h->state(borrowed), JobState::kPending);
  EXPECT_NE(f.NodeOf(mine), dead);
}

TEST(PreemptionTest, WorkWithinItsOwnGuaranteeIsNotPreemptedForAnInterruptedJob) {
  FailingPool f;
  f.h->Quota(f.b, f.pool, 16, 24);  // guarantees now cover the whole pool
  f.Beat(5s);
  const JobId mine = f.Run(f.a, 8);
  const JobId b1 = f.Run(f.b, 8);
  const JobId b2 = f.Run(f.b, 8);
  ASSERT_FALSE(f.h->job(b1).borrowed);
  ASSERT_FALSE(f.h->job(b2).borrowed);
  // a's node fails: a is within its guarantee, but b borrows nothing, so
  // nothing of b's is taken: a's job waits for its node.
  const NodeIndex dead = f.NodeOf(mine);
  f.Beat(60s, dead);
  ASSERT_EQ(f.h->Of<JobInterrupted>().size(), 1u);
  EXPECT_TRUE(f.h->Of<PreemptionStarted>().empty());
  EXPECT_EQ(f.h->state(mine), JobState::kPending);
  EXPECT_EQ(f.h->state(b1), JobState::kRunning);
  EXPECT_EQ(f.h->state(b2), JobState::kRunning);
  f.Beat(10s);  // the node is back, scrubbed
  EXPECT_EQ(f.h->state(mine), JobState::kRunning);
  EXPECT_EQ(f.NodeOf(mine), dead);
}

// The failure took the pool's elastic capacity down to what a's job
// borrowed. Interrupted, that job may borrow the guarantee b leaves unused
// (MayBorrowToRecover), so it runs again at once; it stays borrowed, and b
// takes its guarantee back by preemption as soon as it wants it.
TEST(PreemptionTest, AnInterruptedBorrowedJobTakesAnotherTenantsUnusedGuaranteeUntilItIsWanted) {
  FailingPool f;
  f.Beat(5s);
  const JobId a1 = f.Run(f.a, 8);  // a's guarantee
  const JobId a2 = f.Run(f.a, 8);  // a borrows the elastic 8 GPUs; b runs nothing
  ASSERT_TRUE(f.h->job(a2).borrowed);
  const NodeIndex dead = f.NodeOf(a2);
  ASSERT_NE(dead, f.NodeOf(a1));
  f.Beat(20s, dead);
  ASSERT_EQ(f.h->Of<JobInterrupted>().size(), 1u);
  EXPECT_TRUE(f.h->Of<PreemptionStarted>().empty());
  ASSERT_EQ(f.h->state(a2), JobState::kRunning);  // in b's unused guarantee
  EXPECT_NE(f.NodeOf(a2), dead);
  EXPECT_TRUE(f.h->job(a2).borrowed);
  // A job that no failure interrupted may not do the same: a's third job
  // waits (no elastic capacity, and it has not lost its place).
  const JobId a3 = f.h->Submit(f.h->Spec(f.a, 4));
  EXPECT_EQ(f.h->state(a3), JobState::kPending);
  ASSERT_TRUE(f.h->engine->Cancel(a3, f.h->now, f.h->sink).has_value());
  // b wants its guarantee: a2 is checkpointed and gives it back.
  const JobId b1 = f.h->Submit(f.h->Spec(f.b, 8));
  const auto started = f.h->Of<PreemptionStarted>();
  ASSERT_EQ(started.size(), 1u);
  EXPECT_EQ(started[0].victim, a2);
  EXPECT_EQ(started[0].preemptor, b1);
  EXPECT_EQ(started[0].reason, PreemptReason::kGuaranteeReclaim);
  ASSERT_TRUE(f.h->engine->CheckpointDone(a2, f.h->now, f.h->sink).has_value());
  EXPECT_EQ(f.h->state(b1), JobState::kRunning);
  EXPECT_EQ(f.h->state(a2), JobState::kPending);
}

// C-RECOVERY's slowest re-placement before MayBorrowToRecover: the
// interrupted job is borrowed work (its tenant far above its guarantee),
// and the failure took the pool's elastic capacity down to what the tenant
// already borrows. Where the other tenants' unused guarantees are too small
// for it too, it preempts nobody (other tenants' guaranteed work least of
// all) and waits until the tenant's own borrowing shrinks.
TEST(PreemptionTest, AnInterruptedBorrowedJobWaitsForElasticRoomAndPreemptsNobody) {
  FailingPool f;
  f.Beat(5s);
  const JobId a1 = f.Run(f.a, 8);  // a's guarantee
  const JobId a2 = f.Run(f.a, 8);  // a borrows the elastic 8 GPUs
  const JobId b1 = f.Run(f.b, 4);  // b uses half its guarantee
  ASSERT_TRUE(f.h->job(a2).borrowed);
  // a2's node fails: 16 GPUs ready, 16 guaranteed: no elastic capacity is
  // left for a's borrowed job, and b's unused guarantee (4 GPUs) is too
  // small for it.
  const NodeIndex dead = f.NodeOf(a2);
  ASSERT_NE(dead, f.NodeOf(a1));
  f.Beat(60s, dead);
  ASSERT_EQ(f.h->Of<JobInterrupted>().size(), 1u);
  EXPECT_EQ(f.h->Of<JobInterrupted>()[0].job, a2);
  EXPECT_TRUE(f.h->Of<PreemptionStarted>().empty());
  EXPECT_EQ(f.h->state(a2), JobState::kPending);
  EXPECT_EQ(f.h->state(a1), JobState::kRunning);
  EXPECT_EQ(f.h->state(b1), JobState::kRunning);
  // Once a's own guaranteed job ends, the borrowed one runs again.
  ASSERT_TRUE(f.h->engine->Finish(a1, /*succeeded=*/true, f.h->now, f.h->sink).has_value());
  f.Beat(5s, dead);
  EXPECT_EQ(f.h->state(a2), JobState::kRunning);
}

}  // namespace
}  // namespace gpupool
