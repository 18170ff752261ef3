// Defragmentation in the Engine (FRAG-2): when due, plan migrations with
// src/engine/defrag.h and carry them out; see EngineConfig::defrag.
#include <algorithm>

#include "src/engine/engine.h"

namespace gpupool {

void Engine::Defragment(Instant now, const Sink& sink) {
  if (!config_.defrag || now < next_defrag_) return;
  next_defrag_ = now + config_.defrag_every;
  const Cluster& cluster = state_.cluster;
  // Movable: running checkpointable single-replica jobs, not pipelines, not
  // bound by affinity rules, not already on their way somewhere.
  std::vector<MovableTask> movable;
  for (const auto& [id, j] : state_.running) {
    if (j->state != JobState::kRunning || j->stopping != Job::Stop::kNone || !j->spec.checkpointable) continue;
    if (j->spec.replicas != 1 || j->spec.is_pipeline() || j->spec.affinity != 0 || j->spec.anti_affinity != 0) continue;
    if (state_.recut_moved.contains(id) || planned_moves_.contains(id) || j->placements.empty()) continue;
    movable.push_back({id, j->placements[0].allocation, j->spec.checkpoint_duration});
  }
  if (movable.empty()) return;
  std::erase_if(migrations_started_, [&](Instant t) { return t <= now - std::chrono::hours(1); });
  const int32_t left = MigrationsLeft(migrations_started_, now, config_.defrag_config);
  if (left <= 0) return;
  // Destinations pass the placement framework's filters for the job's demand.
  const DefragFilter allowed = [this](const MovableTask& t, NodeIndex, const Node& n) {
    return policy_.Feasibility(n, state_.cluster.allocation(t.allocation).demand) == FitFailure::kNone;
  };
  const DefragPlan plan = PlanDefrag(cluster, target_.frag, movable, config_.defrag_config, left, allowed);
  if (!plan.triggered) return;
  for (const DefragStep& step : plan.steps) {
    for (const Migration& m : step.moves) {
      const Job& j = state_.job(m.job);
      planned_moves_[m.job] = PlannedMove{m.to, m.to_gpus, j.borrowed};
      migrations_started_.push_back(now);
      low_polls_.erase(m.job);
      Emit(MigrationStarted{m.job, m.to, m.to_gpus, plan.frag_pct_before}, now, sink);
      Emit(PreemptionStarted{m.job, -1, PreemptReason::kDefrag, true}, now, sink);
    }
  }
}

bool Engine::PlaceMigrated(JobId id, Instant now, const Sink& sink) {
  auto it = planned_moves_.find(id);
  if (it == planned_moves_.end()) return false;
  const PlannedMove move = it->second;
  planned_moves_.erase(it);
  const Job& j = state_.job(id);
  if (j.state != JobState::kPending) return false;
  Demand d = j.spec.demand;
  d.allowed_pools = uint64_t{1} << j.pool;
  const Node& node = state_.cluster.node(move.node);
  if (node.pool != j.pool || policy_.Feasibility(node, d) != FitFailure::kNone) return false;
  int taken = 0;
  for (int g = 0; g < node.gpu_count; ++g) {
    if (!(move.gpus >> g & 1)) continue;
    if (!GpuFits(node, g, d)) return false;
    ++taken;
  }
  if (d.gpu_count > 0 && taken != d.gpu_count) return false;
  if (const GpuMask dirty = state_.cluster.NeedsScrub(move.node, move.gpus, j.spec.tenant)) {
    Emit(GpusScrubbed{move.node, dirty}, now, sink);
  }
  Emit(JobPlaced{id, j.pool, move.borrowed, {PlacedReplica{move.node, move.gpus}}}, now, sink);
  return true;
}

}  // namespace gpupool
