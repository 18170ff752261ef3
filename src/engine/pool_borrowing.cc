// Borrowing between pools in the Engine (POOL-3): a scaling pool short of
// capacity first asks back the nodes it lent, then borrows empty nodes of
// other pools, before its provider is asked for new ones. See NodeLent.
#include <algorithm>
#include <map>
#include <string>
#include <tuple>

#include "src/engine/engine.h"

namespace gpupool {
namespace {

bool Empty(const Node& n) {
  return n.gpu_milli_free_total == n.gpu_milli_total() && n.cpu_milli_free == n.cpu_milli_total &&
         n.gpu_kinds_present == 0 && n.cpu_only_residents == 0;
}

}  // namespace

int32_t Engine::BorrowNodes(PoolId pool, int32_t count, const std::string& reason, Instant now, const Sink& sink) {
  const Pool& to = state_.pools[pool];
  if (!to.dedicated_to.empty() || count <= 0) return 0;
  // Pools that queued work may use keep their nodes.
  const uint64_t wanted = PoolsWantedByQueue();
  // What each pool may still lend: its ready capacity beyond its tenants'
  // effective guarantees (reservations included: QUOTA-5) and its use.
  std::vector<int64_t> spare(state_.pools.size(), 0);
  std::vector<double> util(state_.pools.size(), 1);
  for (const Pool& p : state_.pools) {
    if (p.id == pool || !p.dedicated_to.empty() || (wanted >> p.id & 1)) continue;
    int64_t guaranteed = 0, used = 0;
    for (const Tenant& t : state_.tenants) {
      guaranteed += std::max<int64_t>(t.pools[p.id].effective_guarantee(), 0);
      used += t.pools[p.id].usage.gpu_milli;
    }
    const int64_t ready = state_.pool_ready_gpu_milli(p.id);
    spare[p.id] = ready - std::max(guaranteed, used);
    util[p.id] = ready > 0 ? static_cast<double>(used) / static_cast<double>(ready) : 1;
  }
  struct Candidate {
    double util;
    NodeIndex node;
  };
  std::vector<Candidate> candidates;
  for (NodeIndex n = 0; n < state_.cluster.node_count(); ++n) {
    const Node& node = state_.cluster.node(n);
    if (node.pool == pool || spare[node.pool] < node.gpu_milli_total() || node.gpu_count == 0) continue;
    if (node.condition != NodeCondition::kReady || node.reserved_for >= 0 || !Empty(node)) continue;
    if (state_.lent_nodes.contains(n) || state_.hot_nodes.contains(n)) continue;
    const bool model_ok = node.gpu_model != kNoGpuModel && (to.selector.models >> node.gpu_model & 1) != 0;
    const auto& regions = to.selector.regions;
    const bool region_ok = regions.empty() ||
                           std::find(regions.begin(), regions.end(), state_.node_places[n].region) != regions.end();
    if (model_ok && region_ok) candidates.push_back({util[node.pool], n});
  }
  // The least used lenders first; their newest nodes first.
  std::sort(candidates.begin(), candidates.end(), [](const Candidate& a, const Candidate& b) {
    return std::make_tuple(a.util, -a.node) < std::make_tuple(b.util, -b.node);
  });
  int32_t lent = 0;
  for (const Candidate& c : candidates) {
    if (lent >= count) break;
    const Node& node = state_.cluster.node(c.node);
    if (spare[node.pool] < node.gpu_milli_total()) continue;
    spare[node.pool] -= node.gpu_milli_total();
    Emit(NodeLent{c.node, pool, "pool " + to.name + " is short: " + reason}, now, sink);
    if (pool_max_node_gpus_.size() <= pool) pool_max_node_gpus_.resize(pool + 1, 0);
    pool_max_node_gpus_[pool] = std::max<int32_t>(pool_max_node_gpus_[pool], node.gpu_count);
    ++lent;
  }
  return lent;
}

int32_t Engine::RecallLentNodes(PoolId pool, int32_t count, Instant now, const Sink& sink) {
  struct Candidate {
    int64_t used_milli;
    NodeIndex node;
  };
  std::vector<Candidate> candidates;
  for (const auto& [n, home] : state_.lent_nodes) {
    const Node& node = state_.cluster.node(n);
    if (home != pool || state_.draining.contains(n) || node.reserved_for >= 0) continue;
    if (node.condition != NodeCondition::kReady && node.condition != NodeCondition::kDown) continue;
    candidates.push_back({node.gpu_milli_total() - node.gpu_milli_free_total, n});
  }
  std::sort(candidates.begin(), candidates.end(), [](const Candidate& a, const Candidate& b) {
    return std::make_tuple(a.used_milli, a.node) < std::make_tuple(b.used_milli, b.node);
  });
  int32_t recalled = 0;
  for (const Candidate& c : candidates) {
    if (recalled >= count) break;
    StartDrain(c.node, "pool " + state_.pools[pool].name + " needs its node back", now, sink);
    ++recalled;
  }
  return recalled;
}

uint64_t Engine::PoolsWantedByQueue() const {
  uint64_t wanted = 0;
  for (TenantId t : state_.queue.tenants()) {
    uint64_t quota = 0;
    for (PoolId p = 0; p < state_.pools.size(); ++p) {
      if (state_.tenant_pool(t, p).quota.elastic_limit_milli > 0) quota |= uint64_t{1} << p;
    }
    for (const auto& [key, group] : state_.queue.find_tenant(t)->groups) wanted |= key.pools & quota;
  }
  return wanted;
}

std::string Engine::FragmentedRack(PoolId pool) const { return gpupool::FragmentedRack(state_, pool); }

std::string FragmentedRack(const EngineState& state, PoolId pool) {
  // Free GPU milli on partly used ready nodes, per rack of the pool.
  std::map<std::string, int64_t> free;
  for (NodeIndex n = 0; n < state.cluster.node_count(); ++n) {
    const Node& node = state.cluster.node(n);
    if (node.pool != pool || node.condition != NodeCondition::kReady || Empty(node)) continue;
    if (node.gpu_milli_free_total > 0) free[state.node_places[n].rack] += node.gpu_milli_free_total;
  }
  std::string best;
  int64_t most = 0;
  for (const auto& [rack, milli] : free) {
    if (milli > most) {
      most = milli;
      best = rack;
    }
  }
  return best;
}

}  // namespace gpupool
