// GPU selection inside the chosen node.
#include "src/sched/plugins/plugins.h"

namespace gpupool {

GpuMask LowestFreeGpus(const Node& n, int gpu_count) {
  GpuMask mask = 0;
  int taken = 0;
  for (int g = 0; g < n.gpu_count && taken < gpu_count; ++g) {
    if (n.gpu_residents[g] == 0 && !((n.gpu_unhealthy | n.mig_enabled) >> g & 1)) {
      mask |= static_cast<GpuMask>(1u << g);
      ++taken;
    }
  }
  return mask;
}

namespace {

// best: a share goes to the fitting GPU with the least free milli (lowest
// index on equal free milli), so partly used GPUs fill before fresh ones.
class BestFitGpuSelector final : public GpuSelector {
 public:
  std::string_view name() const override { return "best"; }
  GpuMask Select(const Node& n, const Demand& d, Rng&) const override {
    if (d.kind() != DemandKind::kGpuShare) return LowestFreeGpus(n, d.gpu_count);
    int best = -1;
    for (int g = 0; g < n.gpu_count; ++g) {
      const int16_t f = n.gpu_free_milli[g];
      if (GpuFits(n, g, d) && (best < 0 || f < n.gpu_free_milli[best])) best = g;
    }
    return best < 0 ? GpuMask{0} : static_cast<GpuMask>(1u << best);
  }
};

// random: a share goes to a uniformly chosen fitting GPU.
class RandomGpuSelector final : public GpuSelector {
 public:
  std::string_view name() const override { return "random"; }
  GpuMask Select(const Node& n, const Demand& d, Rng& rng) const override {
    if (d.kind() != DemandKind::kGpuShare) return LowestFreeGpus(n, d.gpu_count);
    int fitting[kMaxGpusPerNode];
    int count = 0;
    for (int g = 0; g < n.gpu_count; ++g) {
      if (GpuFits(n, g, d)) fitting[count++] = g;
    }
    if (count == 0) return 0;
    return static_cast<GpuMask>(1u << fitting[rng.Below(static_cast<uint64_t>(count))]);
  }
};

}  // namespace

std::unique_ptr<GpuSelector> MakeBestFitGpuSelector() { return std::make_unique<BestFitGpuSelector>(); }
std::unique_ptr<GpuSelector> MakeRandomGpuSelector() { return std::make_unique<RandomGpuSelector>(); }

}  // namespace gpupool
