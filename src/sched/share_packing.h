// Prices for packing GPU shares into GPUs, from the cutting-stock LP.
//
// Shares of one GPU arrive with sizes s_i (milli) at relative rates d_i.
// Packing them into GPUs (bins of 1000 milli) as well as possible is the
// cutting-stock problem; its LP relaxation
//     minimise  sum_p x_p   subject to  sum_p a_ip x_p >= d_i,  x >= 0
// over packing patterns p (a_ip shares of size i in one GPU) has dual prices
// y_i >= 0: the fraction of a GPU that a share of size i costs in the best
// packing of the whole stream. From them:
//     V(h)    = max sum_i y_i a_i  over multisets with sum_i a_i s_i <= h
//               (the most that a GPU hole of h free milli can be worth)
//     Loss(h, s_i) = V(h) - y_i - V(h - s_i)  >= 0
// Loss is 0 exactly when putting the share into the hole is consistent with
// some optimal packing, and grows with how much worth the hole loses beyond
// the share's own price. A placement policy that keeps Loss at 0 follows the
// LP's optimal patterns online (the idea behind LP-guided online stochastic
// bin packing); see src/sched/plugins/fgd_plus.h.
//
// The LP is solved by column generation: the restricted master LP with COIN-OR
// CLP, new patterns priced by an unbounded-knapsack dynamic program over
// 0..1000 milli.
//
// Immutable after Solve; safe to share between threads.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "src/base/status.h"

namespace gpupool {

struct ShareRate {
  int32_t milli = 0;  // 1..999
  double rate = 0;    // any positive scale: only ratios matter
};

class SharePackingModel {
 public:
  // Fails on a size outside 1..999 or a non-positive rate. An empty list
  // gives a model whose prices are all 0 (every Loss is 0).
  static Result<SharePackingModel> Solve(std::span<const ShareRate> shares);

  // y_i for a share of `milli`; sizes the model was not solved for cost 0.
  double Price(int32_t milli) const;
  // V(h) for 0 <= free_milli <= 1000.
  double HoleValue(int32_t free_milli) const { return hole_value_[free_milli]; }
  // Requires 0 < milli <= free_milli <= 1000.
  double Loss(int32_t free_milli, int32_t milli) const {
    const double loss = hole_value_[free_milli] - Price(milli) - hole_value_[free_milli - milli];
    return loss > 0 ? loss : 0;
  }
  // Optimal LP objective per unit of rate: GPUs needed per share arrival.
  double gpus_per_unit() const { return gpus_per_unit_; }
  int patterns_generated() const { return patterns_; }

 private:
  std::vector<double> price_by_milli_;  // index 0..999
  std::vector<double> hole_value_;      // index 0..1000
  double gpus_per_unit_ = 0;
  int patterns_ = 0;
};

}  // namespace gpupool
