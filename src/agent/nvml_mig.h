// NVML's MIG lifecycle calls (EXEC-7), for the NVML backend
// (src/agent/nvml_backend.h): creating a GPU instance at a placement and its
// compute instance, and destroying both. Like the rest of the backend, the
// entry points are resolved from the library with dlsym, and nothing at
// build time depends on nvml.h: the slice of the C ABI used here is declared
// in nvml_mig.cc from NVIDIA's NVML API reference (values and layouts of
// nvml.h). The mode itself is never changed (nvmlDeviceSetMigMode is not
// even resolved): enabling MIG needs a GPU reset, an operator's action.
//
// How a table profile maps to NVML: the GPU-instance profile constant is
// chosen by its compute and memory slices and media extensions
// (NVML_GPU_INSTANCE_PROFILE_<N>_SLICE; _REV1 for "+me" profiles; _REV2 for
// the 1g profile with two memory slices, e.g. "1g.20gb" on an H100), and the
// device's profile id for it is asked of the driver
// (nvmlDeviceGetGpuInstanceProfileInfo), so ids that differ between GPUs
// and drivers are never assumed. The compute instance covers the GPU
// instance: NVML_COMPUTE_INSTANCE_PROFILE_<N>_SLICE with the profile's
// compute slices, the shared engine profile.
//
// Thread-safety: none (the backend's).
#pragma once

#include <string>
#include <vector>

#include "src/base/status.h"
#include "src/model/mig.h"

namespace gpupool {

// NVML handles and return codes as the backend passes them (nvmlDevice_t,
// nvmlReturn_t).
using NvmlDeviceHandle = void*;
using NvmlErrorStringFn = const char* (*)(int);

class NvmlMig {
 public:
  // Resolves the MIG lifecycle symbols from `library` (a dlopen handle).
  // A driver without them still serves everything else: Create and Destroy
  // then fail, naming what is missing.
  void Resolve(void* library);

  // GPU instance of table profile `profile` at memory slice `start` with
  // placement size = its memory slices, then its compute instance. On a
  // failure after the GPU instance exists, the GPU instance is destroyed
  // again. Returns the driver's GPU and compute instance ids.
  struct Created {
    int gi_id = -1, ci_id = -1;
  };
  Result<Created> Create(NvmlDeviceHandle device, int gpu, const MigTable& table, int profile, int start,
                         NvmlErrorStringFn error_string) const;
  // Destroys compute instance `ci_id` of GPU instance `gi_id`, then the GPU
  // instance. NotFound when the GPU instance is gone already.
  Status Destroy(NvmlDeviceHandle device, int gpu, int gi_id, int ci_id, NvmlErrorStringFn error_string) const;

  // The placements the driver allows for table profile `profile` ("0, 4"),
  // for messages; empty when it does not say.
  std::string PossibleStarts(NvmlDeviceHandle device, const MigTable& table, int profile) const;

 private:
  // The entry points, with handles and structures passed as void* (the
  // structures are declared in nvml_mig.cc). Required unless marked.
  struct Api {
    int (*DeviceGetGpuInstanceProfileInfo)(void*, unsigned, void*) = nullptr;
    int (*DeviceGetGpuInstancePossiblePlacements)(void*, unsigned, void*, unsigned*) = nullptr;  // optional
    int (*DeviceCreateGpuInstanceWithPlacement)(void*, unsigned, const void*, void**) = nullptr;
    int (*DeviceGetGpuInstanceById)(void*, unsigned, void**) = nullptr;
    int (*GpuInstanceGetInfo)(void*, void*) = nullptr;
    int (*GpuInstanceGetComputeInstanceProfileInfo)(void*, unsigned, unsigned, void*) = nullptr;
    int (*GpuInstanceCreateComputeInstance)(void*, unsigned, void**) = nullptr;
    int (*GpuInstanceGetComputeInstanceById)(void*, unsigned, void**) = nullptr;
    int (*ComputeInstanceGetInfo)(void*, void*) = nullptr;
    int (*ComputeInstanceDestroy)(void*) = nullptr;
    int (*GpuInstanceDestroy)(void*) = nullptr;
  };
  Api api_;
  std::string missing_;  // required symbols the library lacks, comma-separated
};

// The NVML_GPU_INSTANCE_PROFILE_* constant of table profile `p`, or -1 when
// none matches. Pure.
int NvmlGpuInstanceProfileOf(const MigTable& t, int p);
// The NVML_COMPUTE_INSTANCE_PROFILE_* constant for `compute_slices`, or -1. Pure.
int NvmlComputeInstanceProfileOf(int compute_slices);

}  // namespace gpupool
