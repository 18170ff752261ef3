// A scripted stand-in for libnvidia-ml, for the NVML backend's tests.
//
// Built as a shared library (target fake_nvml) that exports, with the same C
// signatures, exactly the NVML symbols src/agent/nvml_backend.cc and
// src/agent/nvml_fields.cc resolve, so the real backend code loads it
// through dlopen/dlsym. Everything else is hidden (the target builds with
// hidden visibility).
//
// nvmlInit_v2 reads the JSON file named by GPUPOOL_FAKE_NVML_SCRIPT (when not
// already initialised: like NVML, the fake is process-wide and counts inits,
// so a test re-scripts it only after every backend on it is gone):
//
// {
//   "devices": [{
//     "uuid": "GPU-...", "name": "NVIDIA H100 80GB HBM3",
//     "pci_bus_id": "00000000:17:00.0",     // default: bus 0x10 + index
//     "memory_total_mib": 81559, "memory_used_mib": 1024,
//     "utilization_pct": 37, "temperature_c": 41,
//     "minor": 0,                           // /dev/nvidiaN's minor; default: position
//     "mig_mode": 1,                        // absent: nvmlDeviceGetMigMode is "not supported"
//     "max_mig_devices": 7,                 // default: 7 when mig_mode is 1, else 0
//     "mig": [{"uuid": "MIG-...", "name": "NVIDIA H100 80GB HBM3 MIG 3g.40gb",
//              "index": 0,                  // MIG device index; default: position
//              "gpu_instance_id": 1, "start": 4, "size": 4, "memory_mib": 40192,
//              "compute_instance_id": 0}],          // default 0
//     "nvlinks": [{"peer": 1},              // link 0 (position = link number) to device 1
//                 {"remote_bus_id": "..."}, // or to any PCI address
//                 {"switch": true},         // or into an NVSwitch
//                 {"peer": 2, "active": false}],
//     "processes": [{"pid": 123, "memory_mib": 500,
//                    "sm_util": 40, "timestamp_us": 1000000}],  // util sample (when sm_util > 0)
//     "memory_util_pct": 12,                // nvmlDeviceGetUtilizationRates' memory (default 0)
//     "remapped_rows": {"pending": false, "failure": false,
//                       "correctable": 0, "uncorrectable": 0},
//     ...                                   // the DCGM field set's keys: fake_nvml_fields.cc
//     "fail": {"nvmlDeviceGetTemperature": 999}  // this device's calls that fail, with the code
//   }],
//   "fail": {"nvmlDeviceGetProcessUtilization": 3}  // calls that fail on every device
// }
//
// fake_nvml_fields.cc serves the DCGM field set's calls and XID events from
// the same devices' objects (fake_nvml_state.h).
//
// Process-utilization samples follow NVML: only samples newer than the
// caller's lastSeenTimeStamp are returned, NVML_ERROR_NOT_FOUND when none.
#include "tests/fake_nvml/fake_nvml_state.h"

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <stdexcept>
#include <string>
#include <vector>

namespace {

using nvmlReturn_t = int;
constexpr nvmlReturn_t kSuccess = 0;
constexpr nvmlReturn_t kUninitialized = 1;
constexpr nvmlReturn_t kInvalidArgument = 2;
constexpr nvmlReturn_t kNotSupported = 3;
constexpr nvmlReturn_t kNotFound = 6;
constexpr nvmlReturn_t kInsufficientSize = 7;
constexpr nvmlReturn_t kDriverNotLoaded = 9;

struct nvmlMemory_t {
  unsigned long long total, free, used;
};
struct nvmlUtilization_t {
  unsigned int gpu, memory;
};
struct nvmlPciInfo_t {
  char busIdLegacy[16];
  unsigned int domain, bus, device, pciDeviceId, pciSubSystemId;
  char busId[32];
};
struct nvmlProcessInfo_t {
  unsigned int pid;
  unsigned long long usedGpuMemory;
  unsigned int gpuInstanceId, computeInstanceId;
};
struct nvmlProcessUtilizationSample_t {
  unsigned int pid;
  unsigned long long timeStamp;
  unsigned int smUtil, memUtil, encUtil, decUtil;
};
struct nvmlGpuInstancePlacement_t {
  unsigned int start, size;
};
struct FakeDevice;
struct nvmlGpuInstanceInfo_t {
  FakeDevice* device;
  unsigned int id, profileId;
  nvmlGpuInstancePlacement_t placement;
};

struct FakeProcess {
  unsigned int pid = 0;
  unsigned long long memory_bytes = 0;
  unsigned int sm_util = 0;
  unsigned long long timestamp_us = 1000000;
};
struct FakeLink {
  bool active = true;
  bool to_switch = false;
  std::string remote_bus_id;
};
struct FakeGpuInstance {
  unsigned int id = 0, start = 0, size = 0;
};

// A GPU or a MIG device: NVML hands out both as nvmlDevice_t.
struct FakeDevice {
  FakeDevice* parent = nullptr;  // set for MIG devices
  std::string uuid, name, bus_id;
  unsigned long long memory_total = 0, memory_used = 0;
  unsigned int utilization = 0, temperature = 0;
  unsigned int minor = 0;
  int mig_mode = -1;  // -1: not supported
  unsigned int max_mig_devices = 0;
  std::map<unsigned int, std::unique_ptr<FakeDevice>> mig;  // by MIG device index
  FakeGpuInstance gpu_instance;                             // of a MIG device
  unsigned int compute_instance_id = 0;                     // of a MIG device
  std::vector<FakeLink> links;
  std::vector<FakeProcess> processes;
  bool remap_pending = false, remap_failure = false;
  std::map<std::string, int> fail;
  nlohmann::json script = nlohmann::json::object();  // its object in the script (fake_nvml_fields.cc reads it)
};

struct State {
  std::vector<std::unique_ptr<FakeDevice>> devices;
  std::map<std::string, int> fail;
};

State* g_state = nullptr;
int g_init_count = 0;
uint64_t g_generation = 0;  // scripts loaded so far

std::map<std::string, int> FailMap(const nlohmann::json& j) {
  std::map<std::string, int> out;
  if (j.is_object()) {
    for (const auto& [k, v] : j.items()) out[k] = v.get<int>();
  }
  return out;
}

std::unique_ptr<State> Load(const char* path) {
  std::ifstream in(path);
  if (!in) throw std::runtime_error(std::string("cannot open ") + path);
  const nlohmann::json script = nlohmann::json::parse(in);
  auto state = std::make_unique<State>();
  state->fail = FailMap(script.value("fail", nlohmann::json::object()));
  const auto devices = script.value("devices", nlohmann::json::array());
  std::vector<std::string> bus_ids;
  for (size_t i = 0; i < devices.size(); ++i) {
    char bus[32];
    std::snprintf(bus, sizeof(bus), "00000000:%02X:00.0", static_cast<unsigned>(0x10 + i));
    bus_ids.push_back(devices[i].value("pci_bus_id", std::string(bus)));
  }
  for (size_t i = 0; i < devices.size(); ++i) {
    const auto& d = devices[i];
    auto dev = std::make_unique<FakeDevice>();
    dev->uuid = d.value("uuid", "GPU-fake-" + std::to_string(i));
    dev->name = d.value("name", std::string("NVIDIA H100 80GB HBM3"));
    dev->bus_id = bus_ids[i];
    dev->memory_total = d.value("memory_total_mib", 81559ULL) << 20;
    dev->memory_used = d.value("memory_used_mib", 0ULL) << 20;
    dev->utilization = d.value("utilization_pct", 0u);
    dev->minor = d.value("minor", static_cast<unsigned int>(i));
    dev->temperature = d.value("temperature_c", 40u);
    dev->mig_mode = d.value("mig_mode", -1);
    dev->max_mig_devices = d.value("max_mig_devices", dev->mig_mode == 1 ? 7u : 0u);
    const auto mig = d.value("mig", nlohmann::json::array());
    for (size_t k = 0; k < mig.size(); ++k) {
      const auto& m = mig[k];
      auto md = std::make_unique<FakeDevice>();
      md->parent = dev.get();
      md->uuid = m.value("uuid", dev->uuid + "-mig-" + std::to_string(k));
      md->name = m.value("name", dev->name + " MIG 1g.10gb");
      md->memory_total = m.value("memory_mib", 9728ULL) << 20;
      md->gpu_instance = {m.value("gpu_instance_id", static_cast<unsigned>(k + 1)), m.value("start", 0u),
                          m.value("size", 1u)};
      md->compute_instance_id = m.value("compute_instance_id", 0u);
      md->script = m;
      dev->mig[m.value("index", static_cast<unsigned>(k))] = std::move(md);
    }
    for (const auto& l : d.value("nvlinks", nlohmann::json::array())) {
      FakeLink link;
      link.active = l.value("active", true);
      link.to_switch = l.value("switch", false);
      if (l.contains("peer")) link.remote_bus_id = bus_ids.at(l["peer"].get<size_t>());
      link.remote_bus_id = l.value("remote_bus_id", link.remote_bus_id);
      dev->links.push_back(link);
    }
    for (const auto& p : d.value("processes", nlohmann::json::array())) {
      dev->processes.push_back({p.at("pid").get<unsigned>(), p.value("memory_mib", 0ULL) << 20, p.value("sm_util", 0u),
                                p.value("timestamp_us", 1000000ULL)});
    }
    const auto rows = d.value("remapped_rows", nlohmann::json::object());
    dev->remap_pending = rows.value("pending", false);
    dev->remap_failure = rows.value("failure", false);
    dev->fail = FailMap(d.value("fail", nlohmann::json::object()));
    dev->script = d;
    state->devices.push_back(std::move(dev));
  }
  return state;
}

FakeDevice* Dev(void* handle) { return static_cast<FakeDevice*>(handle); }

// The scripted failure of `call` on device `d` (or its parent), or success.
nvmlReturn_t Scripted(const char* call, const FakeDevice* d = nullptr) {
  if (!g_state) return kUninitialized;
  for (const FakeDevice* x = d; x; x = x->parent) {
    if (auto it = x->fail.find(call); it != x->fail.end()) return it->second;
  }
  if (auto it = g_state->fail.find(call); it != g_state->fail.end()) return it->second;
  return kSuccess;
}

nvmlReturn_t CopyString(const std::string& s, char* out, unsigned int length) {
  if (!out) return kInvalidArgument;
  if (s.size() + 1 > length) return kInsufficientSize;
  std::memcpy(out, s.c_str(), s.size() + 1);
  return kSuccess;
}

void FillPci(const std::string& bus_id, nvmlPciInfo_t* pci) {
  std::memset(pci, 0, sizeof(*pci));
  std::snprintf(pci->busId, sizeof(pci->busId), "%s", bus_id.c_str());
  unsigned domain = 0, bus = 0, device = 0, function = 0;
  std::sscanf(bus_id.c_str(), "%x:%x:%x.%x", &domain, &bus, &device, &function);
  pci->domain = domain;
  pci->bus = bus;
  pci->device = device;
  std::snprintf(pci->busIdLegacy, sizeof(pci->busIdLegacy), "%04X:%02X:%02X.0", domain & 0xFFFF, bus, device);
}

}  // namespace

#define FAKE_NVML_API extern "C" __attribute__((visibility("default")))

FAKE_NVML_API nvmlReturn_t nvmlInit_v2() {
  if (g_init_count > 0) {
    ++g_init_count;
    return kSuccess;
  }
  const char* path = std::getenv("GPUPOOL_FAKE_NVML_SCRIPT");
  if (!path) {
    std::fprintf(stderr, "fake NVML: GPUPOOL_FAKE_NVML_SCRIPT is not set\n");
    return kDriverNotLoaded;
  }
  try {
    auto state = Load(path);
    if (auto it = state->fail.find("nvmlInit_v2"); it != state->fail.end()) return it->second;
    delete g_state;
    g_state = state.release();
    ++g_generation;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "fake NVML: script %s: %s\n", path, e.what());
    return kDriverNotLoaded;
  }
  g_init_count = 1;
  return kSuccess;
}

FAKE_NVML_API nvmlReturn_t nvmlShutdown() {
  if (g_init_count == 0) return kUninitialized;
  if (--g_init_count == 0) {
    delete g_state;
    g_state = nullptr;
  }
  return kSuccess;
}

FAKE_NVML_API const char* nvmlErrorString(nvmlReturn_t rc) {
  switch (rc) {
    case 0: return "Success";
    case 1: return "Uninitialized";
    case 2: return "Invalid Argument";
    case 3: return "Not Supported";
    case 4: return "Insufficient Permissions";
    case 6: return "Not Found";
    case 7: return "Insufficient Size";
    case 9: return "Driver Not Loaded";
    case 15: return "GPU is lost";
    default: return "Unknown Error";
  }
}

FAKE_NVML_API nvmlReturn_t nvmlDeviceGetCount_v2(unsigned int* count) {
  if (nvmlReturn_t rc = Scripted("nvmlDeviceGetCount_v2"); rc != kSuccess) return rc;
  *count = static_cast<unsigned int>(g_state->devices.size());
  return kSuccess;
}

FAKE_NVML_API nvmlReturn_t nvmlDeviceGetHandleByIndex_v2(unsigned int index, void** device) {
  if (nvmlReturn_t rc = Scripted("nvmlDeviceGetHandleByIndex_v2"); rc != kSuccess) return rc;
  if (index >= g_state->devices.size()) return kInvalidArgument;
  if (nvmlReturn_t rc = Scripted("nvmlDeviceGetHandleByIndex_v2", g_state->devices[index].get()); rc != kSuccess) {
    return rc;
  }
  *device = g_state->devices[index].get();
  return kSuccess;
}

FAKE_NVML_API nvmlReturn_t nvmlDeviceGetUUID(void* device, char* uuid, unsigned int length) {
  if (nvmlReturn_t rc = Scripted("nvmlDeviceGetUUID", Dev(device)); rc != kSuccess) return rc;
  return CopyString(Dev(device)->uuid, uuid, length);
}

// As the real one: the minor number of /dev/nvidiaN; not for MIG devices.
FAKE_NVML_API nvmlReturn_t nvmlDeviceGetMinorNumber(void* device, unsigned int* minor) {
  if (nvmlReturn_t rc = Scripted("nvmlDeviceGetMinorNumber", Dev(device)); rc != kSuccess) return rc;
  if (minor == nullptr) return kInvalidArgument;
  if (Dev(device)->parent != nullptr) return kNotSupported;
  *minor = Dev(device)->minor;
  return kSuccess;
}

FAKE_NVML_API nvmlReturn_t nvmlDeviceGetName(void* device, char* name, unsigned int length) {
  if (nvmlReturn_t rc = Scripted("nvmlDeviceGetName", Dev(device)); rc != kSuccess) return rc;
  return CopyString(Dev(device)->name, name, length);
}

FAKE_NVML_API nvmlReturn_t nvmlDeviceGetMemoryInfo(void* device, nvmlMemory_t* memory) {
  if (nvmlReturn_t rc = Scripted("nvmlDeviceGetMemoryInfo", Dev(device)); rc != kSuccess) return rc;
  const FakeDevice* d = Dev(device);
  memory->total = d->memory_total;
  memory->used = d->memory_used;
  memory->free = d->memory_total - d->memory_used;
  return kSuccess;
}

FAKE_NVML_API nvmlReturn_t nvmlDeviceGetPciInfo_v3(void* device, nvmlPciInfo_t* pci) {
  if (nvmlReturn_t rc = Scripted("nvmlDeviceGetPciInfo_v3", Dev(device)); rc != kSuccess) return rc;
  FillPci(Dev(device)->bus_id, pci);
  return kSuccess;
}

FAKE_NVML_API nvmlReturn_t nvmlDeviceGetUtilizationRates(void* device, nvmlUtilization_t* utilization) {
  if (nvmlReturn_t rc = Scripted("nvmlDeviceGetUtilizationRates", Dev(device)); rc != kSuccess) return rc;
  utilization->gpu = Dev(device)->utilization;
  utilization->memory = Dev(device)->script.value("memory_util_pct", 0u);
  return kSuccess;
}

FAKE_NVML_API nvmlReturn_t nvmlDeviceGetTemperature(void* device, int sensor, unsigned int* temp) {
  if (nvmlReturn_t rc = Scripted("nvmlDeviceGetTemperature", Dev(device)); rc != kSuccess) return rc;
  if (sensor != 0) return kInvalidArgument;  // NVML_TEMPERATURE_GPU only
  *temp = Dev(device)->temperature;
  return kSuccess;
}

FAKE_NVML_API nvmlReturn_t nvmlDeviceGetComputeRunningProcesses_v3(void* device, unsigned int* count,
                                                                    nvmlProcessInfo_t* infos) {
  if (nvmlReturn_t rc = Scripted("nvmlDeviceGetComputeRunningProcesses_v3", Dev(device)); rc != kSuccess) return rc;
  const auto& procs = Dev(device)->processes;
  const unsigned int cap = *count;
  *count = static_cast<unsigned int>(procs.size());
  if (procs.empty()) return kSuccess;
  if (!infos || cap < procs.size()) return kInsufficientSize;
  for (size_t i = 0; i < procs.size(); ++i) {
    infos[i] = {procs[i].pid, procs[i].memory_bytes, ~0u, ~0u};
  }
  return kSuccess;
}

FAKE_NVML_API nvmlReturn_t nvmlDeviceGetProcessUtilization(void* device, nvmlProcessUtilizationSample_t* utilization,
                                                           unsigned int* count, unsigned long long last_seen) {
  if (nvmlReturn_t rc = Scripted("nvmlDeviceGetProcessUtilization", Dev(device)); rc != kSuccess) return rc;
  std::vector<const FakeProcess*> fresh;
  for (const auto& p : Dev(device)->processes) {
    if (p.sm_util > 0 && p.timestamp_us > last_seen) fresh.push_back(&p);
  }
  if (fresh.empty()) return kNotFound;
  const unsigned int cap = *count;
  *count = static_cast<unsigned int>(fresh.size());
  if (!utilization || cap < fresh.size()) return kInsufficientSize;
  for (size_t i = 0; i < fresh.size(); ++i) {
    utilization[i] = {fresh[i]->pid, fresh[i]->timestamp_us, fresh[i]->sm_util, 0, 0, 0};
  }
  return kSuccess;
}

FAKE_NVML_API nvmlReturn_t nvmlDeviceGetMigMode(void* device, unsigned int* current, unsigned int* pending) {
  if (nvmlReturn_t rc = Scripted("nvmlDeviceGetMigMode", Dev(device)); rc != kSuccess) return rc;
  if (Dev(device)->mig_mode < 0) return kNotSupported;
  *current = *pending = static_cast<unsigned int>(Dev(device)->mig_mode);
  return kSuccess;
}

FAKE_NVML_API nvmlReturn_t nvmlDeviceGetMaxMigDeviceCount(void* device, unsigned int* count) {
  if (nvmlReturn_t rc = Scripted("nvmlDeviceGetMaxMigDeviceCount", Dev(device)); rc != kSuccess) return rc;
  *count = Dev(device)->max_mig_devices;
  return kSuccess;
}

FAKE_NVML_API nvmlReturn_t nvmlDeviceGetMigDeviceHandleByIndex(void* device, unsigned int index, void** mig) {
  if (nvmlReturn_t rc = Scripted("nvmlDeviceGetMigDeviceHandleByIndex", Dev(device)); rc != kSuccess) return rc;
  const FakeDevice* d = Dev(device);
  if (index >= d->max_mig_devices) return kInvalidArgument;
  auto it = d->mig.find(index);
  if (it == d->mig.end()) return kNotFound;
  *mig = it->second.get();
  return kSuccess;
}

FAKE_NVML_API nvmlReturn_t nvmlDeviceGetGpuInstanceId(void* device, unsigned int* id) {
  if (nvmlReturn_t rc = Scripted("nvmlDeviceGetGpuInstanceId", Dev(device)); rc != kSuccess) return rc;
  if (!Dev(device)->parent) return kNotSupported;  // not a MIG device
  *id = Dev(device)->gpu_instance.id;
  return kSuccess;
}

FAKE_NVML_API nvmlReturn_t nvmlDeviceGetComputeInstanceId(void* device, unsigned int* id) {
  if (nvmlReturn_t rc = Scripted("nvmlDeviceGetComputeInstanceId", Dev(device)); rc != kSuccess) return rc;
  if (!Dev(device)->parent) return kNotSupported;  // not a MIG device
  *id = Dev(device)->compute_instance_id;
  return kSuccess;
}

FAKE_NVML_API nvmlReturn_t nvmlDeviceGetGpuInstanceById(void* device, unsigned int id, void** gpu_instance) {
  if (nvmlReturn_t rc = Scripted("nvmlDeviceGetGpuInstanceById", Dev(device)); rc != kSuccess) return rc;
  for (auto& [index, m] : Dev(device)->mig) {
    if (m->gpu_instance.id == id) {
      *gpu_instance = m.get();  // a GPU instance handle: the MIG device that holds its facts
      return kSuccess;
    }
  }
  return kNotFound;
}

FAKE_NVML_API nvmlReturn_t nvmlGpuInstanceGetInfo(void* gpu_instance, nvmlGpuInstanceInfo_t* info) {
  FakeDevice* m = Dev(gpu_instance);
  if (nvmlReturn_t rc = Scripted("nvmlGpuInstanceGetInfo", m); rc != kSuccess) return rc;
  info->device = m->parent;
  info->id = m->gpu_instance.id;
  info->profileId = 0;
  info->placement = {m->gpu_instance.start, m->gpu_instance.size};
  return kSuccess;
}

FAKE_NVML_API nvmlReturn_t nvmlDeviceGetNvLinkState(void* device, unsigned int link, int* active) {
  if (nvmlReturn_t rc = Scripted("nvmlDeviceGetNvLinkState", Dev(device)); rc != kSuccess) return rc;
  const auto& links = Dev(device)->links;
  if (links.empty()) return kNotSupported;
  if (link >= links.size()) return kInvalidArgument;
  *active = links[link].active ? 1 : 0;
  return kSuccess;
}

FAKE_NVML_API nvmlReturn_t nvmlDeviceGetNvLinkRemoteDeviceType(void* device, unsigned int link, int* type) {
  if (nvmlReturn_t rc = Scripted("nvmlDeviceGetNvLinkRemoteDeviceType", Dev(device)); rc != kSuccess) return rc;
  const auto& links = Dev(device)->links;
  if (link >= links.size()) return kInvalidArgument;
  *type = links[link].to_switch ? 2 : 0;  // NVML_NVLINK_DEVICE_TYPE_SWITCH : _GPU
  return kSuccess;
}

FAKE_NVML_API nvmlReturn_t nvmlDeviceGetNvLinkRemotePciInfo_v2(void* device, unsigned int link, nvmlPciInfo_t* pci) {
  if (nvmlReturn_t rc = Scripted("nvmlDeviceGetNvLinkRemotePciInfo_v2", Dev(device)); rc != kSuccess) return rc;
  const auto& links = Dev(device)->links;
  if (link >= links.size()) return kInvalidArgument;
  FillPci(links[link].to_switch ? "00000000:FF:00.0" : links[link].remote_bus_id, pci);
  return kSuccess;
}

FAKE_NVML_API nvmlReturn_t nvmlDeviceGetRemappedRows(void* device, unsigned int* corrected, unsigned int* uncorrected,
                                                     unsigned int* pending, unsigned int* failure) {
  if (nvmlReturn_t rc = Scripted("nvmlDeviceGetRemappedRows", Dev(device)); rc != kSuccess) return rc;
  const auto rows = Dev(device)->script.value("remapped_rows", nlohmann::json::object());
  *corrected = rows.value("correctable", 0u);
  *uncorrected = rows.value("uncorrectable", 0u);
  *pending = Dev(device)->remap_pending ? 1 : 0;
  *failure = Dev(device)->remap_failure ? 1 : 0;
  return kSuccess;
}

// For fake_nvml_fields.cc, which serves the DCGM field set's calls from the
// same script (hidden like everything but the NVML symbols).
namespace fake_nvml {

bool Initialised() { return g_state != nullptr; }
uint64_t Generation() { return g_generation; }

// The script object of `handle` (a GPU or MIG device of the loaded script), or null.
const nlohmann::json* DeviceScript(const void* handle) {
  if (!g_state || !handle) return nullptr;
  for (const auto& d : g_state->devices) {
    if (d.get() == handle) return &d->script;
    for (const auto& [index, m] : d->mig) {
      if (m.get() == handle) return &m->script;
    }
  }
  return nullptr;
}

// The GPU a MIG device belongs to; null for a GPU (or an unknown handle).
void* ParentOf(const void* handle) {
  if (!DeviceScript(handle)) return nullptr;
  return static_cast<const FakeDevice*>(handle)->parent;
}

// The GPU-instance id of the MIG device `handle`; -1 for a GPU.
int GpuInstanceIdOf(const void* handle) {
  if (!DeviceScript(handle) || !static_cast<const FakeDevice*>(handle)->parent) return -1;
  return static_cast<int>(static_cast<const FakeDevice*>(handle)->gpu_instance.id);
}

// The MIG device of GPU `parent` with GPU instance `gi`, or null.
void* MigDeviceOf(const void* parent, unsigned int gi) {
  if (!DeviceScript(parent)) return nullptr;
  for (const auto& [index, m] : static_cast<const FakeDevice*>(parent)->mig) {
    if (m->gpu_instance.id == gi) return m.get();
  }
  return nullptr;
}

int MigModeOf(const void* handle) {
  return DeviceScript(handle) ? static_cast<const FakeDevice*>(handle)->mig_mode : -1;
}

nvmlReturn_t ScriptedFailure(const char* call, const void* handle) {
  return Scripted(call, DeviceScript(handle) ? static_cast<const FakeDevice*>(handle) : nullptr);
}

}  // namespace fake_nvml
