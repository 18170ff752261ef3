#include "src/sched/target_workload.h"

#include <map>

#include "src/sched/plugins/fgd_plus.h"
#include <vector>

namespace gpupool {

Result<TargetWorkload> TargetWorkloadOf(std::span<const Demand> demands, int64_t cluster_cpu_milli,
                                        int64_t cluster_gpu_milli, double typical_coverage) {
  std::map<int32_t, double> share_counts;
  for (const Demand& d : demands) {
    if (d.kind() == DemandKind::kGpuShare) share_counts[d.gpu_milli] += 1.0;
  }
  std::vector<ShareRate> rates;
  for (const auto& [milli, count] : share_counts) rates.push_back({milli, count});
  GP_ASSIGN_OR_RETURN(auto packing, SharePackingModel::Solve(rates));
  return TargetWorkload{FragmentationModel(ComputeTypicalDemands(demands, typical_coverage)), std::move(packing),
                        CpuReservePerGpuMilli(cluster_cpu_milli, cluster_gpu_milli, demands)};
}

}  // namespace gpupool
