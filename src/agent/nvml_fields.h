// The DCGM-named field set (dcgm_fields.h, EXEC-10) and XID health (the
// agent's side of EXEC-11), read from NVML. The NVML backend
// (nvml_backend.h) owns one reader: its Sample adds the reader's XID
// health, and its ReadDcgmFields is the reader's Read.
//
// The reader loads the same library as the backend (dlopen and nvmlInit_v2
// count references, so both share one driver session) and resolves every
// call it uses as optional: a symbol the driver lacks, or a call answering
// NVML_ERROR_NOT_SUPPORTED, leaves that field absent for that GPU (never 0,
// never an error). What each field reads:
//   GPU_UTIL, MEM_COPY_UTIL   nvmlDeviceGetUtilizationRates (.gpu, .memory)
//   PROF_SM_ACTIVE            GPM (nvmlGpmSampleGet / nvmlGpmMigSampleGet,
//                             NVML_GPM_METRIC_SM_UTIL / 100) between this read
//                             and the previous one; Hopper and later
//   FB_USED, FB_FREE, FB_TOTAL nvmlDeviceGetMemoryInfo (of the MIG device
//                             handle for an instance), MiB
//   GPU_TEMP                  nvmlDeviceGetTemperature (NVML_TEMPERATURE_GPU)
//   MEMORY_TEMP               field value NVML_FI_DEV_MEMORY_TEMP
//   POWER_USAGE               nvmlDeviceGetPowerUsage (mW) / 1000
//   TOTAL_ENERGY_CONSUMPTION  nvmlDeviceGetTotalEnergyConsumption (mJ)
//   SM_CLOCK, MEM_CLOCK       nvmlDeviceGetClockInfo (NVML_CLOCK_SM, _MEM)
//   ECC_SBE/DBE_VOL_TOTAL     nvmlDeviceGetTotalEccErrors (corrected /
//                             uncorrected, volatile)
//   XID_ERRORS                the last XID of the event set (0 before any);
//                             absent where events cannot be registered
//   PROF_PCIE_TX/RX_BYTES     nvmlDeviceGetPcieThroughput (KB/s) x 1024; the
//                             driver samples each over 20 ms (wall time, not CPU)
//   PCIE_REPLAY_COUNTER       nvmlDeviceGetPcieReplayCounter
//   NVLINK_BANDWIDTH_TOTAL    field values NVML_FI_DEV_NVLINK_THROUGHPUT_DATA_TX
//                             + _RX over all links (scope UINT_MAX), KiB
//   ENC_UTIL, DEC_UTIL        nvmlDeviceGetEncoder/DecoderUtilization
//   CLOCK_THROTTLE_REASONS    nvmlDeviceGetCurrentClocksEventReasons, or the
//                             older nvmlDeviceGetCurrentClocksThrottleReasons
//   FAN_SPEED                 nvmlDeviceGetFanSpeed (absent on passively
//                             cooled boards)
//   *_REMAPPED_ROWS, ROW_REMAP_FAILURE  nvmlDeviceGetRemappedRows
// A GPU in MIG mode also yields one entity per MIG device
// (nvmlDeviceGetMigDeviceHandleByIndex), with its GPU instance id, its
// profile (from the MIG device's name), memory and SM activity.
//
// XIDs: at open, every GPU registers nvmlEventTypeXidCriticalError with one
// event set; each Sample and Read drains it without waiting
// (nvmlEventSetWait_v2 with timeout 0, at most kMaxXidEventsPerPoll events).
// An XID outside the application list (dcgm_fields.h, IsApplicationXid)
// makes the GPU unhealthy until the agent restarts: the GPU needs an
// operator (a GPU reset or a reboot), and NVML says nothing when one
// happened. XIDs on a MIG instance count for its GPU.
//
// Thread-safety: none; the backend's one thread uses it.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "src/agent/dcgm_fields.h"
#include "src/base/status.h"

namespace gpupool {

inline constexpr int kMaxXidEventsPerPoll = 256;

class NvmlFieldReader {
 public:
  // Loads `library`, resolves the calls above, calls nvmlInit_v2 and
  // registers the XID events. Fails only when the library cannot be loaded
  // or initialised ("cannot load <library>: ...", "nvmlInit_v2: ...");
  // events that cannot be registered are named by xid_problem().
  static Result<std::unique_ptr<NvmlFieldReader>> Open(const std::string& library);
  ~NvmlFieldReader();
  NvmlFieldReader(const NvmlFieldReader&) = delete;
  NvmlFieldReader& operator=(const NvmlFieldReader&) = delete;

  // Drains the XID event set (no waiting).
  void PollXids();
  // Why GPU `gpu` is unhealthy from its XIDs: "XID 79 (GPU has fallen off
  // the bus) at 2025-01-01T10:00:00Z (reset the GPU, then restart the
  // agent)", the newest critical one with how many there were; "" when
  // none was seen since the reader opened.
  std::string XidHealth(int gpu) const;
  // Every GPU's readings and, on a GPU in MIG mode, each instance's. Polls
  // XIDs first. Fails only when the GPUs cannot be counted.
  Result<std::vector<DcgmEntity>> Read();
  // Why XIDs are not watched on some or all GPUs ("nvmlDeviceRegisterEvents
  // (GPU 1): Not Supported"); "" when they are on every GPU.
  const std::string& xid_problem() const;

  struct Impl;

 private:
  explicit NvmlFieldReader(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace gpupool
