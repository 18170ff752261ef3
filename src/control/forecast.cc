#include "src/control/forecast.h"

namespace gpupool {

Result<HoltWinters> HoltWinters::Create(HoltWintersConfig c) {
  GP_TRY(CheckHoltWintersConfig(c));
  return HoltWinters(c);
}

void HoltWinters::Observe(double y) {
  const int n = config_.season_steps;
  const int slot = static_cast<int>(seen_ % n);
  last_ = y;
  if (seen_ < n) {
    // The first season: kept raw, then turned into level and offsets.
    season_[slot] = y;
    if (++seen_ == n) {
      double mean = 0;
      for (double v : season_) mean += v;
      mean /= n;
      for (double& v : season_) v -= mean;
      level_ = mean;
      trend_ = 0;
    }
    return;
  }
  const double previous = level_;
  level_ = config_.alpha * (y - season_[slot]) + (1 - config_.alpha) * (level_ + trend_);
  trend_ = config_.beta * (level_ - previous) + (1 - config_.beta) * trend_;
  season_[slot] = config_.gamma * (y - level_) + (1 - config_.gamma) * season_[slot];
  ++seen_;
}

double HoltWinters::Forecast(int steps_ahead) const {
  if (!seasonal()) return last_;
  const int n = config_.season_steps;
  const int64_t target = seen_ - 1 + steps_ahead;  // the step forecast
  return level_ + steps_ahead * trend_ + season_[static_cast<size_t>(target % n)];
}

}  // namespace gpupool
