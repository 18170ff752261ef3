// What a node's agent reports about its accelerators (OPS-1): the devices
// (DeviceBackend::Discover) and their samples (DeviceBackend::Sample), as
// the agent protocol carries them (src/api/agent_protocol.h). Plain data.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace gpupool {

// A MIG instance (GPU instance + its compute instance) as the driver lists it.
struct MigInstance {
  std::string uuid;     // "MIG-...": what CUDA_VISIBLE_DEVICES takes
  std::string profile;  // "3g.40gb"
  int start = 0;        // first memory slice (the GPU instance placement start)
  int64_t memory_mib = 0;
  int gi_id = -1, ci_id = -1;  // the driver's GPU and compute instance ids; -1: not known
};

struct GpuDevice {
  int index = 0;
  std::string uuid;     // "GPU-...": what CUDA_VISIBLE_DEVICES takes
  std::string product;  // as the driver names it: "NVIDIA H100 80GB HBM3"
  std::string model;    // the catalog's name ("H100"); empty when no catalog model matches
  int64_t memory_mib = 0;
  bool mig_enabled = false;
  std::vector<MigInstance> mig;
  std::vector<int> nvlink_peers;  // indexes of this node's GPUs reached by an active NVLink, ascending
};

struct GpuProcess {
  int pid = 0;
  int64_t memory_mib = 0;
};

struct GpuSample {
  int index = 0;
  double util_pct = 0;  // SM activity over the driver's last sample period
  int64_t memory_used_mib = 0;
  int64_t memory_total_mib = 0;
  int temperature_c = -1;  // -1: unknown
  bool healthy = true;
  std::string health_detail;  // why not healthy
  std::vector<GpuProcess> processes;
};

}  // namespace gpupool
