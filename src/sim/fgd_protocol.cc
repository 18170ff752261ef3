#include "src/sim/fgd_protocol.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <limits>
#include <numeric>

#include "src/base/check.h"
#include "src/sched/scheduler.h"
#include <memory>

namespace gpupool {
namespace {

double RoundHalfEven(double x) { return std::nearbyint(x); }  // default rounding mode: to nearest, ties even
double Round2(double x) { return std::nearbyint(x * 100.0) / 100.0; }

struct Record {
  int bin;
  double allocated_pct;  // rounded to 0.01
  double frag_milli;
  double frag_ratio_pct;  // rounded to 0.01
};

// Inflates (or trims) the shuffled list to the target, as the file comment of
// fgd_protocol.h describes.
std::vector<const TracePod*> BuildArrivals(const std::vector<const TracePod*>& sorted, int64_t cluster_gpu_milli,
                                           double tune_ratio, Rng& rng) {
  std::vector<const TracePod*> arrivals = sorted;
  rng.Shuffle(std::span<const TracePod*>(arrivals));
  int64_t total = 0;
  for (const TracePod* p : arrivals) total += p->demand.total_gpu_milli();
  const double target = tune_ratio * static_cast<double>(cluster_gpu_milli);
  if (static_cast<double>(total) < target) {
    while (true) {
      const TracePod* p = sorted[rng.Below(sorted.size())];
      if (static_cast<double>(total + p->demand.gpu_milli) > target) break;
      total += p->demand.total_gpu_milli();
      arrivals.push_back(p);
    }
  } else {
    while (static_cast<double>(total) > target) {
      const size_t i = rng.Below(arrivals.size());
      total -= arrivals[i]->demand.total_gpu_milli();
      arrivals.erase(arrivals.begin() + static_cast<std::ptrdiff_t>(i));
    }
  }
  return arrivals;
}

}  // namespace

Result<FgdRunResult> RunFgdProtocol(const std::vector<NodeSpec>& nodes, const std::vector<TracePod>& pods,
                                    const TargetWorkload& target, const PolicySpec& policy_spec,
                                    const FgdRunOptions& options) {
  GP_ASSIGN_OR_RETURN(auto policy, BuildPolicy(policy_spec, target.deps()));
  std::unique_ptr<Scheduler> scheduler;
  auto result = RunFgdProtocolWith(
      nodes, pods, target.frag, options,
      [&](const Cluster& cluster, std::vector<int32_t> ranks, Rng& rng) {
        scheduler = std::make_unique<Scheduler>(&cluster, &policy, std::move(ranks), &rng);
      },
      [&](const Demand& d) { return scheduler->Schedule(d); });
  if (result) result->policy = policy_spec.name;
  return result;
}

Result<FgdRunResult> RunFgdProtocolLearning(const std::vector<NodeSpec>& nodes, const std::vector<TracePod>& pods,
                                            const FragmentationModel& frag, const PolicySpec& policy_spec,
                                            const WorkloadLearningConfig& learning, const FgdRunOptions& options) {
  GP_TRY(CheckWorkloadLearningConfig(learning));
  const std::vector<Demand> prior = learning.prior.empty() ? DefaultWorkloadPrior() : learning.prior;
  int64_t cluster_cpu = 0, cluster_gpu = 0;
  for (const NodeSpec& n : nodes) {
    cluster_cpu += n.cpu_milli;
    cluster_gpu += int64_t{n.gpu_count} * kMilliPerGpu;
  }
  WorkloadLearner learner;
  learner.Configure(learning);
  TargetWorkload target;
  Policy policy;
  const Cluster* cluster = nullptr;
  std::vector<int32_t> ranks;
  Rng* rng = nullptr;
  std::unique_ptr<Scheduler> scheduler;
  auto rebuild = [&]() -> Status {
    GP_ASSIGN_OR_RETURN(target, learner.BuildTarget(prior, learning.prior_weight));
    GP_ASSIGN_OR_RETURN(policy, BuildPolicy(policy_spec, target.deps()));
    scheduler = std::make_unique<Scheduler>(cluster, &policy, ranks, rng);
    return {};
  };
  Status status;  // a rebuild's failure ends the run (no pod placed after it)
  int64_t arrival = 0;
  auto result = RunFgdProtocolWith(
      nodes, pods, frag, options,
      [&](const Cluster& c, std::vector<int32_t> r, Rng& g) {
        cluster = &c;
        ranks = std::move(r);
        rng = &g;
        status = rebuild();
      },
      [&](const Demand& d) -> std::optional<Placement> {
        const Instant now = InstantFromMillis(1000 * arrival++);
        if (status && learner.Observe(std::span<const Demand>(&d, 1), now, cluster_cpu, cluster_gpu)) {
          status = rebuild();
        }
        if (!status) return std::nullopt;
        return scheduler->Schedule(d);
      });
  if (!status) return std::unexpected(status.error());
  if (result) result->policy = policy_spec.name;
  return result;
}

Result<FgdRunResult> RunFgdProtocolWith(const std::vector<NodeSpec>& nodes, const std::vector<TracePod>& pods,
                                        const FragmentationModel& frag, const FgdRunOptions& options,
                                        const FgdStartFn& start, const FgdPlaceFn& place) {
  const auto started = std::chrono::steady_clock::now();

  Cluster cluster;
  for (const NodeSpec& spec : nodes) {
    GP_TRY(cluster.AddNode(spec));
  }
  if (cluster.gpu_milli_total() == 0) return InvalidArgument("the cluster has no GPUs");

  std::vector<const TracePod*> sorted;
  sorted.reserve(pods.size());
  int64_t gpu_request = 0;
  for (const TracePod& p : pods) {
    sorted.push_back(&p);
    gpu_request += p.demand.total_gpu_milli();
  }
  if (gpu_request == 0) return InvalidArgument("the pod list requests no GPU: nothing to inflate");
  std::sort(sorted.begin(), sorted.end(), [](const TracePod* a, const TracePod* b) { return a->name < b->name; });

  Rng rng(options.seed);
  const std::vector<const TracePod*> arrivals =
      BuildArrivals(sorted, cluster.gpu_milli_total(), options.tune_ratio, rng);
  start(cluster, RandomRanks(cluster.node_count(), rng), rng);

  FgdRunResult result;
  result.seed = options.seed;
  result.placements.reserve(arrivals.size());

  // Fragmentation is kept per node and updated only where a pod landed.
  std::vector<double> node_frag(cluster.node_count());
  double frag_sum = 0;
  for (NodeIndex i = 0; i < cluster.node_count(); ++i) {
    node_frag[i] = frag.NodeFragMilli(cluster.node(i));
    frag_sum += node_frag[i];
  }

  const double gpus = static_cast<double>(cluster.gpu_count_total());
  std::vector<Record> records;
  records.reserve(arrivals.size());
  int64_t arrived = 0;
  for (const TracePod* pod : arrivals) {
    arrived += pod->demand.total_gpu_milli();
    const std::optional<Placement> placed = place(pod->demand);
    if (placed) {
      cluster.Allocate(placed->node, pod->demand, placed->gpus);
      const double updated = frag.NodeFragMilli(cluster.node(placed->node));
      frag_sum += updated - node_frag[placed->node];
      node_frag[placed->node] = updated;
      result.placements.emplace_back(placed->node, placed->gpus);
    } else {
      ++result.pods_failed;
      result.placements.emplace_back(-1, 0);
    }
    if (options.on_pod) options.on_pod(pod->demand, placed.has_value(), arrived, cluster);
    const double idle = static_cast<double>(cluster.gpu_milli_total() - cluster.gpu_milli_allocated());
    records.push_back(Record{
        static_cast<int>(RoundHalfEven(static_cast<double>(arrived) / gpus / 10.0)),
        Round2(static_cast<double>(cluster.gpu_milli_allocated()) / gpus / 10.0),
        frag_sum,
        idle > 0 ? Round2(100.0 * frag_sum / idle) : 0.0,
    });
  }
  result.pods_submitted = static_cast<int64_t>(arrivals.size());

  // Bin the records (see the header for the rule).
  struct Acc {
    double alloc = 0, frag = 0, ratio = 0;
    int n = 0;
  };
  std::vector<Acc> acc(kFgdBins + 2);
  for (const Record& r : records) {
    if (r.bin < 0 || r.bin > kFgdBins) continue;
    Acc& a = acc[r.bin];
    a.alloc += r.allocated_pct;
    a.frag += r.frag_milli;
    a.ratio += r.frag_ratio_pct;
    ++a.n;
  }
  const double nan = std::numeric_limits<double>::quiet_NaN();
  for (int k = 0; k < kFgdBins; ++k) {
    Acc sum = acc[k];
    if (sum.n == 0) {
      for (int j = std::max(0, k - 1); j <= k + 1; ++j) {
        sum.alloc += acc[j].alloc;
        sum.frag += acc[j].frag;
        sum.ratio += acc[j].ratio;
        sum.n += acc[j].n;
      }
    }
    if (sum.n == 0) {
      result.allocated_pct[k] = result.frag_pct[k] = result.frag_ratio_pct[k] = nan;
      continue;
    }
    result.allocated_pct[k] = Round2(sum.alloc / sum.n);
    result.frag_pct[k] = Round2(100.0 * (sum.frag / sum.n) / 1000.0 / gpus);
    result.frag_ratio_pct[k] = sum.ratio / sum.n;
  }
  result.wall_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  return result;
}

FgdPolicySummary SummarizeFgdRuns(const std::vector<FgdRunResult>& runs) {
  GP_CHECK(!runs.empty());
  FgdPolicySummary s;
  s.policy = runs[0].policy;
  const double n = static_cast<double>(runs.size());
  for (int k = 0; k < kFgdBins; ++k) {
    double sum = 0;
    for (const auto& r : runs) sum += r.allocated_pct[k];
    s.allocated_pct[k] = sum / n;
  }
  double unalloc_sum = 0, frag_sum = 0, ratio_sum = 0, failed = 0;
  for (const auto& r : runs) {
    s.seeds.push_back(r.seed);
    unalloc_sum += 100.0 - r.allocated_pct[100];
    frag_sum += r.frag_pct[100];
    ratio_sum += r.frag_ratio_pct[100];
    failed += static_cast<double>(r.pods_failed);
    s.wall_seconds += r.wall_seconds;
  }
  s.unallocated_pct_at_100 = unalloc_sum / n;
  double var = 0;
  for (const auto& r : runs) {
    const double d = (100.0 - r.allocated_pct[100]) - s.unallocated_pct_at_100;
    var += d * d;
  }
  s.unallocated_pct_sd_at_100 = runs.size() > 1 ? std::sqrt(var / (n - 1)) : 0.0;
  s.fragmentation_pct_at_100 = frag_sum / n;
  s.fragmentation_ratio_pct_at_100 = ratio_sum / n;
  s.pods_failed_mean = failed / n;
  return s;
}

}  // namespace gpupool
