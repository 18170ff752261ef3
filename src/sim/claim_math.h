// Small arithmetic shared by the claims (claims.cc, claim_ops.cc).
#pragma once

#include <cmath>

namespace gpupool {

// Two decimals, for reports.
inline double Round2(double v) { return std::round(v * 100.0) / 100.0; }

// Reduction of `ours` relative to `baseline`, in percent (positive = lower).
inline double ReductionPct(double baseline, double ours) {
  return baseline > 0 ? 100.0 * (baseline - ours) / baseline : 0.0;
}

// Change of `ours` relative to `baseline`, in percent (negative = lower).
inline double ChangePct(double baseline, double ours) { return -ReductionPct(baseline, ours); }

}  // namespace gpupool
