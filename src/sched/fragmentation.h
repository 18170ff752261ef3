// GPU fragmentation as measured by the FGD paper (ATC'23, "Beware of
// Fragmentation"), against a target workload of "typical" demands.
//
// For a node n and a typical demand m (with popularity p_m, summing to 1):
//   frag_n(m) = T_n                    if m is CPU-only, or m cannot run on n
//                                      (GPU model not allowed, too few GPUs
//                                      with enough free milli, or short of CPU)
//             = sum of free milli of the GPUs whose free milli < m.gpu_milli
//                                      otherwise
// where T_n is the node's total free GPU milli. Memory is not considered.
// F_n = sum_m p_m * frag_n(m), in GPU milli; the cluster's fragmentation is
// the sum over nodes. The fragmentation ratio is that sum over the total free
// GPU milli.
//
// The sums are accumulated in the same fixed order every time (typical
// demands in list order, into per-case accumulators added at the end), so a
// value is reproducible bit for bit.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "src/model/cluster.h"
#include "src/model/demand.h"

namespace gpupool {

struct TypicalDemand {
  Demand demand;        // memory_mib is 0: typical demands ignore memory
  double popularity;    // p_m; the list's popularities sum to 1
  double weight;        // how many source demands had this shape (a sum of weights when weighted)
};

// One shape of a weighted workload and how much of it the workload is
// (any positive scale: only ratios matter). Only cpu_milli, gpu_milli,
// gpu_count and allowed_models are read.
struct WeightedDemand {
  Demand demand;
  double weight = 0;
};

// The typical demands of a workload: demands are grouped by (cpu_milli,
// gpu_milli, gpu_count, allowed models); groups are sorted by count
// (descending; ties by larger cpu, then gpu_milli, then gpu_count, then
// model mask) and kept, most frequent first, until they cover at least
// `coverage` (0 < coverage <= 1) of all demands; popularities are
// renormalised over the kept groups. CPU-only demands take part.
std::vector<TypicalDemand> ComputeTypicalDemands(std::span<const Demand> workload, double coverage);
// The same over a weighted workload: groups are ranked by their summed
// weight, and coverage is a share of the total weight. With every weight 1
// it gives what ComputeTypicalDemands gives, bit for bit.
std::vector<TypicalDemand> ComputeTypicalDemands(std::span<const WeightedDemand> workload, double coverage);

class FragmentationModel {
 public:
  FragmentationModel() = default;  // no typical demands: every node scores 0
  explicit FragmentationModel(std::vector<TypicalDemand> typical);

  // F_n for one node, in GPU milli (see the file comment). 0 for a node with
  // no free GPU milli.
  double NodeFragMilli(const Node& n) const;

  const std::vector<TypicalDemand>& typical() const { return typical_; }

 private:
  std::vector<TypicalDemand> typical_;
};

}  // namespace gpupool
