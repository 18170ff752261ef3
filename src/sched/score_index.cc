#include "src/sched/score_index.h"

#include "src/base/check.h"

namespace gpupool {

size_t ScoreIndex::DemandHash::operator()(const Demand& d) const {
  uint64_t h = 0xcbf29ce484222325ULL;
  auto mix = [&h](uint64_t v) {
    h ^= v;
    h *= 0x100000001b3ULL;
    h ^= h >> 29;
  };
  mix(static_cast<uint64_t>(d.cpu_milli));
  mix(static_cast<uint64_t>(d.memory_mib));
  mix(static_cast<uint64_t>(d.gpu_count) << 32 | static_cast<uint32_t>(d.gpu_milli));
  mix(d.allowed_models);
  return static_cast<size_t>(h);
}

ScoreIndex::ScoreIndex(const Cluster* cluster, const Policy* policy, const std::vector<int32_t>* node_rank)
    : cluster_(cluster), policy_(policy), node_rank_(node_rank) {
  GP_CHECK(policy->node_local()) << "policy " << policy->name << " cannot be indexed";
  GP_CHECK(static_cast<int>(node_rank->size()) == cluster->node_count());
  node_of_rank_.assign(node_rank->size(), -1);
  for (size_t i = 0; i < node_rank->size(); ++i) node_of_rank_[(*node_rank)[i]] = static_cast<NodeIndex>(i);
}

void ScoreIndex::Refresh(Shape& s, NodeIndex i) {
  const Node& n = cluster_->node(i);
  const int32_t rank = (*node_rank_)[i];
  const int64_t old_score = s.score[i];
  const int64_t new_score = CheckFit(n, s.demand) == FitFailure::kNone ? policy_->Score(n, s.demand) : kInfeasible;
  if (old_score == new_score) return;
  if (old_score != kInfeasible) s.ranked.erase({-old_score, rank});
  if (new_score != kInfeasible) s.ranked.insert({-new_score, rank});
  s.score[i] = new_score;
}

void ScoreIndex::Rebuild(Shape& s) {
  const int n = cluster_->node_count();
  s.ranked.clear();
  s.score.assign(n, kInfeasible);
  s.stamp.assign(n, 0);
  for (NodeIndex i = 0; i < n; ++i) Refresh(s, i);
  s.cursor = cluster_->change_log_end();
  s.built = true;
}

std::optional<std::pair<NodeIndex, int64_t>> ScoreIndex::Best(const Demand& d) {
  auto [it, inserted] = shape_of_.try_emplace(d, static_cast<int>(shapes_.size()));
  if (inserted) {
    shapes_.emplace_back();
    shapes_.back().demand = d;
  }
  Shape& s = shapes_[it->second];
  const uint64_t end = cluster_->change_log_end();
  const uint64_t pending = end - s.cursor;
  if (!s.built || s.cursor < cluster_->change_log_base() || pending > static_cast<uint64_t>(cluster_->node_count())) {
    Rebuild(s);
  } else if (pending > 0) {
    if (++s.round == 0) {  // stamps wrapped: clear them
      std::fill(s.stamp.begin(), s.stamp.end(), 0);
      s.round = 1;
    }
    for (uint64_t seq = s.cursor; seq < end; ++seq) {
      const NodeIndex i = cluster_->changed_node(seq);
      if (s.stamp[i] == s.round) continue;
      s.stamp[i] = s.round;
      Refresh(s, i);
    }
    s.cursor = end;
  }
  if (s.ranked.empty()) return std::nullopt;
  const auto& [neg_score, rank] = *s.ranked.begin();
  return std::make_pair(node_of_rank_[rank], -neg_score);
}

}  // namespace gpupool
