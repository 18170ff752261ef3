// Who computes on each GPU in a simulation, and what sharing a GPU costs
// them (PART-1). A task's load on a GPU is its mean utilization (the
// fraction of a whole GPU it keeps busy alone; the simulator caps it at the
// share for MIG instances and MPS shares, which cannot use more). Per GPU
// mode:
//  - whole GPUs and MIG instances: isolated, no slowdown;
//  - time-slicing: with two or more tasks, the context-switch overhead
//    (SharingCosts::time_slice_overhead), and when their loads add up to
//    more than the GPU (sum > 1) each runs at 1/sum of its speed alone;
//  - MPS: kernels run concurrently, so no switch overhead, but the same
//    1/sum slowdown when together they want more than the GPU.
// A task's factor is its speed relative to running alone, the minimum over
// its GPUs. The busy GPUs are the sum over GPUs of min(1, load).
#pragma once

#include <cstdint>
#include <unordered_map>
#include <utility>
#include <vector>

#include "src/engine/event.h"
#include "src/model/cluster.h"
#include "src/sim/scenario.h"

namespace gpupool {

class GpuLoad {
 public:
  // `cluster` (the engine's) tells each GPU's mode; it must outlive this.
  GpuLoad(const Cluster* cluster, SharingCosts costs) : cluster_(cluster), costs_(costs) {}

  // `job` starts (Add) or stops (Remove) computing on the GPUs of `at`.
  // Both return every other job on those GPUs, sorted: their factors may
  // have changed.
  std::vector<JobId> Add(JobId job, const std::vector<PlacedReplica>& at, double load);
  std::vector<JobId> Remove(JobId job, const std::vector<PlacedReplica>& at);

  // Speed relative to running alone, in (0, 1].
  double Factor(const std::vector<PlacedReplica>& at) const;
  // Sum over GPUs of min(1, load): whole GPUs' worth kept busy.
  double busy_gpus() const { return busy_; }

 private:
  struct Gpu {
    std::vector<std::pair<JobId, double>> tasks;  // (job, load)
    double load = 0;
  };
  static int64_t Key(NodeIndex n, int g) { return int64_t{n} * 64 + g; }
  double GpuFactor(NodeIndex n, int g, const Gpu& gpu) const;

  const Cluster* cluster_;
  SharingCosts costs_;
  std::unordered_map<int64_t, Gpu> gpus_;
  double busy_ = 0;
};

}  // namespace gpupool
