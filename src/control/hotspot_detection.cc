#include "src/control/hotspot_detection.h"

#include <algorithm>
#include <cmath>
#include <tuple>

#include "src/engine/queries.h"

namespace gpupool {

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

void HotspotDetection::Tick(const EngineView& view, Actions& act) {
  (void)view;
  (void)act;  // reports drive it, not time
}

void HotspotDetection::Telemetry(NodeIndex node, const std::vector<GpuTelemetry>& gpus, const EngineView& view,
                                 Actions& act) {
  if (!config_.enabled) return;
  const Instant now = view.now();
  GpuMask over = 0;
  std::string why;
  for (const GpuTelemetry& g : gpus) {
    const std::string text = OverThresholds(config_, g);
    if (text.empty()) continue;
    over |= static_cast<GpuMask>(GpuMask{1} << g.gpu);
    why += (why.empty() ? "" : "; ") + text;
  }
  if (view.state().hot_nodes.contains(node)) {
    if (over == 0) {
      act.Emit(HotspotCleared{node});
      act.SchedulePass();
    }
    return;
  }
  const Node& n = view.state().cluster.node(node);
  if (over == 0 || n.condition != NodeCondition::kReady) {
    hot_since_.erase(node);
    return;
  }
  const Instant since = hot_since_.emplace(node, now).first->second;
  if (now - since < config_.window) return;
  if (auto last = hot_detected_.find(node); last != hot_detected_.end() && now - last->second < config_.cooldown) return;
  // Held for a preemptor: it starts there first; the node is judged again
  // at the next report once the hold is gone (its window keeps running).
  if (n.reserved_for >= 0) return;
  hot_since_.erase(node);
  hot_detected_[node] = now;
  const std::string reason = why + " for " + std::to_string(ToMillis(now - since) / 1000) + " s";
  act.Emit(HotspotDetected{node, over, reason});
  ActOnHotspot(node, over, reason, view, act);
  act.SchedulePass();
}

void HotspotDetection::ActOnHotspot(NodeIndex n, GpuMask gpus, const std::string& reason, const EngineView& view,
                                    Actions& act) {
  const EngineState& s = view.state();
  const std::string where = "hotspot on node " + s.cluster.node_name(n) + ": " + reason;
  // Movable jobs on the hot GPUs, lowest priority first.
  std::vector<const Job*> movable = MovableJobsOn(s, n, gpus);
  std::sort(movable.begin(), movable.end(), [](const Job* a, const Job* b) {
    return std::make_tuple(a->spec.priority, a->id) < std::make_tuple(b->spec.priority, b->id);
  });
  int32_t moved = 0;
  for (const Job* j : movable) {
    if (moved >= config_.max_moves) break;
    ++moved;
    act.MoveOff(*j, n, PreemptReason::kHotspot, where);
  }
  if (moved > 0) return;
  // Nothing can move: more capacity, when the pool scales.
  const PoolId pool = s.cluster.node(n).pool;
  if (view.ScalingOf(pool) == nullptr) return;
  if (s.pool_scaling[pool].requested_nodes > 0) return;  // already asked
  act.Emit(ScaleOutRequested{pool, 1, where});
}

void HotspotDetection::Observe(const Event& e) {
  if (const auto* down = std::get_if<NodeDown>(&e.body)) hot_since_.erase(down->node);
}

}  // namespace gpupool
