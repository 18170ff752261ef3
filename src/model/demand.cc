#include "src/model/demand.h"

namespace gpupool {

const char* ShareModeName(ShareMode m) {
  switch (m) {
    case ShareMode::kAny: return "any";
    case ShareMode::kTimeSlice: return "time-slice";
    case ShareMode::kMps: return "mps";
    case ShareMode::kMig: return "mig";
  }
  return "unknown";
}

Status ValidateDemand(const Demand& d) {
  auto bad = [](const char* field, const std::string& why, int64_t got) {
    return InvalidArgument(std::string(field) + ": " + why + " (got " + std::to_string(got) + ")");
  };
  if (d.cpu_milli < 0) return bad("cpu_milli", "must not be negative", d.cpu_milli);
  if (d.memory_mib < 0) return bad("memory_mib", "must not be negative", d.memory_mib);
  if (d.gpu_count < 0) return bad("num_gpu", "must not be negative", d.gpu_count);
  if (d.gpu_count > kMaxGpusPerNode) {
    return bad("num_gpu", "must be at most " + std::to_string(kMaxGpusPerNode) + " GPUs on one node", d.gpu_count);
  }
  if (d.gpu_count == 0) {
    if (d.gpu_milli != 0) return bad("gpu_milli", "must be 0 when num_gpu is 0", d.gpu_milli);
    return {};
  }
  if (d.gpu_milli <= 0 || d.gpu_milli > kMilliPerGpu) {
    return bad("gpu_milli", "must be between 1 and 1000 when num_gpu > 0", d.gpu_milli);
  }
  if (d.gpu_count > 1 && d.gpu_milli != kMilliPerGpu) {
    return bad("gpu_milli", "must be 1000 when num_gpu > 1 (shares are of one GPU)", d.gpu_milli);
  }
  if (d.allowed_models == 0) return InvalidArgument("gpu_spec: allows no GPU model");
  if (d.gpu_memory_mib < 0) return bad("gpu_memory_mib", "must not be negative", d.gpu_memory_mib);
  if (d.mode != ShareMode::kAny && d.kind() != DemandKind::kGpuShare) {
    return InvalidArgument(std::string("sharing mode: ") + ShareModeName(d.mode) +
                           " applies to a share of one GPU (num_gpu 1, gpu_milli below 1000)");
  }
  return {};
}

}  // namespace gpupool
