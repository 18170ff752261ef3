// How a MIG instance is charged (issue 15): in quotas, accounting and its
// GPU's free compute, as its compute slices over the GPU's.
//
// Thread-safety: pure functions.
#pragma once

#include <cstdint>

#include "src/model/gpu_catalog.h"

namespace gpupool {

// What a MIG share is charged in quotas, accounting and its GPU's free
// compute (PART-2, issue 15): its profile's compute slices over the GPU's,
// in milli, rounded down so that a full GPU's instances sum to at most
// 1000 (a 3g instance of a 7-slice GPU is 428, a 1g 142; on the 4-slice A30
// a 1g is 250; an instance of the whole GPU is 999, so that it stays a
// share and never reads as a whole GPU). The profile is the one the share gets (SmallestProfile of
// its compute and memory). Every MIG-capable model `allowed_models` admits
// must agree on it (A100, H100 and H200 do: 7 slices); where they
// disagree, or no model has a profile for it, `gpu_milli` as asked.
int32_t MigChargedMilli(int32_t gpu_milli, int32_t gpu_memory_mib, GpuModelMask allowed_models);

}  // namespace gpupool
