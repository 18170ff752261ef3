#include "src/sched/plugins/fgd.h"

#include <algorithm>
#include <cmath>

#include "src/sched/plugins/plugins.h"

namespace gpupool {

Node NodeAfter(const Node& n, const Demand& d, GpuMask gpus) {
  Node after = n;
  after.cpu_milli_free -= d.cpu_milli;
  after.memory_mib_free -= d.memory_mib;
  for (int g = 0; g < n.gpu_count; ++g) {
    if (gpus >> g & 1) after.gpu_free_milli[g] = static_cast<int16_t>(after.gpu_free_milli[g] - d.gpu_milli);
  }
  RecomputeGpuTotals(after);
  return after;
}

namespace {

int64_t SigmoidScore(double before, double after) {
  const double x = (before - after) / 1000.0;
  return static_cast<int64_t>(1.0 / (1.0 + std::exp(-x)) * 100.0);
}

}  // namespace

FgdChoice FgdBestChoice(const FragmentationModel& frag, const Node& n, const Demand& d) {
  const double before = frag.NodeFragMilli(n);
  if (d.kind() != DemandKind::kGpuShare) {
    const GpuMask gpus = d.gpu_count > 0 ? LowestFreeGpus(n, d.gpu_count) : GpuMask{0};
    return {SigmoidScore(before, frag.NodeFragMilli(NodeAfter(n, d, gpus))), gpus};
  }
  FgdChoice best{-1, 0};
  // GPUs with equal free milli give the same F after placement (F depends on
  // the multiset of free values), so each distinct value is evaluated once.
  int16_t tried[kMaxGpusPerNode];
  int tried_count = 0;
  int64_t tried_score[kMaxGpusPerNode];
  // (Only when nothing but free milli tells GPUs apart.)
  const bool dedupe = d.mode == ShareMode::kAny && d.gpu_memory_mib == 0 && n.special_gpus == 0;
  for (int g = 0; g < n.gpu_count; ++g) {
    const int16_t f = n.gpu_free_milli[g];
    if (!GpuFits(n, g, d)) continue;
    int64_t score = -1;
    for (int i = 0; i < tried_count && dedupe; ++i) {
      if (tried[i] == f) score = tried_score[i];
    }
    if (score < 0) {
      score = SigmoidScore(before, frag.NodeFragMilli(NodeAfter(n, d, static_cast<GpuMask>(1u << g))));
      tried[tried_count] = f;
      tried_score[tried_count++] = score;
    }
    if (score > best.score) best = {score, static_cast<GpuMask>(1u << g)};
  }
  return best;
}

namespace {

class FgdScore final : public ScorePlugin {
 public:
  explicit FgdScore(const FragmentationModel* frag) : frag_(frag) {}
  std::string_view name() const override { return "FGD"; }
  int64_t Score(const Node& n, const Demand& d) const override { return FgdBestChoice(*frag_, n, d).score; }

 private:
  const FragmentationModel* frag_;
};

class FgdGpuSelector final : public GpuSelector {
 public:
  explicit FgdGpuSelector(const FragmentationModel* frag) : frag_(frag) {}
  std::string_view name() const override { return "fgd"; }
  GpuMask Select(const Node& n, const Demand& d, Rng&) const override {
    if (d.kind() != DemandKind::kGpuShare) return LowestFreeGpus(n, d.gpu_count);
    return FgdBestChoice(*frag_, n, d).gpus;
  }

 private:
  const FragmentationModel* frag_;
};

}  // namespace

std::unique_ptr<ScorePlugin> MakeFgdScore(const FragmentationModel* frag) { return std::make_unique<FgdScore>(frag); }
std::unique_ptr<GpuSelector> MakeFgdGpuSelector(const FragmentationModel* frag) {
  return std::make_unique<FgdGpuSelector>(frag);
}

}  // namespace gpupool
