// Pool autoscaling through the Engine (src/control/pool_autoscaling.h): scale-out requests
// answered by provisioned nodes, drains that move what can move, wait for
// what cannot (up to the drain timeout) and remove empty nodes.
#include <gtest/gtest.h>

#include "src/engine/engine.h"
#include "src/control/pool_autoscaling.h"
#include "tests/engine_harness.h"
#include "tests/fake_engine_view.h"

namespace gpupool {
namespace {

using namespace std::chrono_literals;
using testing::Whole;

EngineConfig ScalingConfig(double in_util, double target_util) {
  EngineConfig config;
  config.policy = "BestFit";
  PoolScalingConfig c;
  c.pool = "gpu";
  c.rule.min_nodes = 1;
  c.rule.max_nodes = 4;
  c.rule.out_for = 1min;
  c.rule.in_for = 2min;
  c.rule.cooldown = 1min;
  c.rule.safety_window = 2min;
  c.rule.in_util = in_util;
  c.rule.out_util = std::max(c.rule.out_util, std::min(1.0, target_util + 0.05));
  c.rule.target_util = target_util;
  c.node = NodeTemplate{"auto", 64000, 1 << 19, 8, *Catalog::Builtin().Find("H100"), 0, "r", "z", 2};
  c.drain_timeout = 10min;
  config.scaling.push_back(c);
  return config;
}

// One scaled pool "gpu" with one 8-GPU node and one tenant.
class ScalingHarness : public testing::EngineHarness {
 public:
  explicit ScalingHarness(double in_util = 0.3, double target_util = 0.65)
      : EngineHarness(ScalingConfig(in_util, target_util)) {
    pool = Pool("gpu");
    tenant = Tenant("team", pool, 0, 64);
    Node("n0");
  }
  JobId Submit(int gpus, bool checkpointable, JobKind kind = JobKind::kTraining) {
    JobSpec s = Spec(tenant, gpus, checkpointable);
    s.kind = kind;
    return EngineHarness::Submit(s);
  }

  PoolId pool = 0;
  TenantId tenant = -1;
};

TEST(ScalingTest, ABusyPoolAsksForNodesThatJoinFromTheTemplate) {
  ScalingHarness h;
  h.Submit(8, false);
  h.Advance(2min);
  const auto asked = h.Of<ScaleOutRequested>();
  ASSERT_EQ(asked.size(), 1u);
  EXPECT_EQ(h.engine->state().pool_scaling[h.pool].requested_nodes, asked[0].nodes);
  auto added = h.engine->AddProvisionedNode(h.pool, "auto-0", "auto-rack-0", h.now, h.sink);
  ASSERT_TRUE(added.has_value()) << added.error().message;
  EXPECT_EQ(h.engine->state().cluster.node(*added).gpu_count, 8);
  EXPECT_EQ(h.engine->state().pool_scaling[h.pool].requested_nodes, asked[0].nodes - 1);
  EXPECT_TRUE(h.Of<NodeAdded>().back().provisioned);
  // A name in use, and more nodes than were asked for, are refused.
  EXPECT_FALSE(h.engine->AddProvisionedNode(h.pool, "auto-0", "r", h.now, h.sink).has_value());
  for (int i = 1; i < asked[0].nodes; ++i) {
    ASSERT_TRUE(h.engine->AddProvisionedNode(h.pool, "auto-" + std::to_string(i), "r", h.now, h.sink).has_value());
  }
  EXPECT_FALSE(h.engine->AddProvisionedNode(h.pool, "auto-extra", "r", h.now, h.sink).has_value());
}

TEST(ScalingTest, AFailedScaleOutIsForgotten) {
  ScalingHarness h;
  h.Submit(8, false);
  h.Advance(2min);
  const int32_t asked = h.engine->state().pool_scaling[h.pool].requested_nodes;
  ASSERT_GT(asked, 0);
  EXPECT_FALSE(h.engine->FailScaleOut(h.pool, asked + 1, "too many", h.now, h.sink).has_value());
  ASSERT_TRUE(h.engine->FailScaleOut(h.pool, asked, "no capacity in the zone", h.now, h.sink).has_value());
  EXPECT_EQ(h.engine->state().pool_scaling[h.pool].requested_nodes, 0);
}

TEST(ScalingTest, ADrainMovesCheckpointableWorkWaitsForTheRestAndRemovesTheNode) {
  // Scale in below 40%, to 80% full nodes.
  ScalingHarness h(0.4, 0.8);
  const EngineState& s = h.engine->state();
  // A reserved tenant's job on n0: n0 is drained last (QUOTA-5).
  const TenantId critical = *h.engine->AddTenant("critical", h.now, h.sink);
  ASSERT_TRUE(h.engine->SetQuota(critical, h.pool, Quota{2 * kMilliPerGpu, 8 * kMilliPerGpu, 1, true}, h.now, h.sink)
                  .has_value());
  JobSpec reserved;
  reserved.tenant = critical;
  reserved.demand = Whole(2, 1000);
  const JobId kept = *h.engine->Submit(reserved, h.now, h.sink);
  ASSERT_EQ(s.job(kept).placements[0].node, 0);
  const JobId filler = h.Submit(6, false);
  h.Advance(2min);
  ASSERT_TRUE(h.engine->AddProvisionedNode(h.pool, "auto-0", "r", h.now, h.sink).has_value());
  const NodeIndex fresh = 1;
  const JobId movable = h.Submit(1, true);
  const JobId stuck = h.Submit(1, false);
  const JobId replica = h.Submit(1, false, JobKind::kOnlineInference);
  for (JobId id : {movable, stuck, replica}) ASSERT_EQ(s.job(id).placements[0].node, fresh);
  // 5 of 16 GPUs in use: one node is enough.
  ASSERT_TRUE(h.engine->Finish(filler, true, h.now, h.sink).has_value());
  h.Advance(5min);
  const auto drains = h.Of<NodeDrainStarted>();
  ASSERT_EQ(drains.size(), 1u);
  ASSERT_EQ(drains[0].node, fresh);  // more used than n0, but n0 runs reserved work
  EXPECT_EQ(s.cluster.node(fresh).condition, NodeCondition::kCordoned);
  // The checkpointable job checkpoints, the replica moves at once, the
  // other one stays until it finishes.
  const auto preempted = h.Of<PreemptionStarted>();
  ASSERT_EQ(preempted.size(), 2u);
  for (const PreemptionStarted& p : preempted) {
    EXPECT_EQ(p.reason, PreemptReason::kDrain);
    EXPECT_EQ(p.checkpoint, p.victim == movable);
    EXPECT_NE(p.victim, stuck);
  }
  EXPECT_EQ(s.job(movable).state, JobState::kCheckpointing);
  ASSERT_TRUE(h.engine->CheckpointDone(movable, h.now, h.sink).has_value());
  EXPECT_EQ(h.Of<JobPreempted>().back().lost_work, Duration(0));
  EXPECT_EQ(s.job(movable).placements[0].node, 0);  // resumed on the node that stays
  EXPECT_EQ(s.job(replica).placements[0].node, 0);
  EXPECT_EQ(s.job(stuck).placements[0].node, fresh);
  h.Advance(1min);
  EXPECT_TRUE(h.Of<NodeRemoved>().empty());
  ASSERT_TRUE(h.engine->Finish(stuck, true, h.now, h.sink).has_value());
  h.Advance(1min);
  ASSERT_EQ(h.Of<NodeRemoved>().size(), 1u);
  EXPECT_EQ(s.cluster.node(fresh).condition, NodeCondition::kRemoved);
  EXPECT_FALSE(h.engine->Heartbeat(fresh, h.now, h.sink).has_value());
  EXPECT_EQ(s.Capacity(h.pool).total_milli, 8 * kMilliPerGpu);
}

TEST(ScalingTest, ADrainTimeoutStopsWhatWouldNotLeave) {
  ScalingHarness h;
  h.Submit(8, false);
  h.Advance(2min);
  ASSERT_TRUE(h.engine->AddProvisionedNode(h.pool, "auto-0", "r", h.now, h.sink).has_value());
  ASSERT_TRUE(h.engine->Finish(1, true, h.now, h.sink).has_value());
  const JobId a = h.Submit(1, false), b = h.Submit(1, false);
  h.Advance(5min);
  ASSERT_EQ(h.Of<NodeDrainStarted>().size(), 1u);
  h.Advance(11min);
  // Past the timeout the non-checkpointable work was stopped, lost its run
  // time, queued again and the node left.
  EXPECT_EQ(h.Of<NodeRemoved>().size(), 1u);
  for (const JobPreempted& p : h.Of<JobPreempted>()) {
    EXPECT_TRUE(p.victim == a || p.victim == b);
    EXPECT_GT(p.lost_work, Duration(0));
  }
}

// Issue 16: scale-in keeps the capacity the tenants' guarantees need.
TEST(ScalingTest, ScaleInStopsAtTheCapacityTheGuaranteesNeedEvenWhenIdle) {
  ScalingHarness h;
  const EngineState& s = h.engine->state();
  h.Node("n1");
  h.Node("n2");
  // 24 GPUs, none in use; 16 of them guaranteed to the tenant.
  h.Quota(h.tenant, h.pool, 16, 64);
  h.Advance(30min);
  // The rule would go down to min_nodes (1 node: 2 of 3 in one step), but
  // only one node may go.
  const auto drains = h.Of<NodeDrainStarted>();
  ASSERT_EQ(drains.size(), 1u);
  EXPECT_NE(drains[0].reason.find("(1 of 2 nodes may go)"), std::string::npos) << drains[0].reason;
  EXPECT_EQ(h.Of<NodeRemoved>().size(), 1u);
  EXPECT_EQ(s.pool_ready_gpu_milli(h.pool), 16 * kMilliPerGpu);
  // Asked for more, the choice says why it cannot.
  const auto none = ScaleInNodes(s, h.pool, 1);
  ASSERT_FALSE(none.has_value());
  EXPECT_EQ(none.error().code, ErrorCode::kFailedPrecondition);
  EXPECT_EQ(none.error().message,
            "pool 'gpu': no node may drain, its tenants are guaranteed 16 GPUs and it has 16 ready");
  // Without the guarantee the idle pool goes down to min_nodes.
  h.Quota(h.tenant, h.pool, 0, 64);
  h.Advance(30min);
  EXPECT_EQ(h.Of<NodeRemoved>().size(), 2u);
  EXPECT_EQ(s.pool_ready_gpu_milli(h.pool), 8 * kMilliPerGpu);
}

TEST(ScalingTest, BadSettingsNameTheField) {
  PoolScalingConfig c;
  c.pool = "gpu";
  c.node = NodeTemplate{"auto", 64000, 1 << 19, 8, *Catalog::Builtin().Find("H100"), 0, "r", "z", 0};
  auto bad = CheckScalingConfig(c);
  ASSERT_FALSE(bad.has_value());
  EXPECT_NE(bad.error().message.find("racks"), std::string::npos) << bad.error().message;
  c.node.racks = 1;
  c.forecast.enabled = true;
  c.forecast.step = 7min;
  bad = CheckScalingConfig(c);
  ASSERT_FALSE(bad.has_value());
  EXPECT_NE(bad.error().message.find("season"), std::string::npos) << bad.error().message;
}

// The loop on its own, through a fake Engine.
PoolScalingConfig QueueTriggered() {
  PoolScalingConfig c = ScalingConfig(0.3, 0.65).scaling[0];
  c.rule.queue_threshold = 2;
  c.warm_pool.enabled = true;
  c.warm_pool.lookback = 1h;
  return c;
}

TEST(PoolAutoscalingTest, ALongQueueAsksTheProviderAndTheWarmPoolFollows) {
  testing::FakeEngineView f;
  f.scaling = {QueueTriggered()};
  PoolAutoscaling loop(f.scaling, /*borrow_between_pools=*/false);
  f.Node("a");
  for (int i = 0; i < 3; ++i) f.Queue();
  loop.Tick(f, f);
  ASSERT_EQ(f.Of<ScaleOutRequested>().size(), 1u);
  EXPECT_EQ(f.Of<ScaleOutRequested>()[0].nodes, 1);
  EXPECT_EQ(f.Of<ScaleOutRequested>()[0].reason, "3 jobs queued (threshold 2)");
  ASSERT_EQ(f.Of<WarmPoolSized>().size(), 1u);
  EXPECT_EQ(f.Of<WarmPoolSized>()[0].nodes, 1);
  // Past the lookback the warm pool empties again.
  for (int i = 0; i < 3; ++i) f.Apply(JobCancelled{i + 1});
  f.clock += 61min;
  loop.Tick(f, f);
  ASSERT_EQ(f.Of<WarmPoolSized>().size(), 2u);
  EXPECT_EQ(f.Of<WarmPoolSized>()[1].nodes, 0);
}

// A job of `tenant`, queued, asking for `gpus` whole GPUs of pool 0.
JobId QueueFor(testing::FakeEngineView& f, TenantId tenant, int gpus) {
  JobSpec spec;
  spec.tenant = tenant;
  spec.demand = Whole(gpus, 1000);
  spec.demand.allowed_pools = 1;
  spec.replicas = 1;
  const JobId id = f.state().next_job_id;
  f.Apply(JobSubmitted{id, spec});
  return id;
}

// Issue 16: a queued job counts as demand only when its tenant's quota
// would admit it on new nodes.
TEST(PoolAutoscalingTest, QueuedJobsCountOnlyWhereTheirTenantsQuotaWouldAdmitThem) {
  testing::FakeEngineView f;
  f.scaling = {QueueTriggered()};  // more than 2 queued jobs: scale out
  PoolAutoscaling loop(f.scaling, /*borrow_between_pools=*/false);
  f.Node("a");
  // Tenant "capped" may hold 4 GPUs in the pool and holds 2.
  f.Apply(TenantAdded{1, "capped"});
  f.Apply(QuotaSet{1, 0, Quota{0, 4 * kMilliPerGpu, 1, false}});
  const JobId running = QueueFor(f, 1, 2);
  f.Apply(JobPlaced{running, 0, false, {PlacedReplica{0, 0b11}}});
  // In queue order: 4 GPUs (over its headroom of 2: not counted), then
  // three of 1 GPU (the first two fit what is left, the third does not).
  QueueFor(f, 1, 4);
  for (int i = 0; i < 3; ++i) QueueFor(f, 1, 1);
  loop.Tick(f, f);
  EXPECT_TRUE(f.Of<ScaleOutRequested>().empty());  // 2 jobs count, not 4
  // A tenant with headroom (tenant 0, no limit to speak of) tips it over.
  f.clock += 1min;
  f.Queue();
  loop.Tick(f, f);
  ASSERT_EQ(f.Of<ScaleOutRequested>().size(), 1u);
  EXPECT_EQ(f.Of<ScaleOutRequested>()[0].reason, "3 jobs queued (threshold 2)");
}

TEST(PoolAutoscalingTest, ANodeThePoolLentComesBackBeforeTheProviderIsAsked) {
  testing::FakeEngineView f;
  f.scaling = {QueueTriggered()};
  PoolAutoscaling loop(f.scaling, /*borrow_between_pools=*/false);
  f.Apply(PoolAdded{Pool{1, "other", {}, {}}});
  f.Node("a");
  const NodeIndex lent = f.Node("b");
  f.Apply(NodeLent{lent, 1, "pool other is short"});
  for (int i = 0; i < 3; ++i) f.Queue();
  loop.Tick(f, f);
  ASSERT_EQ(f.Of<NodeDrainStarted>().size(), 1u);
  EXPECT_EQ(f.Of<NodeDrainStarted>()[0].node, lent);
  EXPECT_TRUE(f.Of<ScaleOutRequested>().empty());
  // Empty: it goes back at the next Tick.
  f.clock += 1min;
  loop.Tick(f, f);
  ASSERT_EQ(f.Of<NodeReturned>().size(), 1u);
  EXPECT_EQ(f.state().cluster.node(lent).pool, 0u);
}

}  // namespace
}  // namespace gpupool
