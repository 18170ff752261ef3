#include "src/model/mig_charge.h"

#include <algorithm>
#include <optional>

#include "src/model/demand.h"
#include "src/model/mig.h"

namespace gpupool {

int32_t MigChargedMilli(int32_t gpu_milli, int32_t gpu_memory_mib, GpuModelMask allowed_models) {
  int32_t charged = -1;
  for (const MigTable& t : MigTables()) {
    const std::optional<GpuModelId> id = Catalog::Builtin().Find(t.gpu_model);
    if (!id || !(allowed_models >> *id & 1)) continue;
    const int p = SmallestProfile(t, ComputeSlicesFor(gpu_milli, t.compute_slices), gpu_memory_mib);
    if (p < 0) continue;
    const int32_t milli = std::min(kMilliPerGpu - 1, t.profiles[p].compute_slices * kMilliPerGpu / t.compute_slices);
    if (charged >= 0 && charged != milli) return gpu_milli;  // the models disagree
    charged = milli;
  }
  return charged < 0 ? gpu_milli : charged;
}

}  // namespace gpupool
