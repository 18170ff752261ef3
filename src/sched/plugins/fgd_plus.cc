#include "src/sched/plugins/fgd_plus.h"

#include <cmath>

#include "src/sched/plugins/fgd.h"
#include "src/sched/plugins/plugins.h"

namespace gpupool {
namespace {

// Score layout: ((-loss_steps) * 2 + used_gpu) * 128 + fgd_score, with
// fgd_score in 0..100, so each criterion only breaks ties of the one before.
constexpr int64_t kFgdRange = 128;
constexpr double kLossStepsPerGpu = 1000.0;

}  // namespace

FgdPlusChoice FgdPlusBestChoice(const FragmentationModel& frag, const SharePackingModel& packing, const Node& n,
                                const Demand& d) {
  if (d.kind() != DemandKind::kGpuShare) {
    const FgdChoice c = FgdBestChoice(frag, n, d);
    return {c.score, c.gpus};
  }
  const double before = frag.NodeFragMilli(n);
  FgdPlusChoice best{INT64_MIN, 0};
  int16_t tried[kMaxGpusPerNode];
  int tried_count = 0;
  for (int g = 0; g < n.gpu_count; ++g) {
    const int16_t f = n.gpu_free_milli[g];
    if (f < d.gpu_milli) continue;
    bool seen = false;  // equal free milli: same outcome, keep the lower index
    for (int i = 0; i < tried_count; ++i) seen |= tried[i] == f;
    if (seen) continue;
    tried[tried_count++] = f;
    const GpuMask mask = static_cast<GpuMask>(1u << g);
    const int64_t loss_steps =
        static_cast<int64_t>(std::floor(packing.Loss(f, d.gpu_milli) * kLossStepsPerGpu + 1e-9));
    const int64_t used = f < kMilliPerGpu ? 1 : 0;
    const double after = frag.NodeFragMilli(NodeAfter(n, d, mask));
    const int64_t fgd = static_cast<int64_t>(1.0 / (1.0 + std::exp(-(before - after) / 1000.0)) * 100.0);
    const int64_t score = (-loss_steps * 2 + used) * kFgdRange + fgd;
    if (score > best.score) best = {score, mask};
  }
  return best;
}

namespace {

class FgdPlusScore final : public ScorePlugin {
 public:
  FgdPlusScore(const FragmentationModel* frag, const SharePackingModel* packing) : frag_(frag), packing_(packing) {}
  std::string_view name() const override { return "FGD+"; }
  int64_t Score(const Node& n, const Demand& d) const override {
    return FgdPlusBestChoice(*frag_, *packing_, n, d).score;
  }

 private:
  const FragmentationModel* frag_;
  const SharePackingModel* packing_;
};

class FgdPlusGpuSelector final : public GpuSelector {
 public:
  FgdPlusGpuSelector(const FragmentationModel* frag, const SharePackingModel* packing)
      : frag_(frag), packing_(packing) {}
  std::string_view name() const override { return "fgd+"; }
  GpuMask Select(const Node& n, const Demand& d, Rng&) const override {
    return FgdPlusBestChoice(*frag_, *packing_, n, d).gpus;
  }

 private:
  const FragmentationModel* frag_;
  const SharePackingModel* packing_;
};

}  // namespace

std::unique_ptr<ScorePlugin> MakeFgdPlusScore(const FragmentationModel* frag, const SharePackingModel* packing) {
  return std::make_unique<FgdPlusScore>(frag, packing);
}
std::unique_ptr<GpuSelector> MakeFgdPlusGpuSelector(const FragmentationModel* frag,
                                                    const SharePackingModel* packing) {
  return std::make_unique<FgdPlusGpuSelector>(frag, packing);
}

}  // namespace gpupool
