// TOPO-1 facts per node that gang placement and elastic growth ask for,
// derived from the state and kept as nodes join: a dense rack id per node,
// whether its GPUs are joined by NVLink, and per pool the most GPUs a node
// of it has had (a gang that needs more can skip the one-node tiers).
//
// A cache, not state: Refresh extends it to nodes added since, and a node
// lent to another pool (NodeLent) is counted there with Lent. Never
// shrinks (a removed node keeps its rack id).
#pragma once

#include <cstdint>
#include <vector>

#include "src/engine/state.h"

namespace gpupool {

class NodeTopology {
 public:
  // Extends the cache to every node of `s`.
  void Refresh(const EngineState& s);
  // A node with `gpus` GPUs now serves pool `to`.
  void Lent(PoolId to, int32_t gpus);

  // Require Refresh since node n was added.
  int32_t rack(NodeIndex n) const { return node_rack_[n]; }
  bool nvlink(NodeIndex n) const { return node_nvlink_[n]; }
  int32_t rack_count() const { return rack_count_; }
  // 0 for a pool no node has joined yet.
  int32_t max_node_gpus(PoolId p) const { return p < pool_max_node_gpus_.size() ? pool_max_node_gpus_[p] : 0; }

 private:
  void NotePoolNode(PoolId p, int32_t gpus);

  std::vector<int32_t> node_rack_;
  std::vector<bool> node_nvlink_;
  int32_t rack_count_ = 0;
  std::vector<int32_t> pool_max_node_gpus_;
};

}  // namespace gpupool
