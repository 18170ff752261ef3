// How busy a simulated job keeps its GPUs (a fraction of one GPU, 0..1),
// piecewise constant over its run time: constant, bursty (busy / idle
// cycles), or a real per-pod duty-cycle series from the Alibaba GenAI 2026
// serving trace (one sample a minute, replayed in a loop).
//
// The simulator uses it three ways: the polls that drive idle reclamation
// (exact segment by segment), the idle GPU time a job holds (integrated over
// segments), and contention between tasks sharing a GPU (with the mean).
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "src/base/status.h"
#include "src/base/time.h"
#include "src/sim/scenario.h"

namespace gpupool {

inline constexpr const char* kGpuDutyCycleTraceFile = "alibaba-genai-2026-gpu-util/pod_gpu_duty_cycle_anon.csv";

// Per pod, its samples (fractions 0..1) a minute apart, pods in a fixed
// order (by pod key). Errors name file, line and column.
Result<std::vector<std::vector<double>>> LoadDutyCycles(const std::string& path);

class Utilization {
 public:
  Utilization() = default;
  // `series` is used for kTrace models (must outlive this); `phase` shifts
  // the model's time (bursty cycles and traces start at this offset).
  Utilization(const UtilizationModel& m, const std::vector<double>* series, Duration phase);

  // The value `t` after the job started running.
  double At(Duration t) const;
  // Start of the constant segment holding `t` (so the moment it became
  // what it is at t).
  Duration SegmentStart(Duration t) const;
  // Start of the next segment after `t` (Duration::max() when it never changes).
  Duration NextChange(Duration t) const;
  // The first moment at or after `t` when it is below `threshold` (or, for
  // NextAtOrAbove, at or above it); Duration::max() when that never happens.
  Duration NextBelow(Duration t, double threshold) const;
  Duration NextAtOrAbove(Duration t, double threshold) const;
  // When the stretch below `threshold` that holds `t` began (0 at the
  // latest: the job's start). Requires At(t) < threshold.
  Duration BelowSince(Duration t, double threshold) const;
  // Time within [a, b) spent below `threshold`.
  Duration TimeBelow(Duration a, Duration b, double threshold) const;
  double mean() const { return mean_; }
  bool valid() const { return valid_; }
  // Whether it ever drops below `threshold` (jobs that cannot need no polls).
  bool CanDropBelow(double threshold) const;

 private:
  UtilizationModel model_;
  const std::vector<double>* series_ = nullptr;
  Duration phase_{0};
  double mean_ = 0;
  bool valid_ = false;
  // Segments in one period of the model (bounds the walks above).
  size_t period_segments() const;
  template <typename Pred>
  Duration NextWhere(Duration t, Pred pred) const;
};

}  // namespace gpupool
