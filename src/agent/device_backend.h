// What the agent needs from a node's accelerators (OPS-1), behind one
// interface with two implementations:
//  - NVML (src/agent/nvml_backend.h): the NVIDIA driver's management library,
//    loaded at run time with dlopen, so the binary has no build-time
//    dependency on the driver and runs on machines without one;
//  - fake (src/agent/fake_backend.h): GPUs described on the command line
//    ("4xH100"), whose per-task utilization is the task's own CPU activity,
//    so that idle reclamation can be exercised with real processes.
//
// Thread-safety: none; the agent calls one backend from one thread.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "src/agent/dcgm_fields.h"
#include "src/base/status.h"
#include "src/model/device.h"

namespace gpupool {

// One running task, for per-task utilization: `pid` leads the task's
// process group (the executor starts every task in its own session), so
// the task's processes are those whose process group is `pid`.
struct TaskProbe {
  std::string key;  // the caller's name for the task
  int pid = 0;
  std::vector<int> gpus;  // GPU indexes the task was given
};
struct TaskUsage {
  double util_pct = 0;     // GPU utilization attributed to the task, 0..100
  int64_t memory_mib = 0;  // GPU memory its processes hold
};

// A character device node a task may use: `host_path` on the node shows as
// `path` inside the task's container; the devices cgroup allows
// major:minor.
struct DeviceNode {
  std::string host_path;
  std::string path;
  uint32_t major = 0, minor = 0;
  friend bool operator==(const DeviceNode&, const DeviceNode&) = default;
};

struct ScrubResult {
  int64_t bytes = 0;  // bytes zeroed
  double seconds = 0;
};

class DeviceBackend {
 public:
  virtual ~DeviceBackend() = default;
  virtual std::string name() const = 0;  // "nvml" or "fake"
  // The node's GPUs, by index. Fails with the driver's reason.
  virtual Result<std::vector<GpuDevice>> Discover() = 0;
  // Utilization, memory, temperature, health and processes, per GPU.
  virtual Result<std::vector<GpuSample>> Sample() = 0;
  // Per task, the utilization since the previous call that named the same
  // key (the first call: since the task started). Keys not named are
  // forgotten.
  virtual std::map<std::string, TaskUsage> SampleTasks(const std::vector<TaskProbe>& tasks) = 0;
  // Zeroes the free memory of GPU `gpu`, or of the MIG instance `mig_uuid`
  // on it when non-empty (RECLAIM-4), before another tenant's task starts.
  virtual Result<ScrubResult> Scrub(int gpu, const std::string& mig_uuid) = 0;
  // The device nodes of GPU `gpu` (/dev/nvidiaN), and those every GPU task
  // needs (/dev/nvidiactl, /dev/nvidia-uvm, /dev/nvidia-uvm-tools): what a
  // task container is given (EXEC-3). Empty where the node has none.
  virtual std::vector<DeviceNode> GpuDeviceNodes(int gpu) = 0;
  virtual std::vector<DeviceNode> ControlDeviceNodes() = 0;
  // The MIG capability nodes of `instance` on GPU `gpu` (device_nodes.h,
  // StatMigCapNodes): what a task on that instance needs besides the
  // GPU's own node. An Error says why they cannot be found.
  virtual Result<std::vector<DeviceNode>> MigDeviceNodes(int gpu, const MigInstance& instance) = 0;

  // MIG lifecycle (EXEC-7). The GPU must be in MIG mode already: no backend
  // ever changes the mode (that needs a GPU reset, an operator's action).
  //
  // Creates a GPU instance of `profile` (e.g. "3g.40gb") at memory slice `start` on GPU `gpu`, then its compute instance covering the whole GPU instance; returns it with uuid, gi_id, ci_id and memory. Fails with the driver's error string (e.g. "nvmlDeviceCreateGpuInstanceWithPlacement on GPU 0: Insufficient Resources").
  virtual Result<MigInstance> CreateMigInstance(int gpu, const std::string& profile, int start) = 0;
  // Destroys its compute instance, then the GPU instance.
  // The instance is found by its UUID; a NotFound error says it is gone
  // already. Fails with the driver's error string (e.g. "In use by another
  // client" while a process runs there).
  virtual Status DestroyMigInstance(int gpu, const MigInstance& instance) = 0;
  // The MIG instances GPU `gpu` has now, by start (empty when it is not in
  // MIG mode): what heartbeats report.
  virtual Result<std::vector<MigInstance>> ListMigInstances(int gpu) = 0;
  // The DCGM-named field set (dcgm_fields.h), read now: per GPU and, on a
  // GPU in MIG mode, per MIG instance; a field the device does not have is
  // absent. Fails only when the GPUs cannot be listed.
  virtual Result<std::vector<DcgmEntity>> ReadDcgmFields() = 0;
};

}  // namespace gpupool
