// Per-demand-shape ranking of nodes, refreshed only where the cluster changed.
//
// For every distinct demand shape seen, the index keeps the feasible nodes
// ordered by (policy score descending, node rank ascending), so the best node
// is the first entry. When a node changes (Cluster's change log), only that
// node's entry is recomputed, and only when a demand of that shape is next
// scheduled. A shape whose reader fell behind the change log (or that is new)
// is rebuilt by scoring every node once.
//
// Cost per decision: O(changed nodes since this shape was last asked, each
// scored once, times log N) instead of scoring all N nodes.
//
// Requires a node-local policy (Policy::node_local()). Not thread-safe.
#pragma once

#include <cstdint>
#include <optional>
#include <set>
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

 private:
  static constexpr int64_t kInfeasible = INT64_MIN;

  struct Shape {
    Demand demand;
    // (-score, rank) of each feasible node; begin() is the best.
    std::set<std::pair<int64_t, int32_t>> ranked;
    std::vector<int64_t> score;   // per node; kInfeasible when it does not fit
    std::vector<uint32_t> stamp;  // refresh round that last saw the node
    uint32_t round = 0;
    uint64_t cursor = 0;          // change log position read up to
    bool built = false;
  };

  struct DemandHash {
    size_t operator()(const Demand& d) const;
  };

  void Rebuild(Shape& s);
  void Refresh(Shape& s, NodeIndex i);

  const Cluster* cluster_;
  const Policy* policy_;
  const std::vector<int32_t>* node_rank_;
  std::vector<NodeIndex> node_of_rank_;
  std::unordered_map<Demand, int, DemandHash> shape_of_;
  std::vector<Shape> shapes_;
};

}  // namespace gpupool
