// Seasonal demand forecasting (SCALE-3): additive Holt-Winters (level,
// trend and a fixed-length season, each smoothed exponentially), fed one
// sample per step and asked for the value some steps ahead. With a daily
// season (e.g. 288 five-minute steps) it predicts the morning ramp before
// the load arrives, which a purely reactive autoscaler only sees after.
//
// Deterministic and allocation-free after Create; no clock: the caller
// feeds samples at a fixed step.
#pragma once

#include <cstdint>
#include <vector>

#include "src/base/status.h"
#include "src/engine/scaling.h"

namespace gpupool {

class HoltWinters {
 public:
  // Fails as CheckHoltWintersConfig (src/engine/scaling.h) does.
  static Result<HoltWinters> Create(HoltWintersConfig config);

  // One sample (the next step's value).
  void Observe(double value);
  // Once a whole season has been seen: the value expected `steps_ahead`
  // (>= 1) steps after the last sample. Before that: the last sample (no
  // season known yet).
  double Forecast(int steps_ahead) const;
  bool seasonal() const { return seen_ >= config_.season_steps; }
  int64_t samples() const { return seen_; }

 private:
  explicit HoltWinters(HoltWintersConfig c) : config_(c), season_(c.season_steps, 0.0) {}
  HoltWintersConfig config_;
  std::vector<double> season_;  // by step within the season
  double level_ = 0, trend_ = 0, last_ = 0;
  int64_t seen_ = 0;
};

}  // namespace gpupool
