// Failure detection (OPS-4) on its own, through a fake Engine: heartbeat
// clocks per node, NodeDown with its jobs interrupted, NodeUp on the next
// heartbeat, and clocks that start afresh after a restart.
#include "src/control/failure_detection.h"

#include <gtest/gtest.h>

#include "tests/engine_harness.h"
#include "tests/fake_engine_view.h"

namespace gpupool {
namespace {

using namespace std::chrono_literals;
using testing::EngineHarness;
using testing::FakeEngineView;
using testing::Whole;

TEST(FailureDetectionTest, ASilentNodeIsDownAndItsJobsAreInterruptedWithTheirLostWork) {
  FakeEngineView f;
  FailureDetection loop(30s);
  const NodeIndex a = f.Node("a"), b = f.Node("b");
  const JobId job = f.Run(a, 0b1);
  ASSERT_TRUE(loop.Heartbeat(b, f, f).has_value());  // both clocks start now
  f.clock += 20s;
  ASSERT_TRUE(loop.Heartbeat(b, f, f).has_value());
  f.clock += 20s;
  loop.Tick(f, f);
  ASSERT_EQ(f.Of<NodeDown>().size(), 1u);
  EXPECT_EQ(f.Of<NodeDown>()[0].node, a);
  // The elastic shrink is tried first; this job cannot shrink.
  ASSERT_EQ(f.shrinks.size(), 1u);
  EXPECT_EQ(f.shrinks[0], std::make_pair(job, a));
  ASSERT_EQ(f.Of<JobInterrupted>().size(), 1u);
  EXPECT_EQ(f.Of<JobInterrupted>()[0].job, job);
  EXPECT_EQ(f.Of<JobInterrupted>()[0].lost_work, Duration(40s));
  EXPECT_EQ(f.state().job(job).state, JobState::kPending);
  // Down once: the next Tick says nothing more.
  f.clock += 10s;
  loop.Tick(f, f);
  EXPECT_EQ(f.Of<NodeDown>().size(), 1u);
}

TEST(FailureDetectionTest, AnElasticJobThatShrinksOffTheNodeIsNotInterrupted) {
  FakeEngineView f;
  FailureDetection loop(30s);
  const NodeIndex a = f.Node("a");
  f.Run(a, 0b1);
  f.shrink_succeeds = true;
  loop.Tick(f, f);
  f.clock += 31s;
  loop.Tick(f, f);
  EXPECT_EQ(f.Of<NodeDown>().size(), 1u);
  EXPECT_EQ(f.shrinks.size(), 1u);
  EXPECT_TRUE(f.Of<JobInterrupted>().empty());
}

TEST(FailureDetectionTest, ADownNodeThatReportsAgainRejoinsAndTheQueueIsServed) {
  FakeEngineView f;
  FailureDetection loop(30s);
  const NodeIndex a = f.Node("a");
  loop.Tick(f, f);
  f.clock += 31s;
  loop.Tick(f, f);
  ASSERT_EQ(f.state().cluster.node(a).condition, NodeCondition::kDown);
  ASSERT_TRUE(loop.Heartbeat(a, f, f).has_value());
  ASSERT_EQ(f.Of<NodeUp>().size(), 1u);
  EXPECT_EQ(f.passes, 1);
  // Heard from just now: not down again within the timeout.
  f.clock += 30s;
  loop.Tick(f, f);
  EXPECT_EQ(f.Of<NodeDown>().size(), 1u);
}

TEST(FailureDetectionTest, ARemovedNodeIsRefusedAndNeverFoundDown) {
  FakeEngineView f;
  FailureDetection loop(30s);
  const NodeIndex a = f.Node("a");
  f.Apply(NodeDrainStarted{a, "scale-in"});
  f.Apply(NodeRemoved{a});
  const Status refused = loop.Heartbeat(a, f, f);
  ASSERT_FALSE(refused.has_value());
  EXPECT_EQ(refused.error().code, ErrorCode::kFailedPrecondition);
  f.clock += 1h;
  loop.Tick(f, f);
  EXPECT_TRUE(f.events.empty());
}

TEST(FailureDetectionTest, AfterARestartEveryNodeCountsAsHeardFromThen) {
  FakeEngineView f;
  FailureDetection loop(30s);
  f.Node("a");
  f.clock += 1h;
  loop.Restarted(f);
  f.clock += 30s;
  loop.Tick(f, f);
  EXPECT_TRUE(f.Of<NodeDown>().empty());
  f.clock += 1s;
  loop.Tick(f, f);
  EXPECT_EQ(f.Of<NodeDown>().size(), 1u);
}

TEST(FailureDetectionTest, WithoutATimeoutNothingIsEverDown) {
  FakeEngineView f;
  FailureDetection loop(Duration(0));
  f.Node("a");
  loop.Tick(f, f);
  f.clock += 24h;
  loop.Tick(f, f);
  EXPECT_TRUE(f.events.empty());
}

TEST(EngineFailureTest, ADeadNodesJobsMoveToHealthyNodesAndTheNodeRejoinsScrubbed) {
  EngineConfig config;
  config.policy = "BestFit";
  config.heartbeat_timeout = 15s;
  EngineHarness h(config);
  const PoolId p = h.Pool("gpu");
  h.Node("n0");
  h.Node("n1");
  const TenantId a = h.Tenant("a", p, 16, 16);
  JobSpec s;
  s.tenant = a;
  s.demand = Whole(4, 4000);
  s.checkpointable = true;
  s.checkpoint_interval = 10min;
  const JobId j = *h.engine->Submit(s, h.now, h.sink);
  const NodeIndex first = h.engine->state().job(j).placements[0].node;
  const NodeIndex other = 1 - first;
  // Both nodes beat every 5 s; at 25 min the job's node stops.
  Instant t = kTimeOrigin;
  for (; t < kTimeOrigin + 25min; t += 5s) {
    ASSERT_TRUE(h.engine->Heartbeat(0, t, h.sink));
    ASSERT_TRUE(h.engine->Heartbeat(1, t, h.sink));
    h.engine->Tick(t, h.sink);
  }
  const Instant last_beat = t - 5s;
  for (; t < kTimeOrigin + 26min; t += 5s) {
    ASSERT_TRUE(h.engine->Heartbeat(other, t, h.sink));
    h.engine->Tick(t, h.sink);
  }
  ASSERT_EQ(h.Of<NodeDown>().size(), 1u);
  EXPECT_EQ(h.Of<NodeDown>()[0].node, first);
  ASSERT_EQ(h.Of<JobInterrupted>().size(), 1u);
  // Lost: the 5 minutes since the checkpoint at 20 min (plus the detection delay).
  EXPECT_EQ(h.Of<JobInterrupted>()[0].lost_work, last_beat + 20s - (kTimeOrigin + 20min));
  EXPECT_EQ(h.state(j), JobState::kRunning);
  EXPECT_EQ(h.engine->state().job(j).placements[0].node, other);
  Instant down_at{}, replaced_at{};
  for (const Event& e : h.events) {
    if (std::holds_alternative<NodeDown>(e.body)) down_at = e.at;
    if (const auto* pl = std::get_if<JobPlaced>(&e.body); pl && pl->job == j) replaced_at = e.at;
  }
  EXPECT_EQ(replaced_at, down_at);  // re-placed in the same step as the failure was detected
  EXPECT_LE(down_at - last_beat, 20s);
  // The node comes back: its GPUs are scrubbed and it takes work again.
  ASSERT_TRUE(h.engine->Heartbeat(first, t, h.sink));
  ASSERT_EQ(h.Of<NodeUp>().size(), 1u);
  EXPECT_EQ(h.engine->state().cluster.node(first).condition, NodeCondition::kReady);
  for (int g = 0; g < 8; ++g) EXPECT_EQ(h.engine->state().cluster.node(first).dirty_owner[g], kClean);
}

}  // namespace
}  // namespace gpupool
