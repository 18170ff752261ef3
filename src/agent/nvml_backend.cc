#include "src/agent/nvml_backend.h"

#include "src/agent/device_nodes.h"
#include "src/agent/mig_layout.h"
#include "src/agent/nvml_abi.h"
#include "src/agent/nvml_fields.h"
#include "src/agent/nvml_mig.h"
#include "src/agent/proc_stat.h"

#include <dlfcn.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <sstream>
#include <tuple>
#include <utility>
#include <vector>

#include "src/base/install_paths.h"
#include "src/base/subprocess.h"
#include "src/model/gpu_catalog.h"
#include "src/model/mig.h"

namespace gpupool {
namespace {

// ---------------------------------------------------------------------------
// The slice of NVML's C ABI this backend uses: the shared part in
// nvml_abi.h, the rest here (values and layouts of NVIDIA's NVML API
// reference).
using namespace nvml_abi;

struct nvmlPciInfo_t {
  char busIdLegacy[16];  // NVML_DEVICE_PCI_BUS_ID_BUFFER_V2_SIZE
  unsigned int domain;
  unsigned int bus;
  unsigned int device;
  unsigned int pciDeviceId;
  unsigned int pciSubSystemId;
  char busId[32];  // NVML_DEVICE_PCI_BUS_ID_BUFFER_SIZE
};
// The layout nvmlDeviceGetComputeRunningProcesses_v3 fills (nvmlProcessInfo_v2_t).
struct nvmlProcessInfo_t {
  unsigned int pid;
  unsigned long long usedGpuMemory;  // bytes, or NVML_VALUE_NOT_AVAILABLE
  unsigned int gpuInstanceId;
  unsigned int computeInstanceId;
};
struct nvmlProcessUtilizationSample_t {
  unsigned int pid;
  unsigned long long timeStamp;  // CPU time, microseconds
  unsigned int smUtil;
  unsigned int memUtil;
  unsigned int encUtil;
  unsigned int decUtil;
};
constexpr int NVML_TEMPERATURE_GPU = 0;               // nvmlTemperatureSensors_t
constexpr int NVML_FEATURE_ENABLED = 1;               // nvmlEnableState_t
constexpr unsigned int NVML_DEVICE_MIG_ENABLE = 1;
constexpr int NVML_NVLINK_DEVICE_TYPE_SWITCH = 2;     // nvmlIntNvLinkDeviceType_t
constexpr unsigned int kNvlinkMaxLinks = 18;          // NVML_NVLINK_MAX_LINKS (Hopper)
constexpr unsigned int kUuidBufferSize = 96;          // NVML_DEVICE_UUID_V2_BUFFER_SIZE
constexpr unsigned int kNameBufferSize = 96;          // NVML_DEVICE_NAME_V2_BUFFER_SIZE
constexpr unsigned long long kValueNotAvailable = ~0ULL;  // NVML_VALUE_NOT_AVAILABLE

// The resolved entry points. Required ones are non-null once OpenNvmlBackend
// succeeds; optional ones are null when the driver predates them.
struct NvmlApi {
  nvmlReturn_t (*Init)();
  nvmlReturn_t (*Shutdown)();
  const char* (*ErrorString)(nvmlReturn_t);
  nvmlReturn_t (*DeviceGetCount)(unsigned int*);
  nvmlReturn_t (*DeviceGetHandleByIndex)(unsigned int, nvmlDevice_t*);
  nvmlReturn_t (*DeviceGetUUID)(nvmlDevice_t, char*, unsigned int);
  nvmlReturn_t (*DeviceGetName)(nvmlDevice_t, char*, unsigned int);
  nvmlReturn_t (*DeviceGetMemoryInfo)(nvmlDevice_t, nvmlMemory_t*);
  nvmlReturn_t (*DeviceGetPciInfo)(nvmlDevice_t, nvmlPciInfo_t*);
  nvmlReturn_t (*DeviceGetUtilizationRates)(nvmlDevice_t, nvmlUtilization_t*);
  nvmlReturn_t (*DeviceGetTemperature)(nvmlDevice_t, int, unsigned int*);
  nvmlReturn_t (*DeviceGetComputeRunningProcesses)(nvmlDevice_t, unsigned int*, nvmlProcessInfo_t*);
  nvmlReturn_t (*DeviceGetMigMode)(nvmlDevice_t, unsigned int*, unsigned int*);
  nvmlReturn_t (*DeviceGetMaxMigDeviceCount)(nvmlDevice_t, unsigned int*);
  nvmlReturn_t (*DeviceGetMigDeviceHandleByIndex)(nvmlDevice_t, unsigned int, nvmlDevice_t*);
  nvmlReturn_t (*DeviceGetGpuInstanceId)(nvmlDevice_t, unsigned int*);
  nvmlReturn_t (*DeviceGetComputeInstanceId)(nvmlDevice_t, unsigned int*);
  nvmlReturn_t (*DeviceGetGpuInstanceById)(nvmlDevice_t, unsigned int, nvmlGpuInstance_t*);
  nvmlReturn_t (*GpuInstanceGetInfo)(nvmlGpuInstance_t, nvmlGpuInstanceInfo_t*);
  nvmlReturn_t (*DeviceGetNvLinkState)(nvmlDevice_t, unsigned int, int*);
  nvmlReturn_t (*DeviceGetNvLinkRemotePciInfo)(nvmlDevice_t, unsigned int, nvmlPciInfo_t*);
  // Optional.
  nvmlReturn_t (*DeviceGetProcessUtilization)(nvmlDevice_t, nvmlProcessUtilizationSample_t*, unsigned int*,
                                              unsigned long long);
  nvmlReturn_t (*DeviceGetNvLinkRemoteDeviceType)(nvmlDevice_t, unsigned int, int*);
  nvmlReturn_t (*DeviceGetRemappedRows)(nvmlDevice_t, unsigned int*, unsigned int*, unsigned int*, unsigned int*);
  nvmlReturn_t (*DeviceGetMinorNumber)(nvmlDevice_t, unsigned int*);
};

// A PCI function as (domain, bus, device, function): how NVLink remote ends
// are matched to this node's GPUs. Parsed from busId, whose domain width
// differs between APIs ("00000000:17:00.0" vs "0000:17:00.0").
using PciAddress = std::tuple<unsigned, unsigned, unsigned, unsigned>;
PciAddress PciAddressOf(const nvmlPciInfo_t& pci) {
  unsigned domain = 0, bus = 0, device = 0, function = 0;
  std::string id(pci.busId, strnlen(pci.busId, sizeof(pci.busId)));
  if (std::sscanf(id.c_str(), "%x:%x:%x.%x", &domain, &bus, &device, &function) == 4) {
    return {domain, bus, device, function};
  }
  return {pci.domain, pci.bus, pci.device, 0};
}

std::string Trim(std::string s) {
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.pop_back();
  size_t i = 0;
  while (i < s.size() && std::isspace(static_cast<unsigned char>(s[i]))) ++i;
  return s.substr(i);
}

// Process group of `pid` (src/agent/proc_stat.h), or nullopt when the process is gone.
std::optional<int> ProcessGroupOf(int pid) {
  const std::optional<ProcStat> s = ReadProcStat(pid);
  if (!s) return std::nullopt;
  return s->pgrp;
}

class NvmlBackend final : public DeviceBackend {
 public:
  NvmlBackend(void* library, const NvmlApi& api, NvmlOptions options, std::unique_ptr<NvmlFieldReader> fields)
      : library_(library), api_(api), options_(std::move(options)), fields_(std::move(fields)) {
    mig_.Resolve(library_);
  }
  ~NvmlBackend() override {
    fields_.reset();  // its own NVML reference and event set
    api_.Shutdown();
    dlclose(library_);
  }
  NvmlBackend(const NvmlBackend&) = delete;
  NvmlBackend& operator=(const NvmlBackend&) = delete;

  std::string name() const override { return "nvml"; }
  Result<std::vector<GpuDevice>> Discover() override;
  Result<std::vector<GpuSample>> Sample() override;
  std::map<std::string, TaskUsage> SampleTasks(const std::vector<TaskProbe>& tasks) override;
  Result<ScrubResult> Scrub(int gpu, const std::string& mig_uuid) override;
  // nvml_mig.h: GPU instance with the placement, then its compute instance;
  // the new MIG device is then found by its GPU and compute instance ids.
  Result<MigInstance> CreateMigInstance(int gpu, const std::string& profile, int start) override;
  Status DestroyMigInstance(int gpu, const MigInstance& instance) override;
  Result<std::vector<MigInstance>> ListMigInstances(int gpu) override;
  Result<std::vector<DcgmEntity>> ReadDcgmFields() override { return fields_->Read(); }
  // /dev/nvidiaM for the GPU's minor number M (NVML's; its index when the
  // driver does not say), and the control nodes, as the node has them.
  // The node keeps its name in the container: CUDA opens /dev/nvidiaM by
  // the minor number the driver gave the GPU.
  std::vector<DeviceNode> GpuDeviceNodes(int gpu) override {
    const std::string name = "nvidia" + std::to_string(MinorOf(gpu));
    std::vector<DeviceNode> out;
    if (auto d = StatDeviceNode(options_.dev_dir + "/" + name, "/dev/" + name)) out.push_back(*d);
    return out;
  }
  std::vector<DeviceNode> ControlDeviceNodes() override { return StatControlNodes(options_.dev_dir); }
  Result<std::vector<DeviceNode>> MigDeviceNodes(int gpu, const MigInstance& instance) override {
    if (instance.gi_id < 0 || instance.ci_id < 0) {
      return FailedPrecondition("MIG instance " + instance.uuid + " on GPU " + std::to_string(gpu) +
                                " has no GPU/compute instance ids from the driver");
    }
    return StatMigCapNodes(options_.mig_caps_proc_dir, options_.mig_caps_dev_dir, MinorOf(gpu), instance.gi_id,
                           instance.ci_id);
  }

 private:
  // "nvmlDeviceGetTemperature (GPU 3): Unknown Error"
  std::string Why(const char* call, nvmlReturn_t rc, int gpu = -1) const {
    std::string s = call;
    if (gpu >= 0) s += " (GPU " + std::to_string(gpu) + ")";
    const char* text = api_.ErrorString(rc);
    return s + ": " + (text ? text : ("NVML error " + std::to_string(rc)));
  }
  Result<unsigned int> Count() const;
  Result<nvmlDevice_t> Handle(int index) const;
  Result<std::string> UuidOf(nvmlDevice_t d, int gpu) const;
  Result<std::string> NameOf(nvmlDevice_t d, int gpu) const;
  // MIG device handles under `parent` (those that exist; the index range has gaps).
  Result<std::vector<nvmlDevice_t>> MigHandles(nvmlDevice_t parent, int gpu) const;
  // The GPU's minor number (/dev/nvidiaM) as NVML reports it; its index
  // when the driver does not say.
  unsigned int MinorOf(int gpu) const {
    unsigned int minor = static_cast<unsigned int>(gpu);
    auto h = Handle(gpu);
    if (h && api_.DeviceGetMinorNumber) {
      unsigned int m = 0;
      if (api_.DeviceGetMinorNumber(*h, &m) == NVML_SUCCESS) minor = m;
    }
    return minor;
  }
  Result<std::vector<MigInstance>> MigInstancesOf(nvmlDevice_t parent, int gpu, const std::string& model) const;
  // Two-call pattern: ask for the count, then fill; retries when processes
  // appear in between.
  nvmlReturn_t Processes(nvmlDevice_t d, std::vector<nvmlProcessInfo_t>* out) const;
  nvmlReturn_t ProcessUtilization(nvmlDevice_t d, unsigned long long since_us,
                                  std::vector<nvmlProcessUtilizationSample_t>* out) const;

  // The GPU's catalog model and whether it is in MIG mode now.
  Result<std::pair<std::string, bool>> ModelAndMigMode(nvmlDevice_t h, int gpu) const;

  void* library_;
  NvmlApi api_;
  NvmlOptions options_;
  NvmlMig mig_;
  std::unique_ptr<NvmlFieldReader> fields_;  // the DCGM field set and XIDs (nvml_fields.h)
  // Per GPU index, the newest process-utilization sample already read
  // (NVML's lastSeenTimeStamp, CPU microseconds).
  std::map<int, unsigned long long> last_seen_us_;
};

Result<unsigned int> NvmlBackend::Count() const {
  unsigned int n = 0;
  if (const nvmlReturn_t rc = api_.DeviceGetCount(&n); rc != NVML_SUCCESS) {
    return FailedPrecondition(Why("nvmlDeviceGetCount_v2", rc));
  }
  return n;
}

Result<nvmlDevice_t> NvmlBackend::Handle(int index) const {
  nvmlDevice_t d = nullptr;
  if (const nvmlReturn_t rc = api_.DeviceGetHandleByIndex(static_cast<unsigned>(index), &d); rc != NVML_SUCCESS) {
    return FailedPrecondition(Why("nvmlDeviceGetHandleByIndex_v2", rc, index));
  }
  return d;
}

Result<std::string> NvmlBackend::UuidOf(nvmlDevice_t d, int gpu) const {
  char buf[kUuidBufferSize] = {};
  if (const nvmlReturn_t rc = api_.DeviceGetUUID(d, buf, sizeof(buf)); rc != NVML_SUCCESS) {
    return FailedPrecondition(Why("nvmlDeviceGetUUID", rc, gpu));
  }
  return std::string(buf, strnlen(buf, sizeof(buf)));
}

Result<std::string> NvmlBackend::NameOf(nvmlDevice_t d, int gpu) const {
  char buf[kNameBufferSize] = {};
  if (const nvmlReturn_t rc = api_.DeviceGetName(d, buf, sizeof(buf)); rc != NVML_SUCCESS) {
    return FailedPrecondition(Why("nvmlDeviceGetName", rc, gpu));
  }
  return std::string(buf, strnlen(buf, sizeof(buf)));
}

Result<std::vector<nvmlDevice_t>> NvmlBackend::MigHandles(nvmlDevice_t parent, int gpu) const {
  unsigned int max = 0;
  if (const nvmlReturn_t rc = api_.DeviceGetMaxMigDeviceCount(parent, &max); rc != NVML_SUCCESS) {
    return FailedPrecondition(Why("nvmlDeviceGetMaxMigDeviceCount", rc, gpu));
  }
  std::vector<nvmlDevice_t> out;
  for (unsigned int k = 0; k < max; ++k) {
    nvmlDevice_t m = nullptr;
    const nvmlReturn_t rc = api_.DeviceGetMigDeviceHandleByIndex(parent, k, &m);
    if (rc == NVML_ERROR_NOT_FOUND || rc == NVML_ERROR_INVALID_ARGUMENT) continue;  // no MIG device there
    if (rc != NVML_SUCCESS) return FailedPrecondition(Why("nvmlDeviceGetMigDeviceHandleByIndex", rc, gpu));
    out.push_back(m);
  }
  return out;
}

// Profile: the MIG device's name carries it ("... MIG 3g.40gb"), as
// nvidia-smi shows it; that holds for compute instances smaller than their
// GPU instance too ("1c.3g.40gb"), which a lookup by GPU-instance profile
// would not tell apart. Only when the name carries none is it derived from
// the built-in MIG table: the one profile of the model that occupies the
// placement's number of memory slices (an error when several do). Start:
// the GPU instance's placement, which NVML reveals to privileged users only.
Result<std::vector<MigInstance>> NvmlBackend::MigInstancesOf(nvmlDevice_t parent, int gpu,
                                                             const std::string& model) const {
  GP_ASSIGN_OR_RETURN(auto handles, MigHandles(parent, gpu));
  std::vector<MigInstance> out;
  for (nvmlDevice_t m : handles) {
    MigInstance mi;
    GP_ASSIGN_OR_RETURN(auto uuid, UuidOf(m, gpu));
    mi.uuid = uuid;
    GP_ASSIGN_OR_RETURN(auto name, NameOf(m, gpu));
    nvmlMemory_t mem{};
    if (const nvmlReturn_t rc = api_.DeviceGetMemoryInfo(m, &mem); rc != NVML_SUCCESS) {
      return FailedPrecondition(Why("nvmlDeviceGetMemoryInfo", rc, gpu) + " for MIG device " + mi.uuid);
    }
    mi.memory_mib = static_cast<int64_t>(mem.total >> 20);
    unsigned int gi_id = 0;
    if (const nvmlReturn_t rc = api_.DeviceGetGpuInstanceId(m, &gi_id); rc != NVML_SUCCESS) {
      return FailedPrecondition(Why("nvmlDeviceGetGpuInstanceId", rc, gpu) + " for MIG device " + mi.uuid);
    }
    mi.gi_id = static_cast<int>(gi_id);
    unsigned int ci_id = 0;
    if (const nvmlReturn_t rc = api_.DeviceGetComputeInstanceId(m, &ci_id); rc != NVML_SUCCESS) {
      return FailedPrecondition(Why("nvmlDeviceGetComputeInstanceId", rc, gpu) + " for MIG device " + mi.uuid);
    }
    mi.ci_id = static_cast<int>(ci_id);
    nvmlGpuInstance_t gi = nullptr;
    if (const nvmlReturn_t rc = api_.DeviceGetGpuInstanceById(parent, gi_id, &gi); rc != NVML_SUCCESS) {
      std::string why = Why("nvmlDeviceGetGpuInstanceById", rc, gpu) + " for MIG device " + mi.uuid;
      if (rc == NVML_ERROR_NO_PERMISSION) why += " (MIG placements are visible to root only)";
      return FailedPrecondition(why);
    }
    nvmlGpuInstanceInfo_t info{};
    if (const nvmlReturn_t rc = api_.GpuInstanceGetInfo(gi, &info); rc != NVML_SUCCESS) {
      return FailedPrecondition(Why("nvmlGpuInstanceGetInfo", rc, gpu) + " for MIG device " + mi.uuid);
    }
    mi.start = static_cast<int>(info.placement.start);
    mi.profile = MigProfileFromDeviceName(name);
    if (mi.profile.empty()) {
      const MigTable* table = FindMigTable(model);
      std::vector<std::string> fits;
      if (table) {
        for (const auto& p : table->profiles) {
          if (!p.media_extensions && p.memory_slices == info.placement.size) fits.push_back(p.name);
        }
      }
      if (fits.size() != 1) {
        return FailedPrecondition("GPU " + std::to_string(gpu) + ": cannot tell the MIG profile of " + mi.uuid +
                                  " from its name '" + name + "' (" + std::to_string(info.placement.size) +
                                  " memory slices)");
      }
      mi.profile = fits[0];
    }
    out.push_back(std::move(mi));
  }
  std::sort(out.begin(), out.end(), [](const MigInstance& a, const MigInstance& b) {
    return std::tie(a.start, a.uuid) < std::tie(b.start, b.uuid);
  });
  return out;
}

Result<std::vector<GpuDevice>> NvmlBackend::Discover() {
  GP_ASSIGN_OR_RETURN(auto count, Count());
  const int n = static_cast<int>(count);
  std::vector<GpuDevice> gpus(n);
  std::vector<PciAddress> address(n);
  std::vector<std::vector<PciAddress>> remote(n);  // GPU-side ends of active links
  std::vector<bool> on_switch(n, false);           // an active link ends at an NVSwitch
  for (int i = 0; i < n; ++i) {
    GpuDevice& g = gpus[i];
    g.index = i;
    GP_ASSIGN_OR_RETURN(auto h, Handle(i));
    GP_ASSIGN_OR_RETURN(auto uuid, UuidOf(h, i));
    g.uuid = uuid;
    GP_ASSIGN_OR_RETURN(auto name, NameOf(h, i));
    g.product = name;
    nvmlMemory_t mem{};
    if (const nvmlReturn_t rc = api_.DeviceGetMemoryInfo(h, &mem); rc != NVML_SUCCESS) {
      return FailedPrecondition(Why("nvmlDeviceGetMemoryInfo", rc, i));
    }
    g.memory_mib = static_cast<int64_t>(mem.total >> 20);
    g.model = CatalogModelForProduct(g.product, g.memory_mib);

    unsigned int current = 0, pending = 0;
    const nvmlReturn_t mig_rc = api_.DeviceGetMigMode(h, &current, &pending);
    if (mig_rc == NVML_SUCCESS) {
      g.mig_enabled = current == NVML_DEVICE_MIG_ENABLE;
    } else if (mig_rc != NVML_ERROR_NOT_SUPPORTED) {
      return FailedPrecondition(Why("nvmlDeviceGetMigMode", mig_rc, i));
    }
    if (g.mig_enabled) {
      GP_ASSIGN_OR_RETURN(auto mig, MigInstancesOf(h, i, g.model));
      g.mig = std::move(mig);
    }

    nvmlPciInfo_t pci{};
    if (const nvmlReturn_t rc = api_.DeviceGetPciInfo(h, &pci); rc != NVML_SUCCESS) {
      return FailedPrecondition(Why("nvmlDeviceGetPciInfo_v3", rc, i));
    }
    address[i] = PciAddressOf(pci);
    // Links a GPU lacks answer "not supported" or "invalid argument"; any
    // error on one link only leaves that link out.
    for (unsigned int link = 0; link < kNvlinkMaxLinks; ++link) {
      int state = 0;
      if (api_.DeviceGetNvLinkState(h, link, &state) != NVML_SUCCESS || state != NVML_FEATURE_ENABLED) continue;
      if (api_.DeviceGetNvLinkRemoteDeviceType) {
        int type = -1;
        if (api_.DeviceGetNvLinkRemoteDeviceType(h, link, &type) == NVML_SUCCESS &&
            type == NVML_NVLINK_DEVICE_TYPE_SWITCH) {
          on_switch[i] = true;
          continue;
        }
      }
      nvmlPciInfo_t far{};
      if (api_.DeviceGetNvLinkRemotePciInfo(h, link, &far) != NVML_SUCCESS) continue;
      remote[i].push_back(PciAddressOf(far));
    }
  }
  // Peers: a GPU whose PCI address ends one of our active links; and, on
  // NVSwitch systems (HGX), every GPU with an active link into the switch
  // fabric reaches every other one.
  for (int i = 0; i < n; ++i) {
    std::set<int> peers;
    for (const PciAddress& far : remote[i]) {
      for (int j = 0; j < n; ++j) {
        if (j != i && address[j] == far) peers.insert(j);
      }
    }
    if (on_switch[i]) {
      for (int j = 0; j < n; ++j) {
        if (j != i && on_switch[j]) peers.insert(j);
      }
    }
    gpus[i].nvlink_peers.assign(peers.begin(), peers.end());
  }
  return gpus;
}

nvmlReturn_t NvmlBackend::Processes(nvmlDevice_t d, std::vector<nvmlProcessInfo_t>* out) const {
  out->clear();
  unsigned int n = 0;
  nvmlReturn_t rc = api_.DeviceGetComputeRunningProcesses(d, &n, nullptr);
  if (rc == NVML_SUCCESS) return rc;  // none
  for (int attempt = 0; attempt < 4 && rc == NVML_ERROR_INSUFFICIENT_SIZE; ++attempt) {
    out->resize(n + 8);  // room for processes starting between the calls
    unsigned int cap = static_cast<unsigned int>(out->size());
    rc = api_.DeviceGetComputeRunningProcesses(d, &cap, out->data());
    if (rc == NVML_SUCCESS) {
      out->resize(std::min<size_t>(cap, out->size()));
      return rc;
    }
    n = std::max(cap, n * 2);
  }
  out->clear();
  return rc;
}

nvmlReturn_t NvmlBackend::ProcessUtilization(nvmlDevice_t d, unsigned long long since_us,
                                             std::vector<nvmlProcessUtilizationSample_t>* out) const {
  out->clear();
  if (!api_.DeviceGetProcessUtilization) return NVML_ERROR_NOT_SUPPORTED;
  unsigned int n = 0;
  nvmlReturn_t rc = api_.DeviceGetProcessUtilization(d, nullptr, &n, since_us);
  if (rc == NVML_SUCCESS && n == 0) return NVML_ERROR_NOT_FOUND;
  for (int attempt = 0; attempt < 4 && (rc == NVML_ERROR_INSUFFICIENT_SIZE || rc == NVML_SUCCESS); ++attempt) {
    out->resize(n + 8);
    unsigned int cap = static_cast<unsigned int>(out->size());
    rc = api_.DeviceGetProcessUtilization(d, out->data(), &cap, since_us);
    if (rc == NVML_SUCCESS) {
      out->resize(std::min<size_t>(cap, out->size()));
      return rc;
    }
    n = std::max(cap, n * 2);
  }
  out->clear();
  return rc;
}

Result<std::vector<GpuSample>> NvmlBackend::Sample() {
  GP_ASSIGN_OR_RETURN(auto count, Count());
  const int n = static_cast<int>(count);
  std::vector<GpuSample> samples(n);
  for (int i = 0; i < n; ++i) {
    GpuSample& s = samples[i];
    s.index = i;
    auto unhealthy = [&s](const std::string& why) {
      s.healthy = false;
      s.health_detail += (s.health_detail.empty() ? "" : "; ") + why;
    };
    auto h = Handle(i);
    if (!h) {
      unhealthy(h.error().message);
      continue;
    }
    // "Not supported" is a missing feature, not a fault: utilization in MIG
    // mode, temperature on some boards, row remapping before Ampere.
    nvmlUtilization_t util{};
    if (const nvmlReturn_t rc = api_.DeviceGetUtilizationRates(*h, &util); rc == NVML_SUCCESS) {
      s.util_pct = std::min(100u, util.gpu);
    } else if (rc != NVML_ERROR_NOT_SUPPORTED) {
      unhealthy(Why("nvmlDeviceGetUtilizationRates", rc, i));
    }
    nvmlMemory_t mem{};
    if (const nvmlReturn_t rc = api_.DeviceGetMemoryInfo(*h, &mem); rc == NVML_SUCCESS) {
      s.memory_used_mib = static_cast<int64_t>(mem.used >> 20);
      s.memory_total_mib = static_cast<int64_t>(mem.total >> 20);
    } else {
      unhealthy(Why("nvmlDeviceGetMemoryInfo", rc, i));
    }
    unsigned int temp = 0;
    if (const nvmlReturn_t rc = api_.DeviceGetTemperature(*h, NVML_TEMPERATURE_GPU, &temp); rc == NVML_SUCCESS) {
      s.temperature_c = static_cast<int>(temp);
    } else if (rc != NVML_ERROR_NOT_SUPPORTED) {
      unhealthy(Why("nvmlDeviceGetTemperature", rc, i));
    }
    std::vector<nvmlProcessInfo_t> procs;
    if (const nvmlReturn_t rc = Processes(*h, &procs); rc == NVML_SUCCESS) {
      for (const auto& p : procs) {
        s.processes.push_back(
            {static_cast<int>(p.pid),
             p.usedGpuMemory == kValueNotAvailable ? 0 : static_cast<int64_t>(p.usedGpuMemory >> 20)});
      }
    } else if (rc != NVML_ERROR_NOT_SUPPORTED && rc != NVML_ERROR_NO_PERMISSION) {
      unhealthy(Why("nvmlDeviceGetComputeRunningProcesses_v3", rc, i));
    }
    if (api_.DeviceGetRemappedRows) {
      unsigned int corrected = 0, uncorrected = 0, pending = 0, failed = 0;
      const nvmlReturn_t rc = api_.DeviceGetRemappedRows(*h, &corrected, &uncorrected, &pending, &failed);
      if (rc == NVML_SUCCESS) {
        if (failed) unhealthy("GPU " + std::to_string(i) + ": a memory row remapping failed");
        if (pending) unhealthy("GPU " + std::to_string(i) + ": memory row remapping pending (needs a GPU reset)");
      } else if (rc != NVML_ERROR_NOT_SUPPORTED) {
        unhealthy(Why("nvmlDeviceGetRemappedRows", rc, i));
      }
    }
  }
  // Critical XIDs since the agent started (nvml_fields.h).
  fields_->PollXids();
  for (GpuSample& s : samples) {
    if (const std::string why = fields_->XidHealth(s.index); !why.empty()) {
      s.healthy = false;
      s.health_detail += (s.health_detail.empty() ? "" : "; ") + why;
    }
  }
  return samples;
}

// Per GPU: util(task, g) = min(100, sum over the task's processes p on g of
// sm(p)), where sm(p) is the mean SM utilization of p's samples newer than
// the last one read; processes without a new sample were idle (NVML lists
// only processes with non-zero utilization). Where the driver keeps no
// per-process samples, util(task, g) = the device's utilization. A task's
// util_pct is the mean over its GPUs; memory is the sum of its processes'
// used memory on every GPU. A task none of whose GPUs could be measured is
// left out of the result.
std::map<std::string, TaskUsage> NvmlBackend::SampleTasks(const std::vector<TaskProbe>& tasks) {
  std::map<std::string, TaskUsage> result;
  auto count = Count();
  if (!count) return result;
  const int n = static_cast<int>(*count);

  struct GpuView {
    bool measured = false;
    bool per_process = false;
    double device_util = 0;
    std::map<int, double> sm_by_pid;
    std::vector<nvmlProcessInfo_t> processes;
  };
  std::vector<GpuView> view(n);
  std::map<int, std::optional<int>> group_of;  // pid -> process group, read once per call
  auto group = [&group_of](int pid) {
    auto it = group_of.find(pid);
    if (it == group_of.end()) it = group_of.emplace(pid, ProcessGroupOf(pid)).first;
    return it->second;
  };

  for (int i = 0; i < n; ++i) {
    auto h = Handle(i);
    if (!h) continue;
    GpuView& v = view[i];
    if (Processes(*h, &v.processes) != NVML_SUCCESS) v.processes.clear();
    std::vector<nvmlProcessUtilizationSample_t> samples;
    unsigned long long& last_seen = last_seen_us_[i];
    const nvmlReturn_t rc = ProcessUtilization(*h, last_seen, &samples);
    if (rc == NVML_SUCCESS || rc == NVML_ERROR_NOT_FOUND) {
      v.measured = v.per_process = true;
      std::map<int, std::pair<double, int>> sum;  // pid -> (sum of sm, samples)
      for (const auto& s : samples) {
        if (s.timeStamp <= last_seen) continue;  // the driver should not return these
        auto& [total, k] = sum[static_cast<int>(s.pid)];
        total += std::min(100u, s.smUtil);
        ++k;
      }
      unsigned long long newest = last_seen;
      for (const auto& s : samples) newest = std::max(newest, s.timeStamp);
      last_seen = newest;
      for (const auto& [pid, tk] : sum) v.sm_by_pid[pid] = tk.first / tk.second;
    } else {
      nvmlUtilization_t util{};
      if (api_.DeviceGetUtilizationRates(*h, &util) == NVML_SUCCESS) {
        v.measured = true;
        v.device_util = std::min(100u, util.gpu);
      }
    }
  }

  for (const TaskProbe& t : tasks) {
    TaskUsage u;
    for (int i = 0; i < n; ++i) {
      for (const auto& p : view[i].processes) {
        if (p.usedGpuMemory == kValueNotAvailable) continue;
        if (group(static_cast<int>(p.pid)) == t.pid) u.memory_mib += static_cast<int64_t>(p.usedGpuMemory >> 20);
      }
    }
    double util_sum = 0;
    int measured = 0;
    for (int g : t.gpus) {
      if (g < 0 || g >= n || !view[g].measured) continue;
      ++measured;
      if (!view[g].per_process) {
        util_sum += view[g].device_util;
        continue;
      }
      double on_gpu = 0;
      for (const auto& [pid, sm] : view[g].sm_by_pid) {
        if (group(pid) == t.pid) on_gpu += sm;
      }
      util_sum += std::min(100.0, on_gpu);
    }
    if (!t.gpus.empty() && measured == 0) continue;
    u.util_pct = measured > 0 ? util_sum / measured : 0;
    result[t.key] = u;
  }
  return result;
}

Result<ScrubResult> NvmlBackend::Scrub(int gpu, const std::string& mig_uuid) {
  GP_ASSIGN_OR_RETURN(auto count, Count());
  if (gpu < 0 || gpu >= static_cast<int>(count)) {
    return InvalidArgument("scrub: no GPU " + std::to_string(gpu) + " (the node has " + std::to_string(count) + ")");
  }
  GP_ASSIGN_OR_RETURN(auto h, Handle(gpu));
  GP_ASSIGN_OR_RETURN(auto gpu_uuid, UuidOf(h, gpu));
  std::string target = gpu_uuid;
  if (!mig_uuid.empty()) {
    GP_ASSIGN_OR_RETURN(auto handles, MigHandles(h, gpu));
    bool found = false;
    for (nvmlDevice_t m : handles) {
      auto u = UuidOf(m, gpu);
      if (u && *u == mig_uuid) found = true;
    }
    if (!found) return NotFound("scrub: GPU " + std::to_string(gpu) + " has no MIG device " + mig_uuid);
    target = mig_uuid;
  }

  const std::string tool = options_.scrub_tool.empty() ? FindHelper("gpupool-scrub", true) : options_.scrub_tool;
  if (tool.empty()) {
    return NotFound("scrub tool gpupool-scrub is not installed (looked beside the gpupool binary and in "
                    "/usr/lib/gpupool; --scrub-tool names it)");
  }
  if (access(tool.c_str(), X_OK) != 0) {
    return NotFound("scrub tool " + tool + " is missing or not executable: " + std::strerror(errno));
  }
  // The shared subprocess helper: the answer on stdout, the last lines of
  // stderr for the error.
  ProgramOptions run_options;
  run_options.keep_stdout = true;
  const auto timeout = std::chrono::duration_cast<Duration>(std::chrono::duration<double>(options_.scrub_timeout_s));
  const CommandOutcome run = RunProgram({tool}, {{"CUDA_VISIBLE_DEVICES", target}}, timeout, run_options);
  if (!run.start_error.empty()) return IoError("cannot run " + run.start_error);

  const std::string what = "scrub of GPU " + std::to_string(gpu) + " (" + target + ") by " + tool;
  const std::string& err = run.output_tail;
  if (run.timed_out) {
    return FailedPrecondition(what + " did not finish within " + std::to_string(options_.scrub_timeout_s) +
                              " s and was killed" + (err.empty() ? "" : ": " + err));
  }
  if (run.signal != 0 || run.exit_code != 0) {
    const std::string how =
        run.signal == 0 ? "exit status " + std::to_string(run.exit_code) : "signal " + std::to_string(run.signal);
    return FailedPrecondition(what + " failed (" + how + ")" + (err.empty() ? "" : ": " + err));
  }
  // The last non-empty line of stdout: {"bytes":N,"seconds":S,...}
  std::string line;
  std::istringstream out(run.stdout_text);
  for (std::string l; std::getline(out, l);) {
    if (!Trim(l).empty()) line = Trim(l);
  }
  const nlohmann::json j = nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false);
  if (!j.is_object() || !j.contains("bytes") || !j["bytes"].is_number_integer() || !j.contains("seconds") ||
      !j["seconds"].is_number() || j["bytes"].get<int64_t>() < 0 || j["seconds"].get<double>() < 0) {
    return FailedPrecondition(what + ": expected one JSON line {\"bytes\":N,\"seconds\":S} on stdout, got '" +
                              line.substr(0, 200) + "'");
  }
  return ScrubResult{j["bytes"].get<int64_t>(), j["seconds"].get<double>()};
}

Result<std::pair<std::string, bool>> NvmlBackend::ModelAndMigMode(nvmlDevice_t h, int gpu) const {
  GP_ASSIGN_OR_RETURN(auto name, NameOf(h, gpu));
  nvmlMemory_t mem{};
  if (const nvmlReturn_t rc = api_.DeviceGetMemoryInfo(h, &mem); rc != NVML_SUCCESS) {
    return FailedPrecondition(Why("nvmlDeviceGetMemoryInfo", rc, gpu));
  }
  unsigned int current = 0, pending = 0;
  const nvmlReturn_t rc = api_.DeviceGetMigMode(h, &current, &pending);
  if (rc != NVML_SUCCESS && rc != NVML_ERROR_NOT_SUPPORTED) return FailedPrecondition(Why("nvmlDeviceGetMigMode", rc, gpu));
  return std::pair{CatalogModelForProduct(name, static_cast<int64_t>(mem.total >> 20)),
                   rc == NVML_SUCCESS && current == NVML_DEVICE_MIG_ENABLE};
}

Result<std::vector<MigInstance>> NvmlBackend::ListMigInstances(int gpu) {
  GP_ASSIGN_OR_RETURN(auto h, Handle(gpu));
  GP_ASSIGN_OR_RETURN(auto mode, ModelAndMigMode(h, gpu));
  if (!mode.second) return std::vector<MigInstance>{};
  return MigInstancesOf(h, gpu, mode.first);
}

Result<MigInstance> NvmlBackend::CreateMigInstance(int gpu, const std::string& profile, int start) {
  GP_ASSIGN_OR_RETURN(auto h, Handle(gpu));
  GP_ASSIGN_OR_RETURN(auto mode, ModelAndMigMode(h, gpu));
  const MigTable* table = FindMigTable(mode.first);
  if (!table) {
    return FailedPrecondition("GPU " + std::to_string(gpu) + ": no MIG profiles are known for its model" +
                              (mode.first.empty() ? "" : " " + mode.first));
  }
  const int p = MigProfileIndex(*table, profile);
  if (p < 0) {
    return InvalidArgument("GPU " + std::to_string(gpu) + " (" + table->gpu_model + ") has no MIG profile '" +
                           profile + "'");
  }
  if (!mode.second) {
    return FailedPrecondition("GPU " + std::to_string(gpu) +
                              " is not in MIG mode: Not Supported (an operator enables it; the agent never does)");
  }
  GP_ASSIGN_OR_RETURN(auto created, mig_.Create(h, gpu, *table, p, start, api_.ErrorString));
  GP_ASSIGN_OR_RETURN(auto all, MigInstancesOf(h, gpu, mode.first));
  for (const MigInstance& m : all) {
    if (m.gi_id == created.gi_id && m.ci_id == created.ci_id) return m;
  }
  return FailedPrecondition("GPU " + std::to_string(gpu) + ": no MIG device shows the new GPU instance " +
                            std::to_string(created.gi_id) + " (compute instance " + std::to_string(created.ci_id) +
                            ")");
}

Status NvmlBackend::DestroyMigInstance(int gpu, const MigInstance& instance) {
  GP_ASSIGN_OR_RETURN(auto h, Handle(gpu));
  GP_ASSIGN_OR_RETURN(auto mode, ModelAndMigMode(h, gpu));
  // The ids are the driver's as listed now: the UUID names the instance.
  std::vector<MigInstance> all;
  if (mode.second) {
    GP_ASSIGN_OR_RETURN(all, MigInstancesOf(h, gpu, mode.first));
  }
  for (const MigInstance& m : all) {
    if (m.uuid == instance.uuid) return mig_.Destroy(h, gpu, m.gi_id, m.ci_id, api_.ErrorString);
  }
  return NotFound("GPU " + std::to_string(gpu) + " has no MIG instance " + instance.uuid);
}

template <class F>
void Resolve(void* library, const char* symbol, F*& out, std::vector<std::string>* missing) {
  dlerror();
  out = reinterpret_cast<F*>(dlsym(library, symbol));
  if (!out && missing) missing->push_back(symbol);
}

std::string Upper(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return out;
}

}  // namespace

Result<std::unique_ptr<DeviceBackend>> OpenNvmlBackend(const NvmlOptions& options) {
  void* library = dlopen(options.library.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!library) {
    const char* e = dlerror();
    return NotFound("cannot load " + options.library + ": " + (e ? e : "unknown dlopen error"));
  }
  NvmlApi api{};
  std::vector<std::string> missing;
  Resolve(library, "nvmlInit_v2", api.Init, &missing);
  Resolve(library, "nvmlShutdown", api.Shutdown, &missing);
  Resolve(library, "nvmlErrorString", api.ErrorString, &missing);
  Resolve(library, "nvmlDeviceGetCount_v2", api.DeviceGetCount, &missing);
  Resolve(library, "nvmlDeviceGetHandleByIndex_v2", api.DeviceGetHandleByIndex, &missing);
  Resolve(library, "nvmlDeviceGetUUID", api.DeviceGetUUID, &missing);
  Resolve(library, "nvmlDeviceGetName", api.DeviceGetName, &missing);
  Resolve(library, "nvmlDeviceGetMemoryInfo", api.DeviceGetMemoryInfo, &missing);
  Resolve(library, "nvmlDeviceGetPciInfo_v3", api.DeviceGetPciInfo, &missing);
  Resolve(library, "nvmlDeviceGetUtilizationRates", api.DeviceGetUtilizationRates, &missing);
  Resolve(library, "nvmlDeviceGetTemperature", api.DeviceGetTemperature, &missing);
  Resolve(library, "nvmlDeviceGetComputeRunningProcesses_v3", api.DeviceGetComputeRunningProcesses, &missing);
  Resolve(library, "nvmlDeviceGetMigMode", api.DeviceGetMigMode, &missing);
  Resolve(library, "nvmlDeviceGetMaxMigDeviceCount", api.DeviceGetMaxMigDeviceCount, &missing);
  Resolve(library, "nvmlDeviceGetMigDeviceHandleByIndex", api.DeviceGetMigDeviceHandleByIndex, &missing);
  Resolve(library, "nvmlDeviceGetGpuInstanceId", api.DeviceGetGpuInstanceId, &missing);
  Resolve(library, "nvmlDeviceGetComputeInstanceId", api.DeviceGetComputeInstanceId, &missing);
  Resolve(library, "nvmlDeviceGetGpuInstanceById", api.DeviceGetGpuInstanceById, &missing);
  Resolve(library, "nvmlGpuInstanceGetInfo", api.GpuInstanceGetInfo, &missing);
  Resolve(library, "nvmlDeviceGetNvLinkState", api.DeviceGetNvLinkState, &missing);
  Resolve(library, "nvmlDeviceGetNvLinkRemotePciInfo_v2", api.DeviceGetNvLinkRemotePciInfo, &missing);
  Resolve(library, "nvmlDeviceGetProcessUtilization", api.DeviceGetProcessUtilization, nullptr);
  Resolve(library, "nvmlDeviceGetNvLinkRemoteDeviceType", api.DeviceGetNvLinkRemoteDeviceType, nullptr);
  Resolve(library, "nvmlDeviceGetRemappedRows", api.DeviceGetRemappedRows, nullptr);
  Resolve(library, "nvmlDeviceGetMinorNumber", api.DeviceGetMinorNumber, nullptr);
  if (!missing.empty()) {
    std::string names;
    for (const auto& m : missing) names += (names.empty() ? "" : ", ") + m;
    dlclose(library);
    return NotFound(options.library + " lacks " + names);
  }
  if (const nvmlReturn_t rc = api.Init(); rc != NVML_SUCCESS) {
    const char* text = api.ErrorString(rc);
    std::string message = "nvmlInit_v2: " + std::string(text ? text : "NVML error " + std::to_string(rc));
    dlclose(library);
    return FailedPrecondition(std::move(message));
  }
  auto fields = NvmlFieldReader::Open(options.library);
  if (!fields) {
    api.Shutdown();
    dlclose(library);
    return std::unexpected(fields.error());
  }
  return std::unique_ptr<DeviceBackend>(std::make_unique<NvmlBackend>(library, api, options, std::move(*fields)));
}

// Product names seen in the wild: "NVIDIA H100 80GB HBM3", "NVIDIA H100 PCIe",
// "NVIDIA H200", "NVIDIA A100-SXM4-80GB", "NVIDIA A100-PCIE-40GB", "NVIDIA
// A100 80GB PCIe", "Tesla V100-SXM2-32GB", "Tesla V100S-PCIE-32GB", "Tesla
// T4", "NVIDIA A10", "NVIDIA A30", "NVIDIA L40S". The family is one token
// of the name (split at anything but letters and digits), so "A10" never
// matches "A100" and "A10G" or "H800" match nothing rather than a near miss.
std::string CatalogModelForProduct(std::string_view product, int64_t memory_mib) {
  std::vector<std::string> tokens;
  std::string cur;
  for (char c : Upper(product)) {
    if (std::isalnum(static_cast<unsigned char>(c))) {
      cur += c;
    } else if (!cur.empty()) {
      tokens.push_back(std::move(cur));
      cur.clear();
    }
  }
  if (!cur.empty()) tokens.push_back(std::move(cur));

  // Memory in GiB: the device's, else a "<N>GB" token of the name, else 0.
  double memory_gib = static_cast<double>(memory_mib) / 1024.0;
  if (memory_mib <= 0) {
    memory_gib = 0;
    for (const auto& t : tokens) {
      if (t.size() > 2 && t.ends_with("GB") &&
          std::all_of(t.begin(), t.end() - 2, [](char c) { return std::isdigit(static_cast<unsigned char>(c)); })) {
        memory_gib = std::stod(t.substr(0, t.size() - 2));
      }
    }
  }
  std::string model;
  for (const auto& t : tokens) {
    if (t == "H200" || t == "H100" || t == "A30" || t == "A10" || t == "L40S" || t == "T4" || t == "P100") {
      model = t;
    } else if (t == "A100") {
      if (memory_gib > 0) model = memory_gib >= 60 ? "A100-80GB" : "A100-40GB";
    } else if (t == "V100" || t == "V100S") {
      if (memory_gib > 0) model = memory_gib >= 24 ? "V100M32" : "V100M16";
    }
    if (!model.empty()) break;
  }
  if (model.empty() || !Catalog::Builtin().Find(model)) return "";
  return model;
}

std::string MigProfileFromDeviceName(std::string_view name) {
  const std::string_view marker = "MIG ";
  size_t at = std::string_view::npos;
  for (size_t pos = name.find(marker); pos != std::string_view::npos; pos = name.find(marker, pos + 1)) {
    if (pos == 0 || name[pos - 1] == ' ') at = pos;  // the last " MIG " word wins
  }
  if (at == std::string_view::npos) return "";
  std::string_view rest = name.substr(at + marker.size());
  while (!rest.empty() && rest.front() == ' ') rest.remove_prefix(1);
  const size_t end = rest.find(' ');
  const std::string_view token = rest.substr(0, end);
  // "3g.40gb", "1g.10gb+me", "1c.3g.40gb": compute slices, then memory.
  if (token.find("g.") == std::string_view::npos || token.find("gb") == std::string_view::npos) return "";
  return std::string(token);
}

}  // namespace gpupool
