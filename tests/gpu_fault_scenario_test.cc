// GPU health (EXEC-11) through the simulator: a GPU that turns unhealthy
// takes no new work, its checkpointable work moves off with no work lost,
// and it takes work again once it is healthy.
#include <gtest/gtest.h>

#include <set>
#include <vector>

#include "src/sim/scenario.h"
#include "src/sim/scenario_runner.h"

namespace gpupool {
namespace {

constexpr std::string_view kScenario = R"(
name: gpu-faults
seed: 5
horizon: 6h
engine:
  policy: best
  tick: 30s
cluster:
  nodes:
    - {count: 2, name_prefix: h100, model: H100, gpus: 8, cpu_cores: 192, memory_gib: 2048}
pools:
  - {name: gpu, models: [H100]}
tenants:
  - name: ml
    quota: {gpu: {guaranteed_gpus: 0, limit_gpus: 16}}
workload:
  - tenant: ml
    arrivals: {process: poisson, rate_per_hour: 10, stop: 5h}
    jobs:
      - {name: train, gpus: 1, checkpointable: true, checkpoint_duration: 30s, duration: {fixed: 2h}}
gpu_faults:
  - {node: h100-0, gpu: 0, at: 1h, for: 1h, xid: 48}
)";

TEST(GpuFaultScenarioTest, AnUnhealthyGpuShedsItsWorkAndTakesWorkAgainWhenHealthy) {
  auto s = ParseScenario(kScenario, "gpu-faults.yaml", "");
  ASSERT_TRUE(s.has_value()) << s.error().message;
  std::vector<Event> events;
  RunOptions o;
  o.check_invariants = true;
  o.on_event = [&events](const Event& e) { events.push_back(e); };
  auto r = RunScenario(*s, o);
  ASSERT_TRUE(r.has_value()) << r.error().message;
  std::vector<std::pair<Instant, GpuMask>> changes;
  std::set<JobId> moved;
  int placed_while_unhealthy = 0, placed_after = 0;
  for (const Event& e : events) {
    if (const auto* h = std::get_if<GpuHealthChanged>(&e.body)) {
      EXPECT_EQ(h->node, 0);
      changes.emplace_back(e.at, h->unhealthy);
      if (h->unhealthy != 0) {
        EXPECT_EQ(h->reason, "GPU 0: XID 48");
      }
    } else if (const auto* p = std::get_if<PreemptionStarted>(&e.body); p && p->reason == PreemptReason::kGpuUnhealthy) {
      EXPECT_TRUE(p->checkpoint);
      moved.insert(p->victim);
    } else if (const auto* p = std::get_if<JobPreempted>(&e.body); p && moved.contains(p->victim)) {
      EXPECT_EQ(p->lost_work, Duration(0));
    } else if (const auto* p = std::get_if<JobPlaced>(&e.body); p && !changes.empty()) {
      for (const PlacedReplica& at : p->replicas) {
        if (at.node != 0 || !(at.gpus & 1)) continue;
        (changes.back().second != 0 ? placed_while_unhealthy : placed_after) += 1;
      }
    }
  }
  ASSERT_EQ(changes.size(), 2u);
  EXPECT_EQ(changes[0].first - kTimeOrigin, std::chrono::hours(1));
  EXPECT_EQ(changes[0].second, 0b1);
  EXPECT_EQ(changes[1].first - kTimeOrigin, std::chrono::hours(2));
  EXPECT_EQ(changes[1].second, 0);
  EXPECT_EQ(moved.size(), 1u) << "the job on GPU 0 moves off";
  EXPECT_EQ(placed_while_unhealthy, 0);
  EXPECT_GT(placed_after, 0) << "GPU 0 takes work again";
}

TEST(GpuFaultScenarioTest, BadGpuFaultsNameTheField) {
  std::string text(kScenario);
  auto bad = [&](const std::string& from, const std::string& to) {
    std::string t = text;
    t.replace(t.find(from), from.size(), to);
    return ParseScenario(t, "x.yaml", "");
  };
  auto r = bad("gpu: 0, at: 1h", "gpu: 16, at: 1h");
  ASSERT_FALSE(r.has_value());
  EXPECT_NE(r.error().message.find("gpu_faults[0].gpu"), std::string::npos) << r.error().message;
  r = bad("node: h100-0, gpu", "node: h100-7, gpu");
  ASSERT_FALSE(r.has_value());
  EXPECT_NE(r.error().message.find("unknown node 'h100-7'"), std::string::npos) << r.error().message;
  r = bad("xid: 48", "xid: 48, colour: red");
  ASSERT_FALSE(r.has_value());
  EXPECT_NE(r.error().message.find("colour"), std::string::npos) << r.error().message;
}

}  // namespace
}  // namespace gpupool
