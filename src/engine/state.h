// Everything the Engine knows, changed only by Apply(event).
//
// Apply is deterministic and total for events the Engine produced: replaying
// a log into a fresh EngineState (same config) rebuilds the same state. It
// GP_CHECKs its preconditions: an event that does not fit the state is a bug,
// not bad input (input is validated before events are decided).
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <unordered_map>
#include <vector>

#include "src/engine/event.h"
#include "src/engine/job_queue.h"
#include "src/model/cluster.h"
#include "src/model/job.h"
#include "src/model/pool.h"
#include "src/model/tenant.h"
#include "src/sched/workload_learner.h"

namespace gpupool {

// QUOTA-3, every number configurable (seed defaults).
struct LendingConfig {
  bool enabled = true;
  Duration window = std::chrono::minutes(5);  // usage must stay low this long
  double threshold = 0.5;                     // "low": below this share of the guarantee
  double lend_fraction = 0.3;                 // share of the guarantee lent
};

struct EngineState {
  explicit EngineState(LendingConfig lending = {}) : lending(lending) {}

  void Apply(const Event& e);

  // Lookups; GP_CHECK that the job is live.
  Job& job(JobId id);
  const Job& job(JobId id) const;
  const Job* find_job(JobId id) const;

  TenantPool& tenant_pool(TenantId t, PoolId p) { return tenants[t].pools[p]; }
  const TenantPool& tenant_pool(TenantId t, PoolId p) const { return tenants[t].pools[p]; }

  // GPU milli of the pool's ready nodes.
  int64_t pool_ready_gpu_milli(PoolId p) const;
  // Sum over tenants other than `except` of their idle effective guarantee
  // in pool p: capacity held for them that nobody else may take.
  int64_t idle_guarantees(PoolId p, TenantId except) const;
  // The capacity model of POOL-3 (see src/model/pool.h).
  PoolCapacity Capacity(PoolId p) const;

  LendingConfig lending;
  Cluster cluster;
  std::vector<Pool> pools;
  std::vector<Tenant> tenants;
  std::unordered_map<JobId, Job> jobs;  // live (non-terminal) jobs; lookup only, never iterated for decisions
  std::map<JobId, Job*> running;        // running or checkpointing jobs, ordered by id
  // The same jobs by (tenant, pool), lowest priority first: preemption
  // looks only at the tenants and priorities that may yield.
  std::map<std::pair<TenantId, PoolId>, std::set<std::pair<int32_t, JobId>>> running_by_tenant_pool;
  // Running jobs with a deadline, earliest first (RECLAIM-2).
  std::set<std::pair<int64_t, JobId>> running_deadlines;
  JobQueue queue;
  // Pending jobs that preempted others for room, in queue order: each pass
  // tries them first (kube-scheduler's nominated pods, in effect).
  std::set<QueueKey> nominated;
  std::map<JobId, std::vector<NodeIndex>> reservations;
  // Jobs moved by a MIG re-cut (MigRecutStarted) -> the job the re-cut makes
  // room for. An entry lives until either job is placed or leaves; while it
  // does, the moved job waits for the room planned for it (it neither
  // preempts nor re-cuts), so that one re-cut cannot set off others.
  std::map<JobId, JobId> recut_moved;
  // Per node: how many running replicas carry each label bit (empty until a
  // labelled job lands on the node).
  std::vector<std::vector<int32_t>> node_label_counts;
  struct NodePlace {
    std::string region, zone, rack;
  };
  std::vector<NodePlace> node_places;  // per node
  // Per pool: GPU milli, CPU milli and memory of its nodes (DRF denominators).
  struct PoolTotals {
    int64_t gpu_milli = 0, cpu_milli = 0, memory_mib = 0;
    int64_t unavailable_gpu_milli = 0;  // on cordoned or down nodes
  };
  std::vector<PoolTotals> pool_totals;
  // Elastic scaling (SCALE-1..6), per pool: nodes asked of the provider and
  // not yet joined, and the warm pool the provider should keep.
  struct PoolScaling {
    int32_t requested_nodes = 0;
    int32_t warm_nodes = 0;
  };
  std::vector<PoolScaling> pool_scaling;
  // Nodes being drained for a scale-in (cordoned; removed once empty), or
  // to go back to their home pool (returned once empty).
  std::set<NodeIndex> draining;
  // OPS-2: nodes found hot (cordoned until HotspotCleared).
  std::set<NodeIndex> hot_nodes;
  // Issue 19: nodes an operator cordoned (NodeCordoned, NodeDrainRequested,
  // NodeRemovalRequested), until NodeUncordoned or NodeRemoved. A node is
  // kCordoned while it is here, hot, or draining, and not down or removed.
  struct OperatorCordon {
    std::string actor, reason;
    Instant since{};
    // A drain under way (NodeDrainRequested until NodeDrained): what still
    // runs at drain_deadline is stopped.
    bool draining = false;
    Instant drain_deadline{};
  };
  std::map<NodeIndex, OperatorCordon> cordons;
  // POOL-3: nodes lent to another pool -> their home pool.
  std::map<NodeIndex, PoolId> lent_nodes;
  // TOPO-2: the region table set at runtime (RegionsSet); unset: the
  // configuration's.
  std::optional<RegionPolicy> regions;
  int32_t removed_nodes = 0;  // nodes in condition kRemoved
  // The workload learned from the jobs submitted so far (JobSubmitted), for
  // the placement policies' target (src/sched/workload_learner.h). Its
  // decay and refresh numbers are configuration: the Engine sets them.
  WorkloadLearner workload;

  JobId next_job_id = 1;
  int64_t last_seq = 0;
  Instant now{};
  // Bumped whenever capacity may have become available (a release, a quota
  // or lending change, a reservation released, a node added): a job group
  // blocked at an earlier epoch is worth trying again.
  uint64_t capacity_epoch = 0;

  // Steps of Apply (src/engine/state.cc); not for other callers.
  void Release(Job& j);
  void Occupy(Job& j, const JobPlaced& e);
  void UsageChanged(TenantPool& tp);
  void LabelNode(NodeIndex n, LabelMask labels, int delta);
  // Drops the re-cut entries that name `job`, as mover or as beneficiary.
  void ForgetRecut(JobId job);
};

// Checks the state's invariants; the error names the first one broken:
// allocations match running jobs, usage matches allocations, no GPU over
// allocated, every pending job queued exactly once, reservations match nodes,
// re-cut entries name a live moved job and a pending beneficiary, no work
// on a GPU another tenant left unscrubbed, GPU memory not overcommitted,
// valid MIG layouts matching each node's used slices.
Status CheckInvariants(const EngineState& s);

// RECLAIM-4, checked when work is handed GPUs: after JobPlaced `e` is
// applied, none of its GPUs holds memory another tenant freed unscrubbed.
// (Memory freed beside work that is already running is scrubbed before the
// next hand-over, not at once.)
Status CheckPlacedOnScrubbedGpus(const EngineState& s, const JobPlaced& e);

}  // namespace gpupool
