#include "src/model/gpu_catalog.h"

namespace gpupool {
namespace {

// Figures are vendor datasheet values for the SXM/PCIe form factor named in
// `note`: memory, dense FP16 tensor and FP32 throughput, memory bandwidth and
// per-GPU interconnect bandwidth.
Catalog MakeBuiltin() {
  Catalog c;
  auto add = [&c](GpuModel m) { (void)c.Add(std::move(m)); };
  add({"T4", "nvidia", "cuda", 15360, 65, 8.1, 320, 32, "T4 PCIe datasheet"});
  add({"P100", "nvidia", "cuda", 16384, 18.7, 9.3, 732, 32, "P100 PCIe 16GB datasheet"});
  add({"V100M16", "nvidia", "cuda", 16384, 125, 15.7, 900, 300, "V100 SXM2 16GB datasheet"});
  add({"V100M32", "nvidia", "cuda", 32768, 125, 15.7, 900, 300, "V100 SXM2 32GB datasheet"});
  add({"A10", "nvidia", "cuda", 24576, 125, 31.2, 600, 64, "A10 PCIe datasheet"});
  add({"A30", "nvidia", "cuda", 24576, 165, 10.3, 933, 200, "A30 PCIe datasheet, NVLink bridge"});
  add({"A100-40GB", "nvidia", "cuda", 40960, 312, 19.5, 1555, 600, "A100 SXM4 40GB datasheet"});
  add({"A100-80GB", "nvidia", "cuda", 81920, 312, 19.5, 2039, 600, "A100 SXM4 80GB datasheet"});
  add({"L40S", "nvidia", "cuda", 49152, 362, 91.6, 864, 64, "L40S PCIe datasheet"});
  add({"H100", "nvidia", "cuda", 81920, 989, 67, 3350, 900, "H100 SXM5 80GB datasheet"});
  add({"H200", "nvidia", "cuda", 144384, 989, 67, 4800, 900, "H200 SXM 141GB datasheet"});
  // The Alibaba 2023 trace anonymises two models. Their nodes carry 8 GPUs
  // with 96 (G2) or 128 (G3) cores; the figures below are assumptions of a
  // plausible model of that generation, used only where attributes matter.
  add({"G2", "nvidia", "cuda", 32768, 125, 15.7, 900, 300, "anonymised (Alibaba G2); assumed V100-class"});
  add({"G3", "nvidia", "cuda", 81920, 312, 19.5, 2039, 600, "anonymised (Alibaba G3); assumed A100-class"});
  add({"Ascend910B", "huawei", "cann", 65536, 320, 0, 1600, 392, "Ascend 910B public figures; HCCS"});
  return c;
}

}  // namespace

const Catalog& Catalog::Builtin() {
  static const Catalog* const kCatalog = new Catalog(MakeBuiltin());
  return *kCatalog;
}

Result<GpuModelId> Catalog::Add(GpuModel model) {
  if (model.name.empty()) return InvalidArgument("GPU model name is empty");
  if (Find(model.name)) return InvalidArgument("GPU model '" + model.name + "' is already in the catalog");
  if (size() >= kMaxGpuModels) {
    return InvalidArgument("GPU model catalog is full (" + std::to_string(kMaxGpuModels) + " models)");
  }
  models_.push_back(std::move(model));
  return static_cast<GpuModelId>(models_.size() - 1);
}

std::optional<GpuModelId> Catalog::Find(std::string_view name) const {
  for (size_t i = 0; i < models_.size(); ++i) {
    if (models_[i].name == name) return static_cast<GpuModelId>(i);
  }
  return std::nullopt;
}

std::string Catalog::Names() const {
  std::string out;
  for (const auto& m : models_) {
    if (!out.empty()) out += ", ";
    out += m.name;
  }
  return out;
}

}  // namespace gpupool
