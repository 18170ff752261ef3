// Elastic training in the Engine (SCALE-7): running elastic jobs grow onto
// free capacity no queued job may use, shrink off nodes that leave or fail,
// and give back what they grew for queued work; each change is one
// JobResized with a reshard step (the job's checkpoint duration), never a
// restart. See JobSpec::min_replicas and the Engine header.
#include <algorithm>
#include <tuple>

#include "src/engine/engine.h"

namespace gpupool {

void Engine::GrowElastic(Instant now, const Sink& sink) {
  if (!any_elastic_) return;
  std::vector<const Job*> growing;
  for (const auto& [id, j] : state_.running) {
    if (!j->spec.elastic() || j->state != JobState::kRunning || j->stopping != Job::Stop::kNone) continue;
    if (j->spec.replicas >= j->spec.max_replicas || j->spec.affinity != 0 || j->spec.anti_affinity != 0) continue;
    if (j->resizes > 0 && now < j->resharding_until + config_.elastic_resize_every) continue;
    if (planned_moves_.contains(id)) continue;
    growing.push_back(j);
  }
  if (growing.empty()) return;
  // Capacity a queued job may use is not grown onto.
  const uint64_t wanted = PoolsWantedByQueue();
  std::sort(growing.begin(), growing.end(), [](const Job* a, const Job* b) {
    return std::make_tuple(-a->spec.priority, a->id) < std::make_tuple(-b->spec.priority, b->id);
  });
  Scheduler& sched = scheduler();
  Cluster& cluster = state_.cluster;
  RefreshTopology();
  for (const Job* j : growing) {
    const PoolId pool = j->pool;
    if (wanted >> pool & 1) continue;
    const TenantId t = j->spec.tenant;
    const TenantPool& tp = state_.tenant_pool(t, pool);
    const int64_t per = j->spec.demand.total_gpu_milli();
    // The most replicas the tenant's quota admits (within its guarantee, or
    // borrowed from the pool's elastic capacity).
    int32_t k = j->spec.max_replicas - j->spec.replicas;
    auto within = [&](int32_t n) { return tp.usage.gpu_milli + n * per <= tp.effective_guarantee(); };
    while (k > 0 && !within(k) && !MayBorrow(t, pool, k * per)) --k;
    if (k == 0) continue;
    Demand d = j->spec.demand;
    d.allowed_pools = uint64_t{1} << pool;
    d.reservation = j->id;
    // Near the job first (its racks: TOPO-1), then anywhere in the pool.
    std::vector<bool> rack(rack_count_, false);
    for (const ReplicaPlacement& r : j->placements) rack[node_rack_[r.node]] = true;
    auto near = [&](NodeIndex n) { return rack[node_rack_[n]]; };
    std::vector<PlacedReplica> added;
    std::vector<AllocationId> tentative;
    const size_t slots = cluster.allocation_slots().size();
    for (int32_t i = 0; i < k; ++i) {
      auto p = sched.ScheduleWhere(d, near);
      if (!p) p = sched.Schedule(d);
      if (!p) break;
      added.push_back({p->node, p->gpus});
      tentative.push_back(cluster.Allocate(p->node, d, p->gpus));
    }
    for (auto it = tentative.rbegin(); it != tentative.rend(); ++it) cluster.Release(*it);
    cluster.TrimFreeSlots(slots);
    if (added.empty()) continue;
    const int32_t n = static_cast<int32_t>(added.size());
    const bool borrowed = j->borrowed || !within(n);
    std::map<NodeIndex, GpuMask> scrub;  // RECLAIM-4, as for any placement
    for (const PlacedReplica& r : added) {
      if (const GpuMask dirty = cluster.NeedsScrub(r.node, r.gpus, t)) scrub[r.node] |= dirty;
    }
    for (const auto& [node, gpus] : scrub) Emit(GpusScrubbed{node, gpus}, now, sink);
    Emit(JobResized{j->id, {}, std::move(added), borrowed, j->spec.checkpoint_duration,
                    "grew by " + std::to_string(n) + " onto free capacity"},
         now, sink);
  }
}

bool Engine::ShrinkElastic(const Job& j, NodeIndex node, const std::string& reason, Instant now, const Sink& sink) {
  if (!j.spec.elastic() || j.state != JobState::kRunning || j.stopping != Job::Stop::kNone) return false;
  std::vector<int32_t> removed;
  const int32_t size = static_cast<int32_t>(j.placements.size());
  if (node >= 0) {
    for (int32_t i = 0; i < size; ++i) {
      if (j.placements[i].node == node) removed.push_back(i);
    }
  } else {
    for (int32_t i = j.spec.min_replicas; i < size; ++i) removed.push_back(i);
  }
  if (removed.empty() || size - static_cast<int32_t>(removed.size()) < j.spec.min_replicas) return false;
  planned_moves_.erase(j.id);
  Emit(JobResized{j.id, std::move(removed), {}, j.borrowed, j.spec.checkpoint_duration, reason}, now, sink);
  return true;
}

bool Engine::YieldElastic(const Job& j, PoolId p, Instant now, const Sink& sink) {
  if (!any_elastic_) return false;
  std::vector<const Job*> extra;
  int64_t freeable = 0;
  for (const auto& [id, r] : state_.running) {
    if (id == j.id || r->pool != p || !r->spec.elastic() || r->state != JobState::kRunning ||
        r->stopping != Job::Stop::kNone || r->spec.replicas <= r->spec.min_replicas) {
      continue;
    }
    extra.push_back(r);
    freeable += int64_t{r->spec.replicas - r->spec.min_replicas} * r->spec.demand.total_gpu_milli();
  }
  if (extra.empty()) return false;
  int64_t allocated = 0;
  for (const Tenant& t : state_.tenants) allocated += t.pools[p].usage.gpu_milli;
  const int64_t free = state_.pool_ready_gpu_milli(p) - allocated;
  const int64_t need = j.spec.total_gpu_milli();
  if (free + freeable < need) return false;  // it would not fit anyway
  std::sort(extra.begin(), extra.end(), [](const Job* a, const Job* b) {
    return std::make_tuple(a->spec.priority, -(a->spec.replicas - a->spec.min_replicas), a->id) <
           std::make_tuple(b->spec.priority, -(b->spec.replicas - b->spec.min_replicas), b->id);
  });
  int64_t freed = 0;
  bool any = false;
  for (const Job* r : extra) {
    if (free + freed >= need) break;
    freed += int64_t{r->spec.replicas - r->spec.min_replicas} * r->spec.demand.total_gpu_milli();
    any |= ShrinkElastic(*r, -1, "gave back grown replicas to queued job " + std::to_string(j.id), now, sink);
  }
  return any;
}

}  // namespace gpupool
