// Operators' node commands in the simulator (issue 19, scenario section
// `node_ops`): a drain moves checkpointable work off with no work lost and
// the node takes nothing until it is uncordoned; a forced removal
// interrupts what runs there and the node leaves its pool.
#include <gtest/gtest.h>

#include <set>
#include <tuple>
#include <string>
#include <vector>

#include "src/sim/scenario.h"
#include "src/sim/scenario_runner.h"

namespace gpupool {
namespace {

using namespace std::chrono_literals;

constexpr std::string_view kScenario = R"(
name: node-ops
seed: 5
horizon: 6h
engine:
  policy: best
  tick: 30s
cluster:
  nodes:
    - {count: 3, name_prefix: h100, model: H100, gpus: 8, cpu_cores: 192, memory_gib: 2048}
pools:
  - {name: gpu, models: [H100]}
tenants:
  - name: ml
    quota: {gpu: {guaranteed_gpus: 0, limit_gpus: 24}}
workload:
  - tenant: ml
    arrivals: {process: poisson, rate_per_hour: 10, stop: 5h}
    jobs:
      - {name: train, gpus: 1, checkpointable: true, checkpoint_duration: 30s, duration: {fixed: 2h}}
node_ops:
  - {node: h100-0, at: 1h, action: drain, timeout: 10m, reason: kernel upgrade}
  - {node: h100-0, at: 3h, action: uncordon}
  - {node: h100-1, at: 4h, action: remove, force: true}
)";

TEST(NodeOpsScenarioTest, ADrainMovesWorkOffAndAForcedRemovalInterruptsIt) {
  auto s = ParseScenario(kScenario, "node-ops.yaml", "");
  ASSERT_TRUE(s.has_value()) << s.error().message;
  std::vector<Event> events;
  RunOptions o;
  o.check_invariants = true;
  o.on_event = [&events](const Event& e) { events.push_back(e); };
  auto r = RunScenario(*s, o);
  ASSERT_TRUE(r.has_value()) << r.error().message;
  std::set<JobId> drained;
  int placed_on_drained = 0, placed_after_uncordon = 0, interrupted = 0, removed = 0, drain_done = 0;
  Instant drain_at{}, uncordon_at{};
  for (const Event& e : events) {
    if (const auto* d = std::get_if<NodeDrainRequested>(&e.body)) {
      EXPECT_EQ(d->actor, "scenario");
      EXPECT_EQ(d->reason, "kernel upgrade");
      drain_at = e.at;
    } else if (std::holds_alternative<NodeDrained>(e.body)) {
      ++drain_done;
    } else if (std::holds_alternative<NodeUncordoned>(e.body)) {
      uncordon_at = e.at;
    } else if (const auto* p = std::get_if<PreemptionStarted>(&e.body); p && p->reason == PreemptReason::kDrain) {
      EXPECT_TRUE(p->checkpoint);
      drained.insert(p->victim);
    } else if (const auto* p = std::get_if<JobPreempted>(&e.body); p && drained.contains(p->victim)) {
      EXPECT_EQ(p->lost_work, Duration(0));
    } else if (const auto* p = std::get_if<JobPlaced>(&e.body)) {
      for (const PlacedReplica& at : p->replicas) {
        if (at.node != 0 || drain_at == Instant{}) continue;
        (uncordon_at == Instant{} ? placed_on_drained : placed_after_uncordon) += 1;
      }
    } else if (const auto* i = std::get_if<JobInterrupted>(&e.body)) {
      EXPECT_EQ(i->node, 1);
      EXPECT_EQ(e.at - kTimeOrigin, 4h);
      ++interrupted;
    } else if (const auto* n = std::get_if<NodeRemoved>(&e.body)) {
      EXPECT_EQ(n->node, 1);
      ++removed;
    }
  }
  EXPECT_EQ(drain_at - kTimeOrigin, 1h);
  EXPECT_GT(drained.size(), 0u) << "the jobs on h100-0 move off";
  EXPECT_EQ(drain_done, 1);
  EXPECT_EQ(placed_on_drained, 0);
  EXPECT_GT(placed_after_uncordon, 0) << "h100-0 takes work again once uncordoned";
  EXPECT_GT(interrupted, 0);
  EXPECT_EQ(removed, 1);
}

TEST(NodeOpsScenarioTest, BadNodeOpsNameTheField) {
  const std::string text(kScenario);
  auto bad = [&](const std::string& from, const std::string& to) {
    std::string t = text;
    t.replace(t.find(from), from.size(), to);
    return ParseScenario(t, "x.yaml", "");
  };
  for (const auto& [from, to, want] : std::vector<std::tuple<std::string, std::string, std::string>>{
           {"action: drain", "action: evict", "node_ops[0].action: unknown action 'evict'"},
           {"node: h100-0, at: 1h", "node: h100-9, at: 1h", "unknown node 'h100-9'"},
           {"action: uncordon}", "action: uncordon, timeout: 5m}", "node_ops[1].timeout: only for action: drain"},
           {"action: drain, timeout: 10m", "action: cordon, force: true", "node_ops[0].force: only for action: remove"},
           {"timeout: 10m", "timeout: 200h", "node_ops[0].timeout"},
       }) {
    auto r = bad(from, to);
    ASSERT_FALSE(r.has_value()) << to;
    EXPECT_NE(r.error().message.find(want), std::string::npos) << r.error().message;
  }
  // A removal the Engine refuses (work on the node, no force) fails the run, naming the entry.
  std::string busy = text;
  busy.replace(busy.find("action: remove, force: true"), 27, "action: remove");
  auto s = ParseScenario(busy, "x.yaml", "");
  ASSERT_TRUE(s.has_value()) << s.error().message;
  auto r = RunScenario(*s, RunOptions{});
  ASSERT_FALSE(r.has_value());
  EXPECT_NE(r.error().message.find("node_ops[2]: node 'h100-1' runs job"), std::string::npos) << r.error().message;
}

}  // namespace
}  // namespace gpupool
