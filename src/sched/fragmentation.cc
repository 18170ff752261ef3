#include "src/sched/fragmentation.h"

#include <algorithm>
#include <map>
#include <tuple>

namespace gpupool {

std::vector<TypicalDemand> ComputeTypicalDemands(std::span<const Demand> workload, double coverage) {
  std::vector<WeightedDemand> weighted;
  weighted.reserve(workload.size());
  for (const Demand& d : workload) weighted.push_back({d, 1.0});
  return ComputeTypicalDemands(weighted, coverage);
}

std::vector<TypicalDemand> ComputeTypicalDemands(std::span<const WeightedDemand> workload, double coverage) {
  using Key = std::tuple<int64_t, int32_t, int32_t, GpuModelMask>;  // cpu, gpu_milli, gpu_count, models
  std::map<Key, double> weights;
  double total = 0;
  for (const WeightedDemand& w : workload) {
    const Demand& d = w.demand;
    weights[Key{d.cpu_milli, d.gpu_milli, d.gpu_count, d.allowed_models}] += w.weight;
    total += w.weight;
  }

  std::vector<std::pair<Key, double>> groups(weights.begin(), weights.end());
  std::sort(groups.begin(), groups.end(), [](const auto& a, const auto& b) {
    if (a.second != b.second) return a.second > b.second;
    return a.first > b.first;  // larger cpu, gpu_milli, gpu_count, mask first
  });

  std::vector<TypicalDemand> typical;
  double covered = 0;
  for (const auto& [key, weight] : groups) {
    if (covered >= coverage * total) break;
    covered += weight;
    Demand d;
    d.cpu_milli = std::get<0>(key);
    d.gpu_milli = std::get<1>(key);
    d.gpu_count = std::get<2>(key);
    d.allowed_models = std::get<3>(key);
    typical.push_back({d, 0.0, weight});
  }
  const double covered_share = covered / total;
  for (auto& t : typical) t.popularity = (t.weight / total) / covered_share;
  return typical;
}

FragmentationModel::FragmentationModel(std::vector<TypicalDemand> typical) : typical_(std::move(typical)) {}

double FragmentationModel::NodeFragMilli(const Node& n) const {
  const int64_t total_free = n.gpu_milli_free_total;
  if (total_free == 0) return 0.0;
  // Accumulators by case, summed at the end in this order:
  // [gpu and cpu short, gpu short, (fits: not counted), cpu short,
  //  cpu-only fits, cpu-only short, model not allowed].
  double acc[7] = {0, 0, 0, 0, 0, 0, 0};
  const double free_d = static_cast<double>(total_free);
  for (const TypicalDemand& t : typical_) {
    const Demand& m = t.demand;
    const bool cpu_fits = n.cpu_milli_free >= m.cpu_milli;
    if (m.gpu_count == 0) {
      acc[cpu_fits ? 4 : 5] += t.popularity * free_d;
      continue;
    }
    if (!(m.allowed_models >> n.gpu_model & 1)) {
      acc[6] += t.popularity * free_d;
      continue;
    }
    int fitting = 0;
    int64_t below = 0;  // free milli on GPUs too small for m
    for (int g = 0; g < n.gpu_count; ++g) {
      const int16_t f = n.gpu_free_milli[g];
      if (f >= m.gpu_milli) {
        ++fitting;
      } else {
        below += f;
      }
    }
    const bool gpu_fits = fitting >= m.gpu_count;
    if (gpu_fits && cpu_fits) {
      acc[1] += t.popularity * static_cast<double>(below);
      acc[2] += t.popularity * static_cast<double>(total_free - below);
    } else if (gpu_fits) {
      acc[3] += t.popularity * free_d;
    } else if (cpu_fits) {
      acc[1] += t.popularity * free_d;
    } else {
      acc[0] += t.popularity * free_d;
    }
  }
  double sum = 0.0;
  for (int i : {0, 1, 3, 4, 5, 6}) sum += acc[i];
  return sum;
}

}  // namespace gpupool
