// The CUDA cap (tools/cuda_cap, libgpupool-cuda-cap.so) for tasks on
// time-sliced and MPS shares (issue 15): the agent preloads it into the
// task and tells it the share through its environment (tools/cuda_cap/
// cuda_cap.h documents the variables and what the library does).
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace gpupool {

inline constexpr const char* kCudaCapLibraryName = "libgpupool-cuda-cap.so";
// Where the oci runtime binds the library in every container, read-only.
inline constexpr const char* kContainerCudaCap = "/gpupool/lib/libgpupool-cuda-cap.so";
// The task-wide accounting file, in the task's scratch directory (writable,
// one per attempt: a new attempt starts with nothing accounted).
inline constexpr const char* kCudaCapStateFile = ".gpupool-cuda-cap";

// The library beside the gpupool binary (a build directory or an install)
// or in /usr/lib/gpupool; "" when there is none (tasks then run uncapped).
std::string FindCudaCapLibrary();

struct CudaCapShare {
  std::string gpu_mode;  // the task order's
  int32_t gpu_milli = 0;
  int64_t gpu_memory_mib = 0;
};

using EnvList = std::vector<std::pair<std::string, std::string>>;

// What to add to the task's environment: for "time-slice", the share's GPU
// memory and its compute (gpu_milli / 1000; none for a whole GPU's worth);
// for "mps", the memory only: MPS's active thread percentage already caps
// compute, and pacing on top would cap it twice. Nothing for other modes or
// when there is nothing to cap. `library` and `scratch_dir` are paths as the
// task sees them; a job's own LD_PRELOAD (in job_env) is kept, after ours.
// `contention_file` (as the task sees it; gpu_contention.h) goes with a
// compute share only, as GPUPOOL_CUDA_CONTENTION_FILE: the cap then lets
// the task use the whole GPU while nobody else is busy on it. Empty: the
// share is always enforced.
EnvList CudaCapEnv(const CudaCapShare& share, const std::string& library, const std::string& scratch_dir,
                   const EnvList& job_env, const std::string& contention_file = "");

}  // namespace gpupool
