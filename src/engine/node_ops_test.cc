// Operators' node commands (issue 19): cordon, uncordon, drain, remove; how
// an operator's cordon lives beside a hotspot's; journaled, so that a
// replay and a restart from a snapshot decide as the original did.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "src/control/control_loops.h"
#include "src/engine/engine.h"
#include "src/engine/snapshot.h"
#include "tests/engine_harness.h"

namespace gpupool {
namespace {

using namespace std::chrono_literals;
using testing::EngineHarness;
using testing::EventsOf;

EngineConfig Config() {
  EngineConfig c;
  c.policy = "BestFit";
  c.hotspots.enabled = true;
  c.hotspots.temperature_above_c = 85;
  c.hotspots.window = 1min;
  c.hotspots.cooldown = 1min;
  return c;
}

std::vector<GpuTelemetry> Temps(double celsius, int gpus = 2) {
  std::vector<GpuTelemetry> out;
  for (int g = 0; g < gpus; ++g) out.push_back({g, 50, 40, celsius});
  return out;
}

NodeCondition Condition(const EngineHarness& h, NodeIndex n) { return h.engine->state().cluster.node(n).condition; }

// After every event of a test: a node is cordoned exactly while an
// operator, a hotspot or a scale-in holds it (and it is neither down nor
// removed), a removed node is held by none, and each pool's unavailable
// capacity is the sum of its cordoned and down nodes' GPUs.
void CheckMarksAfterEachEvent(EngineHarness& h) {
  h.sink = [&h, inner = h.sink](const Event& e) {
    inner(e);
    const EngineState& s = h.engine->state();
    std::vector<int64_t> unavailable(s.pools.size(), 0);
    for (NodeIndex i = 0; i < s.cluster.node_count(); ++i) {
      const Node& n = s.cluster.node(i);
      const bool held = s.cordons.contains(i) || s.hot_nodes.contains(i) || s.draining.contains(i);
      const std::string at = "node " + std::to_string(i) + " after " + ToJsonLine(e);
      switch (n.condition) {
        case NodeCondition::kReady: EXPECT_FALSE(held) << at; break;
        case NodeCondition::kCordoned: EXPECT_TRUE(held) << at; break;
        case NodeCondition::kRemoved: EXPECT_FALSE(held) << at; break;
        case NodeCondition::kDown: break;
      }
      if (n.condition == NodeCondition::kCordoned || n.condition == NodeCondition::kDown) {
        unavailable[n.pool] += n.gpu_milli_total();
      }
    }
    for (size_t p = 0; p < s.pools.size(); ++p) {
      EXPECT_EQ(s.pool_totals[p].unavailable_gpu_milli, unavailable[p]) << "pool " << p << " after " << ToJsonLine(e);
    }
  };
}

TEST(NodeOpsTest, ACordonedNodeTakesNoNewWorkKeepsWhatRunsAndUncordonRestoresIt) {
  EngineHarness h(Config());
  CheckMarksAfterEachEvent(h);
  const PoolId pool = h.Pool("gpu");
  const TenantId t = h.Tenant("team", pool, 0, 16);
  const NodeIndex n0 = h.Node("n0", 2);
  const JobId running = h.Submit(h.Spec(t, 1));
  ASSERT_EQ(h.state(running), JobState::kRunning);

  auto cordoned = h.engine->CordonNode(n0, "admin", "replacing a fan", h.now, h.sink);
  ASSERT_TRUE(cordoned.has_value()) << cordoned.error().message;
  EXPECT_TRUE(*cordoned);
  EXPECT_EQ(Condition(h, n0), NodeCondition::kCordoned);
  const auto c = h.Of<NodeCordoned>();
  ASSERT_EQ(c.size(), 1u);
  EXPECT_EQ(c[0].actor, "admin");
  EXPECT_EQ(c[0].reason, "replacing a fan");
  EXPECT_EQ(h.state(running), JobState::kRunning);  // what runs stays

  const JobId waiting = h.Submit(h.Spec(t, 1));
  h.Advance(2min);
  EXPECT_EQ(h.state(waiting), JobState::kPending);
  EXPECT_NE(h.engine->ExplainPending(waiting).find("not ready"), std::string::npos)
      << h.engine->ExplainPending(waiting);

  // Again: nothing new.
  const size_t before = h.events.size();
  auto again = h.engine->CordonNode(n0, "admin", "other words", h.now, h.sink);
  ASSERT_TRUE(again.has_value());
  EXPECT_FALSE(*again);
  EXPECT_EQ(h.events.size(), before);
  h.ExpectSnapshotRoundTrip();

  auto uncordoned = h.engine->UncordonNode(n0, "admin", h.now, h.sink);
  ASSERT_TRUE(uncordoned.has_value());
  EXPECT_TRUE(*uncordoned);
  EXPECT_EQ(Condition(h, n0), NodeCondition::kReady);
  EXPECT_EQ(h.state(waiting), JobState::kRunning);  // the pass after the uncordon placed it
  auto twice = h.engine->UncordonNode(n0, "admin", h.now, h.sink);
  ASSERT_TRUE(twice.has_value());
  EXPECT_FALSE(*twice);
  EXPECT_EQ(h.engine->state().pool_totals[pool].unavailable_gpu_milli, 0);
}

TEST(NodeOpsTest, AnOperatorsCordonAndAHotspotsDoNotUndoEachOther) {
  EngineHarness h(Config());
  CheckMarksAfterEachEvent(h);
  h.Pool("gpu");
  const NodeIndex n0 = h.Node("n0", 2);
  auto heat = [&](double c) {
    for (int i = 0; i < 3; ++i) {
      h.now += 30s;
      ASSERT_TRUE(h.engine->ReportNodeTelemetry(n0, Temps(c), h.now, h.sink).has_value());
    }
  };
  // Hot first, then the operator: the hotspot clearing keeps the operator's cordon.
  heat(95);
  ASSERT_EQ(h.Of<HotspotDetected>().size(), 1u);
  ASSERT_TRUE(*h.engine->CordonNode(n0, "admin", "", h.now, h.sink));
  heat(60);
  ASSERT_EQ(h.Of<HotspotCleared>().size(), 1u);
  EXPECT_EQ(Condition(h, n0), NodeCondition::kCordoned);
  ASSERT_TRUE(*h.engine->UncordonNode(n0, "admin", h.now, h.sink));
  EXPECT_EQ(Condition(h, n0), NodeCondition::kReady);

  // Hot again, and an uncordon without the operator's cordon changes nothing.
  h.now += 2min;
  heat(95);
  ASSERT_EQ(h.Of<HotspotDetected>().size(), 2u);
  ASSERT_TRUE(*h.engine->CordonNode(n0, "admin", "", h.now, h.sink));
  ASSERT_TRUE(*h.engine->UncordonNode(n0, "admin", h.now, h.sink));
  EXPECT_EQ(Condition(h, n0), NodeCondition::kCordoned);  // the hotspot's cordon stays
  EXPECT_FALSE(*h.engine->UncordonNode(n0, "admin", h.now, h.sink));
  EXPECT_EQ(Condition(h, n0), NodeCondition::kCordoned);
  heat(60);
  EXPECT_EQ(Condition(h, n0), NodeCondition::kReady);
  EXPECT_EQ(h.engine->state().pool_totals[0].unavailable_gpu_milli, 0);
}

TEST(NodeOpsTest, ADrainMovesCheckpointableWorkAndStopsTheRestAtTheTimeout) {
  EngineHarness h(Config());
  CheckMarksAfterEachEvent(h);
  const PoolId pool = h.Pool("gpu");
  const TenantId t = h.Tenant("team", pool, 0, 16);
  const NodeIndex n0 = h.Node("n0", 2);
  const JobId movable = h.Submit(h.Spec(t, 1, /*checkpointable=*/true));
  const JobId stuck = h.Submit(h.Spec(t, 1, /*checkpointable=*/false));
  const NodeIndex n1 = h.Node("n1", 2);
  ASSERT_EQ(h.job(movable).placements[0].node, n0);
  ASSERT_EQ(h.job(stuck).placements[0].node, n0);

  auto drained = h.engine->DrainNode(n0, "admin", "kernel upgrade", 10min, h.now, h.sink);
  ASSERT_TRUE(drained.has_value()) << drained.error().message;
  EXPECT_TRUE(*drained);
  const auto moves = h.Of<PreemptionStarted>();
  ASSERT_EQ(moves.size(), 1u);
  EXPECT_EQ(moves[0].victim, movable);
  EXPECT_EQ(moves[0].reason, PreemptReason::kDrain);
  EXPECT_TRUE(moves[0].checkpoint);
  EXPECT_FALSE(*h.engine->DrainNode(n0, "admin", "", 1min, h.now, h.sink));  // under way: kept as it is
  ASSERT_TRUE(h.engine->CheckpointDone(movable, h.now, h.sink).has_value());
  ASSERT_EQ(h.state(movable), JobState::kRunning);
  EXPECT_EQ(h.job(movable).placements[0].node, n1);
  h.ExpectSnapshotRoundTrip();

  // The rest runs until the deadline, then is stopped, queued again and placed elsewhere.
  h.Advance(9min);
  EXPECT_EQ(h.job(stuck).placements[0].node, n0);
  EXPECT_TRUE(h.Of<NodeDrained>().empty());
  h.Advance(1min);
  const auto stops = h.Of<JobPreempted>();
  ASSERT_EQ(stops.size(), 2u);
  EXPECT_EQ(stops[1].victim, stuck);
  EXPECT_GE(stops[1].lost_work, 10min);  // it never checkpointed
  ASSERT_EQ(h.state(stuck), JobState::kRunning);
  EXPECT_EQ(h.job(stuck).placements[0].node, n1);
  ASSERT_EQ(h.Of<NodeDrained>().size(), 1u);
  EXPECT_EQ(Condition(h, n0), NodeCondition::kCordoned);  // drained, still cordoned
  EXPECT_FALSE(h.engine->state().cordons.at(n0).draining);
  h.Advance(5min);
  EXPECT_EQ(h.Of<NodeDrained>().size(), 1u);
  // A new drain of the empty node is over at once.
  ASSERT_TRUE(*h.engine->DrainNode(n0, "admin", "", 0s, h.now, h.sink));
  EXPECT_EQ(h.Of<NodeDrained>().size(), 2u);
}

// A cordoned node that goes down comes back cordoned; one uncordoned while
// down comes back ready. The failure detector's NodeDown and NodeUp keep
// the operator's mark.
TEST(NodeOpsTest, ACordonOutlastsTheNodeGoingDownAndComingBack) {
  EngineConfig config = Config();
  config.heartbeat_timeout = 1min;
  EngineHarness h(config);
  CheckMarksAfterEachEvent(h);
  h.Pool("gpu");
  const NodeIndex n0 = h.Node("n0", 2);
  const NodeIndex n1 = h.Node("n1", 2);
  auto beat = [&](bool n0_too, int times) {
    for (int i = 0; i < times; ++i) {
      h.now += 20s;
      if (n0_too) {
        ASSERT_TRUE(h.engine->Heartbeat(n0, h.now, h.sink).has_value());
      }
      ASSERT_TRUE(h.engine->Heartbeat(n1, h.now, h.sink).has_value());
      h.engine->Tick(h.now, h.sink);
    }
  };
  beat(true, 2);
  ASSERT_TRUE(*h.engine->CordonNode(n0, "admin", "", h.now, h.sink));
  beat(false, 6);
  ASSERT_EQ(Condition(h, n0), NodeCondition::kDown);
  beat(true, 2);
  ASSERT_EQ(h.Of<NodeUp>().size(), 1u);
  EXPECT_EQ(Condition(h, n0), NodeCondition::kCordoned);  // back, and still cordoned

  beat(false, 6);
  ASSERT_EQ(Condition(h, n0), NodeCondition::kDown);
  ASSERT_TRUE(*h.engine->UncordonNode(n0, "admin", h.now, h.sink));
  EXPECT_EQ(Condition(h, n0), NodeCondition::kDown);  // down until it is back
  beat(true, 2);
  EXPECT_EQ(Condition(h, n0), NodeCondition::kReady);
  h.ExpectSnapshotRoundTrip();
}

// POOL-3 with an operator: a node cordoned while its lender recalls it
// goes home still cordoned; a borrowed node removed leaves from the pool
// it serves, and its lender no longer counts it as lent.
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

struct Lending {
  EngineHarness& h;
  PoolId serve = 0, train = 0;
  TenantId trainers = 0, servers = 0;
  NodeIndex borrowed = -1;
  JobId waiting = -1;
};

// "train" borrows one of "serve"'s two nodes for a queued job.
void Borrow(Lending& l) {
  EngineHarness& h = l.h;
  l.serve = h.Pool("serve", PoolSelector{kAnyGpuModel, {"east"}});
  l.train = h.Pool("train");
  l.trainers = h.Tenant("trainers", l.train, 0, 32);
  l.servers = h.Tenant("servers", l.serve, 0, 32);
  h.Node("t0", 8, "west");
  h.Node("s0", 8, "east");
  h.Node("s1", 8, "east");
  h.Submit(h.Spec(l.trainers, 8));
  l.waiting = h.Submit(h.Spec(l.trainers, 8));
  h.Advance(3min);
  ASSERT_EQ(h.Of<NodeLent>().size(), 1u);
  l.borrowed = h.Of<NodeLent>()[0].node;
  ASSERT_EQ(h.job(l.waiting).placements.at(0).node, l.borrowed);
}

EngineConfig LendingConfig() {
  EngineConfig config = Config();
  config.scaling = {Scaling("train", "t"), Scaling("serve", "s")};
  config.scaling[0].rule.max_nodes = 2;  // one node of its own, one borrowed
  return config;
}

TEST(NodeOpsTest, ANodeCordonedWhileItsLenderRecallsItGoesHomeCordoned) {
  EngineHarness h(LendingConfig());
  CheckMarksAfterEachEvent(h);
  Lending l{h};
  Borrow(l);
  if (::testing::Test::HasFatalFailure()) return;
  h.Submit(h.Spec(l.servers, 8));
  h.Submit(h.Spec(l.servers, 8));
  h.Advance(3min);
  ASSERT_EQ(h.Of<NodeDrainStarted>().size(), 1u);  // the lender wants it back
  ASSERT_TRUE(*h.engine->CordonNode(l.borrowed, "admin", "fan", h.now, h.sink));
  ASSERT_TRUE(h.engine->CheckpointDone(l.waiting, h.now, h.sink).has_value());
  h.Advance(1min);
  ASSERT_EQ(h.Of<NodeReturned>().size(), 1u);
  EXPECT_EQ(h.engine->state().cluster.node(l.borrowed).pool, l.serve);
  EXPECT_EQ(Condition(h, l.borrowed), NodeCondition::kCordoned);  // home, and still cordoned
  h.ExpectSnapshotRoundTrip();
  ASSERT_TRUE(*h.engine->UncordonNode(l.borrowed, "admin", h.now, h.sink));
  EXPECT_EQ(Condition(h, l.borrowed), NodeCondition::kReady);
}

TEST(NodeOpsTest, ABorrowedNodeRemovedLeavesThePoolItServes) {
  EngineHarness h(LendingConfig());
  CheckMarksAfterEachEvent(h);
  Lending l{h};
  Borrow(l);
  if (::testing::Test::HasFatalFailure()) return;
  const int64_t serve_gpus = h.engine->state().pool_totals[l.serve].gpu_milli;
  const int64_t train_gpus = h.engine->state().pool_totals[l.train].gpu_milli;
  ASSERT_TRUE(*h.engine->RemoveNode(l.borrowed, "admin", "", /*force=*/true, h.now, h.sink));
  EXPECT_EQ(h.Of<JobInterrupted>().size(), 1u);
  EXPECT_TRUE(h.engine->state().lent_nodes.empty());
  EXPECT_EQ(h.engine->state().pool_totals[l.train].gpu_milli, train_gpus - 8 * kMilliPerGpu);
  EXPECT_EQ(h.engine->state().pool_totals[l.serve].gpu_milli, serve_gpus);
  h.ExpectSnapshotRoundTrip();
}

// Elastic work shrinks off the drained node without a restart, stateless
// online inference moves at once, and neither comes back while it is
// cordoned: the drain is over as soon as they are gone.
TEST(NodeOpsTest, ADrainShrinksElasticWorkOffAndMovesStatelessInferenceAtOnce) {
  EngineConfig config = Config();
  config.elastic_resize_every = 5min;
  EngineHarness h(config);
  CheckMarksAfterEachEvent(h);
  const PoolId pool = h.Pool("gpu");
  const TenantId t = h.Tenant("team", pool, 0, 32);
  const NodeIndex n0 = h.Node("n0");
  const NodeIndex n1 = h.Node("n1");
  JobSpec elastic = h.Spec(t, 6);
  elastic.replicas = elastic.min_replicas = 1;
  elastic.max_replicas = 2;
  const JobId grows = h.Submit(elastic);
  h.Advance(30s);
  ASSERT_EQ(h.job(grows).placements.size(), 2u);  // one replica on each node
  JobSpec serve = h.Spec(t, 2, /*checkpointable=*/false);
  serve.kind = JobKind::kOnlineInference;
  const JobId server = h.Submit(serve);
  ASSERT_EQ(h.state(server), JobState::kRunning);
  const NodeIndex drained = h.job(server).placements[0].node;
  const NodeIndex other = drained == n0 ? n1 : n0;

  ASSERT_TRUE(*h.engine->DrainNode(drained, "admin", "", 1h, h.now, h.sink));
  const auto resized = h.Of<JobResized>();
  ASSERT_EQ(resized.size(), 2u);  // the growth, then the drain's shrink
  EXPECT_EQ(resized[1].job, grows);
  EXPECT_EQ(resized[1].removed.size(), 1u);
  EXPECT_NE(resized[1].reason.find("drains (operator admin)"), std::string::npos) << resized[1].reason;
  EXPECT_EQ(h.state(grows), JobState::kRunning);
  const auto moves = h.Of<PreemptionStarted>();
  ASSERT_EQ(moves.size(), 1u);
  EXPECT_EQ(moves[0].victim, server);
  EXPECT_FALSE(moves[0].checkpoint);
  ASSERT_EQ(h.Of<JobPreempted>().size(), 1u);
  EXPECT_EQ(h.Of<JobPreempted>()[0].lost_work, Duration(0));  // stateless: nothing lost
  EXPECT_EQ(h.Of<NodeDrained>().size(), 1u);                  // empty at once, well before its hour

  // The inference server runs again beside the elastic job's remaining
  // replica, and the elastic job does not grow back onto the cordoned node.
  h.Advance(20min);
  ASSERT_EQ(h.state(server), JobState::kRunning);
  EXPECT_EQ(h.job(server).placements[0].node, other);
  for (const ReplicaPlacement& r : h.job(grows).placements) EXPECT_EQ(r.node, other);
  EXPECT_EQ(h.engine->state().cluster.node(drained).gpu_milli_free_total, 8 * kMilliPerGpu);
  EXPECT_EQ(h.Of<JobInterrupted>().size(), 0u);
  h.ExpectSnapshotRoundTrip();
}

TEST(NodeOpsTest, RemoveRefusesABusyNodeUnlessForcedAndForceInterruptsAsANodeFailure) {
  EngineHarness h(Config());
  CheckMarksAfterEachEvent(h);
  const PoolId pool = h.Pool("gpu");
  const TenantId t = h.Tenant("team", pool, 0, 16);
  const NodeIndex n0 = h.Node("n0", 2);
  const JobId id = h.Submit(h.Spec(t, 2, /*checkpointable=*/false));
  const NodeIndex n1 = h.Node("n1", 2);
  const size_t before = h.events.size();
  auto refused = h.engine->RemoveNode(n0, "admin", "", /*force=*/false, h.now, h.sink);
  ASSERT_FALSE(refused.has_value());
  EXPECT_EQ(refused.error().code, ErrorCode::kFailedPrecondition);
  EXPECT_EQ(refused.error().message,
            "node 'n0' runs job " + std::to_string(id) +
                " (tenant team, replica 0): drain it first, or remove it with force to interrupt them");
  EXPECT_EQ(h.events.size(), before);

  h.now += 5min;
  auto removed = h.engine->RemoveNode(n0, "admin", "decommissioned", /*force=*/true, h.now, h.sink);
  ASSERT_TRUE(removed.has_value()) << removed.error().message;
  EXPECT_TRUE(*removed);
  const auto interrupted = h.Of<JobInterrupted>();
  ASSERT_EQ(interrupted.size(), 1u);
  EXPECT_EQ(interrupted[0].job, id);
  EXPECT_EQ(interrupted[0].lost_work, 5min);
  ASSERT_EQ(h.Of<NodeRemovalRequested>().size(), 1u);
  EXPECT_TRUE(h.Of<NodeRemovalRequested>()[0].force);
  ASSERT_EQ(h.Of<NodeRemoved>().size(), 1u);
  EXPECT_EQ(Condition(h, n0), NodeCondition::kRemoved);
  EXPECT_EQ(h.state(id), JobState::kRunning);  // queued again and placed on n1
  EXPECT_EQ(h.job(id).placements[0].node, n1);
  EXPECT_EQ(h.engine->state().pool_totals[pool].gpu_milli, 2000);
  EXPECT_EQ(h.engine->state().pool_totals[pool].unavailable_gpu_milli, 0);
  EXPECT_TRUE(h.engine->state().cordons.empty());
  h.ExpectSnapshotRoundTrip();

  // Removed already: nothing; the other commands are refused.
  EXPECT_FALSE(*h.engine->RemoveNode(n0, "admin", "", false, h.now, h.sink));
  auto cordon = h.engine->CordonNode(n0, "admin", "", h.now, h.sink);
  ASSERT_FALSE(cordon.has_value());
  EXPECT_EQ(cordon.error().message, "node 'n0' was removed");
  EXPECT_FALSE(h.engine->DrainNode(n0, "admin", "", 1min, h.now, h.sink).has_value());
  // An empty node goes without force, as does a drained one.
  const NodeIndex n2 = h.Node("n2", 2);
  EXPECT_TRUE(*h.engine->RemoveNode(n2, "admin", "", false, h.now, h.sink));
}

TEST(NodeOpsTest, BadArgumentsAreRefusedNamingTheArgument) {
  EngineHarness h(Config());
  CheckMarksAfterEachEvent(h);
  h.Pool("gpu");
  const NodeIndex n0 = h.Node("n0", 2);
  auto unknown = h.engine->CordonNode(9, "admin", "", h.now, h.sink);
  ASSERT_FALSE(unknown.has_value());
  EXPECT_EQ(unknown.error().code, ErrorCode::kNotFound);
  EXPECT_FALSE(h.engine->RemoveNode(-1, "admin", "", true, h.now, h.sink).has_value());
  auto negative = h.engine->DrainNode(n0, "admin", "", -1s, h.now, h.sink);
  ASSERT_FALSE(negative.has_value());
  EXPECT_TRUE(negative.error().message.starts_with("timeout: ")) << negative.error().message;
  EXPECT_FALSE(h.engine->DrainNode(n0, "admin", "", Engine::kMaxDrainTimeout + 1s, h.now, h.sink).has_value());
  auto wordy = h.engine->CordonNode(n0, "admin", std::string(Engine::kMaxOperatorReasonBytes + 1, 'x'), h.now, h.sink);
  ASSERT_FALSE(wordy.has_value());
  EXPECT_TRUE(wordy.error().message.starts_with("reason: ")) << wordy.error().message;
  auto garbled = h.engine->DrainNode(n0, "admin", "\xff\xfe", 1min, h.now, h.sink);
  ASSERT_FALSE(garbled.has_value());
  EXPECT_EQ(garbled.error().message, "reason: not valid UTF-8");
  EXPECT_TRUE(h.events.size() == 2u);  // PoolAdded, NodeAdded: nothing else
}

// A node held for a preemptor is let go when the operator cordons it.
TEST(NodeOpsTest, ACordonLetsGoOfAHold) {
  EngineHarness h(Config());
  CheckMarksAfterEachEvent(h);
  const PoolId pool = h.Pool("gpu");
  const TenantId t = h.Tenant("team", pool, 0, 2);
  const NodeIndex n0 = h.Node("n0", 2);
  const JobId victim = h.Submit(h.Spec(t, 2));
  JobSpec urgent = h.Spec(t, 2);
  urgent.priority = 10;  // preempts its own tenant's lower priority job
  const JobId preemptor = h.Submit(urgent);
  ASSERT_EQ(h.state(victim), JobState::kCheckpointing);
  ASSERT_EQ(h.engine->state().cluster.node(n0).reserved_for, preemptor);
  ASSERT_TRUE(*h.engine->CordonNode(n0, "admin", "", h.now, h.sink));
  EXPECT_EQ(h.engine->state().cluster.node(n0).reserved_for, -1);
  EXPECT_EQ(h.Of<ReservationReleased>().size(), 1u);
  ASSERT_TRUE(h.engine->CheckpointDone(victim, h.now, h.sink).has_value());
  EXPECT_EQ(h.state(preemptor), JobState::kPending);  // nowhere to go while n0 is cordoned
  ASSERT_TRUE(*h.engine->UncordonNode(n0, "admin", h.now, h.sink));
  EXPECT_EQ(h.state(preemptor), JobState::kRunning);
}

// Snapshot version 9 keeps the cordons; version 8 has none and still loads.
TEST(NodeOpsTest, TheSnapshotKeepsTheCordonsAndAVersion8OneLoads) {
  EngineHarness h(Config());
  CheckMarksAfterEachEvent(h);
  const PoolId pool = h.Pool("gpu");
  const TenantId t = h.Tenant("team", pool, 0, 16);
  const NodeIndex n0 = h.Node("n0", 2);
  const NodeIndex n1 = h.Node("n1", 2);
  h.Submit(h.Spec(t, 1, false));
  const std::string v8 = EncodeSnapshotAs(h.engine->state(), 8);
  ASSERT_EQ(v8[8], 8);
  auto old = DecodeSnapshot(v8, h.engine->config().lending);
  ASSERT_TRUE(old.has_value()) << old.error().message;
  EXPECT_TRUE(old->cordons.empty());
  EXPECT_EQ(EncodeSnapshot(*old), EncodeSnapshot(h.engine->state()));

  h.now += 1min;
  ASSERT_TRUE(*h.engine->CordonNode(n1, "admin", "fan", h.now, h.sink));
  ASSERT_TRUE(*h.engine->DrainNode(n0, "scenario", "upgrade", 10min, h.now, h.sink));
  auto back = DecodeSnapshot(EncodeSnapshot(h.engine->state()), h.engine->config().lending);
  ASSERT_TRUE(back.has_value()) << back.error().message;
  ASSERT_EQ(back->cordons.size(), 2u);
  const EngineState::OperatorCordon& c = back->cordons.at(n0);
  EXPECT_EQ(c.actor, "scenario");
  EXPECT_EQ(c.reason, "upgrade");
  EXPECT_EQ(c.since, h.now);
  EXPECT_TRUE(c.draining);
  EXPECT_EQ(c.drain_deadline, h.now + 10min);
  EXPECT_EQ(back->cordons.at(n1).reason, "fan");
  h.ExpectSnapshotRoundTrip();
}

// The commands' events replay to the same state, and an engine restored
// from a snapshot taken during a drain decides what the original decides.
TEST(NodeOpsTest, AReplayAndARestartFromASnapshotDecideAsTheOriginal) {
  EngineHarness h(Config());
  CheckMarksAfterEachEvent(h);
  const PoolId pool = h.Pool("gpu");
  const TenantId t = h.Tenant("team", pool, 0, 16);
  const NodeIndex n0 = h.Node("n0", 2);
  h.Submit(h.Spec(t, 1, false));
  const JobId stuck = h.Submit(h.Spec(t, 1, false));
  const NodeIndex n1 = h.Node("n1", 2);
  ASSERT_TRUE(*h.engine->CordonNode(n1, "admin", "", h.now, h.sink));
  ASSERT_TRUE(*h.engine->DrainNode(n0, "admin", "upgrade", 10min, h.now, h.sink));
  h.Advance(2min);
  ASSERT_TRUE(*h.engine->UncordonNode(n1, "admin", h.now, h.sink));
  h.Advance(1min);

  // Restart here: from the snapshot, and from the log replayed.
  auto restored = RestoreEngine(h.engine->config(), AttributeTable{}, *DecodeSnapshot(EncodeSnapshot(h.engine->state()),
                                                                                      h.engine->config().lending),
                                h.now);
  ASSERT_TRUE(restored.has_value()) << restored.error().message;
  EngineHarness replayed(Config());
  for (const Event& e : h.events) replayed.engine->Replay(e);
  EXPECT_EQ(EncodeSnapshot(replayed.engine->state()), EncodeSnapshot(h.engine->state()));

  std::vector<Event> original_later, restored_later;
  const Instant from = h.now;
  auto run = [&](Engine& e, std::vector<Event>& out) {
    const Engine::Sink sink = [&](const Event& ev) { out.push_back(ev); };
    Instant now = from;
    for (int i = 0; i < 30; ++i) {
      now += 30s;
      e.Tick(now, sink);
    }
    ASSERT_TRUE(*e.RemoveNode(n0, "admin", "", false, now, sink));
  };
  run(*h.engine, original_later);
  run(**restored, restored_later);
  ASSERT_FALSE(original_later.empty());
  ASSERT_EQ(original_later.size(), restored_later.size());
  for (size_t i = 0; i < original_later.size(); ++i) {
    EXPECT_EQ(ToJsonLine(original_later[i]), ToJsonLine(restored_later[i]));
  }
  EXPECT_EQ(h.job(stuck).placements[0].node, n1);
  EXPECT_EQ(EventsOf<NodeDrained>(original_later).size(), 1u);
}

}  // namespace
}  // namespace gpupool
