// Hotspots (OPS-2) through the simulator: a node in a hot spell is found
// hot after the window, its checkpointable work moves to cool nodes with
// no work lost, and it takes work again once the spell ends.
#include <gtest/gtest.h>

#include <set>
#include <vector>

#include "src/sim/scenario.h"
#include "src/sim/scenario_runner.h"

namespace gpupool {
namespace {

constexpr std::string_view kScenario = R"(
name: hot
seed: 3
horizon: 6h
engine:
  policy: best
  tick: 30s
  hotspots: {temperature_above_c: 85, window: 2m, max_moves: 2, cooldown: 10m}
cluster:
  nodes:
    - {count: 4, name_prefix: h100, model: H100, gpus: 8, cpu_cores: 192, memory_gib: 2048}
pools:
  - {name: gpu, models: [H100]}
tenants:
  - name: ml
    quota: {gpu: {guaranteed_gpus: 0, limit_gpus: 32}}
workload:
  - tenant: ml
    arrivals: {process: poisson, rate_per_hour: 14, stop: 5h}
    jobs:
      - {name: train, gpus: 2, checkpointable: true, checkpoint_duration: 30s,
         duration: {fixed: 2h}}
hot_spells:
  - {node: h100-0, at: 1h, for: 30m, temperature_c: 96}
)";

TEST(HotspotScenarioTest, AHotNodeShedsItsWorkAndTakesWorkAgainWhenCool) {
  auto s = ParseScenario(kScenario, "hot.yaml", "");
  ASSERT_TRUE(s.has_value()) << s.error().message;
  std::vector<Event> events;
  RunOptions o;
  o.check_invariants = true;
  o.on_event = [&events](const Event& e) { events.push_back(e); };
  auto r = RunScenario(*s, o);
  ASSERT_TRUE(r.has_value()) << r.error().message;
  std::optional<Instant> detected, cleared;
  std::set<JobId> moved;
  int placed_on_hot_while_hot = 0, placed_on_hot_after = 0;
  for (const Event& e : events) {
    if (const auto* h = std::get_if<HotspotDetected>(&e.body)) {
      EXPECT_EQ(h->node, 0);
      EXPECT_NE(h->reason.find("temperature 96 C above 85 C"), std::string::npos) << h->reason;
      if (!detected) detected = e.at;
    } else if (std::holds_alternative<HotspotCleared>(e.body)) {
      if (!cleared) cleared = e.at;
    } else if (const auto* p = std::get_if<PreemptionStarted>(&e.body); p && p->reason == PreemptReason::kHotspot) {
      EXPECT_TRUE(p->checkpoint);
      moved.insert(p->victim);
    } else if (const auto* p = std::get_if<JobPreempted>(&e.body); p && moved.contains(p->victim)) {
      EXPECT_EQ(p->lost_work, Duration(0));
    } else if (const auto* p = std::get_if<JobPlaced>(&e.body); p && detected) {
      for (const PlacedReplica& at : p->replicas) {
        if (at.node != 0) continue;
        (cleared ? placed_on_hot_after : placed_on_hot_while_hot) += 1;
      }
    }
  }
  ASSERT_TRUE(detected.has_value());
  // The spell starts at 1 h; the window is 2 min, reports come every tick.
  EXPECT_GE(*detected - kTimeOrigin, std::chrono::minutes(62));
  EXPECT_LE(*detected - kTimeOrigin, std::chrono::minutes(63));
  ASSERT_TRUE(cleared.has_value());
  EXPECT_GE(*cleared - kTimeOrigin, std::chrono::minutes(90));
  EXPECT_FALSE(moved.empty());
  EXPECT_LE(moved.size(), 2u);
  EXPECT_EQ(placed_on_hot_while_hot, 0);
  EXPECT_GT(placed_on_hot_after, 0);
  EXPECT_EQ(r->hotspots.detected, 1);
  EXPECT_EQ(r->hotspots.cleared, 1);
  EXPECT_EQ(r->hotspots.moves, static_cast<int64_t>(moved.size()));
}

TEST(HotspotScenarioTest, HotSpellsNeedHotspotDetection) {
  std::string text(kScenario);
  text.replace(text.find("  hotspots:"), text.find("cluster:") - text.find("  hotspots:"), "");
  auto s = ParseScenario(text, "hot.yaml", "");
  ASSERT_FALSE(s.has_value());
  EXPECT_NE(s.error().message.find("hot_spells"), std::string::npos) << s.error().message;
  EXPECT_NE(s.error().message.find("engine.hotspots"), std::string::npos) << s.error().message;
}

}  // namespace
}  // namespace gpupool
