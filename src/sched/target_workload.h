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

  // Dependencies for BuildPolicy; valid while this object lives.
  PluginDeps deps() const { return PluginDeps{&frag, &packing}; }
};

// Typical demands cover `typical_coverage` of the demands (FGD uses 0.95);
// share prices use every GPU share in the list.
Result<TargetWorkload> TargetWorkloadOf(std::span<const Demand> demands, double typical_coverage = 0.95);

}  // namespace gpupool
