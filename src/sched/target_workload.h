// What placement policies know about the workload they serve: its typical
// demands (FGD's fragmentation model) and the share-packing prices of its
// GPU-share stream. Both are computed from a list of demands that represents
// the expected mix (in the FGD protocol: the original pod list; in a live
// pool: recent history).
#pragma once

#include <span>

#include "src/base/status.h"
#include "src/model/demand.h"
#include "src/sched/fragmentation.h"
#include "src/sched/policy.h"
#include "src/sched/share_packing.h"

namespace gpupool {

struct TargetWorkload {
  FragmentationModel frag;
  SharePackingModel packing;
  int64_t cpu_reserve_per_gpu_milli = 0;

  // Dependencies for BuildPolicy; valid while this object lives.
  PluginDeps deps() const { return PluginDeps{&frag, &packing, cpu_reserve_per_gpu_milli}; }
};

// Typical demands cover `typical_coverage` of the demands (FGD uses 0.95);
// share prices use every GPU share in the list; the CPU reserve also needs
// the capacity of the cluster the policy will place on.
Result<TargetWorkload> TargetWorkloadOf(std::span<const Demand> demands, int64_t cluster_cpu_milli,
                                        int64_t cluster_gpu_milli, double typical_coverage = 0.95);
// The same over a weighted workload (a learned one: WorkloadLearner). With
// every weight 1 it equals TargetWorkloadOf of the demands.
Result<TargetWorkload> TargetWorkloadOf(std::span<const WeightedDemand> demands, int64_t cluster_cpu_milli,
                                        int64_t cluster_gpu_milli, double typical_coverage = 0.95);

}  // namespace gpupool
