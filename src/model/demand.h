// What one replica (one pod, in the trace's words) asks for.
//
// A demand is one of three kinds, decided by its GPU fields:
//   CPU-only      gpu_count == 0 (and gpu_milli == 0)
//   GPU share     gpu_count == 1 and 0 < gpu_milli < 1000: a fraction of one GPU
//   whole GPUs    gpu_count >= 1 and gpu_milli == 1000 on each
// allowed_models restricts which GPU models may serve it (the trace's
// gpu_spec); kAnyGpuModel when unconstrained. CPU-only demands ignore it.
// allowed_pools restricts the pools (bit i = pool id i) whose nodes may
// serve it; requirement names an entry of the engine's requirement table
// (attribute minimums, ecosystem; 0 = none); reservation is the job id that
// may use nodes reserved for it (-1 = none). The three default to "no
// constraint", which is all the FGD protocol uses.
#pragma once

#include <cstdint>
#include <string>

#include "src/base/fields.h"
#include "src/base/status.h"
#include "src/model/gpu_catalog.h"

namespace gpupool {

inline constexpr int32_t kMilliPerGpu = 1000;
inline constexpr int kMaxGpusPerNode = 16;

enum class DemandKind : uint8_t { kCpuOnly, kGpuShare, kWholeGpus };

// How a share of one GPU shares it (PART-1..3):
//   kAny        a slice of compute milli on any GPU in time-slice use (the
//               FGD trace's model; memory is not tracked unless asked);
//   kTimeSlice  time-sliced: compute milli plus gpu_memory_mib of memory;
//   kMps        CUDA MPS: active-thread percentage (gpu_milli / 10) plus a
//               pinned memory limit (gpu_memory_mib);
//   kMig        a MIG instance: the smallest profile of the GPU's model with
//               at least gpu_milli of its compute and gpu_memory_mib.
enum class ShareMode : uint8_t { kAny, kTimeSlice, kMps, kMig };
const char* ShareModeName(ShareMode m);
template <>
struct EnumNames<ShareMode> {
  static constexpr int kCount = 4;
  static const char* Name(ShareMode m) { return ShareModeName(m); }
};

struct Demand {
  int64_t cpu_milli = 0;
  int64_t memory_mib = 0;
  int32_t gpu_count = 0;
  int32_t gpu_milli = 0;  // per GPU
  GpuModelMask allowed_models = kAnyGpuModel;
  uint64_t allowed_pools = ~uint64_t{0};
  uint16_t requirement = 0;
  int64_t reservation = -1;
  ShareMode mode = ShareMode::kAny;  // shares only
  int32_t gpu_memory_mib = 0;        // per GPU, for shares (see ShareMode)
  // kMps shares only: the tenant whose MPS control daemon serves it, -1
  // elsewhere. MPS serves the clients of one user at a time and tasks run
  // under per-tenant uids, so a GPU in MPS use takes shares of one tenant
  // only (GpuFits). The engine sets it from the job's tenant (ScopeMpsShares
  // in src/model/job.h); it is derived, never written to logs or snapshots.
  int32_t mps_tenant = -1;

  DemandKind kind() const {
    if (gpu_count == 0) return DemandKind::kCpuOnly;
    return gpu_milli < kMilliPerGpu ? DemandKind::kGpuShare : DemandKind::kWholeGpus;
  }
  int64_t total_gpu_milli() const { return int64_t{gpu_count} * gpu_milli; }

  friend bool operator==(const Demand&, const Demand&) = default;

  // The journal's names (src/base/fields.h); mps_tenant is derived, never written.
  GP_FIELDS(d) {
    v("cpu_milli", d.cpu_milli);
    v("memory_mib", d.memory_mib);
    v("gpu_count", d.gpu_count);
    v("gpu_milli", d.gpu_milli);
    v("models", d.allowed_models);
    v("pools", d.allowed_pools);
    v("requirement", d.requirement);
    // Each only away from its default, so that logs written before it was
    // carried keep their canonical text (the engine clears reservation at
    // submission).
    v("reservation", d.reservation, d.reservation != -1);
    v("mode", d.mode, d.mode != ShareMode::kAny);
    v("gpu_memory_mib", d.gpu_memory_mib, d.gpu_memory_mib != 0);
  }
};

// Checks the field rules above. The error names the offending field, e.g.
// "gpu_milli: must be 1000 when gpu_count > 1 (got 500)".
Status ValidateDemand(const Demand& d);

}  // namespace gpupool
