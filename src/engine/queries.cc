#include "src/engine/queries.h"

#include <algorithm>
#include <map>

namespace gpupool {

std::vector<JobId> JobsOnNode(const EngineState& s, NodeIndex n) {
  std::vector<JobId> out;
  for (const auto& [id, j] : s.running) {
    for (const ReplicaPlacement& r : j->placements) {
      if (r.node == n) {
        out.push_back(id);
        break;
      }
    }
  }
  return out;
}

std::vector<const Job*> MovableJobsOn(const EngineState& s, NodeIndex n, GpuMask gpus) {
  std::vector<const Job*> movable;
  for (JobId id : JobsOnNode(s, n)) {
    const Job& j = s.job(id);
    if (j.state != JobState::kRunning || j.stopping != Job::Stop::kNone) continue;
    bool on = false;
    for (const ReplicaPlacement& r : j.placements) on |= r.node == n && (r.gpus & gpus) != 0;
    if (!on) continue;
    const bool shrinks = j.spec.elastic() && j.spec.replicas > j.spec.min_replicas;
    if (!shrinks && !j.spec.checkpointable && j.spec.kind != JobKind::kOnlineInference) continue;
    movable.push_back(&j);
  }
  return movable;
}

uint64_t PoolsWantedByQueue(const EngineState& s) {
  uint64_t wanted = 0;
  for (TenantId t : s.queue.tenants()) {
    uint64_t quota = 0;
    for (PoolId p = 0; p < s.pools.size(); ++p) {
      if (s.tenant_pool(t, p).quota.elastic_limit_milli > 0) quota |= uint64_t{1} << p;
    }
    for (const auto& [key, group] : s.queue.find_tenant(t)->groups) wanted |= key.pools & quota;
  }
  return wanted;
}

int64_t QuotaHeadroom(const EngineState& s, TenantId t, PoolId p, int64_t freed) {
  const TenantPool& tp = s.tenant_pool(t, p);
  return tp.quota.elastic_limit_milli - (tp.usage.gpu_milli - freed);
}

int64_t GuaranteedMilli(const EngineState& s, PoolId p) {
  int64_t guaranteed = 0;
  for (const Tenant& t : s.tenants) guaranteed += t.pools[p].quota.guaranteed_milli;
  return guaranteed;
}

bool MayBorrow(const EngineState& s, TenantId t, PoolId p, int64_t need, int64_t freed) {
  if (need > QuotaHeadroom(s, t, p, freed)) return false;
  const TenantPool& tp = s.tenant_pool(t, p);
  const int64_t usage = tp.usage.gpu_milli - freed;
  // The elastic capacity of the pool: what no tenant's effective guarantee
  // holds. Borrowing across tenants must stay within it.
  int64_t guaranteed = 0, borrowed = 0;
  for (const Tenant& other : s.tenants) {
    guaranteed += other.pools[p].effective_guarantee();
    borrowed += other.pools[p].borrowed_milli();
  }
  const int64_t elastic = s.pool_ready_gpu_milli(p) - guaranteed;
  const int64_t borrowed_after = std::max<int64_t>(0, usage + need - tp.effective_guarantee());
  return borrowed - tp.borrowed_milli() + borrowed_after <= elastic;
}

bool MayBorrowToRecover(const EngineState& s, TenantId t, PoolId p, int64_t need) {
  if (need > QuotaHeadroom(s, t, p)) return false;
  const TenantPool& tp = s.tenant_pool(t, p);
  int64_t guaranteed = 0, borrowed = 0, unused = 0;
  for (const Tenant& other : s.tenants) {
    const TenantPool& op = other.pools[p];
    guaranteed += op.effective_guarantee();
    borrowed += op.borrowed_milli();
    if (&op != &tp) unused += std::max<int64_t>(0, op.effective_guarantee() - op.usage.gpu_milli);
  }
  const int64_t elastic = s.pool_ready_gpu_milli(p) - guaranteed;
  const int64_t borrowed_after = std::max<int64_t>(0, tp.usage.gpu_milli + need - tp.effective_guarantee());
  return borrowed - tp.borrowed_milli() + borrowed_after <= elastic + unused;
}

Demand DemandHeldIn(const Job& j, PoolId p) {
  Demand d = j.spec.demand;
  d.allowed_pools = uint64_t{1} << p;
  d.reservation = j.id;
  return d;
}

Duration LostWork(const Job& v, Instant now) {
  const Duration ran = now - v.started;
  if (v.spec.checkpointable) return Duration(0);
  if (v.spec.checkpoint_interval > Duration(0)) return ran % v.spec.checkpoint_interval;
  return ran;
}

bool NodeEmpty(const Node& n) {
  return n.gpu_milli_free_total == n.gpu_milli_total() && n.cpu_milli_free == n.cpu_milli_total &&
         n.gpu_kinds_present == 0 && n.cpu_only_residents == 0;
}

std::string FragmentedRack(const EngineState& s, PoolId pool) {
  // Free GPU milli on partly used ready nodes, per rack of the pool.
  std::map<std::string, int64_t> free;
  for (NodeIndex n = 0; n < s.cluster.node_count(); ++n) {
    const Node& node = s.cluster.node(n);
    if (node.pool != pool || node.condition != NodeCondition::kReady || NodeEmpty(node)) continue;
    if (node.gpu_milli_free_total > 0) free[s.node_places[n].rack] += node.gpu_milli_free_total;
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
