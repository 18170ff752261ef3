#include "src/sched/share_packing.h"

#include <coin/ClpSimplex.hpp>

#include <map>

namespace gpupool {
namespace {

constexpr int kCapacity = 1000;  // milli per GPU

// Unbounded knapsack over 0..kCapacity: best[h] = max sum of prices of
// shares fitting in h milli; `last[h]` is the type added last (-1: h-1 is as
// good), to read one optimal pattern back.
void Knapsack(const std::vector<int32_t>& size, const std::vector<double>& price, std::vector<double>& best,
              std::vector<int>& last) {
  best.assign(kCapacity + 1, 0.0);
  last.assign(kCapacity + 1, -1);
  for (int h = 1; h <= kCapacity; ++h) {
    best[h] = best[h - 1];
    for (size_t i = 0; i < size.size(); ++i) {
      if (size[i] <= h && best[h - size[i]] + price[i] > best[h] + 1e-12) {
        best[h] = best[h - size[i]] + price[i];
        last[h] = static_cast<int>(i);
      }
    }
  }
}

}  // namespace

Result<SharePackingModel> SharePackingModel::Solve(std::span<const ShareRate> shares) {
  std::map<int32_t, double> rate_by_size;
  for (const ShareRate& s : shares) {
    if (s.milli <= 0 || s.milli >= kCapacity) {
      return InvalidArgument("share size must be between 1 and 999 milli, got " + std::to_string(s.milli));
    }
    if (!(s.rate > 0)) return InvalidArgument("share rate must be positive for size " + std::to_string(s.milli));
    rate_by_size[s.milli] += s.rate;
  }
  SharePackingModel model;
  model.price_by_milli_.assign(kCapacity, 0.0);
  model.hole_value_.assign(kCapacity + 1, 0.0);
  if (rate_by_size.empty()) return model;

  double total_rate = 0;
  for (const auto& [size, rate] : rate_by_size) total_rate += rate;
  std::vector<int32_t> size;
  std::vector<double> demand;
  for (const auto& [s, rate] : rate_by_size) {
    size.push_back(s);
    demand.push_back(rate / total_rate);
  }
  const int k = static_cast<int>(size.size());

  // Restricted master LP, starting from one homogeneous pattern per size.
  ClpSimplex lp;
  lp.setLogLevel(0);
  lp.setOptimizationDirection(1);  // minimise
  {
    std::vector<double> row_lower(demand), row_upper(k, COIN_DBL_MAX);
    lp.resize(k, 0);
    for (int i = 0; i < k; ++i) {
      lp.setRowLower(i, row_lower[i]);
      lp.setRowUpper(i, row_upper[i]);
    }
  }
  auto add_pattern = [&lp](const std::vector<int>& count) {
    std::vector<int> rows;
    std::vector<double> values;
    for (size_t i = 0; i < count.size(); ++i) {
      if (count[i] > 0) {
        rows.push_back(static_cast<int>(i));
        values.push_back(count[i]);
      }
    }
    lp.addColumn(static_cast<int>(rows.size()), rows.data(), values.data(), 0.0, COIN_DBL_MAX, 1.0);
  };
  for (int i = 0; i < k; ++i) {
    std::vector<int> count(k, 0);
    count[i] = kCapacity / size[i];
    add_pattern(count);
  }

  std::vector<double> price(k, 0.0), best;
  std::vector<int> last;
  constexpr int kMaxPatterns = 5000;
  for (int iteration = 0;; ++iteration) {
    lp.primal();
    if (!lp.isProvenOptimal()) return FailedPrecondition("share packing LP did not reach an optimum");
    const double* dual = lp.dualRowSolution();
    for (int i = 0; i < k; ++i) price[i] = dual[i] > 0 ? dual[i] : 0.0;
    Knapsack(size, price, best, last);
    if (best[kCapacity] <= 1.0 + 1e-9 || iteration >= kMaxPatterns) break;
    std::vector<int> count(k, 0);
    for (int h = kCapacity; h > 0;) {
      if (last[h] < 0) {
        --h;
      } else {
        ++count[last[h]];
        h -= size[last[h]];
      }
    }
    add_pattern(count);
    ++model.patterns_;
  }
  model.gpus_per_unit_ = lp.objectiveValue();
  for (int i = 0; i < k; ++i) model.price_by_milli_[size[i]] = price[i];
  model.hole_value_ = best;
  return model;
}

double SharePackingModel::Price(int32_t milli) const {
  return milli > 0 && milli < kCapacity ? price_by_milli_[milli] : 0.0;
}

}  // namespace gpupool
