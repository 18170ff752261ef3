// Builders for tests: demands and hand-made nodes, so that a test reads
// like the situation it sets up.
#pragma once

#include <algorithm>
#include <utility>
#include <vector>

#include "src/model/cluster.h"
#include "src/model/demand.h"
#include "src/sched/fragmentation.h"

namespace gpupool::testing {

inline Demand CpuOnly(int64_t cpu, int64_t mem = 0) { return Demand{cpu, mem, 0, 0, kAnyGpuModel}; }
inline Demand Share(int32_t milli, int64_t cpu = 0, int64_t mem = 0, GpuModelMask models = kAnyGpuModel) {
  return Demand{cpu, mem, 1, milli, models};
}
inline Demand Whole(int32_t count, int64_t cpu = 0, int64_t mem = 0, GpuModelMask models = kAnyGpuModel) {
  return Demand{cpu, mem, count, kMilliPerGpu, models};
}

// A node built directly (not through a Cluster): free CPU, free milli per
// GPU, GPU model and free memory; totals equal the free amounts and the
// derived fields are computed here. No GPUs means no model. A GPU with less
// than 1000 free milli holds one time-sliced share (its memory untracked).
inline Node NodeOf(int64_t cpu_free, const std::vector<int>& gpu_free, GpuModelId model = 0,
                   int64_t mem_free = int64_t{1} << 20) {
  Node n;
  n.cpu_milli_total = n.cpu_milli_free = cpu_free;
  n.memory_mib_total = n.memory_mib_free = mem_free;
  n.gpu_count = static_cast<uint8_t>(gpu_free.size());
  n.gpu_model = gpu_free.empty() ? kNoGpuModel : model;
  // Model ids past the catalog (tests of mask edge cases) get a nominal 16 GiB.
  if (!gpu_free.empty()) {
    n.gpu_memory_mib = model < Catalog::Builtin().size()
                           ? static_cast<int32_t>(Catalog::Builtin().Get(model).memory_mib)
                           : 16384;
  }
  for (size_t g = 0; g < gpu_free.size(); ++g) {
    n.gpu_free_milli[g] = static_cast<int16_t>(gpu_free[g]);
    n.gpu_memory_free_mib[g] = n.gpu_memory_mib;
    n.dirty_owner[g] = kClean;
    if (gpu_free[g] < kMilliPerGpu) {
      n.gpu_residents[g] = 1;
      n.gpu_mode[g] = GpuMode::kTimeSlice;
    }
  }
  RecomputeGpuTotals(n);
  return n;
}

// A fragmentation model over hand-picked typical demands and popularities.
inline FragmentationModel TypicalOf(const std::vector<std::pair<Demand, double>>& demands) {
  std::vector<TypicalDemand> t;
  for (const auto& [d, p] : demands) t.push_back({d, p, 1});
  return FragmentationModel(std::move(t));
}

}  // namespace gpupool::testing
