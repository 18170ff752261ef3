#include "src/sim/synthetic.h"

#include <cstdio>
#include <string>
#include <utility>

#include "src/base/check.h"
#include "src/base/rng.h"

namespace gpupool {
namespace {

struct NodeShape {
  const char* model;
  int gpus;
  int64_t cores;
  int64_t memory_gib;
  int weight;  // relative frequency
};

template <size_t N>
const NodeShape& Pick(const NodeShape (&shapes)[N], Rng& rng) {
  int total = 0;
  for (const auto& s : shapes) total += s.weight;
  int x = static_cast<int>(rng.Below(static_cast<uint64_t>(total)));
  for (const auto& s : shapes) {
    if ((x -= s.weight) < 0) return s;
  }
  return shapes[N - 1];
}

std::string Name(const char* prefix, int i, int width) {
  char buf[48];
  std::snprintf(buf, sizeof buf, "%s%0*d", prefix, width, i);
  return buf;
}

template <size_t N>
std::vector<NodeSpec> Generate(const NodeShape (&shapes)[N], int node_count, uint64_t seed, const Catalog& catalog) {
  Rng rng(seed);
  std::vector<NodeSpec> nodes;
  nodes.reserve(node_count);
  for (int i = 0; i < node_count; ++i) {
    const NodeShape& s = Pick(shapes, rng);
    auto model = catalog.Find(s.model);
    GP_CHECK(model.has_value()) << "built-in catalog lacks " << s.model;
    nodes.push_back(NodeSpec{Name("gen-node-", i, 5), s.cores * 1000, s.memory_gib * 1024, s.gpus, *model});
  }
  return nodes;
}

// Training servers (8 GPUs) hold most GPUs; inference servers are many but
// small, as in the 2023 trace (about half the nodes carry 8 GPUs).
constexpr NodeShape kMixed[] = {
    {"A100-80GB", 8, 128, 1024, 25}, {"H100", 8, 192, 2048, 10},  {"V100M32", 8, 96, 768, 10},
    {"T4", 2, 104, 512, 30},         {"A10", 1, 32, 128, 5},     {"L40S", 4, 64, 512, 10},
    {"A30", 4, 64, 256, 10},
};
constexpr NodeShape kEightGpu[] = {
    {"A100-80GB", 8, 128, 1024, 50}, {"H100", 8, 192, 2048, 20}, {"V100M32", 8, 96, 768, 30},
};

}  // namespace

std::vector<NodeSpec> GenerateMixedCluster(int node_count, uint64_t seed, const Catalog& catalog) {
  return Generate(kMixed, node_count, seed, catalog);
}

std::vector<NodeSpec> GenerateEightGpuCluster(int node_count, uint64_t seed, const Catalog& catalog) {
  return Generate(kEightGpu, node_count, seed, catalog);
}

std::vector<TracePod> GeneratePods(int count, uint64_t seed) {
  Rng rng(seed);
  // Fractions of one GPU that inference services ask for, with relative
  // weights. Shares follow model memory footprints, so most do not divide a
  // GPU evenly (a 0.81 share leaves 0.19 that little else fits).
  constexpr std::pair<int32_t, int> kShareMilli[] = {{810, 35}, {470, 25}, {320, 11}, {650, 8}, {230, 5},
                                                     {150, 5},  {550, 5},  {370, 3},  {100, 3}};
  int share_weight_total = 0;
  for (const auto& [milli, weight] : kShareMilli) share_weight_total += weight;
  constexpr int64_t kCpuOnlyCores[] = {1, 2, 4, 8, 16, 32};
  std::vector<TracePod> pods;
  pods.reserve(count);
  for (int i = 0; i < count; ++i) {
    TracePod p;
    p.name = Name("gen-pod-", i, 7);
    Demand& d = p.demand;
    const uint64_t kind = rng.Below(100);
    if (kind < 13) {  // CPU-only: data loaders, web front ends, preprocessing
      d.cpu_milli = kCpuOnlyCores[rng.Below(std::size(kCpuOnlyCores))] * 1000;
    } else if (kind < 51) {  // a share of one GPU: inference replicas
      d.gpu_count = 1;
      int x = static_cast<int>(rng.Below(static_cast<uint64_t>(share_weight_total)));
      for (const auto& [milli, weight] : kShareMilli) {
        d.gpu_milli = milli;
        if ((x -= weight) < 0) break;
      }
      d.cpu_milli = static_cast<int64_t>(2 + rng.Below(11)) * 1000;
    } else if (kind < 97) {  // one whole GPU: training or large inference
      d.gpu_count = 1;
      d.gpu_milli = kMilliPerGpu;
      d.cpu_milli = static_cast<int64_t>(4 + rng.Below(13)) * 1000;
    } else {  // multi-GPU training replicas
      constexpr int32_t kCounts[] = {2, 4, 8};
      d.gpu_count = kCounts[rng.Below(3)];
      d.gpu_milli = kMilliPerGpu;
      d.cpu_milli = int64_t{d.gpu_count} * 8000;
    }
    d.memory_mib = d.cpu_milli / 1000 * 1024 * static_cast<int64_t>(2 + rng.Below(5));
    pods.push_back(std::move(p));
  }
  return pods;
}

}  // namespace gpupool
