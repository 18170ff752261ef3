#include "src/control/autoscaler.h"

#include <algorithm>
#include <cmath>

namespace gpupool {
namespace {

std::string Pct(double x) { return std::to_string(static_cast<int>(std::lround(x * 100))) + "%"; }

}  // namespace

Result<Autoscaler> Autoscaler::Create(AutoscalerConfig c) {
  GP_TRY(CheckAutoscalerConfig(c));
  return Autoscaler(std::move(c));
}

bool Autoscaler::MayAct(Instant now) const {
  if (last_action_ && now < *last_action_ + config_.cooldown) return false;
  const Instant hour_ago = now - std::chrono::hours(1);
  const auto recent = std::count_if(actions_.begin(), actions_.end(), [&](Instant t) { return t > hour_ago; });
  return recent < config_.max_actions_per_hour;
}

void Autoscaler::Acted(Instant now, bool out) {
  last_action_ = now;
  if (out) last_out_ = now;
  actions_.push_back(now);
  while (!actions_.empty() && actions_.front() <= now - std::chrono::hours(1)) actions_.pop_front();
  // A new size: the windows start again.
  samples_.clear();
}

std::optional<double> Autoscaler::WindowMean(Instant now, Duration span) const {
  if (samples_.empty() || samples_.front().first > now - span) return std::nullopt;
  // Each sample holds until the next one.
  double area = 0;
  for (size_t i = 0; i < samples_.size(); ++i) {
    const Instant from = std::max(samples_[i].first, now - span);
    const Instant to = i + 1 < samples_.size() ? samples_[i + 1].first : now;
    if (to > from) area += samples_[i].second * static_cast<double>(ToMillis(to - from));
  }
  const double ms = static_cast<double>(ToMillis(span));
  // The last sample counts for an instant when it is `now` itself.
  return ms > 0 ? area / ms : samples_.back().second;
}

ScaleDecision Autoscaler::Observe(const PoolObservation& o) {
  const AutoscalerConfig& c = config_;
  samples_.emplace_back(o.now, o.utilization);
  const Duration history = std::max(c.out_for, c.in_for);
  while (samples_.size() > 1 && samples_[1].first <= o.now - history) samples_.pop_front();
  ScaleDecision d;
  if (!MayAct(o.now)) return d;
  const std::optional<double> high = WindowMean(o.now, c.out_for);
  const std::optional<double> low = WindowMean(o.now, c.in_for);

  // Scale out: sized so that the current load would sit at target_util.
  std::string why;
  if (high && *high > c.out_util) {
    why = "utilization " + Pct(*high) + " on average over " + std::to_string(ToMillis(c.out_for) / 1000) +
          " s, above " + Pct(c.out_util);
  } else if (o.queued_jobs > c.queue_threshold) {
    why = std::to_string(o.queued_jobs) + " jobs queued (threshold " + std::to_string(c.queue_threshold) + ")";
  } else if (o.forecast_utilization && *o.forecast_utilization > c.out_util) {
    why = "forecast utilization " + Pct(*o.forecast_utilization) + " above " + Pct(c.out_util);
  }
  if (!why.empty() && o.nodes < c.max_nodes) {
    const double load = std::max({high.value_or(o.utilization), o.forecast_utilization.value_or(0.0), c.target_util});
    const int32_t wanted = static_cast<int32_t>(std::ceil(std::max(1, o.nodes) * load / c.target_util)) - o.nodes;
    d.kind = ScaleDecision::Kind::kOut;
    d.nodes = std::clamp(wanted, 1, std::min(c.max_step, c.max_nodes - o.nodes));
    d.reason = why;
    Acted(o.now, true);
    return d;
  }

  // Scale in: only after a long low stretch, away from the last scale-out,
  // and not when the forecast says the load is coming back.
  const bool low_long = low && *low < c.in_util;
  const bool safe = !last_out_ || o.now >= *last_out_ + c.safety_window;
  const bool coming_back = o.forecast_utilization && *o.forecast_utilization >= c.in_util;
  if (low_long && safe && !coming_back && o.queued_jobs == 0 && o.nodes > c.min_nodes && o.removable_nodes > 0) {
    const double load = *low;
    const int32_t keep = std::max<int32_t>(c.min_nodes, static_cast<int32_t>(std::ceil(o.nodes * load / c.target_util)));
    const int32_t wanted = std::clamp(o.nodes - keep, 1, std::min(c.max_step, o.nodes - c.min_nodes));
    d.kind = ScaleDecision::Kind::kIn;
    d.nodes = std::min(wanted, o.removable_nodes);
    d.reason = "utilization " + Pct(*low) + " on average over " + std::to_string(ToMillis(c.in_for) / 1000) +
               " s, below " + Pct(c.in_util);
    if (d.nodes < wanted) d.reason += " (" + std::to_string(d.nodes) + " of " + std::to_string(wanted) + " nodes may go)";
    Acted(o.now, false);
  }
  return d;
}

}  // namespace gpupool
