// FGD+: our placement policy. It keeps FGD's fragmentation measure (fgd.h)
// and adds two things FGD cannot see: how the GPU-share stream packs as a
// whole, and whether a node keeps enough CPU for the GPUs it has left.
//
// Every candidate placement (a node, and for a share one GPU g of it with
// free milli f_g >= s) is ranked lexicographically:
//   1. shares only: the packing loss Loss(f_g, s) of share_packing.h, in
//      steps of 0.001 GPU, lowest first: stay on the path of an optimal
//      packing of the share stream;
//   2. CPU stranding, "no" first: after placement the node keeps at least
//      cpu_reserve_per_gpu_milli of free CPU per free GPU (counting partly
//      free GPUs by their free fraction), so its GPUs stay usable;
//   3. shares only: an already used GPU (f_g < 1000) before a fresh one, so
//      fewer GPUs are half-filled at any moment;
//   4. the FGD score of the placement, highest first;
// and then, as everywhere in the framework, nodes tie-break by rank. The
// node's score is its best candidate's; the GPU selector returns that
// candidate (the lowest index on a tie).
//
// The CPU reserve comes from the workload and the cluster (see
// CpuReservePerGpuMilli): a fixed share of the CPU per GPU that the cluster
// has left once CPU-only work has taken its expected part.
#pragma once

#include <cstdint>
#include <span>

#include "src/model/cluster.h"
#include "src/sched/fragmentation.h"
#include "src/sched/share_packing.h"

namespace gpupool {

struct FgdPlusConfig {
  const FragmentationModel* frag = nullptr;
  const SharePackingModel* packing = nullptr;
  int64_t cpu_reserve_per_gpu_milli = 0;  // 0 disables criterion 2
};

struct FgdPlusChoice {
  int64_t score = 0;
  GpuMask gpus = 0;
};

// Requires CheckFit(n, d) == kNone and non-null models in `config`.
FgdPlusChoice FgdPlusBestChoice(const FgdPlusConfig& config, const Node& n, const Demand& d);

// The CPU to keep per free GPU on a node:
//   kCpuReserveShare x (cluster CPU per GPU - CPU-only demand's CPU per GPU of demand)
// where the second term is (sum of cpu_milli of CPU-only demands) / (sum of
// GPUs of GPU demands) over `demands`. Never negative; 0 when the cluster
// has no GPUs.
int64_t CpuReservePerGpuMilli(int64_t cluster_cpu_milli, int64_t cluster_gpu_milli, std::span<const Demand> demands);
// The same over a weighted workload (each demand counts `weight` times).
int64_t CpuReservePerGpuMilli(int64_t cluster_cpu_milli, int64_t cluster_gpu_milli,
                              std::span<const WeightedDemand> demands);

// The share of the spare CPU per GPU kept as reserve. Chosen on the default
// Alibaba 2023 trace with seeds 0-19 (a plateau from about 0.5 to 0.65), and
// evaluated on the published seeds 42-51.
inline constexpr double kCpuReserveShare = 0.57;

}  // namespace gpupool
