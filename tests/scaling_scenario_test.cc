// Elastic scaling through the simulator (SCALE-2, SCALE-4, SCALE-6,
// SCALE-7), on scenarios/scaling.yaml: the autoscaler does not oscillate,
// no task loses progress in a drain, and elastic training grows onto new
// nodes and shrinks off leaving ones without a restart.
#include <gtest/gtest.h>

#include <map>
#include <set>
#include <vector>

#include "src/sim/scenario.h"
#include "src/sim/scenario_runner.h"

namespace gpupool {
namespace {

const std::string kScenario = std::string(GPUPOOL_SOURCE_DIR) + "/scenarios/scaling.yaml";

struct ScalingRun {
  std::vector<Event> events;
  SimReport report;
};

ScalingRun RunScaling(const std::function<void(Scenario&)>& change = {}) {
  auto s = LoadScenario(kScenario);
  EXPECT_TRUE(s.has_value()) << s.error().message;
  if (change) change(*s);
  ScalingRun run;
  RunOptions o;
  o.check_invariants = true;
  o.on_event = [&run](const Event& e) { run.events.push_back(e); };
  auto r = RunScenario(*s, o);
  EXPECT_TRUE(r.has_value()) << r.error().message;
  if (r) run.report = *r;
  return run;
}

TEST(ScalingScenarioTest, NeverOscillates) {
  const ScalingRun run = RunScaling();
  auto s = LoadScenario(kScenario);
  const AutoscalerConfig& rule = s->engine.scaling.at(0).rule;
  // One action per decision instant: a scale-out, or a batch of drains.
  std::vector<std::pair<Instant, bool>> actions;  // (when, out)
  for (const Event& e : run.events) {
    const bool out = std::holds_alternative<ScaleOutRequested>(e.body);
    const bool in = std::holds_alternative<NodeDrainStarted>(e.body);
    if (!out && !in) continue;
    if (!actions.empty() && actions.back().first == e.at && actions.back().second == out) continue;
    actions.emplace_back(e.at, out);
  }
  ASSERT_GT(run.report.scaling.scale_outs, 3);
  ASSERT_GT(run.report.scaling.drains, 3);
  std::optional<Instant> last_out;
  for (size_t i = 0; i < actions.size(); ++i) {
    const auto [at, out] = actions[i];
    if (out) last_out = at;
    // No scale-in within the safety window after a scale-out.
    if (!out && last_out) {
      EXPECT_GE(at - *last_out, rule.safety_window) << "drain at " << ToMillis(at) << " s";
    }
    // At most the configured number of actions in any sliding hour, and
    // none within the cooldown of the one before.
    int in_hour = 0;
    for (size_t k = 0; k <= i; ++k) in_hour += actions[k].first > at - std::chrono::hours(1);
    EXPECT_LE(in_hour, rule.max_actions_per_hour) << "at " << ToMillis(at) << " s";
    if (i > 0) {
      EXPECT_GE(at - actions[i - 1].first, rule.cooldown) << "at " << ToMillis(at) << " s";
    }
  }
}

TEST(ScalingScenarioTest, EveryDrainedTaskResumesFromItsCheckpoint) {
  // Shorter scale-in windows drain more nodes with work on them.
  const ScalingRun run = RunScaling([](Scenario& s) {
    s.engine.scaling[0].rule.in_util = 0.5;
    s.engine.scaling[0].rule.in_for = std::chrono::minutes(5);
  });
  std::set<JobId> checkpointable;
  for (const Event& e : run.events) {
    if (const auto* s = std::get_if<JobSubmitted>(&e.body); s && s->spec.checkpointable) checkpointable.insert(s->job);
  }
  std::map<JobId, Instant> drained;  // checkpointable victims, until placed again
  std::map<JobId, Instant> stopped;  // every drained job, until placed again
  int moved = 0, resumed = 0, drain_moves = 0;
  double down_at_least_s = 0;  // stop to placement, plus the start latency
  std::set<NodeIndex> removed;
  auto s = LoadScenario(kScenario);
  for (const Event& e : run.events) {
    if (const auto* p = std::get_if<PreemptionStarted>(&e.body); p && p->reason == PreemptReason::kDrain) {
      ++drain_moves;
      stopped[p->victim] = e.at;
      if (checkpointable.contains(p->victim)) {
        EXPECT_TRUE(p->checkpoint) << "job " << p->victim << " drained without a checkpoint";
        drained[p->victim] = e.at;
        ++moved;
      }
    } else if (const auto* p = std::get_if<JobPreempted>(&e.body); p && drained.contains(p->victim)) {
      EXPECT_EQ(p->lost_work, Duration(0)) << "job " << p->victim << " lost work in a drain";
    } else if (const auto* p = std::get_if<JobPlaced>(&e.body); p && stopped.contains(p->job)) {
      down_at_least_s += ToSeconds(e.at - stopped[p->job] + s->start_latency);
      stopped.erase(p->job);
      resumed += drained.erase(p->job) > 0;
    } else if (const auto* n = std::get_if<NodeRemoved>(&e.body)) {
      removed.insert(n->node);
    } else if (const auto* p = std::get_if<JobPlaced>(&e.body)) {
      for (const PlacedReplica& r : p->replicas) EXPECT_FALSE(removed.contains(r.node)) << "placed on a removed node";
    }
  }
  EXPECT_GT(moved, 0);
  EXPECT_EQ(resumed + static_cast<int>(drained.size()), moved);
  EXPECT_LE(drained.size(), 2u) << "drained jobs still waiting at the horizon";
  EXPECT_EQ(run.report.scaling.drained_lost_work_s, 0);
  EXPECT_GT(run.report.scaling.nodes_removed, 0);
  // Each move's downtime runs from the stop to the process starting again
  // (start latency and the restore of the checkpoint included).
  const MoveReport& m = run.report.scaling.drain_moves;
  EXPECT_EQ(m.moves, drain_moves);
  EXPECT_GE(m.downtime_s.p50, ToSeconds(s->start_latency));
  EXPECT_GE(m.downtime_hours * 3600, down_at_least_s - 1e-6);
}

TEST(ScalingScenarioTest, ElasticTrainingGrowsOntoNewNodesAndShrinksOffLeavingOnes) {
  const ScalingRun run = RunScaling([](Scenario& s) {
    s.engine.scaling[0].rule.in_util = 0.5;
    s.engine.scaling[0].rule.in_for = std::chrono::minutes(5);
  });
  std::set<JobId> elastic;
  std::set<NodeIndex> provisioned, draining;
  std::map<JobId, std::vector<NodeIndex>> where;  // replica nodes of running elastic jobs
  NodeIndex nodes = 0;
  int grew_onto_new = 0, shrank_off_leaving = 0, finished = 0, restarted = 0;
  for (const Event& e : run.events) {
    if (const auto* s = std::get_if<JobSubmitted>(&e.body); s && s->spec.elastic()) {
      elastic.insert(s->job);
      EXPECT_EQ(s->spec.replicas, s->spec.min_replicas);
    } else if (const auto* n = std::get_if<NodeAdded>(&e.body)) {
      if (n->provisioned) provisioned.insert(nodes);
      ++nodes;
    } else if (const auto* d = std::get_if<NodeDrainStarted>(&e.body)) {
      draining.insert(d->node);
    } else if (const auto* p = std::get_if<JobPlaced>(&e.body); p && elastic.contains(p->job)) {
      where[p->job].clear();
      for (const PlacedReplica& r : p->replicas) where[p->job].push_back(r.node);
    } else if (const auto* r = std::get_if<JobResized>(&e.body)) {
      ASSERT_TRUE(elastic.contains(r->job));
      std::vector<NodeIndex>& at = where[r->job];
      for (auto it = r->removed.rbegin(); it != r->removed.rend(); ++it) {
        shrank_off_leaving += draining.contains(at[*it]);
        at.erase(at.begin() + *it);
      }
      for (const PlacedReplica& p : r->added) {
        grew_onto_new += provisioned.contains(p.node);
        at.push_back(p.node);
      }
    } else if (const auto* p = std::get_if<JobPreempted>(&e.body); p && elastic.contains(p->victim)) {
      ++restarted;
      EXPECT_EQ(p->lost_work, Duration(0)) << "elastic job " << p->victim << " lost work";
    } else if (const auto* f = std::get_if<JobFinished>(&e.body); f && elastic.contains(f->job)) {
      ++finished;
      where.erase(f->job);
    }
  }
  ASSERT_FALSE(elastic.empty());
  EXPECT_GT(grew_onto_new, 0);
  EXPECT_GT(shrank_off_leaving, 0);
  EXPECT_GT(run.report.scaling.elastic_resizes, 0);
  EXPECT_GT(finished, 0);
  EXPECT_EQ(run.report.scaling.drained_lost_work_s, 0);
  // Restarts (a drain of a job's last node, or a preemption) stay rare next to resizes.
  EXPECT_LT(restarted, run.report.scaling.elastic_resizes);
}

TEST(ScalingScenarioTest, WarmPoolNodesJoinFaster) {
  const ScalingRun warm = RunScaling();
  const ScalingRun cold = RunScaling([](Scenario& s) { s.engine.scaling[0].warm_pool.enabled = false; });
  EXPECT_GT(warm.report.scaling.warm_starts, 0);
  EXPECT_EQ(cold.report.scaling.warm_starts, 0);
  EXPECT_GT(warm.report.scaling.warm_node_hours, 0);
  // Requested at, joined at: warm nodes within the warm start.
  auto latencies = [](const ScalingRun& r) {
    std::vector<Duration> out;
    std::vector<Instant> asked;
    for (const Event& e : r.events) {
      if (const auto* s = std::get_if<ScaleOutRequested>(&e.body)) {
        for (int i = 0; i < s->nodes; ++i) asked.push_back(e.at);
      } else if (const auto* n = std::get_if<NodeAdded>(&e.body); n && n->provisioned && !asked.empty()) {
        out.push_back(e.at - asked.front());
        asked.erase(asked.begin());
      }
    }
    return out;
  };
  auto mean_s = [](const std::vector<Duration>& v) {
    double sum = 0;
    for (Duration d : v) sum += ToSeconds(d);
    return v.empty() ? 0 : sum / static_cast<double>(v.size());
  };
  EXPECT_LT(mean_s(latencies(warm)), mean_s(latencies(cold)));
}

}  // namespace
}  // namespace gpupool
