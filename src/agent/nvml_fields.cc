#include "src/agent/nvml_fields.h"

#include <dlfcn.h>

#include <algorithm>
#include <climits>
#include <cstring>
#include <map>
#include <utility>

#include "src/agent/nvml_abi.h"
#include "src/agent/nvml_backend.h"
#include "src/base/time_text.h"

namespace gpupool {
namespace {

// The slice of NVML's C ABI the reader uses: the shared part in
// nvml_abi.h, the rest here (values and layouts of NVIDIA's NVML API
// reference; enums passed as int).
using namespace nvml_abi;

struct nvmlEventSet_st;
using nvmlEventSet_t = nvmlEventSet_st*;
struct nvmlGpmSample_st;
using nvmlGpmSample_t = nvmlGpmSample_st*;
struct nvmlEventData_t {
  nvmlDevice_t device;
  unsigned long long eventType;
  unsigned long long eventData;  // the XID for nvmlEventTypeXidCriticalError (999: unknown)
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
  unsigned int fieldId;
  unsigned int scopeId;
  long long timestamp;
  long long latencyUsec;
  int valueType;  // nvmlValueType_t
  nvmlReturn_t nvmlReturn;
  nvmlValue_t value;
};
struct nvmlGpmSupport_t {
  unsigned int version;
  unsigned int isSupportedDevice;
};
struct nvmlGpmMetric_t {
  unsigned int metricId;
  nvmlReturn_t nvmlReturn;
  double value;
  struct {
    char* shortName;
    char* longName;
    char* unit;
  } metricInfo;
};
// nvmlGpmMetricsGet_t: its array's declared size (NVML_GPM_METRIC_MAX) grew
// between driver releases; the driver reads numMetrics entries, and the
// array here is larger than any release's, so every release fits.
struct nvmlGpmMetricsGet_t {
  unsigned int version;
  unsigned int numMetrics;
  nvmlGpmSample_t sample1, sample2;
  nvmlGpmMetric_t metrics[1024];
};

constexpr unsigned long long nvmlEventTypeXidCriticalError = 0x8;
constexpr int NVML_TEMPERATURE_GPU = 0;
constexpr int NVML_CLOCK_SM = 1, NVML_CLOCK_MEM = 2;
constexpr int NVML_MEMORY_ERROR_TYPE_CORRECTED = 0, NVML_MEMORY_ERROR_TYPE_UNCORRECTED = 1;
constexpr int NVML_VOLATILE_ECC = 0;
constexpr int NVML_PCIE_UTIL_TX_BYTES = 0, NVML_PCIE_UTIL_RX_BYTES = 1;
constexpr unsigned int NVML_FI_DEV_MEMORY_TEMP = 82;
constexpr unsigned int NVML_FI_DEV_NVLINK_THROUGHPUT_DATA_TX = 138, NVML_FI_DEV_NVLINK_THROUGHPUT_DATA_RX = 139;
constexpr int NVML_VALUE_TYPE_DOUBLE = 0, NVML_VALUE_TYPE_UNSIGNED_INT = 1, NVML_VALUE_TYPE_UNSIGNED_LONG = 2,
              NVML_VALUE_TYPE_UNSIGNED_LONG_LONG = 3, NVML_VALUE_TYPE_SIGNED_LONG_LONG = 4,
              NVML_VALUE_TYPE_SIGNED_INT = 5, NVML_VALUE_TYPE_UNSIGNED_SHORT = 6;
constexpr unsigned int NVML_GPM_METRIC_SM_UTIL = 2;
constexpr unsigned int NVML_GPM_METRICS_GET_VERSION = 1, NVML_GPM_SUPPORT_VERSION = 1;
constexpr unsigned int NVML_DEVICE_MIG_ENABLE = 1;
constexpr unsigned int kNameBufferSize = 96, kUuidBufferSize = 96;

// Every entry point may be null (the driver predates it), except those
// Open requires: init, shutdown, error strings, count and handles.
struct Api {
  nvmlReturn_t (*Init)();
  nvmlReturn_t (*Shutdown)();
  const char* (*ErrorString)(nvmlReturn_t);
  nvmlReturn_t (*DeviceGetCount)(unsigned int*);
  nvmlReturn_t (*DeviceGetHandleByIndex)(unsigned int, nvmlDevice_t*);
  nvmlReturn_t (*DeviceGetUUID)(nvmlDevice_t, char*, unsigned int);
  nvmlReturn_t (*DeviceGetName)(nvmlDevice_t, char*, unsigned int);
  nvmlReturn_t (*DeviceGetMinorNumber)(nvmlDevice_t, unsigned int*);
  nvmlReturn_t (*DeviceGetMemoryInfo)(nvmlDevice_t, nvmlMemory_t*);
  nvmlReturn_t (*DeviceGetUtilizationRates)(nvmlDevice_t, nvmlUtilization_t*);
  nvmlReturn_t (*DeviceGetTemperature)(nvmlDevice_t, int, unsigned int*);
  nvmlReturn_t (*DeviceGetPowerUsage)(nvmlDevice_t, unsigned int*);
  nvmlReturn_t (*DeviceGetTotalEnergyConsumption)(nvmlDevice_t, unsigned long long*);
  nvmlReturn_t (*DeviceGetClockInfo)(nvmlDevice_t, int, unsigned int*);
  nvmlReturn_t (*DeviceGetTotalEccErrors)(nvmlDevice_t, int, int, unsigned long long*);
  nvmlReturn_t (*DeviceGetPcieThroughput)(nvmlDevice_t, int, unsigned int*);
  nvmlReturn_t (*DeviceGetPcieReplayCounter)(nvmlDevice_t, unsigned int*);
  nvmlReturn_t (*DeviceGetEncoderUtilization)(nvmlDevice_t, unsigned int*, unsigned int*);
  nvmlReturn_t (*DeviceGetDecoderUtilization)(nvmlDevice_t, unsigned int*, unsigned int*);
  nvmlReturn_t (*DeviceGetCurrentClocksEventReasons)(nvmlDevice_t, unsigned long long*);
  nvmlReturn_t (*DeviceGetCurrentClocksThrottleReasons)(nvmlDevice_t, unsigned long long*);
  nvmlReturn_t (*DeviceGetFanSpeed)(nvmlDevice_t, unsigned int*);
  nvmlReturn_t (*DeviceGetFieldValues)(nvmlDevice_t, int, nvmlFieldValue_t*);
  nvmlReturn_t (*DeviceGetRemappedRows)(nvmlDevice_t, unsigned int*, unsigned int*, unsigned int*, unsigned int*);
  nvmlReturn_t (*DeviceGetMigMode)(nvmlDevice_t, unsigned int*, unsigned int*);
  nvmlReturn_t (*DeviceGetMaxMigDeviceCount)(nvmlDevice_t, unsigned int*);
  nvmlReturn_t (*DeviceGetMigDeviceHandleByIndex)(nvmlDevice_t, unsigned int, nvmlDevice_t*);
  nvmlReturn_t (*DeviceGetGpuInstanceId)(nvmlDevice_t, unsigned int*);
  nvmlReturn_t (*DeviceGetDeviceHandleFromMigDeviceHandle)(nvmlDevice_t, nvmlDevice_t*);
  nvmlReturn_t (*DeviceGetGpuInstanceById)(nvmlDevice_t, unsigned int, nvmlGpuInstance_t*);
  nvmlReturn_t (*GpuInstanceGetInfo)(nvmlGpuInstance_t, nvmlGpuInstanceInfo_t*);
  nvmlReturn_t (*EventSetCreate)(nvmlEventSet_t*);
  nvmlReturn_t (*DeviceRegisterEvents)(nvmlDevice_t, unsigned long long, nvmlEventSet_t);
  nvmlReturn_t (*EventSetWait)(nvmlEventSet_t, nvmlEventData_t*, unsigned int);
  nvmlReturn_t (*EventSetFree)(nvmlEventSet_t);
  nvmlReturn_t (*GpmQueryDeviceSupport)(nvmlDevice_t, nvmlGpmSupport_t*);
  nvmlReturn_t (*GpmSampleAlloc)(nvmlGpmSample_t*);
  nvmlReturn_t (*GpmSampleFree)(nvmlGpmSample_t);
  nvmlReturn_t (*GpmSampleGet)(nvmlDevice_t, nvmlGpmSample_t);
  nvmlReturn_t (*GpmMigSampleGet)(nvmlDevice_t, unsigned int, nvmlGpmSample_t);
  nvmlReturn_t (*GpmMetricsGet)(nvmlGpmMetricsGet_t*);
};

template <class Fn>
void Resolve(void* library, const char* symbol, Fn*& out) {
  out = reinterpret_cast<Fn*>(dlsym(library, symbol));
}

std::optional<double> FieldNumber(const nvmlFieldValue_t& v) {
  if (v.nvmlReturn != NVML_SUCCESS) return std::nullopt;
  switch (v.valueType) {
    case NVML_VALUE_TYPE_DOUBLE: return v.value.dVal;
    case NVML_VALUE_TYPE_UNSIGNED_INT: return static_cast<double>(v.value.uiVal);
    case NVML_VALUE_TYPE_UNSIGNED_LONG: return static_cast<double>(v.value.ulVal);
    case NVML_VALUE_TYPE_UNSIGNED_LONG_LONG: return static_cast<double>(v.value.ullVal);
    case NVML_VALUE_TYPE_SIGNED_LONG_LONG: return static_cast<double>(v.value.sllVal);
    case NVML_VALUE_TYPE_SIGNED_INT: return static_cast<double>(v.value.siVal);
    case NVML_VALUE_TYPE_UNSIGNED_SHORT: return static_cast<double>(v.value.usVal);
    default: return std::nullopt;
  }
}

}  // namespace

struct NvmlFieldReader::Impl {
  void* library = nullptr;
  Api api{};
  bool initialised = false;
  nvmlEventSet_t events = nullptr;
  std::vector<nvmlDevice_t> handles;  // by GPU index, as at open
  std::vector<bool> xid_watched;      // by GPU index
  std::string xid_problem;
  struct Xids {
    uint64_t last = 0;          // the last XID (any kind)
    uint64_t last_critical = 0; // the last one outside the application list
    int64_t critical_count = 0;
    std::string critical_at;    // when the last critical one was seen (RFC 3339)
  };
  std::map<int, Xids> xids;  // by GPU index
  // GPM: per (GPU, GPU instance id or -1), whether supported, and the
  // previous sample.
  std::map<int, bool> gpm_supported;
  std::map<std::pair<int, int>, nvmlGpmSample_t> gpm_previous;

  ~Impl() {
    for (auto& [key, s] : gpm_previous) {
      if (s && api.GpmSampleFree) api.GpmSampleFree(s);
    }
    if (events && api.EventSetFree) api.EventSetFree(events);
    if (initialised) api.Shutdown();
    if (library) dlclose(library);
  }

  std::string Why(const char* call, nvmlReturn_t rc, int gpu) const {
    const char* text = api.ErrorString(rc);
    return std::string(call) + " (GPU " + std::to_string(gpu) + "): " +
           (text ? text : "NVML error " + std::to_string(rc));
  }

  int GpuOf(nvmlDevice_t d) const {
    for (size_t i = 0; i < handles.size(); ++i) {
      if (handles[i] == d) return static_cast<int>(i);
    }
    nvmlDevice_t parent = nullptr;
    if (api.DeviceGetDeviceHandleFromMigDeviceHandle &&
        api.DeviceGetDeviceHandleFromMigDeviceHandle(d, &parent) == NVML_SUCCESS) {
      for (size_t i = 0; i < handles.size(); ++i) {
        if (handles[i] == parent) return static_cast<int>(i);
      }
    }
    return -1;
  }

  void RegisterXids() {
    xid_watched.assign(handles.size(), false);
    if (!api.EventSetCreate || !api.DeviceRegisterEvents || !api.EventSetWait || !api.EventSetFree) {
      xid_problem = "the NVML library has no event sets (nvmlEventSetCreate, nvmlEventSetWait_v2)";
      return;
    }
    if (const nvmlReturn_t rc = api.EventSetCreate(&events); rc != NVML_SUCCESS) {
      const char* text = api.ErrorString(rc);
      xid_problem = std::string("nvmlEventSetCreate: ") + (text ? text : "NVML error " + std::to_string(rc));
      events = nullptr;
      return;
    }
    for (size_t i = 0; i < handles.size(); ++i) {
      const nvmlReturn_t rc = api.DeviceRegisterEvents(handles[i], nvmlEventTypeXidCriticalError, events);
      if (rc == NVML_SUCCESS) {
        xid_watched[i] = true;
      } else {
        xid_problem += (xid_problem.empty() ? "" : "; ") + Why("nvmlDeviceRegisterEvents", rc, static_cast<int>(i));
      }
    }
  }

  void PollXids() {
    if (!events) return;
    for (int k = 0; k < kMaxXidEventsPerPoll; ++k) {
      nvmlEventData_t e{};
      const nvmlReturn_t rc = api.EventSetWait(events, &e, 0);
      if (rc != NVML_SUCCESS) break;  // NVML_ERROR_TIMEOUT: none pending
      if (!(e.eventType & nvmlEventTypeXidCriticalError)) continue;
      const int gpu = GpuOf(e.device);
      if (gpu < 0) continue;
      Xids& x = xids[gpu];
      x.last = e.eventData;
      if (!IsApplicationXid(e.eventData)) {
        x.last_critical = e.eventData;
        ++x.critical_count;
        x.critical_at = FormatRfc3339(WallNow());
      }
    }
  }

  // SM activity of GPU `gpu` (instance `gi` or -1) between the previous
  // sample and one taken now; nullopt on the first call or where GPM is
  // not supported.
  std::optional<double> SmActive(nvmlDevice_t gpu_handle, int gpu, int gi) {
    if (!api.GpmQueryDeviceSupport || !api.GpmSampleAlloc || !api.GpmSampleFree || !api.GpmMetricsGet ||
        !(gi < 0 ? api.GpmSampleGet != nullptr : api.GpmMigSampleGet != nullptr)) {
      return std::nullopt;
    }
    auto sup = gpm_supported.find(gpu);
    if (sup == gpm_supported.end()) {
      nvmlGpmSupport_t s{NVML_GPM_SUPPORT_VERSION, 0};
      const bool ok = api.GpmQueryDeviceSupport(gpu_handle, &s) == NVML_SUCCESS && s.isSupportedDevice != 0;
      sup = gpm_supported.emplace(gpu, ok).first;
    }
    if (!sup->second) return std::nullopt;
    nvmlGpmSample_t now = nullptr;
    if (api.GpmSampleAlloc(&now) != NVML_SUCCESS) return std::nullopt;
    const nvmlReturn_t rc = gi < 0 ? api.GpmSampleGet(gpu_handle, now)
                                   : api.GpmMigSampleGet(gpu_handle, static_cast<unsigned>(gi), now);
    if (rc != NVML_SUCCESS) {
      api.GpmSampleFree(now);
      return std::nullopt;
    }
    nvmlGpmSample_t& previous = gpm_previous[{gpu, gi}];
    std::optional<double> out;
    if (previous) {
      auto get = std::make_unique<nvmlGpmMetricsGet_t>();
      std::memset(get.get(), 0, sizeof(*get));
      get->version = NVML_GPM_METRICS_GET_VERSION;
      get->numMetrics = 1;
      get->sample1 = previous;
      get->sample2 = now;
      get->metrics[0].metricId = NVML_GPM_METRIC_SM_UTIL;
      if (api.GpmMetricsGet(get.get()) == NVML_SUCCESS && get->metrics[0].nvmlReturn == NVML_SUCCESS) {
        out = std::clamp(get->metrics[0].value / 100.0, 0.0, 1.0);
      }
      api.GpmSampleFree(previous);
    }
    previous = now;
    return out;
  }

  void Memory(nvmlDevice_t d, DcgmEntity& e) const {
    nvmlMemory_t m{};
    if (api.DeviceGetMemoryInfo && api.DeviceGetMemoryInfo(d, &m) == NVML_SUCCESS) {
      e.Set(DcgmField::kFbUsed, static_cast<double>(m.used >> 20));
      e.Set(DcgmField::kFbFree, static_cast<double>(m.free >> 20));
      e.Set(DcgmField::kFbTotal, static_cast<double>(m.total >> 20));
    }
  }

  void DeviceFields(nvmlDevice_t d, int gpu, DcgmEntity& e) {
    using F = DcgmField;
    unsigned int u = 0, period = 0;
    unsigned long long ull = 0;
    nvmlUtilization_t util{};
    if (api.DeviceGetUtilizationRates && api.DeviceGetUtilizationRates(d, &util) == NVML_SUCCESS) {
      e.Set(F::kGpuUtil, std::min(100u, util.gpu));
      e.Set(F::kMemCopyUtil, std::min(100u, util.memory));
    }
    Memory(d, e);
    if (api.DeviceGetTemperature && api.DeviceGetTemperature(d, NVML_TEMPERATURE_GPU, &u) == NVML_SUCCESS) {
      e.Set(F::kGpuTemp, u);
    }
    if (api.DeviceGetPowerUsage && api.DeviceGetPowerUsage(d, &u) == NVML_SUCCESS) e.Set(F::kPowerUsage, u / 1000.0);
    if (api.DeviceGetTotalEnergyConsumption && api.DeviceGetTotalEnergyConsumption(d, &ull) == NVML_SUCCESS) {
      e.Set(F::kTotalEnergyConsumption, static_cast<double>(ull));
    }
    if (api.DeviceGetClockInfo && api.DeviceGetClockInfo(d, NVML_CLOCK_SM, &u) == NVML_SUCCESS) e.Set(F::kSmClock, u);
    if (api.DeviceGetClockInfo && api.DeviceGetClockInfo(d, NVML_CLOCK_MEM, &u) == NVML_SUCCESS) e.Set(F::kMemClock, u);
    if (api.DeviceGetTotalEccErrors) {
      if (api.DeviceGetTotalEccErrors(d, NVML_MEMORY_ERROR_TYPE_CORRECTED, NVML_VOLATILE_ECC, &ull) == NVML_SUCCESS) {
        e.Set(F::kEccSbeVolTotal, static_cast<double>(ull));
      }
      if (api.DeviceGetTotalEccErrors(d, NVML_MEMORY_ERROR_TYPE_UNCORRECTED, NVML_VOLATILE_ECC, &ull) == NVML_SUCCESS) {
        e.Set(F::kEccDbeVolTotal, static_cast<double>(ull));
      }
    }
    if (gpu < static_cast<int>(xid_watched.size()) && xid_watched[gpu]) {
      auto it = xids.find(gpu);
      e.Set(F::kXidErrors, it == xids.end() ? 0.0 : static_cast<double>(it->second.last));
    }
    if (api.DeviceGetPcieThroughput) {
      if (api.DeviceGetPcieThroughput(d, NVML_PCIE_UTIL_TX_BYTES, &u) == NVML_SUCCESS) e.Set(F::kPcieTxBytes, u * 1024.0);
      if (api.DeviceGetPcieThroughput(d, NVML_PCIE_UTIL_RX_BYTES, &u) == NVML_SUCCESS) e.Set(F::kPcieRxBytes, u * 1024.0);
    }
    if (api.DeviceGetPcieReplayCounter && api.DeviceGetPcieReplayCounter(d, &u) == NVML_SUCCESS) {
      e.Set(F::kPcieReplayCounter, u);
    }
    if (api.DeviceGetFieldValues) {
      nvmlFieldValue_t v[3] = {};
      v[0].fieldId = NVML_FI_DEV_MEMORY_TEMP;
      v[1].fieldId = NVML_FI_DEV_NVLINK_THROUGHPUT_DATA_TX;
      v[1].scopeId = UINT_MAX;  // summed over every link
      v[2].fieldId = NVML_FI_DEV_NVLINK_THROUGHPUT_DATA_RX;
      v[2].scopeId = UINT_MAX;
      if (api.DeviceGetFieldValues(d, 3, v) == NVML_SUCCESS) {
        if (auto t = FieldNumber(v[0])) e.Set(F::kMemoryTemp, *t);
        auto tx = FieldNumber(v[1]), rx = FieldNumber(v[2]);
        if (tx && rx) e.Set(F::kNvlinkBandwidthTotal, *tx + *rx);
      }
    }
    if (api.DeviceGetEncoderUtilization && api.DeviceGetEncoderUtilization(d, &u, &period) == NVML_SUCCESS) {
      e.Set(F::kEncUtil, std::min(100u, u));
    }
    if (api.DeviceGetDecoderUtilization && api.DeviceGetDecoderUtilization(d, &u, &period) == NVML_SUCCESS) {
      e.Set(F::kDecUtil, std::min(100u, u));
    }
    auto* reasons = api.DeviceGetCurrentClocksEventReasons ? api.DeviceGetCurrentClocksEventReasons
                                                          : api.DeviceGetCurrentClocksThrottleReasons;
    if (reasons && reasons(d, &ull) == NVML_SUCCESS) e.Set(F::kClockThrottleReasons, static_cast<double>(ull));
    if (api.DeviceGetFanSpeed && api.DeviceGetFanSpeed(d, &u) == NVML_SUCCESS) e.Set(F::kFanSpeed, u);
    if (api.DeviceGetRemappedRows) {
      unsigned int corrected = 0, uncorrected = 0, pending = 0, failed = 0;
      if (api.DeviceGetRemappedRows(d, &corrected, &uncorrected, &pending, &failed) == NVML_SUCCESS) {
        e.Set(F::kCorrectableRemappedRows, corrected);
        e.Set(F::kUncorrectableRemappedRows, uncorrected);
        e.Set(F::kRowRemapFailure, failed ? 1 : 0);
      }
    }
  }

  std::string Text(nvmlReturn_t (*call)(nvmlDevice_t, char*, unsigned int), nvmlDevice_t d) const {
    char buf[kNameBufferSize > kUuidBufferSize ? kNameBufferSize : kUuidBufferSize] = {};
    if (!call || call(d, buf, sizeof(buf)) != NVML_SUCCESS) return "";
    return std::string(buf, strnlen(buf, sizeof(buf)));
  }

  // The MIG instances of GPU `gpu` (in MIG mode), with their memory and SM activity.
  void Instances(nvmlDevice_t parent, const DcgmEntity& gpu_entity, std::vector<DcgmEntity>& out) {
    unsigned int current = 0, pending = 0, max = 0;
    if (!api.DeviceGetMigMode || api.DeviceGetMigMode(parent, &current, &pending) != NVML_SUCCESS ||
        current != NVML_DEVICE_MIG_ENABLE || !api.DeviceGetMaxMigDeviceCount ||
        !api.DeviceGetMigDeviceHandleByIndex || !api.DeviceGetGpuInstanceId ||
        api.DeviceGetMaxMigDeviceCount(parent, &max) != NVML_SUCCESS) {
      return;
    }
    for (unsigned int k = 0; k < std::min(max, 8u); ++k) {
      nvmlDevice_t m = nullptr;
      if (api.DeviceGetMigDeviceHandleByIndex(parent, k, &m) != NVML_SUCCESS) continue;  // NOT_FOUND: a gap
      unsigned int gi = 0;
      if (api.DeviceGetGpuInstanceId(m, &gi) != NVML_SUCCESS) continue;
      DcgmEntity e;
      e.gpu = gpu_entity.gpu;
      e.uuid = gpu_entity.uuid;
      e.model_name = gpu_entity.model_name;
      e.device_minor = gpu_entity.device_minor;
      e.gpu_instance_id = static_cast<int>(gi);
      e.gpu_instance_profile = MigProfileFromDeviceName(Text(api.DeviceGetName, m));
      // The placement start (to find the task on it) needs root, as
      // NVML's GPU-instance queries do; without it the task is not known.
      nvmlGpuInstance_t instance = nullptr;
      nvmlGpuInstanceInfo_t info{};
      if (api.DeviceGetGpuInstanceById && api.GpuInstanceGetInfo &&
          api.DeviceGetGpuInstanceById(parent, gi, &instance) == NVML_SUCCESS &&
          api.GpuInstanceGetInfo(instance, &info) == NVML_SUCCESS) {
        e.mig_start = static_cast<int>(info.placement.start);
      }
      Memory(m, e);
      if (auto sm = SmActive(parent, e.gpu, e.gpu_instance_id)) e.Set(DcgmField::kSmActive, *sm);
      out.push_back(std::move(e));
    }
  }
};

NvmlFieldReader::NvmlFieldReader(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
NvmlFieldReader::~NvmlFieldReader() = default;

Result<std::unique_ptr<NvmlFieldReader>> NvmlFieldReader::Open(const std::string& library) {
  auto impl = std::make_unique<Impl>();
  impl->library = dlopen(library.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!impl->library) {
    const char* e = dlerror();
    return NotFound("cannot load " + library + ": " + (e ? e : "unknown dlopen error"));
  }
  void* l = impl->library;
  Api& a = impl->api;
  Resolve(l, "nvmlInit_v2", a.Init);
  Resolve(l, "nvmlShutdown", a.Shutdown);
  Resolve(l, "nvmlErrorString", a.ErrorString);
  Resolve(l, "nvmlDeviceGetCount_v2", a.DeviceGetCount);
  Resolve(l, "nvmlDeviceGetHandleByIndex_v2", a.DeviceGetHandleByIndex);
  if (!a.Init || !a.Shutdown || !a.ErrorString || !a.DeviceGetCount || !a.DeviceGetHandleByIndex) {
    return NotFound(library + " lacks nvmlInit_v2, nvmlShutdown, nvmlErrorString, nvmlDeviceGetCount_v2 or "
                              "nvmlDeviceGetHandleByIndex_v2");
  }
  Resolve(l, "nvmlDeviceGetUUID", a.DeviceGetUUID);
  Resolve(l, "nvmlDeviceGetName", a.DeviceGetName);
  Resolve(l, "nvmlDeviceGetMinorNumber", a.DeviceGetMinorNumber);
  Resolve(l, "nvmlDeviceGetMemoryInfo", a.DeviceGetMemoryInfo);
  Resolve(l, "nvmlDeviceGetUtilizationRates", a.DeviceGetUtilizationRates);
  Resolve(l, "nvmlDeviceGetTemperature", a.DeviceGetTemperature);
  Resolve(l, "nvmlDeviceGetPowerUsage", a.DeviceGetPowerUsage);
  Resolve(l, "nvmlDeviceGetTotalEnergyConsumption", a.DeviceGetTotalEnergyConsumption);
  Resolve(l, "nvmlDeviceGetClockInfo", a.DeviceGetClockInfo);
  Resolve(l, "nvmlDeviceGetTotalEccErrors", a.DeviceGetTotalEccErrors);
  Resolve(l, "nvmlDeviceGetPcieThroughput", a.DeviceGetPcieThroughput);
  Resolve(l, "nvmlDeviceGetPcieReplayCounter", a.DeviceGetPcieReplayCounter);
  Resolve(l, "nvmlDeviceGetEncoderUtilization", a.DeviceGetEncoderUtilization);
  Resolve(l, "nvmlDeviceGetDecoderUtilization", a.DeviceGetDecoderUtilization);
  Resolve(l, "nvmlDeviceGetCurrentClocksEventReasons", a.DeviceGetCurrentClocksEventReasons);
  Resolve(l, "nvmlDeviceGetCurrentClocksThrottleReasons", a.DeviceGetCurrentClocksThrottleReasons);
  Resolve(l, "nvmlDeviceGetFanSpeed", a.DeviceGetFanSpeed);
  Resolve(l, "nvmlDeviceGetFieldValues", a.DeviceGetFieldValues);
  Resolve(l, "nvmlDeviceGetRemappedRows", a.DeviceGetRemappedRows);
  Resolve(l, "nvmlDeviceGetMigMode", a.DeviceGetMigMode);
  Resolve(l, "nvmlDeviceGetMaxMigDeviceCount", a.DeviceGetMaxMigDeviceCount);
  Resolve(l, "nvmlDeviceGetMigDeviceHandleByIndex", a.DeviceGetMigDeviceHandleByIndex);
  Resolve(l, "nvmlDeviceGetGpuInstanceId", a.DeviceGetGpuInstanceId);
  Resolve(l, "nvmlDeviceGetDeviceHandleFromMigDeviceHandle", a.DeviceGetDeviceHandleFromMigDeviceHandle);
  Resolve(l, "nvmlDeviceGetGpuInstanceById", a.DeviceGetGpuInstanceById);
  Resolve(l, "nvmlGpuInstanceGetInfo", a.GpuInstanceGetInfo);
  Resolve(l, "nvmlEventSetCreate", a.EventSetCreate);
  Resolve(l, "nvmlDeviceRegisterEvents", a.DeviceRegisterEvents);
  Resolve(l, "nvmlEventSetWait_v2", a.EventSetWait);
  Resolve(l, "nvmlEventSetFree", a.EventSetFree);
  Resolve(l, "nvmlGpmQueryDeviceSupport", a.GpmQueryDeviceSupport);
  Resolve(l, "nvmlGpmSampleAlloc", a.GpmSampleAlloc);
  Resolve(l, "nvmlGpmSampleFree", a.GpmSampleFree);
  Resolve(l, "nvmlGpmSampleGet", a.GpmSampleGet);
  Resolve(l, "nvmlGpmMigSampleGet", a.GpmMigSampleGet);
  Resolve(l, "nvmlGpmMetricsGet", a.GpmMetricsGet);
  if (const nvmlReturn_t rc = a.Init(); rc != NVML_SUCCESS) {
    const char* text = a.ErrorString(rc);
    return FailedPrecondition("nvmlInit_v2: " + std::string(text ? text : "NVML error " + std::to_string(rc)));
  }
  impl->initialised = true;
  unsigned int n = 0;
  if (a.DeviceGetCount(&n) == NVML_SUCCESS) {
    for (unsigned int i = 0; i < n; ++i) {
      nvmlDevice_t d = nullptr;
      if (a.DeviceGetHandleByIndex(i, &d) != NVML_SUCCESS) d = nullptr;
      impl->handles.push_back(d);
    }
  }
  impl->RegisterXids();
  return std::unique_ptr<NvmlFieldReader>(new NvmlFieldReader(std::move(impl)));
}

void NvmlFieldReader::PollXids() { impl_->PollXids(); }

std::string NvmlFieldReader::XidHealth(int gpu) const {
  auto it = impl_->xids.find(gpu);
  if (it == impl_->xids.end() || it->second.critical_count == 0) return "";
  const Impl::Xids& x = it->second;
  std::string s = XidText(x.last_critical) + " at " + x.critical_at;
  if (x.critical_count > 1) s += " (" + std::to_string(x.critical_count) + " critical XIDs since the agent started)";
  return s + "; reset the GPU, then restart the agent";
}

const std::string& NvmlFieldReader::xid_problem() const { return impl_->xid_problem; }

Result<std::vector<DcgmEntity>> NvmlFieldReader::Read() {
  Impl& m = *impl_;
  m.PollXids();
  unsigned int n = 0;
  if (const nvmlReturn_t rc = m.api.DeviceGetCount(&n); rc != NVML_SUCCESS) {
    const char* text = m.api.ErrorString(rc);
    return FailedPrecondition("nvmlDeviceGetCount_v2: " + std::string(text ? text : "NVML error " + std::to_string(rc)));
  }
  std::vector<DcgmEntity> out;
  for (unsigned int i = 0; i < n && out.size() < kMaxDcgmEntities; ++i) {
    const int gpu = static_cast<int>(i);
    nvmlDevice_t d = nullptr;
    if (m.api.DeviceGetHandleByIndex(i, &d) != NVML_SUCCESS) continue;  // Sample reports it unhealthy
    DcgmEntity e;
    e.gpu = gpu;
    e.uuid = m.Text(m.api.DeviceGetUUID, d);
    e.model_name = m.Text(m.api.DeviceGetName, d);
    unsigned int minor = 0;
    if (m.api.DeviceGetMinorNumber && m.api.DeviceGetMinorNumber(d, &minor) == NVML_SUCCESS) {
      e.device_minor = static_cast<int>(minor);
    }
    m.DeviceFields(d, gpu, e);
    std::vector<DcgmEntity> instances;
    m.Instances(d, e, instances);
    if (instances.empty()) {
      if (auto sm = m.SmActive(d, gpu, -1)) e.Set(DcgmField::kSmActive, *sm);
    }
    out.push_back(std::move(e));
    for (auto& x : instances) out.push_back(std::move(x));
  }
  return out;
}

}  // namespace gpupool
