#include "src/control/autoscaler.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <vector>

#include "src/base/rng.h"

namespace gpupool {
namespace {

using std::chrono::minutes;
using std::chrono::seconds;

struct Action {
  Instant at;
  ScaleDecision d;
};

// A pool whose load (in nodes' worth of GPUs) follows `load(t)`; nodes
// join at once. Observed every 30 s for `span`.
std::vector<Action> Drive(Autoscaler& a, int32_t& nodes, const std::function<double(Instant)>& load, Duration span) {
  std::vector<Action> actions;
  for (Instant t{}; t < Instant{} + span; t += seconds(30)) {
    const double l = load(t);
    PoolObservation o{t, std::min(1.0, l / std::max(1, nodes)), static_cast<int64_t>(std::max(0.0, l - nodes) * 4),
                      nodes, std::nullopt};
    const ScaleDecision d = a.Observe(o);
    if (d.kind == ScaleDecision::Kind::kOut) nodes += d.nodes;
    if (d.kind == ScaleDecision::Kind::kIn) nodes -= d.nodes;
    if (d.kind != ScaleDecision::Kind::kNone) actions.push_back({t, d});
  }
  return actions;
}

AutoscalerConfig Quiet() {
  AutoscalerConfig c;
  c.queue_threshold = 1000;  // utilization alone
  return c;
}

TEST(AutoscalerTest, SustainedHighUtilizationScalesOutAfterTheWindowStepByStep) {
  auto a = Autoscaler::Create(Quiet());
  ASSERT_TRUE(a.has_value());
  int32_t nodes = 10;
  const auto actions = Drive(*a, nodes, [](Instant) { return 19.0; }, minutes(40));
  ASSERT_GE(actions.size(), 3u);
  EXPECT_EQ(actions[0].at, Instant{} + minutes(5));  // not before the 5-minute window
  EXPECT_EQ(actions[0].d.kind, ScaleDecision::Kind::kOut);
  EXPECT_EQ(actions[0].d.nodes, 4);                  // bounded step
  EXPECT_NE(actions[0].d.reason.find("above 80%"), std::string::npos) << actions[0].d.reason;
  for (size_t i = 1; i < actions.size(); ++i) {
    EXPECT_EQ(actions[i].d.kind, ScaleDecision::Kind::kOut);
    EXPECT_GE(actions[i].at - actions[i - 1].at, minutes(5));  // observe again after each step
  }
  EXPECT_LE(19.0 / nodes, 0.8);  // it got there
}

TEST(AutoscalerTest, AQueueOverTheThresholdScalesOutAtOnce) {
  AutoscalerConfig c;
  c.queue_threshold = 10;
  auto a = Autoscaler::Create(c);
  const ScaleDecision d = a->Observe({Instant{}, 0.5, 11, 8, std::nullopt});
  EXPECT_EQ(d.kind, ScaleDecision::Kind::kOut);
  EXPECT_NE(d.reason.find("11 jobs queued"), std::string::npos);
  // Cooldown: not again right away, whatever the queue.
  EXPECT_EQ(a->Observe({Instant{} + minutes(1), 0.5, 50, 9, std::nullopt}).kind, ScaleDecision::Kind::kNone);
  EXPECT_EQ(a->Observe({Instant{} + minutes(3), 0.5, 50, 9, std::nullopt}).kind, ScaleDecision::Kind::kOut);
}

TEST(AutoscalerTest, LowUtilizationScalesInOnlyAfterItsWindowAndTheSafetyWindow) {
  auto a = Autoscaler::Create(Quiet());
  int32_t nodes = 10;
  // High for 6 minutes (one scale-out at 5), then nearly idle.
  const auto actions =
      Drive(*a, nodes, [](Instant t) { return t < Instant{} + minutes(6) ? 9.5 : 2.0; }, minutes(60));
  ASSERT_GE(actions.size(), 2u);
  EXPECT_EQ(actions[0].d.kind, ScaleDecision::Kind::kOut);
  EXPECT_EQ(actions[1].d.kind, ScaleDecision::Kind::kIn);
  // Low since 6 min: the 10-minute window ends at 16 min, but the safety
  // window after the scale-out at 5 min ends at 20 min.
  EXPECT_EQ(actions[1].at, Instant{} + minutes(20));
  EXPECT_NE(actions[1].d.reason.find("below 30%"), std::string::npos);
  EXPECT_GE(nodes, 1);
}

TEST(AutoscalerTest, NoisyLoadAroundAThresholdDoesNotOscillate) {
  AutoscalerConfig c = Quiet();
  auto a = Autoscaler::Create(c);
  int32_t nodes = 20;
  Rng rng(3);
  // Load hovering around 80% of the starting size (+-20% noise every 30 s),
  // with slow swings down toward the scale-in threshold, for 12 hours.
  const auto actions = Drive(
      *a, nodes,
      [&](Instant t) {
        const double hours = ToMillis(t - Instant{}) / 3.6e6;
        const double base = 16.0 * (0.6 + 0.4 * std::cos(hours));  // 3.2 .. 16 nodes' worth
        return base * (0.8 + 0.4 * rng.Uniform());
      },
      std::chrono::hours(12));
  ASSERT_FALSE(actions.empty());
  for (size_t i = 0; i < actions.size(); ++i) {
    // At most the configured actions in any hour.
    size_t in_hour = 0;
    for (size_t k = i; k < actions.size() && actions[k].at < actions[i].at + std::chrono::hours(1); ++k) ++in_hour;
    EXPECT_LE(in_hour, static_cast<size_t>(c.max_actions_per_hour)) << "from " << ToMillis(actions[i].at - Instant{});
    // No scale-in within the safety window after a scale-out.
    if (actions[i].d.kind != ScaleDecision::Kind::kIn) continue;
    for (size_t k = 0; k < i; ++k) {
      if (actions[k].d.kind == ScaleDecision::Kind::kOut) {
        EXPECT_GE(actions[i].at - actions[k].at, c.safety_window);
      }
    }
  }
  // It did follow the slow swings, both ways.
  const auto outs = std::count_if(actions.begin(), actions.end(),
                                  [](const Action& x) { return x.d.kind == ScaleDecision::Kind::kOut; });
  EXPECT_GE(outs, 1);
  EXPECT_GE(static_cast<long>(actions.size()) - outs, 1);
  EXPECT_LE(actions.size(), 12u * 4) << "too busy for 12 hours";
}

TEST(AutoscalerTest, StaysWithinItsBounds) {
  AutoscalerConfig c = Quiet();
  c.min_nodes = 3;
  c.max_nodes = 12;
  auto a = Autoscaler::Create(c);
  int32_t nodes = 10;
  Drive(*a, nodes, [](Instant) { return 100.0; }, minutes(60));
  EXPECT_EQ(nodes, 12);
  Drive(*a, nodes, [](Instant) { return 0.0; }, std::chrono::hours(3));
  EXPECT_EQ(nodes, 3);
}

TEST(AutoscalerTest, AForecastPreScalesAndHoldsOffAScaleIn) {
  auto a = Autoscaler::Create(Quiet());
  ScaleDecision d = a->Observe({Instant{}, 0.5, 0, 10, 0.95});
  EXPECT_EQ(d.kind, ScaleDecision::Kind::kOut);
  EXPECT_NE(d.reason.find("forecast"), std::string::npos);
  // Low now but expected back: no scale-in.
  auto b = Autoscaler::Create(Quiet());
  for (int m = 0; m <= 30; ++m) {
    EXPECT_EQ(b->Observe({Instant{} + minutes(m), 0.1, 0, 10, 0.5}).kind, ScaleDecision::Kind::kNone);
  }
}

TEST(AutoscalerTest, AScaleInRemovesNoMoreNodesThanMayGo) {
  AutoscalerConfig c = Quiet();
  c.safety_window = minutes(0);
  auto a = Autoscaler::Create(c);
  ASSERT_TRUE(a.has_value());
  // Idle, 10 nodes, none may go: no action however long it lasts.
  PoolObservation o{Instant{}, 0.0, 0, 10, std::nullopt, 0};
  for (; o.now < Instant{} + minutes(30); o.now += seconds(30)) {
    EXPECT_EQ(a->Observe(o).kind, ScaleDecision::Kind::kNone);
  }
  // Two may go: two go, and the reason says the step was cut.
  o.removable_nodes = 2;
  const ScaleDecision d = a->Observe(o);
  ASSERT_EQ(d.kind, ScaleDecision::Kind::kIn);
  EXPECT_EQ(d.nodes, 2);
  EXPECT_NE(d.reason.find("(2 of 4 nodes may go)"), std::string::npos) << d.reason;
}

TEST(AutoscalerTest, BadSettingsNameTheField) {
  auto field = [](AutoscalerConfig c) {
    auto a = Autoscaler::Create(c);
    return a ? std::string() : a.error().message.substr(0, a.error().message.find(':'));
  };
  AutoscalerConfig c;
  c.out_util = 1.5;
  EXPECT_EQ(field(c), "out_util");
  c = {};
  c.in_util = 0.9;
  EXPECT_EQ(field(c), "in_util");
  c = {};
  c.target_util = 0.9;
  EXPECT_EQ(field(c), "target_util");
  c = {};
  c.max_step = 0;
  EXPECT_EQ(field(c), "max_step");
  c = {};
  c.min_nodes = 5;
  c.max_nodes = 4;
  EXPECT_EQ(field(c), "min_nodes");
  c = {};
  c.in_for = Duration(0);
  EXPECT_EQ(field(c), "in_for");
}

}  // namespace
}  // namespace gpupool
