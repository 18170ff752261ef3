// GPU model catalog: the hardware facts the scheduler reasons about.
//
// A catalog maps model names ("H100", "T4", ...) to dense ids (GpuModelId) so
// that hot paths compare small integers and constraint sets are bit masks.
// The built-in catalog ships real entries for common data-center GPUs plus the
// anonymised models of the Alibaba 2023 trace (G2, G3) and one domestic
// accelerator; Add() lets configuration register more.
//
// Thread-safety: a Catalog is immutable once built and may be shared by
// reading threads.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "src/base/status.h"

namespace gpupool {

// Dense id of a model inside one Catalog. At most kMaxGpuModels models.
using GpuModelId = uint8_t;
inline constexpr int kMaxGpuModels = 64;

// A set of models as a bit mask: bit i set = model id i allowed.
using GpuModelMask = uint64_t;
inline constexpr GpuModelMask kAnyGpuModel = ~GpuModelMask{0};

struct GpuModel {
  std::string name;
  std::string vendor;      // "nvidia", "huawei", ...
  std::string ecosystem;   // software stack family: "cuda", "cann"
  int64_t memory_mib = 0;
  double fp16_tflops = 0;  // dense tensor throughput
  double fp32_tflops = 0;
  int64_t memory_bandwidth_gbps = 0;  // GB/s
  int64_t interconnect_gbps = 0;      // GB/s per GPU: NVLink/HCCS when present, else PCIe
  std::string note;        // where the figures come from, or why they are assumed
};

// Are the model's GPUs joined by NVLink (or HCCS) inside a node? Those
// links carry 150 GB/s or more per GPU; PCIe Gen4/Gen5 at most 64.
inline bool JoinedByNvlink(const GpuModel& m) { return m.interconnect_gbps >= 150; }

class Catalog {
 public:
  // The built-in catalog (see gpu_catalog.cc for the entries and sources).
  static const Catalog& Builtin();

  // Registers a model. Fails when the name is empty, already present, or the
  // catalog is full.
  Result<GpuModelId> Add(GpuModel model);

  std::optional<GpuModelId> Find(std::string_view name) const;
  const GpuModel& Get(GpuModelId id) const { return models_[id]; }
  int size() const { return static_cast<int>(models_.size()); }

  // "A, B, C": for error messages that list what is known.
  std::string Names() const;

 private:
  std::vector<GpuModel> models_;
};

}  // namespace gpupool
