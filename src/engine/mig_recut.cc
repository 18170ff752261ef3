#include "src/engine/mig_recut.h"

#include <algorithm>
#include <bit>
#include <map>
#include <set>
#include <tuple>

#include "src/base/check.h"
#include "src/engine/engine.h"
#include "src/engine/queries.h"

namespace gpupool {
namespace {

// Places `profiles` in this order by first fit on top of `layout` (which
// uses `used` slices and holds `me` +me instances). Appends them to `layout`
// and returns true when every one fits and the result is a valid layout.
bool FirstFitAll(const MigTable& t, const std::vector<int>& profiles, uint8_t used, int me,
                 std::vector<std::pair<int, uint8_t>>& layout) {
  for (int p : profiles) {
    const std::optional<uint8_t> start = FindPlacement(t, p, used, me);
    if (!start) return false;
    used |= SliceMask(t, p, *start);
    me += t.profiles[p].media_extensions ? 1 : 0;
    layout.emplace_back(p, *start);
  }
  return IsValidLayout(t, layout);
}

// Does every order of `profiles` fit back by first fit? `base` is the
// layout they are added to; on success `out` is the index-order result.
bool FitsInAnyOrder(const MigTable& t, std::vector<int> profiles, const std::vector<std::pair<int, uint8_t>>& base,
                    uint8_t used, int me, std::vector<std::pair<int, uint8_t>>* out) {
  std::vector<std::pair<int, uint8_t>> first = base;
  if (!FirstFitAll(t, profiles, used, me, first)) return false;
  std::vector<int> order = profiles;
  std::sort(order.begin(), order.end());
  do {
    std::vector<std::pair<int, uint8_t>> layout = base;
    if (!FirstFitAll(t, order, used, me, layout)) return false;
  } while (std::next_permutation(order.begin(), order.end()));
  *out = std::move(first);
  return true;
}

}  // namespace

std::optional<MigRecutPlan> PlanMigRecut(const MigTable& t, const std::vector<MigInstance>& instances, int profile) {
  GP_CHECK(profile >= 0 && profile < static_cast<int>(t.profiles.size())) << "profile " << profile;
  GP_CHECK(instances.size() <= 32) << instances.size() << " instances on one GPU";
  uint8_t used = 0;
  int me = 0;
  uint32_t movable = 0;
  for (size_t i = 0; i < instances.size(); ++i) {
    const MigInstance& in = instances[i];
    used |= SliceMask(t, in.profile, in.start);
    me += t.profiles[in.profile].media_extensions ? 1 : 0;
    if (in.movable) movable |= uint32_t{1} << i;
  }
  // Not even moving everything movable frees enough slices: no plan.
  if (std::popcount(used) + t.profiles[profile].memory_slices > t.memory_slices) return std::nullopt;
  std::optional<MigRecutPlan> best;
  // Every subset of the movable instances (submask enumeration, down to 0).
  for (uint32_t moved = movable;; moved = (moved - 1) & movable) {
    MigRecutPlan plan;
    plan.moved = moved;
    plan.moved_count = std::popcount(moved);
    uint8_t kept_used = 0;
    int kept_me = 0;
    std::vector<std::pair<int, uint8_t>> kept;
    std::vector<int> back;  // profiles of the moved instances, in index order
    for (size_t i = 0; i < instances.size(); ++i) {
      const MigInstance& in = instances[i];
      if (moved >> i & 1) {
        plan.cost += in.cost;
        back.push_back(in.profile);
        continue;
      }
      kept_used |= SliceMask(t, in.profile, in.start);
      kept_me += t.profiles[in.profile].media_extensions ? 1 : 0;
      kept.emplace_back(in.profile, in.start);
    }
    const bool better = !best || std::tie(plan.moved_count, plan.cost, plan.moved) <
                                     std::tie(best->moved_count, best->cost, best->moved);
    if (better) {
      if (const std::optional<uint8_t> start = FindPlacement(t, profile, kept_used, kept_me)) {
        plan.start = *start;
        kept.emplace_back(profile, *start);
        const uint8_t with_new = kept_used | SliceMask(t, profile, *start);
        const int me_new = kept_me + (t.profiles[profile].media_extensions ? 1 : 0);
        if (FitsInAnyOrder(t, back, kept, with_new, me_new, &plan.layout)) best = std::move(plan);
      }
    }
    if (moved == 0) break;
  }
  return best;
}

}  // namespace gpupool

// --- the Engine's step (declared in src/engine/engine.h) ----------------------

namespace gpupool {
namespace {

// Only a single-replica MIG job re-cuts.
bool MayRecutFor(const JobSpec& spec) {
  return spec.replicas == 1 && !spec.is_pipeline() && spec.demand.kind() == DemandKind::kGpuShare &&
         spec.demand.mode == ShareMode::kMig;
}

// A MIG instance of a running job, on the GPU it occupies.
struct Resident {
  MigInstance instance;
  JobId job;
  AllocationId allocation;
};
using Residents = std::map<std::pair<NodeIndex, int>, std::vector<Resident>>;

// The MIG instances of pool's running jobs by (node, GPU), by start slice.
Residents IndexResidents(const EngineState& s, PoolId pool) {
  Residents residents;
  for (const Tenant& t : s.tenants) {
    auto it = s.running_by_tenant_pool.find({t.id, pool});
    if (it == s.running_by_tenant_pool.end()) continue;
    for (const auto& [priority, id] : it->second) {
      const Job& v = s.job(id);
      const bool movable = v.state == JobState::kRunning && v.stopping == Job::Stop::kNone && v.spec.checkpointable &&
                           v.spec.replicas == 1 && !v.spec.is_pipeline();
      // As preemption prices a checkpointing victim: GPU milli x checkpoint time.
      const int64_t cost = ToMillis(v.spec.checkpoint_duration) * v.spec.total_gpu_milli();
      for (const ReplicaPlacement& r : v.placements) {
        const Allocation& a = s.cluster.allocation(r.allocation);
        if (a.mig_profile < 0) continue;
        const int g = std::countr_zero(static_cast<unsigned>(a.gpus));
        residents[{r.node, g}].push_back({{a.mig_profile, a.mig_start, movable, cost}, id, r.allocation});
      }
    }
  }
  for (auto& [gpu, list] : residents) {
    std::sort(list.begin(), list.end(),
              [](const Resident& a, const Resident& b) { return a.instance.start < b.instance.start; });
  }
  return residents;
}

// The order GPUs are chosen in: fewest moved instances, then least cost,
// then the lowest node and GPU index.
struct RecutChoice {
  int moved_count;
  int64_t cost;
  NodeIndex node;
  int gpu;
  auto operator<=>(const RecutChoice&) const = default;
};

struct RecutCandidate {
  RecutChoice choice;
  MigRecutPlan plan;
  std::vector<JobId> moved;  // by id
};

// Finds the GPU of `pool` to re-cut for j (see Engine::TryMigRecut).
class RecutSearch {
 public:
  RecutSearch(const EngineState& s, const Policy& policy, const Job& j, PoolId pool)
      : s_(s), policy_(policy), j_(j), pool_(pool), demand_(DemandHeldIn(j, pool)) {}

  std::optional<RecutCandidate> Run() {
    for (NodeIndex n = 0; n < s_.cluster.node_count(); ++n) {
      const Node& node = s_.cluster.node(n);
      if (!Eligible(node)) continue;
      const int profile = MigProfileFor(node, demand_);
      if (profile < 0) continue;
      for (int g = 0; g < node.gpu_count; ++g) TryGpu(n, g, profile);
    }
    return std::move(best_);
  }

  const Demand& demand() const { return demand_; }

 private:
  bool Eligible(const Node& node) const {
    if (node.pool != pool_ || node.condition != NodeCondition::kReady || node.mig_table == 0) return false;
    if (node.reserved_for >= 0 && node.reserved_for != j_.id) return false;  // held for another job (or being re-cut)
    if (!(demand_.allowed_models >> node.gpu_model & 1)) return false;
    // The moved jobs come back to this node: its CPU and memory must take
    // the job on top of everything that is there now.
    return node.cpu_milli_free >= demand_.cpu_milli && node.memory_mib_free >= demand_.memory_mib;
  }

  // GPU g of node n, if re-cutting it makes room for `profile` and beats
  // the best so far, becomes the best.
  void TryGpu(NodeIndex n, int g, int profile) {
    const Node& node = s_.cluster.node(n);
    const MigTable& table = MigTables()[node.mig_table - 1];
    if (node.gpu_mode[g] != GpuMode::kMig) return;
    if (node.mig_existing[g] != 0) return;  // a layout the node reported is a fact, never re-cut here
    if (std::popcount(node.mig_used_slices[g]) + table.profiles[profile].memory_slices > table.memory_slices) {
      return;  // not enough free slices however the GPU is cut
    }
    if (GpuFits(node, g, demand_)) return;  // there is room: nothing to re-cut
    if (!residents_) residents_ = IndexResidents(s_, pool_);  // built on the first GPU worth a look
    const std::vector<Resident>& here = (*residents_)[{n, g}];
    std::vector<MigInstance> instances;
    uint8_t used = 0;
    for (const Resident& r : here) {
      instances.push_back(r.instance);
      used |= SliceMask(table, r.instance.profile, r.instance.start);
    }
    GP_CHECK(used == node.mig_used_slices[g]) << "MIG instances of running jobs do not match node " << n << " GPU "
                                              << g;
    std::optional<MigRecutPlan> plan = PlanMigRecut(table, instances, profile);
    if (!plan || plan->moved == 0) return;
    const RecutChoice choice{plan->moved_count, plan->cost, n, g};
    if (best_ && !(choice < best_->choice)) return;
    // With the moved instances gone the node must take the job, filters
    // (requirements, ecosystem) included.
    Node copy = node;
    copy.reserved_for = -1;
    std::vector<JobId> moved;
    for (size_t i = 0; i < here.size(); ++i) {
      if (!(plan->moved >> i & 1)) continue;
      VacateGpus(copy, s_.cluster.allocation(here[i].allocation));
      moved.push_back(here[i].job);
    }
    if (policy_.Feasibility(copy, demand_) != FitFailure::kNone) return;
    std::sort(moved.begin(), moved.end());
    best_ = RecutCandidate{choice, std::move(*plan), std::move(moved)};
  }

  const EngineState& s_;
  const Policy& policy_;
  const Job& j_;
  const PoolId pool_;
  Demand demand_;  // j's, held for it in `pool_`
  std::optional<Residents> residents_;
  std::optional<RecutCandidate> best_;
};

}  // namespace

bool Engine::TryMigRecut(Job& j, PoolId pool, Instant now, const Sink& sink) {
  if (!MayRecutFor(j.spec)) return false;
  RecutSearch search(state_, policy_, j, pool);
  const std::optional<RecutCandidate> best = search.Run();
  if (!best) return false;
  const NodeIndex n = best->choice.node;
  const Node& node = state_.cluster.node(n);
  const MigTable& table = MigTables()[node.mig_table - 1];
  Emit(MigRecutStarted{j.id, n, best->choice.gpu, table.profiles[MigProfileFor(node, search.demand())].name,
                       best->plan.start, best->moved},
       now, sink);
  // Hold the node for the job while the moved jobs checkpoint, exactly as
  // for a preemptor.
  HoldNodesFor(j, {n}, now, sink);
  for (JobId m : best->moved) Emit(PreemptionStarted{m, j.id, PreemptReason::kMigRecut, true}, now, sink);
  return true;
}

}  // namespace gpupool
