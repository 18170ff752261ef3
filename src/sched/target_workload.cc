#include "src/sched/target_workload.h"

#include <map>
#include <vector>

#include "src/sched/plugins/fgd_plus.h"

namespace gpupool {

Result<TargetWorkload> TargetWorkloadOf(std::span<const Demand> demands, int64_t cluster_cpu_milli,
                                        int64_t cluster_gpu_milli, double typical_coverage) {
  std::vector<WeightedDemand> weighted;
  weighted.reserve(demands.size());
  for (const Demand& d : demands) weighted.push_back({d, 1.0});
  return TargetWorkloadOf(weighted, cluster_cpu_milli, cluster_gpu_milli, typical_coverage);
}

Result<TargetWorkload> TargetWorkloadOf(std::span<const WeightedDemand> demands, int64_t cluster_cpu_milli,
                                        int64_t cluster_gpu_milli, double typical_coverage) {
  std::map<int32_t, double> share_weights;
  for (const WeightedDemand& w : demands) {
    if (w.demand.kind() == DemandKind::kGpuShare && w.weight > 0) share_weights[w.demand.gpu_milli] += w.weight;
  }
  std::vector<ShareRate> rates;
  for (const auto& [milli, weight] : share_weights) rates.push_back({milli, weight});
  GP_ASSIGN_OR_RETURN(auto packing, SharePackingModel::Solve(rates));
  return TargetWorkload{FragmentationModel(ComputeTypicalDemands(demands, typical_coverage)), std::move(packing),
                        CpuReservePerGpuMilli(cluster_cpu_milli, cluster_gpu_milli, demands)};
}

}  // namespace gpupool
