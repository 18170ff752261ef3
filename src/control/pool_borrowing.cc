// Borrowing between pools (POOL-3): a scaling pool short of capacity first
// asks back the nodes it lent, then borrows empty nodes of other pools,
// before its provider is asked for new ones. See NodeLent and
// src/control/pool_autoscaling.h.
#include <algorithm>
#include <string>
#include <tuple>

#include "src/control/pool_autoscaling.h"
#include "src/engine/queries.h"

namespace gpupool {

int32_t PoolAutoscaling::BorrowNodes(PoolId pool, int32_t count, const std::string& reason, const EngineView& view,
                                     Actions& act) {
  const EngineState& s = view.state();
  const Pool& to = s.pools[pool];
  if (!to.dedicated_to.empty() || count <= 0) return 0;
  // Pools that queued work may use keep their nodes.
  const uint64_t wanted = PoolsWantedByQueue(s);
  // What each pool may still lend: its ready capacity beyond its tenants'
  // effective guarantees (reservations included: QUOTA-5) and its use.
  std::vector<int64_t> spare(s.pools.size(), 0);
  std::vector<double> util(s.pools.size(), 1);
  for (const Pool& p : s.pools) {
    if (p.id == pool || !p.dedicated_to.empty() || (wanted >> p.id & 1)) continue;
    int64_t guaranteed = 0, used = 0;
    for (const Tenant& t : s.tenants) {
      guaranteed += std::max<int64_t>(t.pools[p.id].effective_guarantee(), 0);
      used += t.pools[p.id].usage.gpu_milli;
    }
    const int64_t ready = s.pool_ready_gpu_milli(p.id);
    spare[p.id] = ready - std::max(guaranteed, used);
    util[p.id] = ready > 0 ? static_cast<double>(used) / static_cast<double>(ready) : 1;
  }
  struct Candidate {
    double util;
    NodeIndex node;
  };
  std::vector<Candidate> candidates;
  for (NodeIndex n = 0; n < s.cluster.node_count(); ++n) {
    const Node& node = s.cluster.node(n);
    if (node.pool == pool || spare[node.pool] < node.gpu_milli_total() || node.gpu_count == 0) continue;
    if (node.condition != NodeCondition::kReady || node.reserved_for >= 0 || !NodeEmpty(node)) continue;
    if (s.lent_nodes.contains(n) || s.hot_nodes.contains(n)) continue;
    const bool model_ok = node.gpu_model != kNoGpuModel && (to.selector.models >> node.gpu_model & 1) != 0;
    const auto& regions = to.selector.regions;
    const bool region_ok =
        regions.empty() || std::find(regions.begin(), regions.end(), s.node_places[n].region) != regions.end();
    if (model_ok && region_ok) candidates.push_back({util[node.pool], n});
  }
  // The least used lenders first; their newest nodes first.
  std::sort(candidates.begin(), candidates.end(), [](const Candidate& a, const Candidate& b) {
    return std::make_tuple(a.util, -a.node) < std::make_tuple(b.util, -b.node);
  });
  int32_t lent = 0;
  for (const Candidate& c : candidates) {
    if (lent >= count) break;
    const Node& node = s.cluster.node(c.node);
    if (spare[node.pool] < node.gpu_milli_total()) continue;
    spare[node.pool] -= node.gpu_milli_total();
    act.Emit(NodeLent{c.node, pool, "pool " + to.name + " is short: " + reason});
    ++lent;
  }
  return lent;
}

int32_t PoolAutoscaling::RecallLentNodes(PoolId pool, int32_t count, const EngineView& view, Actions& act) {
  const EngineState& s = view.state();
  struct Candidate {
    int64_t used_milli;
    NodeIndex node;
  };
  std::vector<Candidate> candidates;
  for (const auto& [n, home] : s.lent_nodes) {
    const Node& node = s.cluster.node(n);
    if (home != pool || s.draining.contains(n) || node.reserved_for >= 0) continue;
    if (node.condition != NodeCondition::kReady && node.condition != NodeCondition::kDown) continue;
    candidates.push_back({node.gpu_milli_total() - node.gpu_milli_free_total, n});
  }
  std::sort(candidates.begin(), candidates.end(), [](const Candidate& a, const Candidate& b) {
    return std::make_tuple(a.used_milli, a.node) < std::make_tuple(b.used_milli, b.node);
  });
  int32_t recalled = 0;
  for (const Candidate& c : candidates) {
    if (recalled >= count) break;
    StartDrain(c.node, "pool " + s.pools[pool].name + " needs its node back", view, act);
    ++recalled;
  }
  return recalled;
}

}  // namespace gpupool
