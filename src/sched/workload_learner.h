// The workload the placement policies serve, learned online from the jobs
// that have arrived so far (issue 16: no policy may know future arrivals).
//
// FGD and FGD+ score a placement against a target workload (their typical
// demands and share prices, TargetWorkload). A live pool cannot know the
// jobs it will be sent, so the simulator and the daemon both learn it the
// same way, here:
//  - every arriving job adds its replica demands (up to
//    kLearnedReplicasPerJob of them) to a histogram of shapes (CPU, GPU
//    count, GPU milli, allowed models; what the target reads);
//  - weights decay exponentially with the arrival time: a shape seen
//    `half_life` ago counts half as much as one seen now (a sliding window
//    with a soft edge);
//  - the prior (WorkloadLearningConfig::prior, by default
//    DefaultWorkloadPrior: the typical shapes of a shared GPU cluster) is
//    worth `prior_weight` arrivals at every moment: it dominates a pool
//    that has seen few jobs recently and fades in one that sees many;
//  - the target is rebuilt from the histogram at the arrivals numbered 1,
//    2, 4, ... up to warmup_arrivals (learning fast at first), then at the
//    first arrival once refresh_every has passed since the last rebuild (a
//    rebuild rescores every node, so its rate is bounded by time, not by
//    the arrival rate). A rebuild freezes the histogram as it was
//    (`built`), so that an engine restored from a snapshot places as the
//    one that wrote it did.
// Everything here is a function of the arrivals (their demands and times)
// and the cluster's totals at each rebuild: replaying a journal rebuilds
// it exactly. The prior and the four numbers are configuration, not state.
//
// Thread-safety: none; owned by EngineState.
#pragma once

#include <cstdint>
#include <map>
#include <span>
#include <tuple>
#include <vector>

#include "src/base/status.h"
#include "src/base/time.h"
#include "src/model/demand.h"
#include "src/sched/fragmentation.h"
#include "src/sched/target_workload.h"

namespace gpupool {

inline constexpr int kLearnedReplicasPerJob = 64;  // a gang's first replicas stand for the rest
inline constexpr int kMaxLearnedShapes = 1024;     // beyond it the lightest shape is forgotten

struct WorkloadLearningConfig {
  Duration half_life = std::chrono::hours(6);  // a day-old arrival counts 1/16
  double prior_weight = 50;                    // the prior counts as this many arrivals
  int32_t warmup_arrivals = 64;
  Duration refresh_every = std::chrono::minutes(5);
  std::vector<Demand> prior;  // empty: DefaultWorkloadPrior()
};

// The typical shapes of a shared GPU cluster before any job is known:
// quarter and half GPU shares (4 cores, 16 GiB) and 1, 1, 2, 4 and 8 whole
// GPUs (8 cores and 64 GiB a GPU).
std::vector<Demand> DefaultWorkloadPrior();

// The error names the field: half_life and refresh_every positive,
// prior_weight finite and > 0, warmup_arrivals in [1, 1,000,000], prior
// demands valid (Demand::Validate) with at least one GPU demand.
Status CheckWorkloadLearningConfig(const WorkloadLearningConfig& c);

// The shape key: (cpu_milli, gpu_milli, gpu_count, allowed_models).
using LearnedShape = std::tuple<int64_t, int32_t, int32_t, GpuModelMask>;
LearnedShape ShapeOf(const Demand& d);
Demand DemandOfShape(const LearnedShape& s);

// What a snapshot holds (src/engine/snapshot.cc writes it field by field).
struct WorkloadLearnerImage {
  // Weights are stored scaled to `reference` (a weight w added at time t
  // is stored as w * 2^((t - reference) / half_life)), so that decaying
  // never touches every entry; the reference moves forward, rescaling
  // everything, when the scale would grow past 2^64.
  std::map<LearnedShape, double> weights;
  Instant reference{};
  int64_t arrivals = 0;              // jobs seen
  int64_t arrivals_since_build = 0;  // since the last rebuild
  // The last rebuild: the histogram's weights as of `built_at` (decayed to
  // it, not scaled), the cluster's totals then, and a counter.
  std::map<LearnedShape, double> built;
  Instant built_at{};
  int64_t built_cpu_milli = 0, built_gpu_milli = 0;
  uint64_t builds = 0;
};

class WorkloadLearner {
 public:
  WorkloadLearner() = default;

  // The numbers that govern decay and rebuilds (configuration: an
  // EngineState gets them from the Engine, not from a snapshot).
  void Configure(const WorkloadLearningConfig& c);

  // One arriving job with its replicas' demands, at `now` (not before the
  // previous arrival; an earlier time counts as that arrival's). Rebuilds
  // `built` when a refresh is due, with the cluster's current totals.
  // Returns whether it did.
  bool Observe(std::span<const Demand> replicas, Instant now, int64_t cluster_cpu_milli, int64_t cluster_gpu_milli);

  // The target of the last rebuild with `prior` worth prior_weight arrivals
  // beside it (only the prior before the first rebuild); coverage as in
  // TargetWorkloadOf.
  Result<TargetWorkload> BuildTarget(std::span<const Demand> prior, double prior_weight) const;
  // The weighted workload BuildTarget uses: the prior's entries (each
  // prior_weight / prior.size()) then the built histogram's.
  std::vector<WeightedDemand> BuiltWorkload(std::span<const Demand> prior, double prior_weight) const;

  uint64_t builds() const { return image_.builds; }
  int64_t arrivals() const { return image_.arrivals; }
  const WorkloadLearnerImage& image() const { return image_; }
  // Validates (finite, non-negative weights; shapes Demand::Validate
  // accepts; at most kMaxLearnedShapes; counts not negative); the error
  // names the field.
  static Result<WorkloadLearner> FromImage(WorkloadLearnerImage image);

 private:
  bool RefreshDue(Instant now) const;
  void Rebuild(Instant now, int64_t cluster_cpu_milli, int64_t cluster_gpu_milli);
  void MoveReference(Instant now);
  void ForgetLightest();
  double ScaleAt(Instant t) const;  // 2^((t - reference) / half_life)

  Duration half_life_ = std::chrono::hours(6);
  int32_t warmup_arrivals_ = 64;
  Duration refresh_every_ = std::chrono::minutes(5);
  WorkloadLearnerImage image_;
};

}  // namespace gpupool
