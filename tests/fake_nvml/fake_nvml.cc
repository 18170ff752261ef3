// A scripted stand-in for libnvidia-ml, for the NVML backend's tests.
//
// Built as a shared library (target fake_nvml) that exports, with the same C
// signatures, exactly the NVML symbols src/agent/nvml_backend.cc,
// src/agent/nvml_mig.cc and src/agent/nvml_fields.cc resolve, so the real
// backend code loads it through dlopen/dlsym. Everything else is hidden (the
// target builds with hidden visibility).
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
//              "compute_instance_id": 0,    // default 0
//              "processes": [{"pid": 7}]}], // running there: its compute instance is in use
//     "mig_model": "H100",                  // its MIG table (src/model/mig.h); default: from the name
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
//   "fail": {"nvmlDeviceGetProcessUtilization": 3},  // calls that fail on every device
//   "mig_caps": {"proc_dir": "...", "dev_dir": "..."}  // where instances' capabilities appear
// }
//
// MIG lifecycle (as the driver): GPU instances are created at a placement
// with the model's table (src/model/mig.h, the same NVIDIA-documented
// profiles the Engine plans with) and refused as the driver refuses them:
// not in MIG mode or a profile the GPU lacks -> NVML_ERROR_NOT_SUPPORTED; an
// unknown profile id, a start that is not one of the profile's documented
// placements or a wrong size -> NVML_ERROR_INVALID_ARGUMENT; memory slices
// overlapping an existing GPU instance, the profile's instance limit or a
// second "+me" instance -> NVML_ERROR_INSUFFICIENT_RESOURCES. A GPU instance
// with a compute instance, or a compute instance with processes, is not
// destroyed (NVML_ERROR_IN_USE). Every compute instance is a MIG device with
// a new UUID at the lowest free MIG device index; GPU instance ids are the
// lowest free from 1, compute instance ids from 0. Profile ids are those
// nvidia-smi shows (e.g. 9 for 3g.40gb on an H100), distinct from the
// NVML_GPU_INSTANCE_PROFILE_* constants that nvmlDeviceGetGpuInstanceProfileInfo
// takes. With "mig_caps", each instance's capability listing and node
// appear under proc_dir and dev_dir while it exists (device_nodes.h).
// Handles of destroyed instances are refused (NVML_ERROR_INVALID_ARGUMENT).
//
// fake_nvml_fields.cc serves the DCGM field set's calls and XID events from
// the same devices' objects (fake_nvml_state.h).
//
// Process-utilization samples follow NVML: only samples newer than the
// caller's lastSeenTimeStamp are returned, NVML_ERROR_NOT_FOUND when none.
#include "tests/fake_nvml/fake_nvml_state.h"

#include <cctype>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <set>
#include <stdexcept>
#include <string>
#include <vector>

#include "src/agent/device_nodes.h"
#include "src/model/mig.h"

namespace {

using nvmlReturn_t = int;
constexpr nvmlReturn_t kSuccess = 0;
constexpr nvmlReturn_t kUninitialized = 1;
constexpr nvmlReturn_t kInvalidArgument = 2;
constexpr nvmlReturn_t kNotSupported = 3;
constexpr nvmlReturn_t kNotFound = 6;
constexpr nvmlReturn_t kInsufficientSize = 7;
constexpr nvmlReturn_t kDriverNotLoaded = 9;
constexpr nvmlReturn_t kInUse = 19;
constexpr nvmlReturn_t kInsufficientResources = 23;

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
struct FakeDevice;
struct FakeGpuInstance;
// A compute instance: what a MIG device is.
struct FakeComputeInstance {
  FakeGpuInstance* gi = nullptr;
  unsigned int id = 0, profile_id = 0, slices = 1;
  unsigned int index = 0;  // its MIG device index on the GPU
  std::unique_ptr<FakeDevice> device;
};
struct FakeGpuInstance {
  FakeDevice* parent = nullptr;
  unsigned int id = 0, profile_id = 0, start = 0, size = 0;
  int profile = -1;  // index into the GPU's MIG table; -1: none matches
  std::string profile_name;
  std::vector<std::unique_ptr<FakeComputeInstance>> cis;
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
  const gpupool::MigTable* mig_table = nullptr;             // of a GPU
  std::vector<std::unique_ptr<FakeGpuInstance>> gpu_instances;  // of a GPU
  std::map<unsigned int, FakeDevice*> mig;  // of a GPU: MIG devices by index (owned by their compute instances)
  FakeComputeInstance* ci = nullptr;        // of a MIG device
  std::vector<FakeLink> links;
  std::vector<FakeProcess> processes;
  bool remap_pending = false, remap_failure = false;
  std::map<std::string, int> fail;
  nlohmann::json script = nlohmann::json::object();  // its object in the script (fake_nvml_fields.cc reads it)
};

struct State {
  std::vector<std::unique_ptr<FakeDevice>> devices;
  std::map<std::string, int> fail;
  std::string caps_proc_dir, caps_dev_dir;  // "mig_caps"; empty: none
  std::set<const void*> live;               // GPU and compute instance handles that exist
  unsigned long long mig_created = 0;       // UUIDs of created MIG devices count up
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

// The MIG table of a product name, as the driver knows its own GPU.
std::string MigModelOf(const std::string& name, unsigned long long memory_mib) {
  for (const char* m : {"H200", "H100", "A30"}) {
    if (name.find(m) != std::string::npos) return m;
  }
  if (name.find("A100") != std::string::npos) return memory_mib >= 60 * 1024 ? "A100-80GB" : "A100-40GB";
  return "";
}

// Per table position (src/model/mig.h lists profiles in one order per
// layout): the NVML_GPU_INSTANCE_PROFILE_* constant and the profile id
// nvidia-smi shows for it.
struct ProfileIds {
  unsigned int constant, id;
};
ProfileIds IdsOf(const gpupool::MigTable& t, int p) {
  // 1g, 1g+me, 1g with 2 memory slices, 2g, 3g, 4g, 7g
  static constexpr ProfileIds kEight[] = {{0x0, 19}, {0x7, 20}, {0x9, 15}, {0x1, 14}, {0x2, 9}, {0x3, 5}, {0x4, 0}};
  // A30: 1g, 1g+me, 2g, 2g+me, 4g
  static constexpr ProfileIds kFour[] = {{0x0, 14}, {0x7, 21}, {0x1, 5}, {0x8, 6}, {0x3, 0}};
  return t.memory_slices == 8 ? kEight[p] : kFour[p];
}
int ProfileByConstant(const gpupool::MigTable* t, unsigned int constant) {
  for (int p = 0; t && p < static_cast<int>(t->profiles.size()); ++p) {
    if (IdsOf(*t, p).constant == constant) return p;
  }
  return -1;
}
int ProfileById(const gpupool::MigTable* t, unsigned int id) {
  for (int p = 0; t && p < static_cast<int>(t->profiles.size()); ++p) {
    if (IdsOf(*t, p).id == id) return p;
  }
  return -1;
}
// NVML_COMPUTE_INSTANCE_PROFILE_* (= the compute profile id here) -> compute
// slices; 0 for the constants no table profile uses (_1_SLICE_REV1, _7_SLICE_NVL).
unsigned int ComputeSlicesOf(unsigned int constant) {
  static constexpr unsigned int kSlices[] = {1, 2, 3, 4, 7, 8, 6, 0, 0};
  return constant < 9 ? kSlices[constant] : 0;
}
unsigned int GpuInstanceSlices(const FakeGpuInstance& gi) {
  const gpupool::MigTable* t = gi.parent->mig_table;
  if (t && gi.profile >= 0) return t->profiles[gi.profile].compute_slices;
  return gi.size >= 8 ? 7 : gi.size;
}

void MakeCaps(const State& state, const FakeDevice& gpu, unsigned int gi, int ci) {
  if (state.caps_proc_dir.empty()) return;
  if (auto ok = gpupool::MakeFakeMigCapNode(state.caps_proc_dir, state.caps_dev_dir, static_cast<int>(gpu.minor),
                                            static_cast<int>(gi), ci);
      !ok) {
    std::fprintf(stderr, "fake NVML: %s\n", ok.error().message.c_str());
  }
}
void RemoveCaps(const State& state, const FakeDevice& gpu, unsigned int gi, int ci) {
  if (state.caps_proc_dir.empty()) return;
  if (auto ok = gpupool::RemoveFakeMigCapNode(state.caps_proc_dir, state.caps_dev_dir, static_cast<int>(gpu.minor),
                                              static_cast<int>(gi), ci);
      !ok) {
    std::fprintf(stderr, "fake NVML: %s\n", ok.error().message.c_str());
  }
}

// A compute instance on `gi` with its MIG device at `index`.
FakeComputeInstance& AddComputeInstance(State& state, FakeGpuInstance& gi, unsigned int id, unsigned int slices,
                                        unsigned int index) {
  FakeDevice& gpu = *gi.parent;
  auto ci = std::make_unique<FakeComputeInstance>();
  ci->gi = &gi;
  ci->id = id;
  ci->slices = slices;
  ci->profile_id = 0;
  for (unsigned int c = 0; c < 9; ++c) {
    if (ComputeSlicesOf(c) == slices) ci->profile_id = c;
  }
  ci->index = index;
  ci->device = std::make_unique<FakeDevice>();
  ci->device->parent = &gpu;
  ci->device->ci = ci.get();
  gpu.mig[index] = ci->device.get();
  state.live.insert(ci.get());
  gi.cis.push_back(std::move(ci));
  return *gi.cis.back();
}

FakeGpuInstance& AddGpuInstance(State& state, FakeDevice& gpu, unsigned int id, unsigned int start,
                                unsigned int size, int profile) {
  auto gi = std::make_unique<FakeGpuInstance>();
  gi->parent = &gpu;
  gi->id = id;
  gi->start = start;
  gi->size = size;
  gi->profile = profile;
  if (gpu.mig_table && profile >= 0) {
    gi->profile_id = IdsOf(*gpu.mig_table, profile).id;
    gi->profile_name = gpu.mig_table->profiles[profile].name;
  }
  state.live.insert(gi.get());
  gpu.gpu_instances.push_back(std::move(gi));
  return *gpu.gpu_instances.back();
}

// A scripted MIG device: its GPU instance (shared by the entries that name
// the same gpu_instance_id) and its compute instance.
void LoadMigDevice(State& state, FakeDevice& gpu, const nlohmann::json& m, size_t k) {
  const unsigned int gi_id = m.value("gpu_instance_id", static_cast<unsigned>(k + 1));
  FakeGpuInstance* gi = nullptr;
  for (auto& g : gpu.gpu_instances) {
    if (g->id == gi_id) gi = g.get();
  }
  const std::string name = m.value("name", gpu.name + " MIG 1g.10gb");
  if (!gi) {
    const unsigned int size = m.value("size", 1u);
    int profile = -1;  // the profile named after " MIG " ("1c.3g.40gb": the GPU instance's is 3g.40gb), else by size
    std::string token = name.find(" MIG ") == std::string::npos ? "" : name.substr(name.rfind(" MIG ") + 5);
    if (const size_t dot = token.find('.'); dot != std::string::npos && dot > 0 && token[dot - 1] == 'c') {
      token = token.substr(dot + 1);
    }
    for (int p = 0; gpu.mig_table && p < static_cast<int>(gpu.mig_table->profiles.size()); ++p) {
      const auto& prof = gpu.mig_table->profiles[p];
      if (prof.name == token || (token.empty() && profile < 0 && !prof.media_extensions && prof.memory_slices == size)) {
        profile = p;
      }
    }
    gi = &AddGpuInstance(state, gpu, gi_id, m.value("start", 0u), size, profile);
  }
  const unsigned int gi_slices = GpuInstanceSlices(*gi);
  unsigned int slices = gi_slices;
  if (const size_t c = name.rfind("c."); c != std::string::npos && c > 0 && std::isdigit(static_cast<unsigned char>(name[c - 1]))) {
    slices = static_cast<unsigned int>(name[c - 1] - '0');
  }
  FakeComputeInstance& ci = AddComputeInstance(state, *gi, m.value("compute_instance_id", 0u), slices,
                                               m.value("index", static_cast<unsigned>(k)));
  FakeDevice& md = *ci.device;
  md.script = m;
  md.uuid = m.value("uuid", gpu.uuid + "-mig-" + std::to_string(k));
  md.name = name;
  md.memory_total = m.value("memory_mib", 9728ULL) << 20;
  for (const auto& p : m.value("processes", nlohmann::json::array())) {
    md.processes.push_back({p.at("pid").get<unsigned>(), p.value("memory_mib", 0ULL) << 20, 0, 1000000});
  }
}

std::unique_ptr<State> Load(const char* path) {
  std::ifstream in(path);
  if (!in) throw std::runtime_error(std::string("cannot open ") + path);
  const nlohmann::json script = nlohmann::json::parse(in);
  auto state = std::make_unique<State>();
  state->fail = FailMap(script.value("fail", nlohmann::json::object()));
  const auto caps = script.value("mig_caps", nlohmann::json::object());
  state->caps_proc_dir = caps.value("proc_dir", std::string());
  state->caps_dev_dir = caps.value("dev_dir", std::string());
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
    dev->mig_table = gpupool::FindMigTable(d.value("mig_model", MigModelOf(dev->name, dev->memory_total >> 20)));
    const auto mig = d.value("mig", nlohmann::json::array());
    for (size_t k = 0; k < mig.size(); ++k) LoadMigDevice(*state, *dev, mig[k], k);
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
    case 19: return "In use by another client";
    case 23: return "Insufficient Resources";
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
  *mig = it->second;
  return kSuccess;
}

FAKE_NVML_API nvmlReturn_t nvmlDeviceGetGpuInstanceId(void* device, unsigned int* id) {
  if (nvmlReturn_t rc = Scripted("nvmlDeviceGetGpuInstanceId", Dev(device)); rc != kSuccess) return rc;
  if (!Dev(device)->parent) return kNotSupported;  // not a MIG device
  *id = Dev(device)->ci->gi->id;
  return kSuccess;
}

FAKE_NVML_API nvmlReturn_t nvmlDeviceGetComputeInstanceId(void* device, unsigned int* id) {
  if (nvmlReturn_t rc = Scripted("nvmlDeviceGetComputeInstanceId", Dev(device)); rc != kSuccess) return rc;
  if (!Dev(device)->parent) return kNotSupported;  // not a MIG device
  *id = Dev(device)->ci->id;
  return kSuccess;
}

FAKE_NVML_API nvmlReturn_t nvmlDeviceGetGpuInstanceById(void* device, unsigned int id, void** gpu_instance) {
  if (nvmlReturn_t rc = Scripted("nvmlDeviceGetGpuInstanceById", Dev(device)); rc != kSuccess) return rc;
  if (!gpu_instance || Dev(device)->parent) return kInvalidArgument;
  if (Dev(device)->mig_mode != 1) return kNotSupported;
  for (auto& gi : Dev(device)->gpu_instances) {
    if (gi->id == id) {
      *gpu_instance = gi.get();
      return kSuccess;
    }
  }
  return kNotFound;
}

FAKE_NVML_API nvmlReturn_t nvmlGpuInstanceGetInfo(void* gpu_instance, nvmlGpuInstanceInfo_t* info) {
  if (!g_state) return kUninitialized;
  if (!info || !g_state->live.count(gpu_instance)) return kInvalidArgument;
  const auto* gi = static_cast<FakeGpuInstance*>(gpu_instance);
  if (nvmlReturn_t rc = Scripted("nvmlGpuInstanceGetInfo", gi->parent); rc != kSuccess) return rc;
  info->device = gi->parent;
  info->id = gi->id;
  info->profileId = gi->profile_id;
  info->placement = {gi->start, gi->size};
  return kSuccess;
}

// --- MIG lifecycle ------------------------------------------------------------

struct nvmlGpuInstanceProfileInfo_t {
  unsigned int id, isP2pSupported, sliceCount, instanceCount, multiprocessorCount, copyEngineCount, decoderCount,
      encoderCount, jpegCount, ofaCount;
  unsigned long long memorySizeMB;
};
struct nvmlComputeInstanceProfileInfo_t {
  unsigned int id, sliceCount, instanceCount, multiprocessorCount, sharedCopyEngineCount, sharedDecoderCount,
      sharedEncoderCount, sharedJpegCount, sharedOfaCount;
};
struct nvmlComputeInstanceInfo_t {
  FakeDevice* device;
  void* gpuInstance;
  unsigned int id, profileId;
  nvmlGpuInstancePlacement_t placement;  // compute slices within the GPU instance
};

namespace {

// A GPU in MIG mode that knows its profiles, or the error.
nvmlReturn_t MigGpu(void* device, const char* call) {
  if (nvmlReturn_t rc = Scripted(call, Dev(device)); rc != kSuccess) return rc;
  const FakeDevice* d = Dev(device);
  if (d->parent) return kInvalidArgument;  // a MIG device
  if (d->mig_mode != 1 || !d->mig_table) return kNotSupported;
  return kSuccess;
}

std::string NewMigUuid(const FakeDevice& gpu) {
  const unsigned long long n = ++g_state->mig_created;
  const size_t h = std::hash<std::string>{}(gpu.uuid + "/" + std::to_string(n));
  char buf[64];
  std::snprintf(buf, sizeof(buf), "MIG-%08x-%04x-%04x-%04x-%012llx", static_cast<unsigned>(h >> 32),
                static_cast<unsigned>(h >> 16) & 0xffff, static_cast<unsigned>(h) & 0xffff,
                static_cast<unsigned>(n >> 48) & 0xffff, n & 0xffffffffffffULL);
  return buf;
}

}  // namespace

FAKE_NVML_API nvmlReturn_t nvmlDeviceGetGpuInstanceProfileInfo(void* device, unsigned int profile,
                                                               nvmlGpuInstanceProfileInfo_t* info) {
  if (nvmlReturn_t rc = MigGpu(device, "nvmlDeviceGetGpuInstanceProfileInfo"); rc != kSuccess) return rc;
  if (!info || profile >= 0x12) return kInvalidArgument;  // NVML_GPU_INSTANCE_PROFILE_COUNT
  const gpupool::MigTable* t = Dev(device)->mig_table;
  const int p = ProfileByConstant(t, profile);
  if (p < 0) return kNotSupported;
  const gpupool::MigProfile& prof = t->profiles[p];
  *info = {IdsOf(*t, p).id, 0, prof.compute_slices, prof.max_instances, prof.compute_slices * 16u,
           prof.compute_slices,   prof.media_extensions ? 1u : 0u, 0, prof.media_extensions ? 1u : 0u,
           prof.media_extensions ? 1u : 0u, static_cast<unsigned long long>(prof.memory_mib)};
  return kSuccess;
}

FAKE_NVML_API nvmlReturn_t nvmlDeviceGetGpuInstancePossiblePlacements_v2(void* device, unsigned int profile_id,
                                                                          nvmlGpuInstancePlacement_t* placements,
                                                                          unsigned int* count) {
  if (nvmlReturn_t rc = Scripted("nvmlDeviceGetGpuInstancePossiblePlacements_v2", Dev(device)); rc != kSuccess) {
    return rc;
  }
  const FakeDevice* d = Dev(device);
  if (!count || d->parent) return kInvalidArgument;
  const int p = ProfileById(d->mig_table, profile_id);
  if (d->mig_mode < 0 || p < 0) return kNotSupported;  // placements are listed whether MIG is on or not
  const gpupool::MigProfile& prof = d->mig_table->profiles[p];
  if (!placements) {
    *count = static_cast<unsigned int>(prof.starts.size());
    return kSuccess;
  }
  if (*count < prof.starts.size()) return kInsufficientSize;
  for (size_t i = 0; i < prof.starts.size(); ++i) placements[i] = {prof.starts[i], prof.memory_slices};
  *count = static_cast<unsigned int>(prof.starts.size());
  return kSuccess;
}

FAKE_NVML_API nvmlReturn_t nvmlDeviceCreateGpuInstanceWithPlacement(void* device, unsigned int profile_id,
                                                                    const nvmlGpuInstancePlacement_t* placement,
                                                                    void** gpu_instance) {
  if (nvmlReturn_t rc = MigGpu(device, "nvmlDeviceCreateGpuInstanceWithPlacement"); rc != kSuccess) return rc;
  FakeDevice& gpu = *Dev(device);
  const gpupool::MigTable& t = *gpu.mig_table;
  const int p = ProfileById(&t, profile_id);
  if (!placement || !gpu_instance || p < 0) return kInvalidArgument;
  const gpupool::MigProfile& prof = t.profiles[p];
  bool documented = false;
  for (uint8_t s : prof.starts) documented |= s == placement->start;
  if (!documented || placement->size != prof.memory_slices) return kInvalidArgument;
  const unsigned int mask = ((1u << placement->size) - 1) << placement->start;
  int same = 0, media = 0;
  for (const auto& gi : gpu.gpu_instances) {
    if ((((1u << gi->size) - 1) << gi->start) & mask) return kInsufficientResources;
    same += gi->profile == p ? 1 : 0;
    media += gi->profile >= 0 && t.profiles[gi->profile].media_extensions ? 1 : 0;
  }
  if (same >= prof.max_instances || (prof.media_extensions && media > 0)) return kInsufficientResources;
  unsigned int id = 1;
  for (bool taken = true; taken; ++id) {
    taken = false;
    for (const auto& gi : gpu.gpu_instances) taken |= gi->id == id;
    if (!taken) break;
  }
  FakeGpuInstance& gi = AddGpuInstance(*g_state, gpu, id, placement->start, placement->size, p);
  MakeCaps(*g_state, gpu, gi.id, -1);
  *gpu_instance = &gi;
  return kSuccess;
}

FAKE_NVML_API nvmlReturn_t nvmlGpuInstanceGetComputeInstanceProfileInfo(void* gpu_instance, unsigned int profile,
                                                                        unsigned int eng_profile,
                                                                        nvmlComputeInstanceProfileInfo_t* info) {
  if (!g_state) return kUninitialized;
  if (!info || !g_state->live.count(gpu_instance) || eng_profile != 0 || profile >= 9) return kInvalidArgument;
  const auto* gi = static_cast<FakeGpuInstance*>(gpu_instance);
  if (nvmlReturn_t rc = Scripted("nvmlGpuInstanceGetComputeInstanceProfileInfo", gi->parent); rc != kSuccess) {
    return rc;
  }
  const unsigned int slices = ComputeSlicesOf(profile), gi_slices = GpuInstanceSlices(*gi);
  if (slices == 0 || slices > gi_slices) return kNotSupported;
  *info = {profile, slices, gi_slices / slices, slices * 16u, 1, 0, 0, 0, 0};
  return kSuccess;
}

FAKE_NVML_API nvmlReturn_t nvmlGpuInstanceCreateComputeInstance(void* gpu_instance, unsigned int profile_id,
                                                                void** compute_instance) {
  if (!g_state) return kUninitialized;
  if (!compute_instance || !g_state->live.count(gpu_instance)) return kInvalidArgument;
  auto* gi = static_cast<FakeGpuInstance*>(gpu_instance);
  FakeDevice& gpu = *gi->parent;
  if (nvmlReturn_t rc = Scripted("nvmlGpuInstanceCreateComputeInstance", &gpu); rc != kSuccess) return rc;
  const unsigned int slices = ComputeSlicesOf(profile_id), gi_slices = GpuInstanceSlices(*gi);
  if (slices == 0 || slices > gi_slices) return kNotSupported;
  unsigned int used = 0;
  for (const auto& ci : gi->cis) used += ci->slices;
  if (used + slices > gi_slices) return kInsufficientResources;
  unsigned int index = 0;
  while (index < gpu.max_mig_devices && gpu.mig.count(index)) ++index;
  if (index >= gpu.max_mig_devices) return kInsufficientResources;
  unsigned int id = 0;
  for (bool taken = true; taken; ++id) {
    taken = false;
    for (const auto& ci : gi->cis) taken |= ci->id == id;
    if (!taken) break;
  }
  FakeComputeInstance& ci = AddComputeInstance(*g_state, *gi, id, slices, index);
  FakeDevice& md = *ci.device;
  md.uuid = NewMigUuid(gpu);
  const std::string profile = gi->profile_name.empty() ? std::to_string(gi_slices) + "g" : gi->profile_name;
  md.name = gpu.name + " MIG " + (slices == gi_slices ? profile : std::to_string(slices) + "c." + profile);
  md.memory_total = gi->profile >= 0 ? static_cast<unsigned long long>(gpu.mig_table->profiles[gi->profile].memory_mib)
                                           << 20
                                     : 0;
  MakeCaps(*g_state, gpu, gi->id, static_cast<int>(ci.id));
  *compute_instance = &ci;
  return kSuccess;
}

FAKE_NVML_API nvmlReturn_t nvmlGpuInstanceGetComputeInstanceById(void* gpu_instance, unsigned int id,
                                                                 void** compute_instance) {
  if (!g_state) return kUninitialized;
  if (!compute_instance || !g_state->live.count(gpu_instance)) return kInvalidArgument;
  auto* gi = static_cast<FakeGpuInstance*>(gpu_instance);
  if (nvmlReturn_t rc = Scripted("nvmlGpuInstanceGetComputeInstanceById", gi->parent); rc != kSuccess) return rc;
  for (auto& ci : gi->cis) {
    if (ci->id == id) {
      *compute_instance = ci.get();
      return kSuccess;
    }
  }
  return kNotFound;
}

FAKE_NVML_API nvmlReturn_t nvmlComputeInstanceGetInfo_v2(void* compute_instance, nvmlComputeInstanceInfo_t* info) {
  if (!g_state) return kUninitialized;
  if (!info || !g_state->live.count(compute_instance)) return kInvalidArgument;
  const auto* ci = static_cast<FakeComputeInstance*>(compute_instance);
  if (nvmlReturn_t rc = Scripted("nvmlComputeInstanceGetInfo_v2", ci->gi->parent); rc != kSuccess) return rc;
  unsigned int start = 0;
  for (const auto& other : ci->gi->cis) {
    if (other.get() == ci) break;
    start += other->slices;
  }
  *info = {ci->gi->parent, ci->gi, ci->id, ci->profile_id, {start, ci->slices}};
  return kSuccess;
}

FAKE_NVML_API nvmlReturn_t nvmlComputeInstanceDestroy(void* compute_instance) {
  if (!g_state) return kUninitialized;
  if (!g_state->live.count(compute_instance)) return kInvalidArgument;
  auto* ci = static_cast<FakeComputeInstance*>(compute_instance);
  FakeGpuInstance& gi = *ci->gi;
  FakeDevice& gpu = *gi.parent;
  if (nvmlReturn_t rc = Scripted("nvmlComputeInstanceDestroy", &gpu); rc != kSuccess) return rc;
  if (!ci->device->processes.empty()) return kInUse;
  RemoveCaps(*g_state, gpu, gi.id, static_cast<int>(ci->id));
  gpu.mig.erase(ci->index);
  g_state->live.erase(ci);
  std::erase_if(gi.cis, [ci](const std::unique_ptr<FakeComputeInstance>& x) { return x.get() == ci; });
  return kSuccess;
}

FAKE_NVML_API nvmlReturn_t nvmlGpuInstanceDestroy(void* gpu_instance) {
  if (!g_state) return kUninitialized;
  if (!g_state->live.count(gpu_instance)) return kInvalidArgument;
  auto* gi = static_cast<FakeGpuInstance*>(gpu_instance);
  FakeDevice& gpu = *gi->parent;
  if (nvmlReturn_t rc = Scripted("nvmlGpuInstanceDestroy", &gpu); rc != kSuccess) return rc;
  if (!gi->cis.empty()) return kInUse;  // its compute instances go first
  RemoveCaps(*g_state, gpu, gi->id, -1);
  g_state->live.erase(gi);
  std::erase_if(gpu.gpu_instances, [gi](const std::unique_ptr<FakeGpuInstance>& x) { return x.get() == gi; });
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
      if (m == handle) return &m->script;
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
  if (!DeviceScript(handle)) return -1;
  const FakeDevice* d = static_cast<const FakeDevice*>(handle);
  return d->parent && d->ci && d->ci->gi ? static_cast<int>(d->ci->gi->id) : -1;
}

// The MIG device of GPU `parent` with GPU instance `gi`, or null.
void* MigDeviceOf(const void* parent, unsigned int gi) {
  if (!DeviceScript(parent)) return nullptr;
  for (const auto& [index, m] : static_cast<const FakeDevice*>(parent)->mig) {
    if (m->ci && m->ci->gi && m->ci->gi->id == gi) return m;
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
