// Elastic training (SCALE-7): an elastic job starts as its smallest gang,
// grows onto free capacity, gives grown replicas back to queued work and
// shrinks off a failed node, each time with JobResized and no restart.
#include <gtest/gtest.h>

#include "tests/engine_harness.h"

namespace gpupool {
namespace {

using namespace std::chrono_literals;
using testing::EngineHarness;

// Failure detection only where a test sends heartbeats.
EngineConfig Config(Duration heartbeat_timeout = Duration(0)) {
  EngineConfig c;
  c.policy = "BestFit";
  c.heartbeat_timeout = heartbeat_timeout;
  c.elastic_resize_every = 5min;
  return c;
}

JobSpec Elastic(const EngineHarness& h, TenantId t, int gpus, int min, int max) {
  JobSpec s = h.Spec(t, gpus);
  s.replicas = min;
  s.min_replicas = min;
  s.max_replicas = max;
  return s;
}

TEST(ElasticTest, StartsAtItsMinimumAndGrowsOntoFreeCapacityWithoutARestart) {
  EngineHarness h(Config());
  const PoolId pool = h.Pool("gpu");
  const TenantId t = h.Tenant("team", pool, 0, 32);
  h.Node("n0");
  h.Node("n1");
  const JobId id = h.Submit(Elastic(h, t, 2, 2, 6));
  ASSERT_EQ(h.job(id).state, JobState::kRunning);
  EXPECT_EQ(h.job(id).spec.replicas, 2);
  const auto first = h.job(id).placements;
  h.Advance(30s);
  const auto resized = h.Of<JobResized>();
  ASSERT_EQ(resized.size(), 1u);
  EXPECT_TRUE(resized[0].removed.empty());
  EXPECT_EQ(resized[0].added.size(), 4u);
  EXPECT_EQ(resized[0].reshard, 30s);
  const Job& j = h.job(id);
  EXPECT_EQ(j.spec.replicas, 6);
  EXPECT_EQ(j.placements.size(), 6u);
  EXPECT_EQ(j.placements[0].node, first[0].node);  // the first replicas stay where they run
  EXPECT_EQ(j.placements[1].allocation, first[1].allocation);
  EXPECT_EQ(h.engine->state().tenant_pool(t, pool).usage.gpu_milli, 12 * kMilliPerGpu);
  EXPECT_TRUE(h.Of<PreemptionStarted>().empty());
  EXPECT_EQ(j.resizes, 1);
  // At its maximum it grows no more.
  h.Advance(10min);
  EXPECT_EQ(h.Of<JobResized>().size(), 1u);
  h.ExpectSnapshotRoundTrip();
}

TEST(ElasticTest, GrownReplicasGoBackToQueuedWorkBeforeAnyPreemption) {
  EngineHarness h(Config());
  const PoolId pool = h.Pool("gpu");
  const TenantId a = h.Tenant("a", pool, 0, 16);
  const TenantId b = h.Tenant("b", pool, 0, 16);
  h.Node("n0");
  h.Node("n1");
  const JobId elastic = h.Submit(Elastic(h, a, 2, 1, 8));
  h.Advance(30s);
  ASSERT_EQ(h.job(elastic).spec.replicas, 8);  // all 16 GPUs
  const JobId other = h.Submit(h.Spec(b, 8, false));
  EXPECT_EQ(h.job(other).state, JobState::kRunning);
  const auto resized = h.Of<JobResized>();
  ASSERT_EQ(resized.size(), 2u);
  EXPECT_EQ(resized[1].removed.size(), 7u);  // back to its minimum
  EXPECT_NE(resized[1].reason.find("queued job"), std::string::npos) << resized[1].reason;
  EXPECT_EQ(h.job(elastic).state, JobState::kRunning);
  EXPECT_EQ(h.job(elastic).spec.replicas, 1);
  EXPECT_TRUE(h.Of<PreemptionStarted>().empty());
  // It grows again onto what is left, once its resize interval has passed.
  h.Advance(2min);
  EXPECT_EQ(h.Of<JobResized>().size(), 2u);
  h.Advance(5min);
  EXPECT_EQ(h.job(elastic).spec.replicas, 4);
}

TEST(ElasticTest, ShrinksOffAFailedNodeAndKeepsRunning) {
  EngineHarness h(Config(1min));
  const PoolId pool = h.Pool("gpu");
  const TenantId t = h.Tenant("team", pool, 0, 16);
  const NodeIndex n0 = h.Node("n0");
  const NodeIndex n1 = h.Node("n1");
  const JobId id = h.Submit(Elastic(h, t, 8, 1, 2));
  h.Advance(30s);
  ASSERT_EQ(h.job(id).spec.replicas, 2);
  // Only n0 keeps reporting.
  for (int i = 0; i < 6; ++i) {
    h.now += 20s;
    ASSERT_TRUE(h.engine->Heartbeat(n0, h.now, h.sink).has_value());
    h.engine->Tick(h.now, h.sink);
  }
  ASSERT_EQ(h.engine->state().cluster.node(n1).condition, NodeCondition::kDown);
  EXPECT_TRUE(h.Of<JobInterrupted>().empty());
  const Job& j = h.job(id);
  EXPECT_EQ(j.state, JobState::kRunning);
  ASSERT_EQ(j.placements.size(), 1u);
  EXPECT_EQ(j.placements[0].node, n0);
  EXPECT_NE(h.Of<JobResized>().back().reason.find("failed"), std::string::npos);
  h.ExpectSnapshotRoundTrip();
}

// A replica keeps its id for its life (the agent keys its task by it): when
// the first replica's node fails, the survivor is still replica 1, and a
// replica added later gets a new id, never a departed one's.
TEST(ElasticTest, ReplicaIdsNeverShiftWhenAReplicaLeaves) {
  EngineHarness h(Config(1min));
  const PoolId pool = h.Pool("gpu");
  const TenantId t = h.Tenant("team", pool, 0, 24);
  const NodeIndex n0 = h.Node("n0");
  const NodeIndex n1 = h.Node("n1");
  const JobId id = h.Submit(Elastic(h, t, 8, 1, 2));
  h.Advance(30s);
  ASSERT_EQ(h.job(id).placements.size(), 2u);
  EXPECT_EQ(h.job(id).placements[0].id, 0);
  EXPECT_EQ(h.job(id).placements[1].id, 1);
  const NodeIndex first = h.job(id).placements[0].node;
  const NodeIndex alive = first == n0 ? n1 : n0;
  for (int i = 0; i < 6; ++i) {  // only the second replica's node reports
    h.now += 20s;
    ASSERT_TRUE(h.engine->Heartbeat(alive, h.now, h.sink).has_value());
    h.engine->Tick(h.now, h.sink);
  }
  ASSERT_EQ(h.job(id).placements.size(), 1u);
  EXPECT_EQ(h.job(id).placements[0].node, alive);
  EXPECT_EQ(h.job(id).placements[0].id, 1);  // index 0 now, still replica 1
  const NodeIndex n2 = h.Node("n2");
  for (int i = 0; i < 20 && h.job(id).placements.size() < 2; ++i) {
    h.now += 30s;
    ASSERT_TRUE(h.engine->Heartbeat(alive, h.now, h.sink).has_value());
    ASSERT_TRUE(h.engine->Heartbeat(n2, h.now, h.sink).has_value());
    h.engine->Tick(h.now, h.sink);
  }
  ASSERT_EQ(h.job(id).placements.size(), 2u);
  EXPECT_EQ(h.job(id).placements[0].id, 1);
  EXPECT_EQ(h.job(id).placements[1].id, 2);
  EXPECT_EQ(h.job(id).placements[1].node, n2);
  EXPECT_EQ(h.job(id).next_replica_id, 3);
  h.ExpectSnapshotRoundTrip();
}

TEST(ElasticTest, AJobAtItsMinimumIsInterruptedAsAnyOther) {
  EngineHarness h(Config(1min));
  const PoolId pool = h.Pool("gpu");
  const TenantId t = h.Tenant("team", pool, 0, 16);
  const NodeIndex n0 = h.Node("n0");
  h.Node("n1");
  const JobId id = h.Submit(Elastic(h, t, 8, 2, 2));
  ASSERT_EQ(h.job(id).state, JobState::kRunning);
  for (int i = 0; i < 6; ++i) {
    h.now += 20s;
    ASSERT_TRUE(h.engine->Heartbeat(n0, h.now, h.sink).has_value());
    h.engine->Tick(h.now, h.sink);
  }
  EXPECT_EQ(h.Of<JobInterrupted>().size(), 1u);
  EXPECT_TRUE(h.Of<JobResized>().empty());
}

TEST(ElasticTest, BadBoundsAreRefusedNamingTheField) {
  EngineHarness h(Config());
  const PoolId pool = h.Pool("gpu");
  const TenantId t = h.Tenant("team", pool, 0, 16);
  h.Node("n0");
  JobSpec s = Elastic(h, t, 1, 3, 2);
  auto bad = h.engine->Submit(s, h.now, h.sink);
  ASSERT_FALSE(bad.has_value());
  EXPECT_NE(bad.error().message.find("min_replicas"), std::string::npos) << bad.error().message;
  s = Elastic(h, t, 1, 1, 1 << 20);
  bad = h.engine->Submit(s, h.now, h.sink);
  ASSERT_FALSE(bad.has_value());
  EXPECT_NE(bad.error().message.find("max_replicas"), std::string::npos) << bad.error().message;
  EXPECT_TRUE(h.events.size() > 0 && h.Of<JobSubmitted>().empty());
}

}  // namespace
}  // namespace gpupool
