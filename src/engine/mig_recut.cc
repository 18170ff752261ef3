#include "src/engine/mig_recut.h"

#include <algorithm>
#include <bit>
#include <map>
#include <set>
#include <tuple>

#include "src/base/check.h"
#include "src/engine/engine.h"

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

bool Engine::TryMigRecut(Job& j, PoolId pool, Instant now, const Sink& sink) {
  const JobSpec& spec = j.spec;
  if (spec.replicas != 1 || spec.is_pipeline() || spec.demand.kind() != DemandKind::kGpuShare ||
      spec.demand.mode != ShareMode::kMig) {
    return false;
  }
  Demand d = spec.demand;
  d.allowed_pools = uint64_t{1} << pool;
  d.reservation = j.id;
  // The MIG instances of the pool's running jobs by (node, GPU), built on
  // the first GPU worth a look.
  struct Resident {
    MigInstance instance;
    JobId job;
    AllocationId allocation;
  };
  std::map<std::pair<NodeIndex, int>, std::vector<Resident>> residents;
  bool indexed = false;
  auto index = [&] {
    for (const Tenant& t : state_.tenants) {
      auto it = state_.running_by_tenant_pool.find({t.id, pool});
      if (it == state_.running_by_tenant_pool.end()) continue;
      for (const auto& [priority, id] : it->second) {
        const Job& v = state_.job(id);
        const bool movable = v.state == JobState::kRunning && v.stopping == Job::Stop::kNone &&
                             v.spec.checkpointable && v.spec.replicas == 1 && !v.spec.is_pipeline();
        // As TryPreempt prices a checkpointing victim: GPU milli x checkpoint time.
        const int64_t cost = ToMillis(v.spec.checkpoint_duration) * v.spec.total_gpu_milli();
        for (const ReplicaPlacement& r : v.placements) {
          const Allocation& a = state_.cluster.allocation(r.allocation);
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
    indexed = true;
  };
  struct Choice {
    int moved_count;
    int64_t cost;
    NodeIndex node;
    int gpu;
    auto operator<=>(const Choice&) const = default;
  };
  std::optional<Choice> best;
  MigRecutPlan best_plan;
  std::vector<JobId> best_moved;
  for (NodeIndex n = 0; n < state_.cluster.node_count(); ++n) {
    const Node& node = state_.cluster.node(n);
    if (node.pool != pool || node.condition != NodeCondition::kReady || node.mig_table == 0) continue;
    if (node.reserved_for >= 0 && node.reserved_for != j.id) continue;  // held for another job (or being re-cut)
    if (!(d.allowed_models >> node.gpu_model & 1)) continue;
    // The moved jobs come back to this node: its CPU and memory must take
    // the job on top of everything that is there now.
    if (node.cpu_milli_free < d.cpu_milli || node.memory_mib_free < d.memory_mib) continue;
    const MigTable& table = MigTables()[node.mig_table - 1];
    const int profile = MigProfileFor(node, d);
    if (profile < 0) continue;
    for (int g = 0; g < node.gpu_count; ++g) {
      if (node.gpu_mode[g] != GpuMode::kMig) continue;
      if (node.mig_existing[g] != 0) continue;  // a layout the node reported is a fact, never re-cut here
      if (std::popcount(node.mig_used_slices[g]) + table.profiles[profile].memory_slices > table.memory_slices) {
        continue;  // not enough free slices however the GPU is cut
      }
      if (GpuFits(node, g, d)) continue;  // there is room: nothing to re-cut
      if (!indexed) index();
      const std::vector<Resident>& here = residents[{n, g}];
      std::vector<MigInstance> instances;
      uint8_t used = 0;
      for (const Resident& r : here) {
        instances.push_back(r.instance);
        used |= SliceMask(table, r.instance.profile, r.instance.start);
      }
      GP_CHECK(used == node.mig_used_slices[g]) << "MIG instances of running jobs do not match node " << n
                                                << " GPU " << g;
      const std::optional<MigRecutPlan> plan = PlanMigRecut(table, instances, profile);
      if (!plan || plan->moved == 0) continue;
      const Choice choice{plan->moved_count, plan->cost, n, g};
      if (best && !(choice < *best)) continue;
      // With the moved instances gone the node must take the job, filters
      // (requirements, ecosystem) included.
      Node copy = node;
      copy.reserved_for = -1;
      std::vector<JobId> moved;
      for (size_t i = 0; i < here.size(); ++i) {
        if (!(plan->moved >> i & 1)) continue;
        VacateGpus(copy, state_.cluster.allocation(here[i].allocation));
        moved.push_back(here[i].job);
      }
      if (policy_.Feasibility(copy, d) != FitFailure::kNone) continue;
      std::sort(moved.begin(), moved.end());
      best = choice;
      best_plan = *plan;
      best_moved = std::move(moved);
    }
  }
  if (!best) return false;
  const Node& node = state_.cluster.node(best->node);
  const MigTable& table = MigTables()[node.mig_table - 1];
  Emit(MigRecutStarted{j.id, best->node, best->gpu, table.profiles[MigProfileFor(node, d)].name, best_plan.start,
                       best_moved},
       now, sink);
  // Hold the node for the job (with any it already held) while the moved
  // jobs checkpoint, exactly as for a preemptor.
  std::set<NodeIndex> hold{best->node};
  if (auto held = state_.reservations.find(j.id); held != state_.reservations.end()) {
    hold.insert(held->second.begin(), held->second.end());
    Emit(ReservationReleased{j.id}, now, sink);
  }
  std::erase_if(hold, [this](NodeIndex n) { return state_.cluster.node(n).reserved_for >= 0; });
  if (!hold.empty()) Emit(NodesReserved{j.id, std::vector<NodeIndex>(hold.begin(), hold.end())}, now, sink);
  for (JobId m : best_moved) Emit(PreemptionStarted{m, j.id, PreemptReason::kMigRecut, true}, now, sink);
  return true;
}

}  // namespace gpupool
