#include "src/sched/workload_learner.h"

#include <algorithm>
#include <cmath>
#include <string>

namespace gpupool {
namespace {

constexpr double kMaxReferenceHalfLives = 64;  // the stored scale stays below 2^64

std::string ShapeName(const LearnedShape& s) {
  return "(cpu_milli " + std::to_string(std::get<0>(s)) + ", gpu_milli " + std::to_string(std::get<1>(s)) +
         ", gpu_count " + std::to_string(std::get<2>(s)) + ")";
}

Status CheckWeights(const std::map<LearnedShape, double>& weights, const std::string& field) {
  if (weights.size() > static_cast<size_t>(kMaxLearnedShapes)) {
    return InvalidArgument(field + ": " + std::to_string(weights.size()) + " shapes, at most " +
                           std::to_string(kMaxLearnedShapes));
  }
  for (const auto& [shape, weight] : weights) {
    if (!std::isfinite(weight) || weight < 0) {
      return InvalidArgument(field + ": shape " + ShapeName(shape) + " has weight " + std::to_string(weight) +
                             " (must be finite and not negative)");
    }
    if (auto ok = ValidateDemand(DemandOfShape(shape)); !ok) {
      return InvalidArgument(field + ": shape " + ShapeName(shape) + ": " + ok.error().message);
    }
  }
  return {};
}

}  // namespace

std::vector<Demand> DefaultWorkloadPrior() {
  std::vector<Demand> prior;
  for (int32_t milli : {250, 500}) prior.push_back(Demand{4000, 16384, 1, milli});
  for (int32_t gpus : {1, 1, 2, 4, 8}) prior.push_back(Demand{8000 * gpus, 65536LL * gpus, gpus, kMilliPerGpu});
  return prior;
}

Status CheckWorkloadLearningConfig(const WorkloadLearningConfig& c) {
  if (c.half_life <= Duration(0)) return InvalidArgument("half_life: must be positive");
  if (c.refresh_every <= Duration(0)) return InvalidArgument("refresh_every: must be positive");
  if (!std::isfinite(c.prior_weight) || c.prior_weight <= 0) {
    return InvalidArgument("prior_weight: must be a positive number");
  }
  if (c.warmup_arrivals < 1 || c.warmup_arrivals > 1'000'000) {
    return InvalidArgument("warmup_arrivals: must be in [1, 1000000] (got " + std::to_string(c.warmup_arrivals) +
                           ")");
  }
  bool any_gpu = c.prior.empty();
  for (size_t i = 0; i < c.prior.size(); ++i) {
    if (auto ok = ValidateDemand(c.prior[i]); !ok) {
      return InvalidArgument("prior[" + std::to_string(i) + "]." + ok.error().message);
    }
    any_gpu |= c.prior[i].gpu_count > 0;
  }
  if (!any_gpu) return InvalidArgument("prior: needs at least one GPU demand");
  return {};
}

LearnedShape ShapeOf(const Demand& d) { return {d.cpu_milli, d.gpu_milli, d.gpu_count, d.allowed_models}; }

Demand DemandOfShape(const LearnedShape& s) {
  Demand d;
  d.cpu_milli = std::get<0>(s);
  d.gpu_milli = std::get<1>(s);
  d.gpu_count = std::get<2>(s);
  d.allowed_models = std::get<3>(s);
  return d;
}

void WorkloadLearner::Configure(const WorkloadLearningConfig& c) {
  half_life_ = c.half_life;
  warmup_arrivals_ = c.warmup_arrivals;
  refresh_every_ = c.refresh_every;
}

double WorkloadLearner::ScaleAt(Instant t) const {
  return std::exp2(static_cast<double>((t - image_.reference).count()) / static_cast<double>(half_life_.count()));
}

void WorkloadLearner::MoveReference(Instant now) {
  const double scale = 1.0 / ScaleAt(now);
  for (auto it = image_.weights.begin(); it != image_.weights.end();) {
    it->second *= scale;
    it = it->second > 0 ? std::next(it) : image_.weights.erase(it);  // underflowed: forgotten
  }
  image_.reference = now;
}

void WorkloadLearner::ForgetLightest() {
  auto lightest = image_.weights.begin();
  for (auto it = image_.weights.begin(); it != image_.weights.end(); ++it) {
    if (it->second <= lightest->second) lightest = it;  // ties: the larger shape goes
  }
  image_.weights.erase(lightest);
}

bool WorkloadLearner::Observe(std::span<const Demand> replicas, Instant now, int64_t cluster_cpu_milli,
                              int64_t cluster_gpu_milli) {
  now = std::max(now, image_.built_at);
  if (image_.weights.empty()) {
    image_.reference = now;
  } else if (now - image_.reference > half_life_ * kMaxReferenceHalfLives) {
    MoveReference(now);
  }
  const double weight = ScaleAt(now);
  const size_t n = std::min(replicas.size(), static_cast<size_t>(kLearnedReplicasPerJob));
  for (size_t r = 0; r < n; ++r) {
    image_.weights[ShapeOf(replicas[r])] += weight;
    if (image_.weights.size() > static_cast<size_t>(kMaxLearnedShapes)) ForgetLightest();
  }
  ++image_.arrivals;
  ++image_.arrivals_since_build;
  if (!RefreshDue(now)) return false;
  Rebuild(now, cluster_cpu_milli, cluster_gpu_milli);
  return true;
}

bool WorkloadLearner::RefreshDue(Instant now) const {
  if (image_.builds == 0 || now - image_.built_at >= refresh_every_) return true;
  const int64_t a = image_.arrivals;
  return a <= warmup_arrivals_ && (a & (a - 1)) == 0;  // 1, 2, 4, ...: learn fast at first
}

void WorkloadLearner::Rebuild(Instant now, int64_t cluster_cpu_milli, int64_t cluster_gpu_milli) {
  const double scale = 1.0 / ScaleAt(now);
  image_.built.clear();
  for (const auto& [shape, weight] : image_.weights) image_.built.emplace(shape, weight * scale);
  image_.built_at = now;
  image_.built_cpu_milli = cluster_cpu_milli;
  image_.built_gpu_milli = cluster_gpu_milli;
  image_.arrivals_since_build = 0;
  ++image_.builds;
}

std::vector<WeightedDemand> WorkloadLearner::BuiltWorkload(std::span<const Demand> prior, double prior_weight) const {
  std::vector<WeightedDemand> out;
  out.reserve(prior.size() + image_.built.size());
  for (const Demand& d : prior) out.push_back({d, prior_weight / static_cast<double>(prior.size())});
  for (const auto& [shape, weight] : image_.built) out.push_back({DemandOfShape(shape), weight});
  return out;
}

Result<TargetWorkload> WorkloadLearner::BuildTarget(std::span<const Demand> prior, double prior_weight) const {
  const std::vector<WeightedDemand> workload = BuiltWorkload(prior, prior_weight);
  return TargetWorkloadOf(workload, image_.built_cpu_milli, image_.built_gpu_milli);
}

Result<WorkloadLearner> WorkloadLearner::FromImage(WorkloadLearnerImage image) {
  GP_TRY(CheckWeights(image.weights, "weights"));
  GP_TRY(CheckWeights(image.built, "built"));
  if (image.arrivals < 0 || image.arrivals_since_build < 0 || image.arrivals_since_build > image.arrivals) {
    return InvalidArgument("arrivals: " + std::to_string(image.arrivals) + " in all and " +
                           std::to_string(image.arrivals_since_build) + " since the last rebuild");
  }
  if (image.built_cpu_milli < 0 || image.built_gpu_milli < 0) {
    return InvalidArgument("built_cpu_milli, built_gpu_milli: must not be negative");
  }
  WorkloadLearner learner;
  learner.image_ = std::move(image);
  return learner;
}

}  // namespace gpupool
