#include "src/control/defragmentation.h"

#include <algorithm>

#include "src/control/defrag_planner.h"

namespace gpupool {

void Defragmentation::Tick(const EngineView& view, Actions& act) {
  const Instant now = view.now();
  if (!enabled_ || now < next_defrag_) return;
  next_defrag_ = now + every_;
  const EngineState& s = view.state();
  // Movable: running checkpointable single-replica jobs, not pipelines, not
  // bound by affinity rules, not already on their way somewhere.
  std::vector<MovableTask> movable;
  for (const auto& [id, j] : s.running) {
    if (j->state != JobState::kRunning || j->stopping != Job::Stop::kNone || !j->spec.checkpointable) continue;
    if (j->spec.replicas != 1 || j->spec.is_pipeline() || j->spec.affinity != 0 || j->spec.anti_affinity != 0) continue;
    if (s.recut_moved.contains(id) || planned_moves_.contains(id) || j->placements.empty()) continue;
    movable.push_back({id, j->placements[0].allocation, j->spec.checkpoint_duration});
  }
  if (movable.empty()) return;
  std::erase_if(migrations_started_, [&](Instant t) { return t <= now - std::chrono::hours(1); });
  const int32_t left = MigrationsLeft(migrations_started_, now, config_);
  if (left <= 0) return;
  // Destinations pass the placement framework's filters for the job's demand.
  const DefragFilter allowed = [&](const MovableTask& t, NodeIndex, const Node& n) {
    return view.Feasibility(n, s.cluster.allocation(t.allocation).demand) == FitFailure::kNone;
  };
  const DefragPlan plan = PlanDefrag(s.cluster, view.target().frag, movable, config_, left, allowed);
  if (!plan.triggered) return;
  for (const DefragStep& step : plan.steps) {
    for (const Migration& m : step.moves) {
      planned_moves_[m.job] = PlannedMove{m.to, m.to_gpus, s.job(m.job).borrowed};
      migrations_started_.push_back(now);
      act.Emit(MigrationStarted{m.job, m.to, m.to_gpus, plan.frag_pct_before});
      act.Emit(PreemptionStarted{m.job, -1, PreemptReason::kDefrag, true});
    }
  }
}

bool Defragmentation::Checkpointed(JobId id, const EngineView& view, Actions& act) {
  auto it = planned_moves_.find(id);
  if (it == planned_moves_.end()) return false;
  const PlannedMove move = it->second;
  planned_moves_.erase(it);
  const EngineState& s = view.state();
  const Job& j = s.job(id);
  if (j.state != JobState::kPending) return false;
  Demand d = j.spec.demand;
  d.allowed_pools = uint64_t{1} << j.pool;
  const Node& node = s.cluster.node(move.node);
  if (node.pool != j.pool || view.Feasibility(node, d) != FitFailure::kNone) return false;
  int taken = 0;
  for (int g = 0; g < node.gpu_count; ++g) {
    if (!(move.gpus >> g & 1)) continue;
    if (!GpuFits(node, g, d)) return false;
    ++taken;
  }
  if (d.gpu_count > 0 && taken != d.gpu_count) return false;
  if (const GpuMask dirty = s.cluster.NeedsScrub(move.node, move.gpus, j.spec.tenant)) {
    act.Emit(GpusScrubbed{move.node, dirty});
  }
  act.Emit(JobPlaced{id, j.pool, move.borrowed, {PlacedReplica{move.node, move.gpus}}});
  return true;
}

void Defragmentation::Observe(const Event& e) {
  // A migration ends with its job, or with its node.
  if (const auto* c = std::get_if<JobCancelled>(&e.body)) {
    planned_moves_.erase(c->job);
  } else if (const auto* f = std::get_if<JobFinished>(&e.body)) {
    planned_moves_.erase(f->job);
  } else if (const auto* i = std::get_if<JobInterrupted>(&e.body)) {
    planned_moves_.erase(i->job);
  }
}

}  // namespace gpupool
