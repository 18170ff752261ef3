// One placement decision at a time: Filter, PreScore, Score, select host,
// select GPUs (see src/sched/plugin.h for the extension points).
//
// The scheduler reads the cluster and never changes it: the caller applies a
// returned Placement with Cluster::Allocate (Reserve) and may undo it with
// Cluster::Release (Unreserve). Decisions are deterministic given the
// cluster, the policy, the node ranks and the Rng state.
//
// Thread-safety: none; one owner.
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "src/base/rng.h"
#include "src/model/cluster.h"
#include "src/sched/policy.h"
#include "src/sched/score_index.h"

namespace gpupool {

struct Placement {
  NodeIndex node = -1;
  GpuMask gpus = 0;
  int64_t score = 0;
};

// Why nothing fits: how many nodes failed each check (the first failing
// check per node).
struct Rejection {
  std::array<int32_t, kFitFailureCount> nodes_by_reason{};
  // "no node fits: 1200 nodes not enough free GPU, 13 nodes not enough free CPU"
  std::string Describe() const;
};

class Scheduler {
 public:
  // `cluster`, `policy` and `rng` must outlive the scheduler. node_rank[i] is
  // node i's tie-break rank (lower wins): a permutation of 0..N-1. Nodes
  // added to the cluster later are not supported (build a new scheduler).
  Scheduler(const Cluster* cluster, const Policy* policy, std::vector<int32_t> node_rank, Rng* rng);

  // The placement for `d`, or nullopt when no node fits. Why nothing fits is
  // not computed here (it costs a scan of every node): ask Explain.
  std::optional<Placement> Schedule(const Demand& d);

  // As Schedule, but only nodes for which `allowed(node)` holds are
  // considered (e.g. affinity to other jobs). Always a full scan.
  std::optional<Placement> ScheduleWhere(const Demand& d, const std::function<bool(NodeIndex)>& allowed);

  // Why `d` fits nowhere: the first failing check of every node. O(nodes).
  Rejection Explain(const Demand& d) const;

 private:
  std::optional<std::pair<NodeIndex, int64_t>> ScanBest(const Demand& d,
                                                       const std::function<bool(NodeIndex)>* allowed = nullptr);
  std::optional<Placement> Finish(const Demand& d, std::optional<std::pair<NodeIndex, int64_t>> best);
  std::optional<NodeIndex> RandomFeasible(const Demand& d);

  const Cluster* cluster_;
  const Policy* policy_;
  std::vector<int32_t> node_rank_;
  Rng* rng_;
  std::unique_ptr<ScoreIndex> index_;  // null when the policy is not node-local
  std::vector<NodeIndex> feasible_scratch_;
};

// A uniformly random permutation of 0..n-1 drawn from `rng`.
std::vector<int32_t> RandomRanks(int n, Rng& rng);

// A random permutation of 0..n-1 that is stable under appends: node i's
// position relative to nodes 0..n-1 depends only on (seed, i), so adding
// node n keeps the order of the others. For clusters that grow.
std::vector<int32_t> StableRanks(int n, uint64_t seed);

}  // namespace gpupool
