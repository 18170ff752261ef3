#include "src/engine/node_topology.h"

#include <algorithm>
#include <string>
#include <unordered_map>

#include "src/model/gpu_catalog.h"

namespace gpupool {

void NodeTopology::Refresh(const EngineState& s) {
  const int count = s.cluster.node_count();
  if (static_cast<int>(node_rack_.size()) == count) return;
  // Rack names to ids; only looked up, never iterated.
  std::unordered_map<std::string, int32_t> ids;
  for (int n = 0; n < static_cast<int>(node_rack_.size()); ++n) ids.emplace(s.node_places[n].rack, node_rack_[n]);
  const Catalog& catalog = Catalog::Builtin();
  for (int n = static_cast<int>(node_rack_.size()); n < count; ++n) {
    auto [it, added] = ids.emplace(s.node_places[n].rack, static_cast<int32_t>(ids.size()));
    node_rack_.push_back(it->second);
    const Node& node = s.cluster.node(n);
    node_nvlink_.push_back(node.gpu_count > 1 && node.gpu_model != kNoGpuModel &&
                           JoinedByNvlink(catalog.Get(node.gpu_model)));
    NotePoolNode(node.pool, node.gpu_count);
  }
  rack_count_ = static_cast<int32_t>(ids.size());
}

void NodeTopology::Lent(PoolId to, int32_t gpus) { NotePoolNode(to, gpus); }

void NodeTopology::NotePoolNode(PoolId p, int32_t gpus) {
  if (pool_max_node_gpus_.size() <= p) pool_max_node_gpus_.resize(p + 1, 0);
  pool_max_node_gpus_[p] = std::max(pool_max_node_gpus_[p], gpus);
}

}  // namespace gpupool
