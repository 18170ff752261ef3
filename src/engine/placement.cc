// Placing a job's replicas in one pool (Engine::TryPlaceIn): all or nothing,
// kept together by topology when EngineConfig::topology_aware (TOPO-1).
#include <map>
#include <utility>

#include "src/engine/engine.h"
#include "src/engine/preemption.h"

namespace gpupool {

// One try at placing every replica of a job in one pool: replicas are placed
// one at a time on the real cluster, then undone, so the scheduler sees each
// after the ones before it; the JobPlaced event applies them for good.
class Engine::PlacementTrial {
 public:
  // Where the replicas after the first may go: anywhere, on the first
  // replica's node, or in its rack.
  enum class Pin : uint8_t { kNone, kNode, kRack };

  PlacementTrial(Engine& e, const Job& j, PoolId pool)
      : e_(e), j_(j), pool_(pool), held_(e.state_.reservations.contains(j.id)),
        constrained_(j.spec.affinity != 0 || j.spec.anti_affinity != 0) {}

  bool held() const { return held_; }
  std::vector<PlacedReplica>& placed() { return placed_; }

  // Replica r's demand, for this pool (and the job's hold, if any).
  Demand DemandOf(int r) const {
    Demand d = j_.spec.replica_demand(r);
    d.allowed_pools = uint64_t{1} << pool_;
    if (held_) d.reservation = j_.id;
    return d;
  }

  // Node n's labels meet the job's affinity and anti-affinity.
  bool LabelOk(NodeIndex n) const {
    const auto& counts = e_.state_.node_label_counts[n];
    auto has = [&](LabelMask m) {
      if (counts.empty()) return false;
      for (int b = 0; b < 64; ++b) {
        if ((m >> b & 1) && counts[b] > 0) return true;
      }
      return false;
    };
    if (j_.spec.affinity != 0 && !has(j_.spec.affinity)) return false;
    if (j_.spec.anti_affinity != 0 && has(j_.spec.anti_affinity)) return false;
    return true;
  }

  // How many of the job's replicas node n takes, each after the ones before
  // it, simulated on a copy of the node.
  int ReplicasFitting(NodeIndex n) const {
    const Cluster& cluster = e_.state_.cluster;
    if (CheckFit(cluster.node(n), DemandOf(0)) != FitFailure::kNone) return 0;  // not even one: no copy
    Node copy = cluster.node(n);
    int fitted = 0;
    for (int r = 0; r < j_.spec.replicas; ++r) {
      const Demand d = DemandOf(r);
      if (e_.policy_.Feasibility(copy, d) != FitFailure::kNone) break;
      TakeOut(copy, d);
      ++fitted;
    }
    return fitted;
  }

  bool TakesAll(NodeIndex n) const { return LabelOk(n) && ReplicasFitting(n) == j_.spec.replicas; }

  // Places every replica, or none (false). `first_ok` restricts the first
  // replica's node (none: LabelOk); `pin` the others'.
  bool Attempt(Pin pin, const std::function<bool(NodeIndex)>& first_ok) {
    placed_.clear();
    Cluster& cluster = e_.state_.cluster;
    const NodeTopology& topology = e_.topology_;
    std::vector<AllocationId> tentative;
    const size_t slots = cluster.allocation_slots().size();
    NodeIndex first = -1;
    auto where = [&](NodeIndex n) {
      if (first < 0) return first_ok ? first_ok(n) : LabelOk(n);
      if (!LabelOk(n)) return false;
      if (pin == Pin::kNode) return n == first;
      if (pin == Pin::kRack) return topology.rack(n) == topology.rack(first);
      return true;
    };
    const bool restricted = constrained_ || pin != Pin::kNone || first_ok;
    Scheduler& sched = e_.scheduler();
    for (int r = 0; r < j_.spec.replicas; ++r) {
      const Demand d = DemandOf(r);
      auto p = restricted ? sched.ScheduleWhere(d, where) : sched.Schedule(d);
      if (!p) break;
      if (first < 0) first = p->node;
      placed_.push_back({p->node, p->gpus});
      tentative.push_back(cluster.Allocate(p->node, d, p->gpus));
    }
    for (auto it = tentative.rbegin(); it != tentative.rend(); ++it) cluster.Release(*it);
    cluster.TrimFreeSlots(slots);  // the slot table as Apply alone leaves it (a replay's)
    return static_cast<int>(placed_.size()) == j_.spec.replicas;
  }

 private:
  Engine& e_;
  const Job& j_;
  const PoolId pool_;
  const bool held_;         // the job holds nodes (a gang hold, a preemptor's)
  const bool constrained_;  // it has affinity or anti-affinity
  std::vector<PlacedReplica> placed_;
};

bool Engine::TryPlaceIn(Job& j, PoolId pool, bool within, Instant now, const Sink& sink) {
  PlacementTrial trial(*this, j, pool);
  using Pin = PlacementTrial::Pin;
  bool ok = false;
  if (j.spec.is_pipeline()) {
    // A pipeline's stages all go to one node: only nodes that can take every
    // stage are candidates for the first, and the rest follow it there.
    ok = trial.Attempt(Pin::kNode, [&](NodeIndex n) { return trial.TakesAll(n); });
  } else if (config_.topology_aware && j.spec.replicas > 1 && j.spec.demand.gpu_count > 0) {
    ok = TryPlaceGangByTopology(j, pool, trial) || trial.Attempt(Pin::kNone, nullptr);
  } else {
    ok = trial.Attempt(Pin::kNone, nullptr);
  }
  if (!ok) return false;
  if (trial.held()) Emit(ReservationReleased{j.id}, now, sink);
  // Memory another tenant left on these GPUs is zeroed before this one
  // starts (RECLAIM-4); the same tenant's own leftovers need no scrub.
  std::map<NodeIndex, GpuMask> scrub;
  for (const PlacedReplica& r : trial.placed()) {
    if (const GpuMask dirty = state_.cluster.NeedsScrub(r.node, r.gpus, j.spec.tenant)) scrub[r.node] |= dirty;
  }
  for (const auto& [node, gpus] : scrub) Emit(GpusScrubbed{node, gpus}, now, sink);
  Emit(JobPlaced{j.id, pool, !within, std::move(trial.placed())}, now, sink);
  return true;
}

bool Engine::TryPlaceGangByTopology(const Job& j, PoolId pool, PlacementTrial& trial) {
  using Pin = PlacementTrial::Pin;
  topology_.Refresh(state_);
  const Cluster& cluster = state_.cluster;
  const int total_gpus = j.spec.replicas * j.spec.demand.gpu_count;
  auto takes_all = [&](NodeIndex n) { return trial.TakesAll(n); };
  if (total_gpus <= topology_.max_node_gpus(pool)) {
    // One NVLink domain (a node whose GPUs are joined by NVLink), then any one node.
    auto nvlink_node = [&](NodeIndex n) { return topology_.nvlink(n) && trial.TakesAll(n); };
    if (trial.Attempt(Pin::kNode, nvlink_node)) return true;
    if (trial.Attempt(Pin::kNode, takes_all)) return true;
  }
  // One rack: racks whose nodes together take every replica.
  std::vector<int32_t> room(topology_.rack_count(), 0);
  for (NodeIndex n = 0; n < cluster.node_count(); ++n) {
    const Node& node = cluster.node(n);
    if (node.pool != pool || (node.gpus_fully_free == 0 && node.max_gpu_free_milli <= 0)) continue;
    if (room[topology_.rack(n)] >= j.spec.replicas || !trial.LabelOk(n)) continue;
    room[topology_.rack(n)] += trial.ReplicasFitting(n);
  }
  bool any = false;
  for (int32_t r : room) any = any || r >= j.spec.replicas;
  if (!any) return false;
  return trial.Attempt(Pin::kRack,
                       [&](NodeIndex n) { return room[topology_.rack(n)] >= j.spec.replicas && trial.LabelOk(n); });
}

}  // namespace gpupool
