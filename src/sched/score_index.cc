#include "src/sched/score_index.h"

#include <algorithm>

#include "src/base/check.h"

namespace gpupool {

bool ScoreIndex::IsPristine(const Node& n) {
  return n.cpu_milli_free == n.cpu_milli_total && n.memory_mib_free == n.memory_mib_total &&
         n.gpu_milli_free_total == n.gpu_milli_total() && n.gpu_kinds_present == 0 && n.cpu_only_residents == 0;
}

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
  mix(d.allowed_pools);
  mix(static_cast<uint64_t>(d.requirement) << 48 ^ static_cast<uint64_t>(d.reservation));
  mix(static_cast<uint64_t>(static_cast<uint32_t>(d.mps_tenant)));
  return static_cast<size_t>(h);
}

ScoreIndex::ScoreIndex(const Cluster* cluster, const Policy* policy, const std::vector<int32_t>* node_rank)
    : cluster_(cluster), policy_(policy), node_rank_(node_rank) {
  GP_CHECK(policy->node_local()) << "policy " << policy->name << " cannot be indexed";
  GP_CHECK(static_cast<int>(node_rank->size()) == cluster->node_count());
  node_of_rank_.assign(node_rank->size(), -1);
  for (size_t i = 0; i < node_rank->size(); ++i) node_of_rank_[(*node_rank)[i]] = static_cast<NodeIndex>(i);
  while (leaves_ < node_rank->size()) leaves_ <<= 1;
}

int32_t ScoreIndex::ScoreOf(const Shape& s, const Node& n) const {
  if (policy_->Feasibility(n, s.demand) != FitFailure::kNone) return kEmpty;
  const int64_t score = policy_->Score(n, s.demand);
  GP_CHECK(score >= -kMaxScore && score <= kMaxScore) << "policy " << policy_->name << " scored " << score;
  return static_cast<int32_t>(score);
}

void ScoreIndex::Refresh(Shape& s, NodeIndex i) {
  size_t pos = leaves_ + static_cast<size_t>((*node_rank_)[i]);
  const int32_t score = ScoreOf(s, cluster_->node(i));
  if (s.tree[pos] == score) return;
  s.tree[pos] = score;
  while (pos > 1) {
    pos >>= 1;
    const int32_t best = std::max(s.tree[2 * pos], s.tree[2 * pos + 1]);
    if (s.tree[pos] == best) break;  // the ancestors above are unchanged too
    s.tree[pos] = best;
  }
}

void ScoreIndex::Rebuild(Shape& s) {
  const int n = cluster_->node_count();
  s.tree.assign(2 * leaves_, kEmpty);
  // Nodes that were never touched score alike when their specs match: score
  // each distinct untouched spec once (a fresh cluster has only a handful).
  std::vector<std::pair<NodeIndex, int32_t>> pristine;
  for (NodeIndex i = 0; i < n; ++i) {
    const Node& node = cluster_->node(i);
    int32_t score = kEmpty;
    bool found = false;
    if (IsPristine(node)) {
      for (const auto& [j, sc] : pristine) {
        if (cluster_->node(j) == node) {
          score = sc;
          found = true;
          break;
        }
      }
    }
    if (!found) {
      score = ScoreOf(s, node);
      if (IsPristine(node) && pristine.size() < 64) pristine.emplace_back(i, score);
    }
    s.tree[leaves_ + static_cast<size_t>((*node_rank_)[i])] = score;
  }
  for (size_t pos = leaves_ - 1; pos >= 1; --pos) s.tree[pos] = std::max(s.tree[2 * pos], s.tree[2 * pos + 1]);
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
  } else {
    // A node changed several times since the last look needs one refresh:
    // at its latest entry in the window.
    for (uint64_t seq = s.cursor; seq < end; ++seq) {
      const NodeIndex i = cluster_->changed_node(seq);
      if (cluster_->last_change_seq(i) == seq) Refresh(s, i);
    }
    s.cursor = end;
  }
  const int32_t top = s.tree[1];
  if (top == kEmpty) return std::nullopt;
  size_t pos = 1;  // descend to the leftmost (lowest-rank) leaf holding the best score
  while (pos < leaves_) pos = s.tree[2 * pos] == top ? 2 * pos : 2 * pos + 1;
  return std::make_pair(node_of_rank_[pos - leaves_], int64_t{top});
}

}  // namespace gpupool
