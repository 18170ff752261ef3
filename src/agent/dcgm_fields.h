// The DCGM-named device metric set (EXEC-10): what each agent serves on its
// own metrics listener (--metrics-listen), under the NVIDIA DCGM exporter's
// metric and label names, so that dashboards (Grafana 12239) and alert
// rules written for the DCGM exporter work unchanged.
//
// This file holds the field table (name, Prometheus type, help, unit, and
// whether a MIG instance has its own reading), one entity's readings (a GPU
// or a MIG instance; a field the device does not have is absent, never 0),
// and the text exposition of a node's readings with its labels:
//   gpu, UUID, device, modelName, Hostname  on every series;
//   GPU_I_ID, GPU_I_PROFILE                 on a MIG instance's series;
//   pool                                    the node's pool, once the server said it;
//   tenant, job                             the task on the GPU or instance.
// A GPU or instance with several tasks (time-sliced or MPS shares) has one
// copy of each series per task, with that task's tenant and job, as the DCGM
// exporter copies a shared device's series per pod; one with none has one
// series without tenant and job. On a GPU in MIG mode the per-instance
// fields (memory, SM activity) are on the instances' series only, so that a
// sum over series counts each byte once; device-wide fields (temperature,
// power, clocks, ECC, PCIe, ...) stay on the GPU's series.
//
// Thread-safety: the table is immutable; the functions are pure.
#pragma once

#include <array>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace gpupool {

enum class DcgmField : uint8_t {
  kGpuUtil,
  kMemCopyUtil,
  kSmActive,
  kFbUsed,
  kFbFree,
  kFbTotal,
  kGpuTemp,
  kMemoryTemp,
  kPowerUsage,
  kTotalEnergyConsumption,
  kSmClock,
  kMemClock,
  kEccSbeVolTotal,
  kEccDbeVolTotal,
  kXidErrors,
  kPcieTxBytes,
  kPcieRxBytes,
  kPcieReplayCounter,
  kNvlinkBandwidthTotal,
  kEncUtil,
  kDecUtil,
  kClockThrottleReasons,
  kFanSpeed,
  kCorrectableRemappedRows,
  kUncorrectableRemappedRows,
  kRowRemapFailure,
};
inline constexpr int kDcgmFieldCount = 26;

struct DcgmFieldInfo {
  DcgmField field;
  const char* name;  // the DCGM exporter's metric name
  bool counter;      // Prometheus type: counter (true) or gauge
  const char* unit;  // "%", "MiB", "C", "W", "mJ", "MHz", "B/s", "KiB", "ratio", "count", "bitmask", "xid"
  const char* help;
  // A MIG instance has its own reading (memory, SM activity); the others
  // are the whole GPU's.
  bool per_instance;
};

// Every field, in DcgmField order.
const std::array<DcgmFieldInfo, kDcgmFieldCount>& DcgmFieldTable();
const DcgmFieldInfo& DcgmFieldInfoOf(DcgmField f);

// One GPU's or MIG instance's readings.
struct DcgmEntity {
  int gpu = 0;             // the GPU's index
  std::string uuid;        // the GPU's UUID (a MIG instance's series carry its GPU's, as the exporter's do)
  std::string model_name;  // the product name as the driver reports it ("NVIDIA H100 80GB HBM3")
  int device_minor = -1;   // /dev/nvidiaN: the `device` label "nvidiaN"; -1: the index
  // MIG instance: its GPU instance id and profile, and its first memory
  // slice (to find the task on it); -1 / "" for the whole GPU.
  int gpu_instance_id = -1;
  std::string gpu_instance_profile;
  int mig_start = -1;
  std::array<std::optional<double>, kDcgmFieldCount> values{};  // by DcgmField; nullopt: absent

  void Set(DcgmField f, double v) { values[static_cast<size_t>(f)] = v; }
  std::optional<double> Get(DcgmField f) const { return values[static_cast<size_t>(f)]; }
  bool is_instance() const { return gpu_instance_id >= 0; }
};

// The task on a GPU or MIG instance, for the tenant and job labels.
struct DcgmTaskLabels {
  int gpu = 0;
  int mig_start = -1;  // the MIG instance's first slice; -1: the whole GPU (or a share of it)
  std::string tenant;
  std::string job;  // the job's id
};

struct DcgmNodeLabels {
  std::string hostname;
  std::string pool;  // empty: not known yet (the label is left out)
  std::vector<DcgmTaskLabels> tasks;
};

// The Prometheus text exposition (format 0.0.4) of `entities` with
// `labels`: one family per field that some entity has, HELP and TYPE as the
// table says. At most kMaxDcgmEntities entities and kMaxDcgmTasksPerEntity
// tasks per entity are rendered (the rest are left out: a node has at most
// 16 GPUs x 7 instances, and a GPU few shares).
inline constexpr size_t kMaxDcgmEntities = 16 * 8;
inline constexpr size_t kMaxDcgmTasksPerEntity = 64;
std::string RenderDcgmMetrics(const std::vector<DcgmEntity>& entities, const DcgmNodeLabels& labels);

// XIDs (NVIDIA's Xid catalog) that an application causes and that leave
// the GPU usable: 13 (graphics engine exception), 31 (GPU memory page
// fault), 43 (GPU stopped processing), 45 (preemptive cleanup), 68 (video
// processor exception), 109 (context switch timeout). The Kubernetes device
// plugin ignores the same ones. Every other XID NVML reports as critical
// marks the GPU unhealthy.
bool IsApplicationXid(uint64_t xid);
// "XID 79 (GPU has fallen off the bus)"; the number alone when not named here.
std::string XidText(uint64_t xid);

}  // namespace gpupool
