#include "src/sched/plugins/fgd_plus.h"

#include <vector>

#include <algorithm>
#include <cmath>

#include "src/sched/plugins/fgd.h"
#include "src/sched/plugins/plugins.h"

namespace gpupool {
namespace {

// Score layout, most significant first:
//   ((-loss_steps * 4 - stranded * 2 + used_gpu) * kFgdRange + fgd_score)
// with fgd_score in 0..100 < kFgdRange, stranded and used_gpu in {0, 1}, so
// each criterion only breaks ties of the ones before it.
constexpr int64_t kFgdRange = 128;
constexpr double kLossStepsPerGpu = 1000.0;

int64_t FgdScoreOf(double before, double after) {
  return static_cast<int64_t>(1.0 / (1.0 + std::exp(-(before - after) / 1000.0)) * 100.0);
}

// 1 when the node, after placing d, keeps less CPU than the reserve for its
// remaining free GPU capacity.
int64_t Stranded(const FgdPlusConfig& c, const Node& n, const Demand& d) {
  if (c.cpu_reserve_per_gpu_milli <= 0) return 0;
  const int64_t free_gpu_milli_after = n.gpu_milli_free_total - d.total_gpu_milli();
  const int64_t cpu_after = n.cpu_milli_free - d.cpu_milli;
  // cpu_after < free_gpus_after * reserve, in integers.
  return cpu_after * kMilliPerGpu < free_gpu_milli_after * c.cpu_reserve_per_gpu_milli ? 1 : 0;
}

}  // namespace

int64_t CpuReservePerGpuMilli(int64_t cluster_cpu_milli, int64_t cluster_gpu_milli, std::span<const Demand> demands) {
  std::vector<WeightedDemand> weighted;
  weighted.reserve(demands.size());
  for (const Demand& d : demands) weighted.push_back({d, 1.0});
  return CpuReservePerGpuMilli(cluster_cpu_milli, cluster_gpu_milli, weighted);
}

int64_t CpuReservePerGpuMilli(int64_t cluster_cpu_milli, int64_t cluster_gpu_milli,
                              std::span<const WeightedDemand> demands) {
  if (cluster_gpu_milli <= 0) return 0;
  double cpu_only_cpu = 0, gpu_milli = 0;  // exact for integer weights (sums below 2^53)
  for (const WeightedDemand& w : demands) {
    const Demand& d = w.demand;
    if (d.gpu_count == 0) {
      cpu_only_cpu += w.weight * static_cast<double>(d.cpu_milli);
    } else {
      gpu_milli += w.weight * static_cast<double>(d.total_gpu_milli());
    }
  }
  const double cluster_per_gpu = static_cast<double>(cluster_cpu_milli) * kMilliPerGpu / cluster_gpu_milli;
  const double cpu_only_per_gpu = gpu_milli > 0 ? cpu_only_cpu * kMilliPerGpu / gpu_milli : 0.0;
  return std::max<int64_t>(0, std::llround(kCpuReserveShare * (cluster_per_gpu - cpu_only_per_gpu)));
}

FgdPlusChoice FgdPlusBestChoice(const FgdPlusConfig& c, const Node& n, const Demand& d) {
  if (d.kind() != DemandKind::kGpuShare) {
    const FgdChoice f = FgdBestChoice(*c.frag, n, d);
    return {-Stranded(c, n, d) * 2 * kFgdRange + f.score, f.gpus};
  }
  const double before = c.frag->NodeFragMilli(n);
  const int64_t stranded = Stranded(c, n, d);  // the same for every GPU of the node
  FgdPlusChoice best{INT64_MIN, 0};
  int16_t tried[kMaxGpusPerNode];
  int tried_count = 0;
  const bool dedupe = d.mode == ShareMode::kAny && d.gpu_memory_mib == 0 && n.special_gpus == 0;
  for (int g = 0; g < n.gpu_count; ++g) {
    const int16_t f = n.gpu_free_milli[g];
    if (!GpuFits(n, g, d)) continue;
    bool seen = false;  // equal free milli: the same outcome; keep the lower index
    for (int i = 0; i < tried_count && dedupe; ++i) seen |= tried[i] == f;
    if (seen) continue;
    tried[tried_count++] = f;
    const GpuMask mask = static_cast<GpuMask>(1u << g);
    const auto loss_steps =
        static_cast<int64_t>(std::floor(c.packing->Loss(f, d.gpu_milli) * kLossStepsPerGpu + 1e-9));
    const int64_t used = f < kMilliPerGpu ? 1 : 0;
    const int64_t fgd = FgdScoreOf(before, c.frag->NodeFragMilli(NodeAfter(n, d, mask)));
    const int64_t score = (-loss_steps * 4 - stranded * 2 + used) * kFgdRange + fgd;
    if (score > best.score) best = {score, mask};
  }
  return best;
}

namespace {

class FgdPlusScore final : public ScorePlugin {
 public:
  explicit FgdPlusScore(FgdPlusConfig config) : config_(config) {}
  std::string_view name() const override { return "FGD+"; }
  int64_t Score(const Node& n, const Demand& d) const override { return FgdPlusBestChoice(config_, n, d).score; }

 private:
  FgdPlusConfig config_;
};

class FgdPlusGpuSelector final : public GpuSelector {
 public:
  explicit FgdPlusGpuSelector(FgdPlusConfig config) : config_(config) {}
  std::string_view name() const override { return "fgd+"; }
  GpuMask Select(const Node& n, const Demand& d, Rng&) const override {
    return FgdPlusBestChoice(config_, n, d).gpus;
  }

 private:
  FgdPlusConfig config_;
};

}  // namespace

std::unique_ptr<ScorePlugin> MakeFgdPlusScore(const FgdPlusConfig& config) {
  return std::make_unique<FgdPlusScore>(config);
}
std::unique_ptr<GpuSelector> MakeFgdPlusGpuSelector(const FgdPlusConfig& config) {
  return std::make_unique<FgdPlusGpuSelector>(config);
}

}  // namespace gpupool
