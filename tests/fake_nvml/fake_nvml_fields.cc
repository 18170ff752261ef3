// The fake NVML's answers for the DCGM field set and XID events
// (src/agent/nvml_fields.h reads them), from the same script as
// fake_nvml.cc. Per device (a GPU, or a MIG device's entry under "mig"),
// each key below scripts one call; a key the device lacks makes that call
// NVML_ERROR_NOT_SUPPORTED, as a board without the feature answers:
//
//   "power_mw": 312000                nvmlDeviceGetPowerUsage
//   "energy_mj": 123456789            nvmlDeviceGetTotalEnergyConsumption
//   "sm_clock_mhz": 1980,             nvmlDeviceGetClockInfo (NVML_CLOCK_SM;
//   "mem_clock_mhz": 2619               NVML_CLOCK_GRAPHICS reads sm_clock_mhz too)
//   "ecc": {"sbe_volatile": 3, "dbe_volatile": 1,
//           "sbe_aggregate": 9, "dbe_aggregate": 2}   nvmlDeviceGetTotalEccErrors
//   "pcie_tx_kbps": 1000, "pcie_rx_kbps": 2000        nvmlDeviceGetPcieThroughput
//   "pcie_replay": 4                  nvmlDeviceGetPcieReplayCounter
//   "encoder_util_pct": 5, "decoder_util_pct": 6      nvmlDeviceGet{En,De}coderUtilization
//   "clocks_event_reasons": 4         nvmlDeviceGetCurrentClocks{Event,Throttle}Reasons
//   "fan_pct": 30                     nvmlDeviceGetFanSpeed
//   "memory_temp_c": 45               field value NVML_FI_DEV_MEMORY_TEMP (82)
//   "nvlink_tx_kib": 100, "nvlink_rx_kib": 200   field values 138/139 (scope
//                                     UINT_MAX: all links; a link number < the
//                                     device's "nvlinks" count: an equal share)
//   "sm_active_pct": 55               GPM NVML_GPM_METRIC_SM_UTIL (a GPU, or a
//                                     MIG device through nvmlGpmMigSampleGet)
//   "xid_events": false               nvmlDeviceRegisterEvents is "not supported"
//   "xids": [{"xid": 79, "after_waits": 0}]   XID events: each is delivered once
//                                     to every event set the device registered
//                                     with, by the first nvmlEventSetWait_v2
//                                     after the set's first `after_waits` waits
// (fake_nvml.cc: "memory_util_pct" is nvmlDeviceGetUtilizationRates' memory,
// "remapped_rows" {"correctable", "uncorrectable"} nvmlDeviceGetRemappedRows'
// counts.) A "fail" entry naming any of these calls fails it as scripted.
#include <climits>
#include <cstring>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <vector>

#include "tests/fake_nvml/fake_nvml_state.h"

namespace {

using nvmlReturn_t = int;
constexpr nvmlReturn_t kSuccess = 0;
constexpr nvmlReturn_t kUninitialized = 1;
constexpr nvmlReturn_t kInvalidArgument = 2;
constexpr nvmlReturn_t kNotSupported = 3;
constexpr nvmlReturn_t kTimeout = 10;
constexpr nvmlReturn_t kArgumentVersionMismatch = 25;

struct nvmlEventData_t {
  void* device;
  unsigned long long eventType, eventData;
  unsigned int gpuInstanceId, computeInstanceId;
};
union nvmlValue_t {
  double dVal;
  int siVal;
  unsigned int uiVal;
  unsigned long ulVal;
  unsigned long long ullVal;
  long long sllVal;
  unsigned short usVal;
};
struct nvmlFieldValue_t {
  unsigned int fieldId, scopeId;
  long long timestamp, latencyUsec;
  int valueType;
  nvmlReturn_t nvmlReturn;
  nvmlValue_t value;
};
struct nvmlGpmSupport_t {
  unsigned int version, isSupportedDevice;
};
struct FakeGpmSample;
struct nvmlGpmMetric_t {
  unsigned int metricId;
  nvmlReturn_t nvmlReturn;
  double value;
  struct {
    char *shortName, *longName, *unit;
  } metricInfo;
};
// The header's array size differs between releases (98 in the first with
// GPM); the fake reads only numMetrics entries, as the driver does.
struct nvmlGpmMetricsGet_t {
  unsigned int version, numMetrics;
  FakeGpmSample *sample1, *sample2;
  nvmlGpmMetric_t metrics[98];
};

constexpr unsigned long long kXidCriticalError = 0x8;  // nvmlEventTypeXidCriticalError
constexpr unsigned long long kKnownEvents = 0x1 | 0x2 | 0x4 | 0x8 | 0x10 | 0x80 | 0x100;
constexpr unsigned int kMaxGpmMetrics = 98;  // NVML_GPM_METRIC_MAX of the oldest release with GPM

struct PendingXid {
  void* device;
  unsigned long long xid;
  int due;  // the set's wait count from which it is delivered
};
struct FakeEventSet {
  uint64_t generation = 0;
  int waits = 0;
  std::set<void*> registered;
  std::vector<PendingXid> pending;
};
struct FakeGpmSample {
  uint64_t generation = 0;
  const void* device = nullptr;  // the GPU, or the MIG device of a MIG sample
  uint64_t sequence = 0;         // 0: never filled
};
uint64_t g_gpm_sequence = 0;

const nlohmann::json* ScriptOf(const void* d) { return fake_nvml::DeviceScript(d); }

// The scripted value `key` of device `d` into `out`: kSuccess, or
// kNotSupported when the script lacks it; kInvalidArgument for an unknown
// handle or a null pointer, kUninitialized before init.
template <class T>
nvmlReturn_t Value(const char* call, void* d, const char* key, T* out) {
  if (!fake_nvml::Initialised()) return kUninitialized;
  const nlohmann::json* s = ScriptOf(d);
  if (!s || !out) return kInvalidArgument;
  if (nvmlReturn_t rc = fake_nvml::ScriptedFailure(call, d); rc != kSuccess) return rc;
  if (!s->contains(key)) return kNotSupported;
  *out = (*s)[key].get<T>();
  return kSuccess;
}

}  // namespace

#define FAKE_NVML_API extern "C" __attribute__((visibility("default")))

FAKE_NVML_API nvmlReturn_t nvmlDeviceGetPowerUsage(void* device, unsigned int* power_mw) {
  return Value("nvmlDeviceGetPowerUsage", device, "power_mw", power_mw);
}

FAKE_NVML_API nvmlReturn_t nvmlDeviceGetTotalEnergyConsumption(void* device, unsigned long long* energy_mj) {
  return Value("nvmlDeviceGetTotalEnergyConsumption", device, "energy_mj", energy_mj);
}

FAKE_NVML_API nvmlReturn_t nvmlDeviceGetClockInfo(void* device, int type, unsigned int* clock_mhz) {
  // nvmlClockType_t: GRAPHICS 0, SM 1, MEM 2, VIDEO 3.
  if (type < 0 || type > 3) return fake_nvml::Initialised() ? kInvalidArgument : kUninitialized;
  if (type == 3) return fake_nvml::Initialised() ? kNotSupported : kUninitialized;
  return Value("nvmlDeviceGetClockInfo", device, type == 2 ? "mem_clock_mhz" : "sm_clock_mhz", clock_mhz);
}

FAKE_NVML_API nvmlReturn_t nvmlDeviceGetTotalEccErrors(void* device, int error_type, int counter_type,
                                                      unsigned long long* count) {
  nlohmann::json ecc;
  if (nvmlReturn_t rc = Value("nvmlDeviceGetTotalEccErrors", device, "ecc", &ecc); rc != kSuccess) return rc;
  if (!count || error_type < 0 || error_type > 1 || counter_type < 0 || counter_type > 1) return kInvalidArgument;
  const char* key = error_type == 0 ? (counter_type == 0 ? "sbe_volatile" : "sbe_aggregate")
                                    : (counter_type == 0 ? "dbe_volatile" : "dbe_aggregate");
  *count = ecc.value(key, 0ULL);
  return kSuccess;
}

FAKE_NVML_API nvmlReturn_t nvmlDeviceGetPcieThroughput(void* device, int counter, unsigned int* kbps) {
  if (counter != 0 && counter != 1) return fake_nvml::Initialised() ? kInvalidArgument : kUninitialized;
  return Value("nvmlDeviceGetPcieThroughput", device, counter == 0 ? "pcie_tx_kbps" : "pcie_rx_kbps", kbps);
}

FAKE_NVML_API nvmlReturn_t nvmlDeviceGetPcieReplayCounter(void* device, unsigned int* value) {
  return Value("nvmlDeviceGetPcieReplayCounter", device, "pcie_replay", value);
}

FAKE_NVML_API nvmlReturn_t nvmlDeviceGetEncoderUtilization(void* device, unsigned int* util, unsigned int* period_us) {
  if (!period_us) return fake_nvml::Initialised() ? kInvalidArgument : kUninitialized;
  const nvmlReturn_t rc = Value("nvmlDeviceGetEncoderUtilization", device, "encoder_util_pct", util);
  if (rc == kSuccess) *period_us = 167000;
  return rc;
}

FAKE_NVML_API nvmlReturn_t nvmlDeviceGetDecoderUtilization(void* device, unsigned int* util, unsigned int* period_us) {
  if (!period_us) return fake_nvml::Initialised() ? kInvalidArgument : kUninitialized;
  const nvmlReturn_t rc = Value("nvmlDeviceGetDecoderUtilization", device, "decoder_util_pct", util);
  if (rc == kSuccess) *period_us = 167000;
  return rc;
}

FAKE_NVML_API nvmlReturn_t nvmlDeviceGetCurrentClocksEventReasons(void* device, unsigned long long* reasons) {
  return Value("nvmlDeviceGetCurrentClocksEventReasons", device, "clocks_event_reasons", reasons);
}

FAKE_NVML_API nvmlReturn_t nvmlDeviceGetCurrentClocksThrottleReasons(void* device, unsigned long long* reasons) {
  return Value("nvmlDeviceGetCurrentClocksThrottleReasons", device, "clocks_event_reasons", reasons);
}

FAKE_NVML_API nvmlReturn_t nvmlDeviceGetFanSpeed(void* device, unsigned int* pct) {
  return Value("nvmlDeviceGetFanSpeed", device, "fan_pct", pct);
}

// As the driver: the call succeeds when its arguments are sound, and each
// value carries its own return code.
FAKE_NVML_API nvmlReturn_t nvmlDeviceGetFieldValues(void* device, int count, void* out) {
  auto* values = static_cast<nvmlFieldValue_t*>(out);
  if (!fake_nvml::Initialised()) return kUninitialized;
  const nlohmann::json* s = ScriptOf(device);
  if (!s || count <= 0 || !values) return kInvalidArgument;
  if (nvmlReturn_t rc = fake_nvml::ScriptedFailure("nvmlDeviceGetFieldValues", device); rc != kSuccess) return rc;
  const size_t links = s->value("nvlinks", nlohmann::json::array()).size();
  for (int i = 0; i < count; ++i) {
    nvmlFieldValue_t& v = values[i];
    v.timestamp = 1700000000000000LL;
    v.latencyUsec = 0;
    v.nvmlReturn = kNotSupported;
    if (v.fieldId == 82 && s->contains("memory_temp_c")) {  // NVML_FI_DEV_MEMORY_TEMP
      v.valueType = 1;                                      // unsigned int
      v.value.uiVal = (*s)["memory_temp_c"].get<unsigned>();
      v.nvmlReturn = kSuccess;
    } else if (v.fieldId == 138 || v.fieldId == 139) {  // NVLink data TX / RX, KiB
      const char* key = v.fieldId == 138 ? "nvlink_tx_kib" : "nvlink_rx_kib";
      if (!s->contains(key) || links == 0) continue;
      if (v.scopeId != UINT_MAX && v.scopeId >= links) {
        v.nvmlReturn = kInvalidArgument;
        continue;
      }
      const unsigned long long total = (*s)[key].get<unsigned long long>();
      v.valueType = 3;  // unsigned long long
      v.value.ullVal = v.scopeId == UINT_MAX ? total : total / links;
      v.nvmlReturn = kSuccess;
    }
  }
  return kSuccess;
}

FAKE_NVML_API nvmlReturn_t nvmlDeviceGetDeviceHandleFromMigDeviceHandle(void* mig, void** device) {
  if (!fake_nvml::Initialised()) return kUninitialized;
  void* parent = fake_nvml::ParentOf(mig);
  if (!parent || !device) return kInvalidArgument;  // not a MIG device
  *device = parent;
  return kSuccess;
}

// ---------------------------------------------------------------------------
// Event sets.

FAKE_NVML_API nvmlReturn_t nvmlEventSetCreate(void** out) {
  auto** set = reinterpret_cast<FakeEventSet**>(out);
  if (!fake_nvml::Initialised()) return kUninitialized;
  if (!set) return kInvalidArgument;
  if (nvmlReturn_t rc = fake_nvml::ScriptedFailure("nvmlEventSetCreate", nullptr); rc != kSuccess) return rc;
  *set = new FakeEventSet{fake_nvml::Generation(), 0, {}, {}};
  return kSuccess;
}

FAKE_NVML_API nvmlReturn_t nvmlDeviceRegisterEvents(void* device, unsigned long long types, void* handle) {
  auto* set = static_cast<FakeEventSet*>(handle);
  if (!fake_nvml::Initialised()) return kUninitialized;
  const nlohmann::json* s = ScriptOf(device);
  if (!s || !set || set->generation != fake_nvml::Generation() || (types & ~kKnownEvents) != 0) {
    return kInvalidArgument;
  }
  if (nvmlReturn_t rc = fake_nvml::ScriptedFailure("nvmlDeviceRegisterEvents", device); rc != kSuccess) return rc;
  if (fake_nvml::ParentOf(device)) return kNotSupported;  // events are registered on GPUs
  if ((types & kXidCriticalError) == 0) return kSuccess;  // the fake delivers XIDs only
  if (!s->value("xid_events", true)) return kNotSupported;
  if (!set->registered.insert(device).second) return kSuccess;
  for (const auto& x : s->value("xids", nlohmann::json::array())) {
    set->pending.push_back({device, x.at("xid").get<unsigned long long>(), set->waits + x.value("after_waits", 0)});
  }
  return kSuccess;
}

FAKE_NVML_API nvmlReturn_t nvmlEventSetWait_v2(void* handle, void* out, unsigned int /*timeout_ms*/) {
  auto* set = static_cast<FakeEventSet*>(handle);
  auto* data = static_cast<nvmlEventData_t*>(out);
  if (!fake_nvml::Initialised()) return kUninitialized;
  if (!set || !data || set->generation != fake_nvml::Generation()) return kInvalidArgument;
  if (nvmlReturn_t rc = fake_nvml::ScriptedFailure("nvmlEventSetWait_v2", nullptr); rc != kSuccess) return rc;
  const int wait = set->waits++;
  for (auto it = set->pending.begin(); it != set->pending.end(); ++it) {
    if (it->due > wait) continue;
    *data = {it->device, kXidCriticalError, it->xid, 0xFFFFFFFFu, 0xFFFFFFFFu};
    set->pending.erase(it);
    return kSuccess;
  }
  return kTimeout;  // the fake never blocks: nothing is due within any timeout
}

FAKE_NVML_API nvmlReturn_t nvmlEventSetFree(void* handle) {
  auto* set = static_cast<FakeEventSet*>(handle);
  if (!set) return kInvalidArgument;
  delete set;
  return kSuccess;
}

// ---------------------------------------------------------------------------
// GPM (GPU performance monitoring): samples, and the SM utilization between two.

FAKE_NVML_API nvmlReturn_t nvmlGpmQueryDeviceSupport(void* device, void* out) {
  auto* support = static_cast<nvmlGpmSupport_t*>(out);
  if (!fake_nvml::Initialised()) return kUninitialized;
  const nlohmann::json* s = ScriptOf(device);
  if (!s || !support) return kInvalidArgument;
  if (support->version != 1) return kArgumentVersionMismatch;
  if (nvmlReturn_t rc = fake_nvml::ScriptedFailure("nvmlGpmQueryDeviceSupport", device); rc != kSuccess) return rc;
  bool any = s->contains("sm_active_pct");
  for (const auto& m : s->value("mig", nlohmann::json::array())) any = any || m.contains("sm_active_pct");
  support->isSupportedDevice = any ? 1 : 0;
  return kSuccess;
}

FAKE_NVML_API nvmlReturn_t nvmlGpmSampleAlloc(void** out) {
  auto** sample = reinterpret_cast<FakeGpmSample**>(out);
  if (!fake_nvml::Initialised()) return kUninitialized;
  if (!sample) return kInvalidArgument;
  *sample = new FakeGpmSample{};
  return kSuccess;
}

FAKE_NVML_API nvmlReturn_t nvmlGpmSampleFree(void* handle) {
  auto* sample = static_cast<FakeGpmSample*>(handle);
  if (!sample) return kInvalidArgument;
  delete sample;
  return kSuccess;
}

namespace {
nvmlReturn_t TakeSample(const char* call, void* gpu, const void* source, FakeGpmSample* sample) {
  if (!fake_nvml::Initialised()) return kUninitialized;
  if (!ScriptOf(gpu) || !source || !sample) return kInvalidArgument;
  if (nvmlReturn_t rc = fake_nvml::ScriptedFailure(call, gpu); rc != kSuccess) return rc;
  if (!ScriptOf(source)->contains("sm_active_pct")) return kNotSupported;
  *sample = {fake_nvml::Generation(), source, ++g_gpm_sequence};
  return kSuccess;
}
}  // namespace

FAKE_NVML_API nvmlReturn_t nvmlGpmSampleGet(void* device, void* handle) {
  auto* sample = static_cast<FakeGpmSample*>(handle);
  if (fake_nvml::Initialised() && fake_nvml::ParentOf(device)) return kInvalidArgument;  // a GPU's handle
  return TakeSample("nvmlGpmSampleGet", device, device, sample);
}

FAKE_NVML_API nvmlReturn_t nvmlGpmMigSampleGet(void* device, unsigned int gpu_instance_id, void* handle) {
  auto* sample = static_cast<FakeGpmSample*>(handle);
  if (!fake_nvml::Initialised()) return kUninitialized;
  if (!ScriptOf(device) || fake_nvml::ParentOf(device)) return kInvalidArgument;
  if (fake_nvml::MigModeOf(device) != 1) return kNotSupported;
  const void* mig = fake_nvml::MigDeviceOf(device, gpu_instance_id);
  if (!mig) return kInvalidArgument;  // no such GPU instance
  return TakeSample("nvmlGpmMigSampleGet", device, mig, sample);
}

FAKE_NVML_API nvmlReturn_t nvmlGpmMetricsGet(void* handle) {
  auto* get = static_cast<nvmlGpmMetricsGet_t*>(handle);
  if (!fake_nvml::Initialised()) return kUninitialized;
  if (!get) return kInvalidArgument;
  if (get->version != 1) return kArgumentVersionMismatch;
  const FakeGpmSample *a = get->sample1, *b = get->sample2;
  if (get->numMetrics == 0 || get->numMetrics > kMaxGpmMetrics || !a || !b || a->sequence == 0 ||
      b->sequence == 0 || a->device != b->device || a->generation != fake_nvml::Generation() ||
      b->generation != a->generation || b->sequence <= a->sequence) {
    return kInvalidArgument;
  }
  const nlohmann::json* s = ScriptOf(b->device);
  for (unsigned int i = 0; i < get->numMetrics; ++i) {
    nvmlGpmMetric_t& m = get->metrics[i];
    m.metricInfo = {nullptr, nullptr, nullptr};
    if (m.metricId == 2 && s && s->contains("sm_active_pct")) {  // NVML_GPM_METRIC_SM_UTIL
      m.value = (*s)["sm_active_pct"].get<double>();
      m.nvmlReturn = kSuccess;
    } else {
      m.nvmlReturn = kNotSupported;
    }
  }
  return kSuccess;
}
