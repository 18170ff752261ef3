// Who computes on each GPU in a simulation, and what sharing a GPU costs
// them (PART-1). A task's load on a GPU is its mean utilization (the
// fraction of a whole GPU it keeps busy alone on a whole GPU). Two costs:
//  - the share limit (ShareLimitSpeed): a MIG instance or an MPS share
//    (active-thread percentage) cannot keep more than its share of the GPU
//    busy, so a task that wants more (load > share) keeps its share busy
//    and runs at share / load of its speed; a time-sliced task is not
//    limited (nothing caps it in this model);
//  - co-location (Factor), per GPU mode:
//    - whole GPUs and MIG instances: isolated, no slowdown;
//    - time-slicing: with two or more tasks, the context-switch overhead
//      (SharingCosts::time_slice_overhead), and when their loads add up to
//      more than the GPU (sum > 1) each runs at 1/sum of its speed;
//    - MPS: kernels run concurrently, so no switch overhead, but the same
//      1/sum slowdown when together they want more than the GPU.
// A task's speed relative to running alone on whole GPUs is the product of
// the two; Factor is the minimum over its GPUs. The busy GPUs are the sum
// over GPUs of min(1, load), with limited tasks counted at their share.
#pragma once

#include <cstdint>
#include <unordered_map>
#include <utility>
#include <vector>

#include "src/engine/event.h"
#include "src/model/cluster.h"
#include "src/sim/scenario.h"

namespace gpupool {

// The speed, relative to an unlimited GPU, of a task that wants `load` of a
// GPU on a share limited to `limit` (a MIG instance's compute slices, an MPS
// share's active threads): limit / load when it wants more, else 1. Both in
// fractions of one GPU; a `limit` of 1 or more, or a load of 0, is no limit.
double ShareLimitSpeed(double load, double limit);

class GpuLoad {
 public:
  // `cluster` (the engine's) tells each GPU's mode; it must outlive this.
  GpuLoad(const Cluster* cluster, SharingCosts costs) : cluster_(cluster), costs_(costs) {}

  // `job` starts (Add) or stops (Remove) computing on the GPUs of `at`;
  // `load` is what it keeps busy there (already limited to its share when
  // it has one: see ShareLimitSpeed). Both return every other job on those
  // GPUs, sorted: their factors may have changed.
  std::vector<JobId> Add(JobId job, const std::vector<PlacedReplica>& at, double load);
  std::vector<JobId> Remove(JobId job, const std::vector<PlacedReplica>& at);

  // Speed relative to running without co-located tasks, in (0, 1].
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
