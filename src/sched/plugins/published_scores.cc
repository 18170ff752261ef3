// The node scores of the FGD paper's public simulator, re-implemented from
// their documented behaviour. Formulas are written out beside each plugin;
// "floor" is the truncation of a non-negative double to an integer, which the
// published scores apply before comparing nodes.
#include <algorithm>
#include <cmath>

#include "src/sched/plugins/plugins.h"

namespace gpupool {
namespace {

// Normalisation constants of the published scores: the largest node they
// were designed for (128 cores, 8 GPUs).
constexpr double kMaxSpecCpuMilli = 128000.0;
constexpr double kMaxSpecGpuMilli = 8000.0;

int64_t Clamp100(int64_t s) { return std::clamp<int64_t>(s, 0, 100); }

// DotProd (Tetris-like), dimensions merged:
//   node = (free cpu, total free GPU milli) / (128 cores, 8000 milli)
//   pod  = (cpu, gpu_count * gpu_milli)     / (128 cores, 8000 milli)
//   score = floor(100 * (1 - dot(node, pod) / 2))
// The smaller the dot product, the fuller the node along the dimensions the
// demand uses, the higher the score.
class DotProdScore final : public ScorePlugin {
 public:
  std::string_view name() const override { return "DotProd"; }
  int64_t Score(const Node& n, const Demand& d) const override {
    const double nv0 = static_cast<double>(n.cpu_milli_free) / kMaxSpecCpuMilli;
    const double nv1 = static_cast<double>(n.gpu_milli_free_total) / kMaxSpecGpuMilli;
    const double pv0 = static_cast<double>(d.cpu_milli) / kMaxSpecCpuMilli;
    const double pv1 = static_cast<double>(d.total_gpu_milli()) / kMaxSpecGpuMilli;
    double dot = 0;
    dot += nv0 * pv0;
    dot += nv1 * pv1;
    return Clamp100(static_cast<int64_t>(100.0 * (1.0 - dot / 2.0)));
  }
};

// GpuClustering: keep demands of one GPU kind (a share, or k whole GPUs)
// together.
//   base  = floor(25 * (8000 - total free GPU milli) / 8000), in integers
//   score = base + 75  node holds only this kind
//           base + 50  node holds this kind and others
//           base + 25  node holds no GPU demand
//           base       node holds only other kinds
// CPU-only demands score 0 everywhere (the lowest-ranked node wins).
class GpuClusteringScore final : public ScorePlugin {
 public:
  std::string_view name() const override { return "GpuClustering"; }
  int64_t Score(const Node& n, const Demand& d) const override {
    const int kind = GpuKindOf(d);
    if (kind < 0) return 0;
    const int64_t base = std::max<int64_t>(0, (25 * (8000 - int64_t{n.gpu_milli_free_total})) / 8000);
    if (n.gpu_kinds_present == 0) return base + 25;
    if (n.gpu_kind_count[kind] > 0) return base + (n.gpu_kinds_present == 1 ? 75 : 50);
    return base;
  }
};

// GpuPacking: prefer GPUs already in use, then used nodes, then small idle
// nodes.
//   idle node (every GPU fully free):           max(33 - G, G), G = GPU count
//   needs k > 0 fully free GPUs on a used node: max(50 - k, 33)
//   fits on partly used GPUs only:              max(100 - floor(sum floor(free/10) / 10), 50)
// where the GPUs taken are those with enough free milli, tightest first.
// CPU-only demands score 0 everywhere.
class GpuPackingScore final : public ScorePlugin {
 public:
  std::string_view name() const override { return "GpuPacking"; }
  int64_t Score(const Node& n, const Demand& d) const override {
    if (d.gpu_count == 0) return 0;
    const int g_count = n.gpu_count;
    if (n.gpus_fully_free == g_count) return std::max(33 - g_count, g_count);
    // GPU indexes by free milli ascending, stable.
    std::array<int8_t, kMaxGpusPerNode> order;
    for (int g = 0; g < g_count; ++g) order[g] = static_cast<int8_t>(g);
    std::stable_sort(order.begin(), order.begin() + g_count,
                     [&n](int8_t a, int8_t b) { return n.gpu_free_milli[a] < n.gpu_free_milli[b]; });
    int taken = 0, fully_free_taken = 0;
    int64_t r = 0;
    for (int i = 0; i < g_count && taken < d.gpu_count; ++i) {
      const int16_t f = n.gpu_free_milli[order[i]];
      if (!GpuFits(n, order[i], d)) continue;
      ++taken;
      fully_free_taken += f == kMilliPerGpu;
      r += (int64_t{f} * 100) / 1000;
    }
    if (fully_free_taken > 0) return std::max(50 - fully_free_taken, 33);
    return std::max<int64_t>(100 - r / 10, 50);
  }
};

// BestFit: the node with the least capacity left after placement.
//   s = 0.5 * (free cpu - cpu) / 128 cores + 0.5 * (free GPU milli - GPU milli) / 8000
//   score = floor(100 * (1 - s))
class BestFitScore final : public ScorePlugin {
 public:
  std::string_view name() const override { return "BestFit"; }
  int64_t Score(const Node& n, const Demand& d) const override {
    double s = 0;
    s += static_cast<double>(n.cpu_milli_free - d.cpu_milli) / kMaxSpecCpuMilli * 0.5;
    s += static_cast<double>(int64_t{n.gpu_milli_free_total} - d.total_gpu_milli()) / kMaxSpecGpuMilli * 0.5;
    return Clamp100(static_cast<int64_t>((1.0 - s) * 100.0));
  }
};

}  // namespace

std::unique_ptr<ScorePlugin> MakeDotProdScore() { return std::make_unique<DotProdScore>(); }
std::unique_ptr<ScorePlugin> MakeGpuClusteringScore() { return std::make_unique<GpuClusteringScore>(); }
std::unique_ptr<ScorePlugin> MakeGpuPackingScore() { return std::make_unique<GpuPackingScore>(); }
std::unique_ptr<ScorePlugin> MakeBestFitScore() { return std::make_unique<BestFitScore>(); }

}  // namespace gpupool
