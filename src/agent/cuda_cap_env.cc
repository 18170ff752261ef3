#include "src/agent/cuda_cap_env.h"

#include <unistd.h>

#include <cstdio>
#include <filesystem>

#include "src/base/install_paths.h"

namespace gpupool {

namespace fs = std::filesystem;

std::string FindCudaCapLibrary() { return FindHelper(kCudaCapLibraryName, false); }

EnvList CudaCapEnv(const CudaCapShare& share, const std::string& library, const std::string& scratch_dir,
                   const EnvList& job_env, const std::string& contention_file) {
  const bool time_slice = share.gpu_mode == "time-slice";
  if (library.empty() || (!time_slice && share.gpu_mode != "mps")) return {};
  EnvList env;
  if (share.gpu_memory_mib > 0) env.emplace_back("GPUPOOL_CUDA_MEMORY_LIMIT_MIB", std::to_string(share.gpu_memory_mib));
  if (time_slice && share.gpu_milli > 0 && share.gpu_milli < 1000) {
    char text[16];
    std::snprintf(text, sizeof text, "0.%03d", static_cast<int>(share.gpu_milli));
    env.emplace_back("GPUPOOL_CUDA_COMPUTE_SHARE", text);
    if (!contention_file.empty()) env.emplace_back("GPUPOOL_CUDA_CONTENTION_FILE", contention_file);
  }
  if (env.empty()) return {};
  env.emplace_back("GPUPOOL_CUDA_CAP_STATE", scratch_dir + "/" + kCudaCapStateFile);
  std::string preload = library;
  for (const auto& [k, v] : job_env) {
    if (k == "LD_PRELOAD" && !v.empty()) preload = library + ":" + v;
  }
  env.emplace_back("LD_PRELOAD", preload);
  return env;
}

}  // namespace gpupool
