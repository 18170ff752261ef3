#include "src/sched/scheduler.h"

#include <algorithm>
#include <numeric>

#include "src/base/check.h"

namespace gpupool {

std::string Rejection::Describe() const {
  std::string out = "no node fits:";
  bool first = true;
  for (int r = 1; r < kFitFailureCount; ++r) {
    if (nodes_by_reason[r] == 0) continue;
    out += first ? " " : ", ";
    first = false;
    out += std::to_string(nodes_by_reason[r]) + (nodes_by_reason[r] == 1 ? " node " : " nodes ") +
           FitFailureName(static_cast<FitFailure>(r));
  }
  if (first) out += " the cluster has no nodes";
  return out;
}

std::vector<int32_t> RandomRanks(int n, Rng& rng) {
  std::vector<int32_t> ranks(n);
  std::iota(ranks.begin(), ranks.end(), 0);
  rng.Shuffle(std::span<int32_t>(ranks));
  return ranks;
}

Scheduler::Scheduler(const Cluster* cluster, const Policy* policy, std::vector<int32_t> node_rank, Rng* rng)
    : cluster_(cluster), policy_(policy), node_rank_(std::move(node_rank)), rng_(rng) {
  GP_CHECK(static_cast<int>(node_rank_.size()) == cluster_->node_count())
      << node_rank_.size() << " ranks for " << cluster_->node_count() << " nodes";
  if (!policy_->random_node && policy_->node_local()) {
    index_ = std::make_unique<ScoreIndex>(cluster_, policy_, &node_rank_);
  }
}

Rejection Scheduler::Explain(const Demand& d) const {
  Rejection r;
  for (const Node& n : cluster_->nodes()) ++r.nodes_by_reason[static_cast<int>(policy_->Feasibility(n, d))];
  return r;
}

std::vector<int32_t> StableRanks(int n, uint64_t seed) {
  std::vector<std::pair<uint64_t, int32_t>> keys(n);
  for (int i = 0; i < n; ++i) keys[i] = {Rng(seed ^ (0x9e3779b97f4a7c15ULL * static_cast<uint64_t>(i + 1))).Next(), i};
  std::sort(keys.begin(), keys.end());
  std::vector<int32_t> ranks(n);
  for (int pos = 0; pos < n; ++pos) ranks[keys[pos].second] = pos;
  return ranks;
}

std::optional<std::pair<NodeIndex, int64_t>> Scheduler::ScanBest(const Demand& d,
                                                                  const std::function<bool(NodeIndex)>* allowed) {
  std::optional<std::pair<NodeIndex, int64_t>> best;
  for (NodeIndex i = 0; i < cluster_->node_count(); ++i) {
    if (allowed && !(*allowed)(i)) continue;
    const Node& n = cluster_->node(i);
    if (policy_->Feasibility(n, d) != FitFailure::kNone) continue;
    const int64_t s = policy_->Score(n, d);
    if (!best || s > best->second || (s == best->second && node_rank_[i] < node_rank_[best->first])) {
      best = {i, s};
    }
  }
  return best;
}

std::optional<NodeIndex> Scheduler::RandomFeasible(const Demand& d) {
  feasible_scratch_.clear();
  for (NodeIndex i = 0; i < cluster_->node_count(); ++i) {
    if (policy_->Feasibility(cluster_->node(i), d) == FitFailure::kNone) feasible_scratch_.push_back(i);
  }
  if (feasible_scratch_.empty()) return std::nullopt;
  if (feasible_scratch_.size() == 1) return feasible_scratch_[0];
  return feasible_scratch_[rng_->Below(feasible_scratch_.size())];
}

std::optional<Placement> Scheduler::Schedule(const Demand& d) {
  if (policy_->random_node) {
    auto node = RandomFeasible(d);
    if (!node) return std::nullopt;
    return Finish(d, std::make_pair(*node, int64_t{0}));
  }
  return Finish(d, index_ ? index_->Best(d) : ScanBest(d));
}

std::optional<Placement> Scheduler::ScheduleWhere(const Demand& d, const std::function<bool(NodeIndex)>& allowed) {
  return Finish(d, ScanBest(d, &allowed));
}

std::optional<Placement> Scheduler::Finish(const Demand& d, std::optional<std::pair<NodeIndex, int64_t>> best) {
  if (!best) return std::nullopt;
  Placement p;
  p.node = best->first;
  p.score = best->second;
  const Node& n = cluster_->node(p.node);
  if (d.gpu_count > 0) p.gpus = policy_->gpu_selector->Select(n, d, *rng_);
  GP_CHECK(GpusSatisfy(n, d, p.gpus)) << "selector " << policy_->gpu_selector->name() << " chose GPUs " << p.gpus
                                      << " that do not satisfy the demand on " << cluster_->node_name(p.node);
  return p;
}

}  // namespace gpupool
