#include "src/agent/nvml_mig.h"

#include <dlfcn.h>

#include <string>

namespace gpupool {
namespace {

// nvml.h: return codes, constants and structures (NVIDIA's NVML API reference).
constexpr int NVML_SUCCESS = 0;
constexpr int NVML_ERROR_INVALID_ARGUMENT = 2;
constexpr int NVML_ERROR_NOT_FOUND = 6;
constexpr int NVML_ERROR_INSUFFICIENT_SIZE = 7;

constexpr int NVML_GPU_INSTANCE_PROFILE_1_SLICE = 0x0;
constexpr int NVML_GPU_INSTANCE_PROFILE_2_SLICE = 0x1;
constexpr int NVML_GPU_INSTANCE_PROFILE_3_SLICE = 0x2;
constexpr int NVML_GPU_INSTANCE_PROFILE_4_SLICE = 0x3;
constexpr int NVML_GPU_INSTANCE_PROFILE_7_SLICE = 0x4;
constexpr int NVML_GPU_INSTANCE_PROFILE_8_SLICE = 0x5;
constexpr int NVML_GPU_INSTANCE_PROFILE_6_SLICE = 0x6;
constexpr int NVML_GPU_INSTANCE_PROFILE_1_SLICE_REV1 = 0x7;  // 1 slice with media extensions
constexpr int NVML_GPU_INSTANCE_PROFILE_2_SLICE_REV1 = 0x8;  // 2 slices with media extensions
constexpr int NVML_GPU_INSTANCE_PROFILE_1_SLICE_REV2 = 0x9;  // 1 slice, twice the memory

constexpr int NVML_COMPUTE_INSTANCE_PROFILE_1_SLICE = 0x0;
constexpr int NVML_COMPUTE_INSTANCE_PROFILE_2_SLICE = 0x1;
constexpr int NVML_COMPUTE_INSTANCE_PROFILE_3_SLICE = 0x2;
constexpr int NVML_COMPUTE_INSTANCE_PROFILE_4_SLICE = 0x3;
constexpr int NVML_COMPUTE_INSTANCE_PROFILE_7_SLICE = 0x4;
constexpr int NVML_COMPUTE_INSTANCE_PROFILE_8_SLICE = 0x5;
constexpr int NVML_COMPUTE_INSTANCE_PROFILE_6_SLICE = 0x6;
constexpr unsigned NVML_COMPUTE_INSTANCE_ENGINE_PROFILE_SHARED = 0x0;

struct nvmlGpuInstancePlacement_t {
  unsigned int start;  // first memory slice
  unsigned int size;   // memory slices
};
struct nvmlGpuInstanceProfileInfo_t {
  unsigned int id;  // the device's profile id
  unsigned int isP2pSupported;
  unsigned int sliceCount;  // compute slices
  unsigned int instanceCount;
  unsigned int multiprocessorCount;
  unsigned int copyEngineCount;
  unsigned int decoderCount;
  unsigned int encoderCount;
  unsigned int jpegCount;
  unsigned int ofaCount;
  unsigned long long memorySizeMB;
};
struct nvmlGpuInstanceInfo_t {
  void* device;
  unsigned int id;
  unsigned int profileId;
  nvmlGpuInstancePlacement_t placement;
};
struct nvmlComputeInstanceProfileInfo_t {
  unsigned int id;
  unsigned int sliceCount;
  unsigned int instanceCount;
  unsigned int multiprocessorCount;
  unsigned int sharedCopyEngineCount;
  unsigned int sharedDecoderCount;
  unsigned int sharedEncoderCount;
  unsigned int sharedJpegCount;
  unsigned int sharedOfaCount;
};
struct nvmlComputeInstancePlacement_t {
  unsigned int start, size;
};
struct nvmlComputeInstanceInfo_t {
  void* device;
  void* gpuInstance;
  unsigned int id;
  unsigned int profileId;
  nvmlComputeInstancePlacement_t placement;
};

template <class F>
void Find(void* library, const char* symbol, F*& out, std::vector<std::string>* missing) {
  dlerror();
  out = reinterpret_cast<F*>(dlsym(library, symbol));
  if (!out && missing) missing->push_back(symbol);
}

std::string Why(const char* call, int rc, int gpu, NvmlErrorStringFn error_string) {
  const char* text = error_string ? error_string(rc) : nullptr;
  return std::string(call) + " on GPU " + std::to_string(gpu) + ": " +
         (text ? std::string(text) : "NVML error " + std::to_string(rc));
}

}  // namespace

int NvmlGpuInstanceProfileOf(const MigTable& t, int p) {
  if (p < 0 || p >= static_cast<int>(t.profiles.size())) return -1;
  const MigProfile& prof = t.profiles[p];
  if (prof.media_extensions) {
    if (prof.compute_slices == 1) return NVML_GPU_INSTANCE_PROFILE_1_SLICE_REV1;
    if (prof.compute_slices == 2) return NVML_GPU_INSTANCE_PROFILE_2_SLICE_REV1;
    return -1;
  }
  if (prof.compute_slices == 1 && prof.memory_slices == 2) return NVML_GPU_INSTANCE_PROFILE_1_SLICE_REV2;
  switch (prof.compute_slices) {
    case 1: return NVML_GPU_INSTANCE_PROFILE_1_SLICE;
    case 2: return NVML_GPU_INSTANCE_PROFILE_2_SLICE;
    case 3: return NVML_GPU_INSTANCE_PROFILE_3_SLICE;
    case 4: return NVML_GPU_INSTANCE_PROFILE_4_SLICE;
    case 6: return NVML_GPU_INSTANCE_PROFILE_6_SLICE;
    case 7: return NVML_GPU_INSTANCE_PROFILE_7_SLICE;
    case 8: return NVML_GPU_INSTANCE_PROFILE_8_SLICE;
    default: return -1;
  }
}

int NvmlComputeInstanceProfileOf(int compute_slices) {
  switch (compute_slices) {
    case 1: return NVML_COMPUTE_INSTANCE_PROFILE_1_SLICE;
    case 2: return NVML_COMPUTE_INSTANCE_PROFILE_2_SLICE;
    case 3: return NVML_COMPUTE_INSTANCE_PROFILE_3_SLICE;
    case 4: return NVML_COMPUTE_INSTANCE_PROFILE_4_SLICE;
    case 6: return NVML_COMPUTE_INSTANCE_PROFILE_6_SLICE;
    case 7: return NVML_COMPUTE_INSTANCE_PROFILE_7_SLICE;
    case 8: return NVML_COMPUTE_INSTANCE_PROFILE_8_SLICE;
    default: return -1;
  }
}

void NvmlMig::Resolve(void* library) {
  std::vector<std::string> names;
  std::vector<std::string>* missing = &names;
  Find(library, "nvmlDeviceGetGpuInstanceProfileInfo", api_.DeviceGetGpuInstanceProfileInfo, missing);
  Find(library, "nvmlDeviceGetGpuInstancePossiblePlacements_v2", api_.DeviceGetGpuInstancePossiblePlacements, nullptr);
  Find(library, "nvmlDeviceCreateGpuInstanceWithPlacement", api_.DeviceCreateGpuInstanceWithPlacement, missing);
  Find(library, "nvmlDeviceGetGpuInstanceById", api_.DeviceGetGpuInstanceById, missing);
  Find(library, "nvmlGpuInstanceGetInfo", api_.GpuInstanceGetInfo, missing);
  Find(library, "nvmlGpuInstanceGetComputeInstanceProfileInfo", api_.GpuInstanceGetComputeInstanceProfileInfo,
       missing);
  Find(library, "nvmlGpuInstanceCreateComputeInstance", api_.GpuInstanceCreateComputeInstance, missing);
  Find(library, "nvmlGpuInstanceGetComputeInstanceById", api_.GpuInstanceGetComputeInstanceById, missing);
  Find(library, "nvmlComputeInstanceGetInfo_v2", api_.ComputeInstanceGetInfo, missing);
  Find(library, "nvmlComputeInstanceDestroy", api_.ComputeInstanceDestroy, missing);
  Find(library, "nvmlGpuInstanceDestroy", api_.GpuInstanceDestroy, missing);
  missing_.clear();
  for (const std::string& n : names) missing_ += (missing_.empty() ? "" : ", ") + n;
}

std::string NvmlMig::PossibleStarts(NvmlDeviceHandle device, const MigTable& table, int profile) const {
  const int constant = NvmlGpuInstanceProfileOf(table, profile);
  if (!api_.DeviceGetGpuInstancePossiblePlacements || constant < 0) return "";
  nvmlGpuInstanceProfileInfo_t info{};
  if (api_.DeviceGetGpuInstanceProfileInfo(device, static_cast<unsigned>(constant), &info) != NVML_SUCCESS) return "";
  nvmlGpuInstancePlacement_t placements[16] = {};
  unsigned int count = 16;
  const int rc = api_.DeviceGetGpuInstancePossiblePlacements(device, info.id, placements, &count);
  if (rc != NVML_SUCCESS && rc != NVML_ERROR_INSUFFICIENT_SIZE) return "";
  std::string out;
  for (unsigned int i = 0; i < count && i < 16; ++i) out += (out.empty() ? "" : ", ") + std::to_string(placements[i].start);
  return out;
}

Result<NvmlMig::Created> NvmlMig::Create(NvmlDeviceHandle device, int gpu, const MigTable& table, int profile,
                                         int start, NvmlErrorStringFn error_string) const {
  if (!missing_.empty()) {
    return FailedPrecondition("GPU " + std::to_string(gpu) + ": the driver's NVML lacks " + missing_ +
                              ": MIG instances cannot be created");
  }
  if (profile < 0 || profile >= static_cast<int>(table.profiles.size())) {
    return InvalidArgument("GPU " + std::to_string(gpu) + ": no such MIG profile");
  }
  const MigProfile& prof = table.profiles[profile];
  const std::string what = " (" + prof.name + " at memory slice " + std::to_string(start) + ")";
  const int constant = NvmlGpuInstanceProfileOf(table, profile);
  const int ci_constant = NvmlComputeInstanceProfileOf(prof.compute_slices);
  if (constant < 0 || ci_constant < 0) {
    return InvalidArgument("GPU " + std::to_string(gpu) + ": MIG profile " + prof.name + " has no NVML profile");
  }
  nvmlGpuInstanceProfileInfo_t info{};
  if (const int rc = api_.DeviceGetGpuInstanceProfileInfo(device, static_cast<unsigned>(constant), &info);
      rc != NVML_SUCCESS) {
    return FailedPrecondition(Why("nvmlDeviceGetGpuInstanceProfileInfo", rc, gpu, error_string) + what);
  }
  if (info.sliceCount != prof.compute_slices) {
    return FailedPrecondition("GPU " + std::to_string(gpu) + ": the driver's GPU instance profile " +
                              std::to_string(constant) + " has " + std::to_string(info.sliceCount) +
                              " compute slices, " + prof.name + " needs " + std::to_string(prof.compute_slices));
  }
  const nvmlGpuInstancePlacement_t placement{static_cast<unsigned>(start), prof.memory_slices};
  void* gi = nullptr;
  if (const int rc = api_.DeviceCreateGpuInstanceWithPlacement(device, info.id, &placement, &gi); rc != NVML_SUCCESS) {
    std::string why = Why("nvmlDeviceCreateGpuInstanceWithPlacement", rc, gpu, error_string) + what;
    if (rc == NVML_ERROR_INVALID_ARGUMENT) {
      if (const std::string starts = PossibleStarts(device, table, profile); !starts.empty()) {
        why += "; the driver places " + prof.name + " at memory slices " + starts;
      }
    }
    return FailedPrecondition(why);
  }
  // From here on a failure takes the GPU instance back.
  auto undo = [&](std::string why) -> Result<Created> {
    if (const int rc = api_.GpuInstanceDestroy(gi); rc != NVML_SUCCESS) {
      why += "; then " + Why("nvmlGpuInstanceDestroy", rc, gpu, error_string);
    }
    return FailedPrecondition(std::move(why));
  };
  nvmlGpuInstanceInfo_t gi_info{};
  if (const int rc = api_.GpuInstanceGetInfo(gi, &gi_info); rc != NVML_SUCCESS) {
    return undo(Why("nvmlGpuInstanceGetInfo", rc, gpu, error_string) + what);
  }
  nvmlComputeInstanceProfileInfo_t ci_info{};
  if (const int rc = api_.GpuInstanceGetComputeInstanceProfileInfo(
          gi, static_cast<unsigned>(ci_constant), NVML_COMPUTE_INSTANCE_ENGINE_PROFILE_SHARED, &ci_info);
      rc != NVML_SUCCESS) {
    return undo(Why("nvmlGpuInstanceGetComputeInstanceProfileInfo", rc, gpu, error_string) + what);
  }
  void* ci = nullptr;
  if (const int rc = api_.GpuInstanceCreateComputeInstance(gi, ci_info.id, &ci); rc != NVML_SUCCESS) {
    return undo(Why("nvmlGpuInstanceCreateComputeInstance", rc, gpu, error_string) + what);
  }
  nvmlComputeInstanceInfo_t info_ci{};
  if (const int rc = api_.ComputeInstanceGetInfo(ci, &info_ci); rc != NVML_SUCCESS) {
    std::string why = Why("nvmlComputeInstanceGetInfo_v2", rc, gpu, error_string) + what;
    if (const int drc = api_.ComputeInstanceDestroy(ci); drc != NVML_SUCCESS) {
      why += "; then " + Why("nvmlComputeInstanceDestroy", drc, gpu, error_string);
    }
    return undo(std::move(why));
  }
  return Created{static_cast<int>(gi_info.id), static_cast<int>(info_ci.id)};
}

Status NvmlMig::Destroy(NvmlDeviceHandle device, int gpu, int gi_id, int ci_id, NvmlErrorStringFn error_string) const {
  if (!missing_.empty()) {
    return FailedPrecondition("GPU " + std::to_string(gpu) + ": the driver's NVML lacks " + missing_ +
                              ": MIG instances cannot be destroyed");
  }
  void* gi = nullptr;
  if (const int rc = api_.DeviceGetGpuInstanceById(device, static_cast<unsigned>(gi_id), &gi); rc != NVML_SUCCESS) {
    const std::string why = Why("nvmlDeviceGetGpuInstanceById", rc, gpu, error_string) + " (GPU instance " +
                            std::to_string(gi_id) + ")";
    if (rc == NVML_ERROR_NOT_FOUND) return NotFound(why);
    return FailedPrecondition(why);
  }
  void* ci = nullptr;
  const int found = api_.GpuInstanceGetComputeInstanceById(gi, static_cast<unsigned>(ci_id), &ci);
  if (found == NVML_SUCCESS) {
    if (const int rc = api_.ComputeInstanceDestroy(ci); rc != NVML_SUCCESS) {
      return FailedPrecondition(Why("nvmlComputeInstanceDestroy", rc, gpu, error_string) + " (GPU instance " +
                                std::to_string(gi_id) + ", compute instance " + std::to_string(ci_id) + ")");
    }
  } else if (found != NVML_ERROR_NOT_FOUND) {
    return FailedPrecondition(Why("nvmlGpuInstanceGetComputeInstanceById", found, gpu, error_string));
  }
  if (const int rc = api_.GpuInstanceDestroy(gi); rc != NVML_SUCCESS) {
    return FailedPrecondition(Why("nvmlGpuInstanceDestroy", rc, gpu, error_string) + " (GPU instance " +
                              std::to_string(gi_id) + ")");
  }
  return {};
}

}  // namespace gpupool
