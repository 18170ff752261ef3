// Fake GPUs for machines without them (development, tests, demos): the
// devices come from a spec, and a task's GPU utilization is its own CPU
// activity, so a busy task looks busy and a sleeping one idle, and idle
// reclamation works on real processes.
//
// Spec: "4xH100", "2xA100-80GB", or a comma list "H100,H100" (one model per
// node); the models are catalog names (src/model/gpu_catalog.h). UUIDs are
// derived from the node name and index, so they are stable across restarts.
//
// MIG: a model with a MIG table (src/model/mig.h) is put in MIG mode by
// ":mig" after it ("2xA100-80GB:mig", "H100:mig,H100"), optionally with
// instances that exist before the agent starts, each PROFILE@START,
// separated by '/' ("H100:mig=3g.40gb@4/1g.10gb@0"; the layout must be
// valid). Instances are created and destroyed in memory with the driver's
// rules (src/agent/mig_layout.h: documented starts, no overlap, instance
// limits, one +me; refusals read like NVML's, "Insufficient Resources"),
// each with a fresh UUID, GPU instance id (the lowest free from 1) and
// compute instance 0. Creating on a GPU not in MIG mode fails ("Not
// Supported"); the fake never changes the mode either. With a device
// directory, each instance has the driver's capability listing under
// DIR/proc-caps and its nodes under DIR/nvidia-caps (device_nodes.h) while
// it exists. MigOps() lists what was done ("create 0 3g.40gb@4 MIG-...",
// "destroy 0 3g.40gb@4 MIG-...") for tests.
//
// Device nodes: with a directory given, real character devices with the
// NVIDIA major (device_nodes.h), so that the devices cgroup of a task
// container can be tested without GPUs.
//
// Device readings (Sample, ReadDcgmFields) are plausible for the model and
// follow the fake utilization: memory in use is a fixed driver overhead
// (kFakeDriverOverheadMib) plus what the tasks on the GPU report
// (SampleTasks), never what the server booked, so a test can tell the two
// apart; power rises with utilization from an idle draw and its energy
// counter accumulates it; clocks boost when busy and the throttle reason is
// "GPU idle" (0x1) when not; ECC, XID, replay and remap counts are 0; the
// boards are passively cooled (no fan speed) and have no video engines in
// use (encoder/decoder 0). A GPU's MIG instances, when it has some, report
// their memory and SM activity.
//
// Scrubs are recorded (Scrubs()) and, when a record file is given, appended
// to it as JSON lines {"gpu":0,"unix_ms":...} for tests and demos.
#pragma once

#include <chrono>
#include <map>
#include <set>
#include <memory>
#include <string>
#include <vector>

#include "src/agent/device_backend.h"

namespace gpupool {

// The devices of a spec; an Error names the bad part ("--fake-gpus: ...").
Result<std::vector<GpuDevice>> ParseFakeGpus(const std::string& spec, const std::string& node);

struct ScrubRecord {
  int gpu = 0;
  std::string mig_uuid;
  int64_t unix_ms = 0;
};

class FakeBackend : public DeviceBackend {
 public:
  // `dev_dir`: where its device nodes are made (MakeDeviceNodes); empty:
  // none, and tasks get no device nodes.
  FakeBackend(std::vector<GpuDevice> gpus, std::string scrub_record_file = "", std::string dev_dir = "");
  // Makes real character nodes for its GPUs in dev_dir (device_nodes.h).
  Status MakeDeviceNodes();
  std::vector<DeviceNode> GpuDeviceNodes(int gpu) override;
  std::vector<DeviceNode> ControlDeviceNodes() override;
  Result<std::vector<DeviceNode>> MigDeviceNodes(int gpu, const MigInstance& instance) override;
  std::string name() const override { return "fake"; }
  Result<std::vector<GpuDevice>> Discover() override { return gpus_; }
  Result<MigInstance> CreateMigInstance(int gpu, const std::string& profile, int start) override;
  Status DestroyMigInstance(int gpu, const MigInstance& instance) override;
  Result<std::vector<MigInstance>> ListMigInstances(int gpu) override;
  const std::vector<std::string>& MigOps() const { return mig_ops_; }
  Result<std::vector<GpuSample>> Sample() override;
  std::map<std::string, TaskUsage> SampleTasks(const std::vector<TaskProbe>& tasks) override;
  Result<ScrubResult> Scrub(int gpu, const std::string& mig_uuid) override;
  Result<std::vector<DcgmEntity>> ReadDcgmFields() override;
  const std::vector<ScrubRecord>& Scrubs() const { return scrubs_; }

 private:
  struct CpuMark {
    double cpu_seconds = 0;
    std::chrono::steady_clock::time_point at;
  };
  std::vector<GpuDevice> gpus_;
  std::string record_file_;
  std::string dev_dir_;
  std::map<std::string, CpuMark> marks_;
  std::vector<double> gpu_util_;  // from the last SampleTasks
  std::vector<int64_t> gpu_task_memory_mib_;  // from the last SampleTasks
  std::vector<double> energy_mj_;             // per GPU, since the backend started
  std::vector<double> nvlink_kib_;            // per GPU, since the backend started
  std::chrono::steady_clock::time_point energy_at_{};
  std::vector<ScrubRecord> scrubs_;
  std::vector<std::string> mig_ops_;
  uint64_t mig_created_ = 0;  // instances created so far: each gets a new UUID
};

// What a fake GPU's driver holds before any task: memory in use with no process.
inline constexpr int64_t kFakeDriverOverheadMib = 512;

// CPU seconds (user + system) used so far by the live processes of each
// process group in `pgids`, from one pass over /proc, plus the children the
// group's leader has reaped. Other processes that exited are not counted;
// a group with no live process is 0.
std::map<int, double> ProcessGroupCpuSeconds(const std::set<int>& pgids);

}  // namespace gpupool
