// Per-demand-shape ranking of nodes, refreshed only where the cluster changed.
//
// For every distinct demand shape seen, the index keeps each node's policy
// score for that shape in a max tree laid out by node rank (leaf r = the
// node of rank r): the root holds the best score, and the best node is the
// leftmost leaf holding it, found by one descent. When a node
// changes (the Cluster's change log), only its leaf is recomputed, and only
// when a demand of that shape is next scheduled; the leaf's new key climbs
// the tree until an ancestor does not change. A shape whose reader fell
// behind the change log (or that is new) is rebuilt by scoring every node
// once.
//
// Cost per decision: for each node changed since this shape was last asked,
// one CheckFit, one policy score and O(log N) comparisons; then one O(log N)
// descent; no allocation. Memory per shape: 2 x next_pow2(N) x 4 bytes of
// tree (about 19 MB for 150 shapes on 10,000 nodes, so the hot part stays
// in cache). A node changed several times is refreshed once, at its latest
// change (Cluster::last_change_seq).
//
// Requires a node-local policy (Policy::node_local()) whose scores fit in
// 32 bits (checked). Not thread-safe.
#pragma once

#include <cstdint>
#include <optional>
#include <unordered_map>
#include <vector>

#include "src/model/cluster.h"
#include "src/sched/policy.h"

namespace gpupool {

class ScoreIndex {
 public:
  // `cluster` and `policy` must outlive the index; node_rank[i] is node i's
  // tie-break rank (lower wins), a permutation of 0..N-1.
  ScoreIndex(const Cluster* cluster, const Policy* policy, const std::vector<int32_t>* node_rank);

  // The best feasible node for `d` and its score, or nullopt when none fits.
  std::optional<std::pair<NodeIndex, int64_t>> Best(const Demand& d);

  int shape_count() const { return static_cast<int>(shapes_.size()); }

  // Scores the index can hold: [-kMaxScore, kMaxScore].
  static constexpr int64_t kMaxScore = INT32_MAX - 1;

 private:
  // Infeasible nodes hold kEmpty, below every score.
  static constexpr int32_t kEmpty = INT32_MIN;

  struct Shape {
    Demand demand;
    std::vector<int32_t> tree;    // 1-based heap layout; leaves at [leaves, 2*leaves)
    uint64_t cursor = 0;          // change log position read up to
    bool built = false;
  };

  struct DemandHash {
    size_t operator()(const Demand& d) const;
  };
  // A node no allocation has touched (its state is fixed by its spec).
  static bool IsPristine(const Node& n);

  // The policy's score of `n` for the shape, or kEmpty when it does not fit.
  int32_t ScoreOf(const Shape& s, const Node& n) const;
  void Rebuild(Shape& s);
  void Refresh(Shape& s, NodeIndex i);

  const Cluster* cluster_;
  const Policy* policy_;
  const std::vector<int32_t>* node_rank_;
  std::vector<NodeIndex> node_of_rank_;
  size_t leaves_ = 1;
  std::unordered_map<Demand, int, DemandHash> shape_of_;
  std::vector<Shape> shapes_;
};

}  // namespace gpupool
