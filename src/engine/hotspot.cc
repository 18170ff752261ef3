// Hotspot detection in the Engine (OPS-2); see src/engine/hotspot.h.
#include "src/engine/hotspot.h"

#include <algorithm>
#include <cmath>
#include <tuple>

#include "src/engine/engine.h"

namespace gpupool {

Status CheckHotspotConfig(const HotspotConfig& c) {
  auto pct = [](double v) { return std::isfinite(v) && v >= 0 && v <= 100; };
  if (!pct(c.util_above_pct)) return InvalidArgument("util_above_pct: must be in [0, 100] (0: off)");
  if (!pct(c.memory_above_pct)) return InvalidArgument("memory_above_pct: must be in [0, 100] (0: off)");
  if (!std::isfinite(c.temperature_above_c) || c.temperature_above_c < 0 || c.temperature_above_c > 150) {
    return InvalidArgument("temperature_above_c: must be in [0, 150] (0: off)");
  }
  if (c.util_above_pct == 0 && c.memory_above_pct == 0 && c.temperature_above_c == 0) {
    return InvalidArgument("util_above_pct: at least one threshold must be on");
  }
  if (c.window <= Duration(0)) return InvalidArgument("window: must be positive");
  if (c.max_moves < 0) return InvalidArgument("max_moves: must not be negative");
  if (c.cooldown < Duration(0)) return InvalidArgument("cooldown: must not be negative");
  return {};
}

std::string OverThresholds(const HotspotConfig& c, const GpuTelemetry& g) {
  std::string out;
  auto num = [](double v) {
    std::string s = std::to_string(std::lround(v * 10) / 10.0);
    s.erase(s.find_last_not_of('0') + 1);
    if (!s.empty() && s.back() == '.') s.pop_back();
    return s;
  };
  auto add = [&](const char* metric, double value, double limit, const char* unit) {
    if (limit <= 0 || value < 0 || value <= limit) return;
    if (!out.empty()) out += ", ";
    out += std::string(metric) + " " + num(value) + unit + " above " + num(limit) + unit;
  };
  add("utilization", g.util_pct, c.util_above_pct, "%");
  add("memory", g.memory_used_pct, c.memory_above_pct, "%");
  add("temperature", g.temperature_c, c.temperature_above_c, " C");
  return out.empty() ? out : "GPU " + std::to_string(g.gpu) + " " + out;
}

Status Engine::ReportNodeTelemetry(NodeIndex node, const std::vector<GpuTelemetry>& gpus, Instant now,
                                   const Sink& sink) {
  if (node < 0 || node >= state_.cluster.node_count()) return NotFound("node " + std::to_string(node) + " does not exist");
  const Node& n = state_.cluster.node(node);
  for (const GpuTelemetry& g : gpus) {
    if (g.gpu < 0 || g.gpu >= n.gpu_count) {
      return InvalidArgument("gpus: GPU " + std::to_string(g.gpu) + " is not on node " + state_.cluster.node_name(node) +
                             " (it has " + std::to_string(n.gpu_count) + ")");
    }
  }
  const HotspotConfig& c = config_.hotspots;
  if (!c.enabled) return {};
  GpuMask over = 0;
  std::string why;
  for (const GpuTelemetry& g : gpus) {
    const std::string text = OverThresholds(c, g);
    if (text.empty()) continue;
    over |= static_cast<GpuMask>(GpuMask{1} << g.gpu);
    why += (why.empty() ? "" : "; ") + text;
  }
  if (state_.hot_nodes.contains(node)) {
    if (over == 0) {
      Emit(HotspotCleared{node}, now, sink);
      SchedulePass(now, sink);
    }
    return {};
  }
  if (over == 0 || n.condition != NodeCondition::kReady) {
    hot_since_.erase(node);
    return {};
  }
  const Instant since = hot_since_.emplace(node, now).first->second;
  if (now - since < c.window) return {};
  if (auto last = hot_detected_.find(node); last != hot_detected_.end() && now - last->second < c.cooldown) return {};
  // Held for a preemptor: it starts there first; the node is judged again
  // at the next report once the hold is gone (its window keeps running).
  if (n.reserved_for >= 0) return {};
  hot_since_.erase(node);
  hot_detected_[node] = now;
  const std::string reason = why + " for " + std::to_string(ToMillis(now - since) / 1000) + " s";
  Emit(HotspotDetected{node, over, reason}, now, sink);
  ActOnHotspot(node, over, reason, now, sink);
  SchedulePass(now, sink);
  return {};
}

std::vector<const Job*> Engine::MovableJobsOn(NodeIndex n, GpuMask gpus) const {
  std::vector<const Job*> movable;
  for (JobId id : JobsOnNode(n)) {
    const Job& j = state_.job(id);
    if (j.state != JobState::kRunning || j.stopping != Job::Stop::kNone) continue;
    bool on = false;
    for (const ReplicaPlacement& r : j.placements) on |= r.node == n && (r.gpus & gpus) != 0;
    if (!on) continue;
    const bool shrinks = j.spec.elastic() && j.spec.replicas > j.spec.min_replicas;
    if (!shrinks && !j.spec.checkpointable && j.spec.kind != JobKind::kOnlineInference) continue;
    movable.push_back(&j);
  }
  return movable;
}

void Engine::MoveOff(const Job& j, NodeIndex n, PreemptReason reason, const std::string& where, Instant now,
                     const Sink& sink) {
  if (ShrinkElastic(j, n, where, now, sink)) return;
  const JobId id = j.id;
  const bool checkpoint = j.spec.checkpointable;
  low_polls_.erase(id);
  planned_moves_.erase(id);
  Emit(PreemptionStarted{id, -1, reason, checkpoint}, now, sink);
  if (!checkpoint) Emit(JobPreempted{id, Duration(0)}, now, sink);  // stateless: nothing to lose
}

void Engine::ActOnHotspot(NodeIndex n, GpuMask gpus, const std::string& reason, Instant now, const Sink& sink) {
  const std::string where = "hotspot on node " + state_.cluster.node_name(n) + ": " + reason;
  // Movable jobs on the hot GPUs, lowest priority first.
  std::vector<const Job*> movable = MovableJobsOn(n, gpus);
  std::sort(movable.begin(), movable.end(), [](const Job* a, const Job* b) {
    return std::make_tuple(a->spec.priority, a->id) < std::make_tuple(b->spec.priority, b->id);
  });
  int32_t moved = 0;
  for (const Job* j : movable) {
    if (moved >= config_.hotspots.max_moves) break;
    ++moved;
    MoveOff(*j, n, PreemptReason::kHotspot, where, now, sink);
  }
  if (moved > 0) return;
  // Nothing can move: more capacity, when the pool scales.
  const PoolId pool = state_.cluster.node(n).pool;
  for (const PoolScalingConfig& c : config_.scaling) {
    if (pool >= state_.pools.size() || c.pool != state_.pools[pool].name) continue;
    if (state_.pool_scaling[pool].requested_nodes > 0) return;  // already asked
    Emit(ScaleOutRequested{pool, 1, where}, now, sink);
    return;
  }
}

}  // namespace gpupool
