#include "src/control/elastic_growth.h"

#include <algorithm>
#include <map>
#include <string>
#include <tuple>
#include <vector>

#include "src/engine/queries.h"

namespace gpupool {

void ElasticGrowth::Tick(const EngineView& view, Actions& act) {
  if (!view.AnyElastic()) return;
  const EngineState& s = view.state();
  std::vector<const Job*> growing;
  for (const auto& [id, j] : s.running) {
    if (!j->spec.elastic() || j->state != JobState::kRunning || j->stopping != Job::Stop::kNone) continue;
    if (j->spec.replicas >= j->spec.max_replicas || j->spec.affinity != 0 || j->spec.anti_affinity != 0) continue;
    if (j->resizes > 0 && view.now() < j->resharding_until + resize_every_) continue;
    growing.push_back(j);
  }
  if (growing.empty()) return;
  // Capacity a queued job may use is not grown onto.
  const uint64_t wanted = PoolsWantedByQueue(s);
  std::sort(growing.begin(), growing.end(), [](const Job* a, const Job* b) {
    return std::make_tuple(-a->spec.priority, a->id) < std::make_tuple(-b->spec.priority, b->id);
  });
  for (const Job* j : growing) {
    if (!(wanted >> j->pool & 1)) Grow(*j, view, act);
  }
}

void ElasticGrowth::Grow(const Job& j, const EngineView& view, Actions& act) const {
  const EngineState& s = view.state();
  const PoolId pool = j.pool;
  const TenantId t = j.spec.tenant;
  const TenantPool& tp = s.tenant_pool(t, pool);
  const int64_t per = j.spec.demand.total_gpu_milli();
  // The most replicas the tenant's quota admits (within its guarantee, or
  // borrowed from the pool's elastic capacity).
  int32_t k = j.spec.max_replicas - j.spec.replicas;
  auto within = [&](int32_t n) { return tp.usage.gpu_milli + n * per <= tp.effective_guarantee(); };
  while (k > 0 && !within(k) && !MayBorrow(s, t, pool, k * per)) --k;
  if (k == 0) return;
  Demand d = j.spec.demand;
  d.allowed_pools = uint64_t{1} << pool;
  d.reservation = j.id;
  // Near the job first (its racks: TOPO-1), then anywhere in the pool.
  std::vector<bool> rack(view.RackCount(), false);
  for (const ReplicaPlacement& r : j.placements) rack[view.RackOf(r.node)] = true;
  std::vector<PlacedReplica> added =
      view.PlaceTentatively(d, k, [&](NodeIndex n) { return static_cast<bool>(rack[view.RackOf(n)]); });
  if (added.empty()) return;
  const auto n = static_cast<int32_t>(added.size());
  const bool borrowed = j.borrowed || !within(n);
  std::map<NodeIndex, GpuMask> scrub;  // RECLAIM-4, as for any placement
  for (const PlacedReplica& r : added) {
    if (const GpuMask dirty = s.cluster.NeedsScrub(r.node, r.gpus, t)) scrub[r.node] |= dirty;
  }
  for (const auto& [node, gpus] : scrub) act.Emit(GpusScrubbed{node, gpus});
  act.Emit(JobResized{j.id, {}, std::move(added), borrowed, j.spec.checkpoint_duration,
                      "grew by " + std::to_string(n) + " onto free capacity"});
}

}  // namespace gpupool
