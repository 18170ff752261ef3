// The autoscaler's decision rule (SCALE-2, SCALE-4), for one pool: given
// what the pool looks like now (utilization, queue, nodes, optionally a
// forecast), decide to add nodes, remove nodes, or wait. Deterministic, no
// clock or I/O: time arrives with each observation, so the simulator and
// the server share it (DESIGN section 2).
//
// The rules, every number configurable (AutoscalerConfig in
// src/engine/scaling.h, the seeds' as defaults):
//  - scale out when utilization averaged over the last `out_for` is above
//    `out_util`, or the queue holds more than `queue_threshold` jobs, or the
//    forecast (SCALE-3) for the coming minutes exceeds `out_util`;
//  - scale in when utilization averaged over the last `in_for` is below
//    `in_util`, no job is queued, and never within `safety_window` after a
//    scale-out; never more nodes than the observation says may go
//    (PoolObservation::removable_nodes: the loop keeps the capacity its
//    tenants' guarantees need, issue 16), and not at all when none may;
//  (averages over the window, so that noise around a threshold neither
//  triggers nor blocks an action; a window needs that much history at the
//  current size);
//  - after any action, wait `cooldown` (incremental scale-out: add a step,
//    observe, repeat);
//  - steps are bounded (`max_step` nodes, within [min_nodes, max_nodes]),
//    sized to bring utilization back to `target_util`;
//  - at most `max_actions_per_hour` actions in any sliding hour.
// Together these rule out oscillation: utilization that hovers around a
// threshold can trigger at most one action per cooldown, and a scale-in
// needs both a long low stretch and the safety window.
#pragma once

#include <cstdint>
#include <deque>
#include <limits>
#include <optional>
#include <string>

#include "src/base/status.h"
#include "src/base/time.h"
#include "src/engine/scaling.h"

namespace gpupool {

struct PoolObservation {
  Instant now{};
  double utilization = 0;  // allocated / total GPU capacity of the pool's ready nodes, 0..1
  int64_t queued_jobs = 0;
  int32_t nodes = 0;       // ready nodes (joining ones count as the provider reports them)
  std::optional<double> forecast_utilization;  // expected soon, at today's size (SCALE-3)
  // How many nodes a scale-in may remove at most (what the loop can drain
  // without going below its floor); unbounded by default.
  int32_t removable_nodes = std::numeric_limits<int32_t>::max();
};

struct ScaleDecision {
  enum class Kind : uint8_t { kNone, kOut, kIn } kind = Kind::kNone;
  int32_t nodes = 0;   // how many to add or remove
  std::string reason;  // for the event log and operators
};

class Autoscaler {
 public:
  // Fails as CheckAutoscalerConfig does.
  static Result<Autoscaler> Create(AutoscalerConfig config);

  // Observations must come in time order (any interval; the windows are
  // measured between them).
  ScaleDecision Observe(const PoolObservation& o);

  const AutoscalerConfig& config() const { return config_; }

 private:
  explicit Autoscaler(AutoscalerConfig c) : config_(std::move(c)) {}
  bool MayAct(Instant now) const;
  void Acted(Instant now, bool out);
  // The mean utilization over the last `span` (time-weighted), when the
  // history at this size covers it.
  std::optional<double> WindowMean(Instant now, Duration span) const;

  AutoscalerConfig config_;
  std::deque<std::pair<Instant, double>> samples_;  // since the last action
  std::optional<Instant> last_action_, last_out_;
  std::deque<Instant> actions_;  // within the last hour
};

}  // namespace gpupool
