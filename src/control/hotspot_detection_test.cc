// Hotspot detection (OPS-2): a node whose GPUs stay over a threshold for
// the window is cordoned, a movable job on the hot GPUs moves off (or the
// pool scales out when none can), and the node takes work again once cool.
#include "src/control/hotspot_detection.h"

#include <gtest/gtest.h>

#include "tests/engine_harness.h"
#include "tests/fake_engine_view.h"

namespace gpupool {
namespace {

using namespace std::chrono_literals;
using testing::EngineHarness;

EngineConfig Config() {
  EngineConfig c;
  c.policy = "BestFit";
  c.hotspots.enabled = true;
  c.hotspots.temperature_above_c = 85;
  c.hotspots.window = 2min;
  c.hotspots.cooldown = 10min;
  return c;
}

std::vector<GpuTelemetry> Temps(std::vector<double> celsius) {
  std::vector<GpuTelemetry> out;
  for (size_t g = 0; g < celsius.size(); ++g) out.push_back({static_cast<int32_t>(g), 50, 40, celsius[g]});
  return out;
}

TEST(HotspotTest, AHotNodeIsCordonedAndItsMovableJobMovesOff) {
  EngineHarness h(Config());
  const PoolId pool = h.Pool("gpu");
  const TenantId t = h.Tenant("team", pool, 0, 16);
  const NodeIndex n0 = h.Node("n0", 2);
  const NodeIndex n1 = h.Node("n1", 2);
  const JobId id = h.Submit(h.Spec(t, 2));
  const NodeIndex first = h.job(id).placements[0].node;
  const NodeIndex other = first == n0 ? n1 : n0;
  // A spike shorter than the window is nothing.
  ASSERT_TRUE(h.engine->ReportNodeTelemetry(first, Temps({91, 60}), h.now, h.sink).has_value());
  h.now += 1min;
  ASSERT_TRUE(h.engine->ReportNodeTelemetry(first, Temps({60, 60}), h.now, h.sink).has_value());
  for (int i = 0; i <= 4; ++i) {
    h.now += 30s;
    ASSERT_TRUE(h.engine->ReportNodeTelemetry(first, Temps({91, 60}), h.now, h.sink).has_value());
  }
  const auto hot = h.Of<HotspotDetected>();
  ASSERT_EQ(hot.size(), 1u);
  EXPECT_EQ(hot[0].node, first);
  EXPECT_EQ(hot[0].gpus, 1u);
  EXPECT_NE(hot[0].reason.find("GPU 0 temperature 91 C above 85 C"), std::string::npos) << hot[0].reason;
  EXPECT_EQ(h.engine->state().cluster.node(first).condition, NodeCondition::kCordoned);
  const auto moved = h.Of<PreemptionStarted>();
  ASSERT_EQ(moved.size(), 1u);
  EXPECT_EQ(moved[0].reason, PreemptReason::kHotspot);
  EXPECT_TRUE(moved[0].checkpoint);
  h.ExpectSnapshotRoundTrip();
  // Checkpointed, it starts again on the other node.
  ASSERT_TRUE(h.engine->CheckpointDone(id, h.now, h.sink).has_value());
  ASSERT_EQ(h.job(id).state, JobState::kRunning);
  EXPECT_EQ(h.job(id).placements[0].node, other);
  // Cool again: the node takes work.
  h.now += 30s;
  ASSERT_TRUE(h.engine->ReportNodeTelemetry(first, Temps({70, 60}), h.now, h.sink).has_value());
  EXPECT_EQ(h.Of<HotspotCleared>().size(), 1u);
  EXPECT_EQ(h.engine->state().cluster.node(first).condition, NodeCondition::kReady);
  EXPECT_TRUE(h.engine->state().hot_nodes.empty());
}

TEST(HotspotTest, WhenNothingCanMoveAScalingPoolScalesOut) {
  EngineConfig config = Config();
  PoolScalingConfig s;
  s.pool = "gpu";
  s.node = NodeTemplate{"auto", 64000, 1 << 19, 2, *Catalog::Builtin().Find("H100"), 0, "r", "z", 1};
  config.scaling.push_back(s);
  EngineHarness h(config);
  const PoolId pool = h.Pool("gpu");
  const TenantId t = h.Tenant("team", pool, 0, 16);
  const NodeIndex n0 = h.Node("n0", 2);
  h.Submit(h.Spec(t, 2, /*checkpointable=*/false));
  for (int i = 0; i <= 4; ++i) {
    h.now += 30s;
    ASSERT_TRUE(h.engine->ReportNodeTelemetry(n0, Temps({95, 95}), h.now, h.sink).has_value());
  }
  ASSERT_EQ(h.Of<HotspotDetected>().size(), 1u);
  EXPECT_TRUE(h.Of<PreemptionStarted>().empty());
  const auto out = h.Of<ScaleOutRequested>();
  ASSERT_EQ(out.size(), 1u);
  EXPECT_NE(out[0].reason.find("hotspot on node n0"), std::string::npos) << out[0].reason;
}

TEST(HotspotTest, BadSettingsAndReportsAreRefused) {
  HotspotConfig c;
  c.temperature_above_c = 200;
  auto bad = CheckHotspotConfig(c);
  ASSERT_FALSE(bad.has_value());
  EXPECT_NE(bad.error().message.find("temperature_above_c"), std::string::npos);
  c = HotspotConfig{};
  c.window = Duration(0);
  EXPECT_FALSE(CheckHotspotConfig(c).has_value());
  EngineHarness h(Config());
  h.Pool("gpu");
  const NodeIndex n0 = h.Node("n0", 2);
  auto report = h.engine->ReportNodeTelemetry(n0, {{5, 10, 10, 10}}, h.now, h.sink);
  ASSERT_FALSE(report.has_value());
  EXPECT_NE(report.error().message.find("GPU 5"), std::string::npos);
  EXPECT_FALSE(h.engine->ReportNodeTelemetry(7, {}, h.now, h.sink).has_value());
}

TEST(HotspotTest, OverThresholdsNamesEachMetric) {
  HotspotConfig c;
  c.util_above_pct = 90;
  EXPECT_EQ(OverThresholds(c, {3, 95, 97.5, 88}),
            "GPU 3 utilization 95% above 90%, memory 97.5% above 95%, temperature 88 C above 85 C");
  EXPECT_EQ(OverThresholds(c, {3, 50, -1, -1}), "");
}

// The loop on its own, through a fake Engine.
class HotspotDetectionTest : public ::testing::Test {
 protected:
  HotspotDetectionTest() : loop(Config().hotspots) {
    f.observer = &loop;
    node = f.Node("n0", 2);
  }
  void Report(double celsius) { loop.Telemetry(node, Temps({celsius, 40}), f, f); }

  testing::FakeEngineView f;
  HotspotDetection loop;
  NodeIndex node = -1;
};

TEST_F(HotspotDetectionTest, ANodeThatGoesDownStartsItsWindowAgain) {
  Report(90);
  f.Emit(NodeDown{node});
  f.Apply(NodeUp{node});
  f.clock += 2min;
  Report(90);  // hot since now, not since the first report
  EXPECT_TRUE(f.Of<HotspotDetected>().empty());
  f.clock += 2min;
  Report(90);
  ASSERT_EQ(f.Of<HotspotDetected>().size(), 1u);
  EXPECT_EQ(f.Of<HotspotDetected>()[0].gpus, GpuMask{1});
}

TEST_F(HotspotDetectionTest, MovableJobsMoveOffLowestPriorityFirstUpToMaxMoves) {
  // Two checkpointable halves of the hot GPU 0, and a job on the cool GPU 1.
  JobSpec high, low, cool;
  high.checkpointable = low.checkpointable = cool.checkpointable = true;
  high.priority = 5;
  high.demand = low.demand = testing::Share(500, 1000);
  f.Run(node, 0b1, high);
  const JobId moved = f.Run(node, 0b1, low);
  f.Run(node, 0b10, cool);
  Report(90);
  f.clock += 2min;
  Report(90);
  ASSERT_EQ(f.Of<HotspotDetected>().size(), 1u);
  ASSERT_EQ(f.moves.size(), 1u);  // max_moves: 1
  EXPECT_EQ(f.moves[0].job, moved);
  EXPECT_EQ(f.moves[0].reason, PreemptReason::kHotspot);
  EXPECT_TRUE(f.Of<ScaleOutRequested>().empty());
  EXPECT_EQ(f.passes, 1);
}

TEST_F(HotspotDetectionTest, WhenNothingCanMoveAScalingPoolAsksForANodeOnce) {
  f.Run(node, 0b1);  // cannot checkpoint: stays
  f.scaling.push_back(PoolScalingConfig{});
  f.scaling.back().pool = "gpu";
  Report(90);
  f.clock += 2min;
  Report(90);
  EXPECT_TRUE(f.moves.empty());
  ASSERT_EQ(f.Of<ScaleOutRequested>().size(), 1u);
  EXPECT_EQ(f.Of<ScaleOutRequested>()[0].nodes, 1);
  // Cool, then hot again after the cooldown: the request is still open.
  Report(50);
  EXPECT_EQ(f.Of<HotspotCleared>().size(), 1u);
  f.clock += 10min;
  Report(90);
  f.clock += 2min;
  Report(90);
  EXPECT_EQ(f.Of<HotspotDetected>().size(), 2u);
  EXPECT_EQ(f.Of<ScaleOutRequested>().size(), 1u);
}

}  // namespace
}  // namespace gpupool
