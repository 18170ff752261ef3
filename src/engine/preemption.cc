#include "src/engine/preemption.h"

#include <algorithm>
#include <climits>
#include <map>
#include <utility>

#include "src/engine/job_queue.h"
#include "src/engine/queries.h"

namespace gpupool {
namespace {

// One replica's plan on one node. The smallest wins: the lowest worst
// victim priority, then the least lost work, then the fewest victims, then
// the lowest node index.
struct NodePlan {
  int32_t worst_priority = INT32_MIN;  // INT32_MIN: no victim
  int64_t lost = 0;
  size_t count = 0;
  NodeIndex node = -1;
  auto operator<=>(const NodePlan&) const = default;
};

// Plans replica by replica on working copies of the nodes; each replica's
// victims are committed to the copies before the next replica is planned.
class Planner {
 public:
  Planner(const EngineState& s, const Policy& policy, const Job& j, PoolId pool)
      : s_(s), policy_(policy), j_(j), pool_(pool), demand_(DemandHeldIn(j, pool)) {}

  // Own lower-priority work, lowest priority first.
  void ConsiderOwnLowerPriority(Instant now) {
    auto it = s_.running_by_tenant_pool.find({j_.spec.tenant, pool_});
    if (it == s_.running_by_tenant_pool.end()) return;
    for (const auto& [priority, id] : it->second) {
      if (priority >= j_.spec.priority) break;
      const Job& v = s_.job(id);
      if (v.state == JobState::kRunning) Consider(v, PreemptReason::kPriority, now);
    }
  }

  // Borrowed work of other tenants (for a job within its guarantee), each
  // lender giving back at most what it borrowed.
  void ConsiderBorrowed(Instant now) {
    for (const Tenant& other : s_.tenants) {
      if (other.id == j_.spec.tenant) continue;
      const int64_t borrowed = other.pools[pool_].borrowed_milli();
      if (borrowed <= 0) continue;
      auto it = s_.running_by_tenant_pool.find({other.id, pool_});
      if (it == s_.running_by_tenant_pool.end()) continue;
      budget_.emplace(other.id, borrowed);
      for (const auto& [priority, id] : it->second) {
        const Job& v = s_.job(id);
        if (v.state == JobState::kRunning && v.borrowed) Consider(v, PreemptReason::kGuaranteeReclaim, now);
      }
    }
  }

  // Orders each node's candidates cheapest first; false when there are none.
  bool SortCandidates() {
    for (auto& [node, list] : by_node_) {
      std::sort(list.begin(), list.end(),
                [](const PreemptionVictim& a, const PreemptionVictim& b) { return a.cost < b.cost; });
    }
    return !by_node_.empty();
  }

  // Plans every replica; false when one fits nowhere.
  bool PlanReplicas() {
    for (int r = 0; r < j_.spec.replicas; ++r) {
      std::optional<NodePlan> best;
      std::vector<PreemptionVictim> best_victims;
      for (NodeIndex n = 0; n < s_.cluster.node_count(); ++n) {
        std::vector<PreemptionVictim> take;
        const std::optional<NodePlan> plan = PlanOnNode(n, take);
        if (plan && (!best || *plan < *best)) {
          best = plan;
          best_victims = std::move(take);
        }
      }
      if (!best) return false;
      Commit(best->node, best_victims);
    }
    return true;
  }

  PreemptionPlan& plan() { return plan_; }

 private:
  void Consider(const Job& v, PreemptReason reason, Instant now) {
    const Duration lost = v.spec.checkpointable ? v.spec.checkpoint_duration : LostWork(v, now);
    const VictimCost cost{v.spec.priority, ToMillis(lost) * v.spec.total_gpu_milli(), v.id};
    for (const ReplicaPlacement& r : v.placements) {
      auto& list = by_node_[r.node];
      if (list.empty() || list.back().job != &v) list.push_back({cost, &v, reason});
    }
  }

  // One replica on node n: the cheapest victims there, in order, until it
  // fits (into `take`); nullopt when the node is not eligible or it does
  // not fit even then.
  std::optional<NodePlan> PlanOnNode(NodeIndex n, std::vector<PreemptionVictim>& take) const {
    const Node& real = s_.cluster.node(n);
    if (real.pool != pool_ || real.condition != NodeCondition::kReady) return std::nullopt;
    if (real.reserved_for >= 0 && real.reserved_for != j_.id && !HeldForFellowPreemptor(s_, real, j_.spec.tenant)) {
      return std::nullopt;
    }
    auto w = working_.find(n);
    Node copy = w != working_.end() ? w->second : real;
    copy.reserved_for = -1;
    if (policy_.Feasibility(copy, demand_) == FitFailure::kFiltered) return std::nullopt;
    NodePlan plan;
    plan.node = n;
    auto it = by_node_.find(n);
    std::map<TenantId, int64_t> spent;
    size_t next = 0;
    while (CheckFit(copy, demand_) != FitFailure::kNone && it != by_node_.end()) {
      while (next < it->second.size() && chosen_.contains(it->second[next].job->id)) ++next;
      if (next >= it->second.size()) break;
      const PreemptionVictim& c = it->second[next++];
      if (c.reason == PreemptReason::kGuaranteeReclaim) {
        // Only a tenant still above its guarantee gives work back. Jobs are
        // indivisible, so the last one taken may straddle the line.
        const TenantId lender = c.job->spec.tenant;
        if (spent[lender] >= budget_.at(lender)) continue;
        spent[lender] += c.job->spec.total_gpu_milli();
      }
      GiveBack(copy, *c.job, n, s_.cluster);
      take.push_back(c);
      plan.worst_priority = std::max(plan.worst_priority, c.cost.priority);
      plan.lost += c.cost.lost;
    }
    if (CheckFit(copy, demand_) != FitFailure::kNone) return std::nullopt;
    plan.count = take.size();
    return plan;
  }

  // Commits one replica's plan on the working copies. A victim may span
  // several nodes: its resources are given back everywhere.
  void Commit(NodeIndex node, const std::vector<PreemptionVictim>& victims) {
    for (const PreemptionVictim& c : victims) {
      chosen_.insert(c.job->id);
      plan_.victims.push_back(c);
      for (const ReplicaPlacement& rp : c.job->placements) GiveBack(Working(rp.node), *c.job, rp.node, s_.cluster);
      if (c.reason == PreemptReason::kGuaranteeReclaim) budget_.at(c.job->spec.tenant) -= c.job->spec.total_gpu_milli();
    }
    TakeOut(Working(node), demand_);
    plan_.nodes.insert(node);
  }

  Node& Working(NodeIndex n) {
    auto it = working_.find(n);
    if (it == working_.end()) it = working_.emplace(n, s_.cluster.node(n)).first;
    return it->second;
  }

  const EngineState& s_;
  const Policy& policy_;
  const Job& j_;
  const PoolId pool_;
  Demand demand_;  // one replica's, held for j in `pool_`
  std::map<NodeIndex, std::vector<PreemptionVictim>> by_node_;  // candidates by node
  std::map<TenantId, int64_t> budget_;  // guarantee reclaim: what each lender may still give back
  std::map<NodeIndex, Node> working_;
  std::set<JobId> chosen_;
  PreemptionPlan plan_;
};

// Preempting only makes sense if the job is then admitted: within its
// guarantee, or borrowing within its limit and the pool's elastic capacity
// once its own preempted work is gone.
bool AdmittedAfter(const EngineState& s, const Job& j, PoolId pool, const PreemptionPlan& plan) {
  const TenantId t = j.spec.tenant;
  int64_t own_freed = 0;
  for (const PreemptionVictim& c : plan.victims) {
    if (c.job->spec.tenant == t) own_freed += c.job->spec.total_gpu_milli();
  }
  const TenantPool& tp = s.tenant_pool(t, pool);
  const int64_t need = j.spec.total_gpu_milli();
  const bool within_after = tp.usage.gpu_milli - own_freed + need <= tp.effective_guarantee();
  return within_after || MayBorrow(s, t, pool, need, own_freed);
}

}  // namespace

std::optional<PreemptionPlan> PlanPreemption(const EngineState& state, const Policy& policy, const Job& j,
                                             PoolId pool, bool within, Instant now) {
  if (j.spec.is_pipeline()) return std::nullopt;  // pipelines wait for room on one node
  Planner planner(state, policy, j, pool);
  planner.ConsiderOwnLowerPriority(now);
  if (within) planner.ConsiderBorrowed(now);
  if (!planner.SortCandidates() || !planner.PlanReplicas()) return std::nullopt;
  PreemptionPlan& plan = planner.plan();
  if (plan.victims.empty()) return std::nullopt;  // it fits without preemption: a later pass will place it
  if (!within && !AdmittedAfter(state, j, pool, plan)) return std::nullopt;
  return std::move(plan);
}

void GiveBack(Node& n, const Job& j, NodeIndex node, const Cluster& cluster) {
  for (const ReplicaPlacement& r : j.placements) {
    if (r.node == node) VacateGpus(n, cluster.allocation(r.allocation));
  }
}

void TakeOut(Node& n, const Demand& d) { OccupyGpus(n, d, FirstFittingGpus(n, d), nullptr); }

bool HeldForFellowPreemptor(const EngineState& s, const Node& n, TenantId t) {
  const Job* holder = s.find_job(n.reserved_for);
  return holder && holder->spec.tenant == t && s.nominated.contains(QueueKeyOf(*holder));
}

}  // namespace gpupool
