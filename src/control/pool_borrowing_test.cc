// Borrowing between pools (POOL-3) and scale-out order (QUOTA-5, FRAG-3):
// a short pool borrows an empty node of another pool before asking the
// provider, the lender asks for it back when it needs it, and a new node
// serves reserved tenants first.
#include <gtest/gtest.h>

#include "tests/engine_harness.h"

namespace gpupool {
namespace {

using namespace std::chrono_literals;
using testing::EngineHarness;

PoolScalingConfig Scaling(const std::string& pool, const std::string& prefix) {
  PoolScalingConfig s;
  s.pool = pool;
  s.rule.min_nodes = 1;
  s.rule.max_nodes = 8;
  s.rule.out_for = 1min;
  s.rule.in_for = 30min;
  s.rule.cooldown = 1min;
  s.rule.safety_window = 30min;
  s.rule.max_step = 1;
  s.node = NodeTemplate{prefix, 64000, 1 << 19, 8, *Catalog::Builtin().Find("H100"), 0, "r", "z", 1};
  s.drain_timeout = 10min;
  return s;
}

TEST(PoolBorrowingTest, AShortPoolBorrowsAnEmptyNodeAndGivesItBackWhenTheLenderNeedsIt) {
  EngineConfig config;
  config.policy = "BestFit";
  config.scaling = {Scaling("train", "t"), Scaling("serve", "s")};
  config.scaling[0].rule.max_nodes = 2;  // one node of its own, one borrowed
  EngineHarness h(config);
  // Nodes in region "east" join "serve"; the others join "train".
  const PoolId serve = h.Pool("serve", PoolSelector{kAnyGpuModel, {"east"}});
  const PoolId train = h.Pool("train");
  const TenantId t = h.Tenant("trainers", train, 0, 32);
  const TenantId s = h.Tenant("servers", serve, 0, 32);
  h.Node("t0", 8, "west");
  const NodeIndex lendable = h.Node("s0", 8, "east");
  h.Node("s1", 8, "east");
  ASSERT_EQ(h.engine->state().cluster.node(lendable).pool, serve);
  h.Submit(h.Spec(t, 8));
  const JobId waiting = h.Submit(h.Spec(t, 8));
  ASSERT_EQ(h.job(waiting).state, JobState::kPending);
  h.Advance(3min);
  const auto lent = h.Of<NodeLent>();
  ASSERT_EQ(lent.size(), 1u);
  EXPECT_EQ(lent[0].to, train);
  EXPECT_NE(lent[0].reason.find("pool train is short"), std::string::npos) << lent[0].reason;
  EXPECT_TRUE(h.Of<ScaleOutRequested>().empty());  // borrowed instead of bought
  const NodeIndex borrowed = lent[0].node;
  EXPECT_EQ(h.engine->state().cluster.node(borrowed).pool, train);
  ASSERT_EQ(h.job(waiting).state, JobState::kRunning);
  EXPECT_EQ(h.job(waiting).placements[0].node, borrowed);
  h.ExpectSnapshotRoundTrip();
  // The lender fills up: it asks for its node back, and the borrowed job
  // moves with a checkpoint; the node returns once empty.
  h.Submit(h.Spec(s, 8));
  h.Submit(h.Spec(s, 8));
  h.Advance(3min);
  const auto drains = h.Of<NodeDrainStarted>();
  ASSERT_EQ(drains.size(), 1u);
  EXPECT_EQ(drains[0].node, borrowed);
  EXPECT_NE(drains[0].reason.find("needs its node back"), std::string::npos);
  ASSERT_EQ(h.job(waiting).state, JobState::kCheckpointing);
  ASSERT_TRUE(h.engine->CheckpointDone(waiting, h.now, h.sink).has_value());
  h.Advance(1min);
  ASSERT_EQ(h.Of<NodeReturned>().size(), 1u);
  EXPECT_EQ(h.engine->state().cluster.node(borrowed).pool, serve);
  EXPECT_TRUE(h.engine->state().lent_nodes.empty());
  EXPECT_TRUE(h.Of<NodeRemoved>().empty());
}

TEST(PoolBorrowingTest, ANodeFromAScaleOutServesReservedTenantsFirst) {
  EngineConfig config;
  config.policy = "BestFit";
  config.scaling = {Scaling("gpu", "auto")};
  config.borrow_between_pools = false;
  EngineHarness h(config);
  const PoolId pool = h.Pool("gpu");
  h.Node("n0", 8);
  // "reserved" holds a reserved guarantee it uses in full; "other" runs
  // nothing, so fair share alone would serve "other" first.
  const TenantId reserved = h.Tenant("reserved", pool, 8, 32, /*reserved=*/true);
  const TenantId other = h.Tenant("other", pool, 0, 32);
  h.Submit(h.Spec(reserved, 8));
  const JobId theirs = h.Submit(h.Spec(other, 8));
  const JobId ours = h.Submit(h.Spec(reserved, 8));
  h.Advance(2min);
  ASSERT_FALSE(h.Of<ScaleOutRequested>().empty());
  ASSERT_TRUE(h.engine->AddProvisionedNode(pool, "auto-0", "auto-rack-0", h.now, h.sink).has_value());
  EXPECT_EQ(h.job(ours).state, JobState::kRunning);
  EXPECT_EQ(h.job(theirs).state, JobState::kPending);
}

TEST(PoolBorrowingTest, FragmentedRackIsWhereFreeGpusAreScatteredOverBusyNodes) {
  EngineConfig config;
  config.policy = "BestFit";
  EngineHarness h(config);
  const PoolId pool = h.Pool("gpu");
  const TenantId t = h.Tenant("team", pool, 0, 64);
  h.Node("a0", 8, "r", "rack-a");
  h.Node("b0", 8, "r", "rack-b");
  h.Node("b1", 8, "r", "rack-b");
  EXPECT_EQ(h.engine->FragmentedRack(pool), "");  // nothing partly used
  for (int i = 0; i < 3; ++i) h.Submit(h.Spec(t, 6));  // each node keeps 2 GPUs free
  EXPECT_EQ(h.engine->FragmentedRack(pool), "rack-b");
}

}  // namespace
}  // namespace gpupool
