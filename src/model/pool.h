// Pools: logical slices of the cluster (POOL-1..3). Every node belongs to
// exactly one pool, chosen by the first pool whose selector matches it.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "src/model/gpu_catalog.h"
#include "src/model/job.h"

namespace gpupool {

struct PoolSelector {
  GpuModelMask models = kAnyGpuModel;  // GPU models (performance dimension)
  std::vector<std::string> regions;    // empty = any region
};

struct Pool {
  PoolId id = 0;
  std::string name;
  PoolSelector selector;
  // Isolation (POOL-2): when non-empty, only these tenants may use the pool.
  std::vector<TenantId> dedicated_to;
};

// The capacity model of a pool (POOL-3), in GPU milli:
//   available = total - allocated - reserved - fragmented   (never negative)
// reserved: guarantees held idle for their tenants, plus capacity held for
//   a waiting gang job; fragmented: free milli that the smallest pending or
//   typical whole-GPU demand cannot use (free slivers of partly used GPUs,
//   and free GPUs on nodes without the CPU or memory to run anything).
struct PoolCapacity {
  int64_t total_milli = 0;
  int64_t allocated_milli = 0;
  int64_t reserved_milli = 0;
  int64_t fragmented_milli = 0;
  int64_t available_milli = 0;
};

}  // namespace gpupool
