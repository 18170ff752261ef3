// Defragmentation planning (FRAG-2): when the cluster's fragmentation rate
// passes a threshold, choose migrations of checkpointable tasks that free
// whole GPUs or whole nodes, keep only those whose gain outweighs their
// cost, and stay within a budget of migrations per hour.
//
// A pure function of the cluster, the fragmentation model and the tasks that
// may move: it reads the cluster and never changes it (it plays moves on
// copies of the nodes it touches, with OccupyGpus / VacateGpus). The
// defragmentation loop (src/control/defragmentation.h) decides when to plan
// and carries the moves out (checkpoint, release, place at the planned
// destination). Its settings, DefragConfig, are in src/engine/defrag.h.
//
// Measure. The cluster's fragmentation F is FGD's (src/sched/fragmentation.h)
// summed over ready GPU nodes; the rate is F / their free GPU milli x 100.
// Moves never change the free total, so lowering F is lowering the rate.
//
// Steps. The unit of a plan is a step: every task on one GPU (with, for a
// whole-GPU task, its other GPUs) moves away, so that the source frees
// those GPUs whole; or, on a node where two or more GPUs can be emptied so
// and no other GPU is in use, every GPU task of the node at once (freeing a
// whole node can be worth it when no single GPU is: typical demands of
// several GPUs). A step is possible only when every allocation on its GPUs
// is a movable task (a GPU with one resident that cannot move is never
// freed); CPU-only tasks never move. Each task of a step goes, largest first, to
// the destination (never its own node) that raises F least: the node and
// GPUs with the lowest F after minus F before, then the busier node (less
// free GPU milli after), then the lower node index. Destinations pass
// CheckFit (and the caller's filter) on the nodes as the plan so far left
// them, so a plan never overcommits a node.
//
// Gain and cost, in GPU-hours:
//   gain = (F before - F after over the nodes the step touches) / 1000 x horizon
//   cost = sum over its tasks of (their GPU milli / 1000) x (checkpoint_duration + restart_cost)
// A step is acceptable when gain > 0 and gain >= min_gain_per_cost x cost.
//
// Greedy. While the rate is above trigger_frag_pct and moves remain in the
// budget: among acceptable steps that fit the budget, take the one with the
// highest (gain - cost) per move (ties: lower cost, lower source node, lower
// freed GPU mask), apply it to the plan's view and look again. A task moves
// at most once per plan. Deterministic: the same inputs give the same plan,
// bit for bit.
//
// Cost: one F evaluation per (demand shape of a movable task, ready node,
// distinct GPU state) to rank destinations, and one per candidate step;
// after each accepted step only the nodes it changed are ranked again and
// only the candidates those nodes could change are evaluated again. A
// 10,000-node, 80,000-GPU cluster with 38,500 movable tasks and 12 typical
// demands: about 0.15 s for the first step, 0.01-0.02 s for each further
// one (one core, -O2).
//
// Thread-safety: none needed; no state.
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <vector>

#include "src/base/status.h"
#include "src/base/time.h"
#include "src/engine/defrag.h"
#include "src/model/cluster.h"
#include "src/sched/fragmentation.h"

namespace gpupool {

// One running task that may move: a live allocation of a checkpointable
// job. Its node, GPUs and demand are the allocation's (Cluster::allocation).
struct MovableTask {
  int64_t job = -1;
  AllocationId allocation = -1;
  Duration checkpoint_duration{0};
};

struct Migration {
  int64_t job = -1;
  AllocationId allocation = -1;  // the allocation it gives up
  NodeIndex from = -1;
  GpuMask from_gpus = 0;
  NodeIndex to = -1;
  GpuMask to_gpus = 0;  // the GPUs it takes on `to` once the moves before it are done
};

// Moves that together free `freed_gpus` of `node`; all or none.
struct DefragStep {
  NodeIndex node = -1;
  GpuMask freed_gpus = 0;
  double frag_milli_removed = 0;  // F before - F after
  double gain_gpu_hours = 0;
  double cost_gpu_hours = 0;
  std::vector<Migration> moves;
};

struct DefragPlan {
  bool triggered = false;  // the rate was above the trigger
  double frag_pct_before = 0;
  double frag_pct_after = 0;  // once every step is done
  // In order: a move's destination assumes every move before it is done
  // (it may use capacity an earlier move released).
  std::vector<DefragStep> steps;

  int32_t move_count() const {
    int32_t n = 0;
    for (const DefragStep& s : steps) n += static_cast<int32_t>(s.moves.size());
    return n;
  }
};

// Extra destination rules (policy filters, affinity): may `task` go to node
// `to`, whose state as the plan so far leaves it is `n`? CheckFit is always
// applied first. An empty function allows every node CheckFit allows. It is
// called often and must depend only on its arguments (and data that does
// not change while planning): the planner reuses its answers.
using DefragFilter = std::function<bool(const MovableTask& task, NodeIndex to, const Node& n)>;

// The fragmentation rate of `cluster`: F over ready GPU nodes / their free
// GPU milli x 100; 0 when nothing is free.
double FragmentationPct(const Cluster& cluster, const FragmentationModel& model);

// The plan described in the file comment, with at most
// min(moves_left, c.max_migrations_per_hour) migrations (none when that is
// 0 or less; `triggered` still tells whether the rate is above the
// trigger). Requires every task's allocation to be live and listed once
// (checked). Tasks whose allocation holds no GPU never move (they cannot
// free one).
DefragPlan PlanDefrag(const Cluster& cluster, const FragmentationModel& model, std::span<const MovableTask> movable,
                      const DefragConfig& c, int32_t moves_left, const DefragFilter& allowed = {});

// The budget left: max_migrations_per_hour minus the migrations started in
// the hour up to `now` (times in (now - 1h, now]); never below 0.
int32_t MigrationsLeft(std::span<const Instant> started, Instant now, const DefragConfig& c);

}  // namespace gpupool
