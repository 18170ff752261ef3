// The evaluation protocol of the FGD paper (ATC'23), as its public simulator
// runs it (see ../shared/traces/alibaba-gpu-2023/PROTOCOL.md):
//
//  1. The pods are sorted by name and shuffled with the run's seed.
//  2. Inflation to `tune_ratio` x the cluster's GPU capacity: while the total
//     GPU request is below the target, a pod drawn uniformly (with
//     replacement) from the name-sorted original list is appended, and the
//     loop stops at the first draw whose per-GPU milli would pass the target
//     (the published simulator's rule, so a CPU-only draw never stops it and
//     a multi-GPU draw may overshoot by up to 7 GPUs); above the target,
//     uniformly drawn pods are removed until it is met.
//  3. A random node rank is drawn (the tie-break order of the whole run).
//  4. Pods are placed one at a time, never retried, never removed.
//  5. After every pod (placed or not) the allocated GPU milli, the arrived
//     GPU milli (all pods submitted so far), and the fragmentation amount and
//     ratio over the typical demands are recorded.
//  6. Records are binned by arrived workload in whole percent of cluster GPU
//     capacity, 0..130: bin = round-half-even(arrived_milli / gpus / 10); a
//     bin's value is the mean of its records (each rounded to 0.01 as the
//     published analysis does), falling back to the records of bins k-1..k+1
//     when bin k has none; NaN when still empty.
//
// Typical demands are computed once from the original list and shared by
// every run over it.
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "src/base/status.h"
#include "src/model/cluster.h"
#include "src/sched/fragmentation.h"
#include "src/sched/policy.h"
#include "src/sched/scheduler.h"
#include "src/sched/target_workload.h"
#include "src/config/alibaba_gpu_trace.h"
#include "src/sched/workload_learner.h"

namespace gpupool {

inline constexpr int kFgdBins = 131;  // arrived workload 0..130 %

struct FgdRunOptions {
  double tune_ratio = 1.3;
  uint64_t seed = 42;
  // Called after every pod with its demand, whether it was placed, the
  // arrived GPU milli so far, and the cluster after the pod. For analysis
  // tools and tests; may be empty.
  std::function<void(const Demand&, bool placed, int64_t arrived_milli, const Cluster&)> on_pod;
};

struct FgdRunResult {
  std::string policy;
  uint64_t seed = 0;
  std::array<double, kFgdBins> allocated_pct{};       // allocation ratio, % of cluster GPU milli
  std::array<double, kFgdBins> frag_pct{};            // fragmentation amount, % of cluster GPUs
  std::array<double, kFgdBins> frag_ratio_pct{};      // fragmentation / idle GPU milli, %
  int64_t pods_submitted = 0;
  int64_t pods_failed = 0;
  double wall_seconds = 0;
  // Placement record, for determinism checks: node index (or -1) and GPU mask
  // of every submitted pod, in order.
  std::vector<std::pair<int32_t, uint16_t>> placements;
};

// Runs one (policy, seed). `pods` is the original list in any order;
// `target` must have been computed from it. Fails when the policy cannot be built or
// the workload asks for no GPU at all (inflation could not end).
Result<FgdRunResult> RunFgdProtocol(const std::vector<NodeSpec>& nodes, const std::vector<TracePod>& pods,
                                    const TargetWorkload& target, const PolicySpec& policy,
                                    const FgdRunOptions& options);

// The same with no knowledge of the pod list: the policy's target is
// learned from the pods as they arrive (WorkloadLearner, one arrival a
// second, cluster totals the run's), as a live pool learns it. `frag` is
// the measure the figures report (the paper's: the pod list's typical
// demands), not what the policy sees.
Result<FgdRunResult> RunFgdProtocolLearning(const std::vector<NodeSpec>& nodes, const std::vector<TracePod>& pods,
                                            const FragmentationModel& frag, const PolicySpec& policy,
                                            const WorkloadLearningConfig& learning, const FgdRunOptions& options);

// The protocol with any placement procedure: `start` is called once with
// the run's empty cluster, the node ranks and the run's Rng (after the
// workload draws); `place` is called for each pod and returns where it goes
// (the runner applies it) or nullopt. For placement research and tests.
using FgdStartFn = std::function<void(const Cluster&, std::vector<int32_t> node_rank, Rng& rng)>;
using FgdPlaceFn = std::function<std::optional<Placement>(const Demand&)>;
Result<FgdRunResult> RunFgdProtocolWith(const std::vector<NodeSpec>& nodes, const std::vector<TracePod>& pods,
                                        const FragmentationModel& frag, const FgdRunOptions& options,
                                        const FgdStartFn& start, const FgdPlaceFn& place);

// Seed means over runs of one policy.
struct FgdPolicySummary {
  std::string policy;
  std::vector<uint64_t> seeds;
  std::array<double, kFgdBins> allocated_pct{};  // seed mean per bin
  double unallocated_pct_at_100 = 0;
  double unallocated_pct_sd_at_100 = 0;  // sample standard deviation over seeds
  double fragmentation_pct_at_100 = 0;
  double fragmentation_ratio_pct_at_100 = 0;
  double pods_failed_mean = 0;
  double wall_seconds = 0;  // sum over the policy's runs
};

FgdPolicySummary SummarizeFgdRuns(const std::vector<FgdRunResult>& runs);

}  // namespace gpupool
