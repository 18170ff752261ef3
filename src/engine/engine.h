// The Engine: the deterministic core shared by the simulator and the server
// (DESIGN section 2). Each command validates its input, decides events,
// applies each one to the state (EngineState::Apply, the only mutator) and
// hands it to the caller's sink, in order. It owns no thread, clock, socket
// or file: time arrives as `now`, randomness from the seed in its config.
// Same commands, same times, same config: the same events, byte for byte.
//
// Expected failures (unknown tenant, malformed demand, ...) come back as an
// Error and decide nothing. A job that is valid but can never run is a fact
// and becomes a JobRejected event.
//
// Scheduling (after every command that may let work start):
//  - Admission per tenant and pool (QUOTA-1): a job within the tenant's
//    effective guarantee may use any free capacity; beyond it the tenant
//    borrows, up to its elastic limit, only capacity that is neither in use
//    nor held idle for another tenant's guarantee, and such jobs are marked
//    borrowed (preemptible).
//  - Order: tenants with idle guarantee first, then by weighted dominant
//    resource share (DRF over GPU, CPU and memory, QUOTA-6); within a tenant
//    by priority, deadline, submit time and id (QUOTA-2).
//  - Elastic jobs (SCALE-7, JobSpec::max_replicas) start as a gang of
//    min_replicas. A job that cannot be placed first gets back what elastic
//    jobs grew onto beyond their minimum (JobResized, lowest priority
//    first, only when that leaves room for it), and is admitted and placed
//    again. After each Tick's pass, running elastic jobs below their
//    maximum grow onto free capacity their tenant's quota admits in pools
//    no queued job may use, near their racks first, at most once per
//    EngineConfig::elastic_resize_every; they shrink off nodes that drain,
//    fail or turn hot while their minimum stays elsewhere.
//  - A job that cannot be placed may preempt (PostFilter): a job within its
//    tenant's guarantee takes capacity back from other tenants' borrowed
//    jobs, never taking one below its guarantee; a job may preempt lower
//    priority jobs of its own tenant. Victims: lowest priority first, then
//    least lost work; the fewest that make room, on the fewest nodes; the
//    nodes are reserved for the preemptor while checkpointable victims
//    checkpoint.
//  - Vertical scaling (PART-5), tried before preemption: a single-replica
//    MIG job that cannot be placed although a GPU has enough free memory
//    slices for its profile (the instances there block every documented
//    start) re-cuts that GPU. Candidates: GPUs in MIG mode on ready nodes of
//    a pool the job is admitted to (as for a placement: within its guarantee,
//    or MayBorrow), not held for another job, that take the job's CPU,
//    memory and requirements, where moving some instances makes room and the
//    moved ones fit back in any order (src/engine/mig_recut.h). Only
//    instances of running, checkpointable, single-replica, non-pipeline jobs
//    move (of any tenant: they are placed again at once). Fewest moved
//    instances first, then least checkpoint cost, then lowest node and GPU
//    index. The moved jobs are preempted with a checkpoint (reason
//    kMigRecut) and the node is held for the job, as for a preemptor; a
//    held node is not re-cut again, a job with victims pending does not
//    re-cut again, and moved jobs neither preempt nor re-cut until the job
//    they made room for starts (MigRecutStarted, EngineState::recut_moved).
//  - A gang job that cannot be placed reserves nodes so that smaller jobs
//    backfill around it without starving it (one such hold per pool).
//  - Gangs are all or nothing. With EngineConfig::topology_aware they are
//    kept together: one NVLink domain, else one node, else one rack
//    (racks whose nodes together take every replica; the policy picks the
//    first replica's node among them), else anywhere.
//
// Control loops (src/engine/control_loop.h; the components are in
// src/control): each Tick first carries operators' drains on (past their
// deadline, see DrainNode), then runs quota lending, deadline eviction, idle
// reclamation, failure detection, pool autoscaling and defragmentation,
// then a scheduling pass, then elastic growth. The commands that feed a
// loop (Submit for lending, ReportUtilization, Heartbeat,
// ReportNodeTelemetry, CheckpointDone for migrations) validate their input
// here and hand it on. Every loop decides through the Engine (events, in
// order), so the Engine's contract above holds for what they decide too.
//
// Thread-safety: none; the caller serialises commands.
#pragma once

#include <functional>
#include <map>
#include <optional>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "src/base/rng.h"
#include "src/base/status.h"
#include "src/engine/control_loop.h"
#include "src/engine/defrag.h"
#include "src/engine/event.h"
#include "src/engine/hotspot.h"
#include "src/engine/mode_policy.h"
#include "src/engine/node_topology.h"
#include "src/engine/queries.h"
#include "src/engine/regions.h"
#include "src/engine/scaling.h"
#include "src/engine/state.h"
#include "src/engine/tenant_order.h"
#include "src/sched/attributes.h"
#include "src/sched/policy.h"
#include "src/sched/scheduler.h"
#include "src/sched/target_workload.h"

namespace gpupool {

// Idle reclamation (RECLAIM-1) and deadline eviction (RECLAIM-2); every
// number configurable, the seeds' as defaults.
struct ReclaimConfig {
  bool idle = false;                 // reclaim idle jobs (off: idle GPUs stay held)
  Duration poll{std::chrono::seconds(5)};   // how often utilization is reported
  double idle_below_pct = 10;        // "idle": GPU utilization below this
  int idle_polls = 3;                // for this many polls in a row
  Duration grace{std::chrono::seconds(15)}; // notified, then still idle this long: reclaim
  bool deadlines = true;             // stop jobs that run past their deadline
};

struct EngineConfig {
  std::string policy = "best";  // the base placement policy; attribute matching is added in front
  // The target workload of the FGD-family policies, learned from arrivals
  // (src/sched/workload_learner.h): its prior, half-life and refreshes.
  WorkloadLearningConfig workload_learning;
  LendingConfig lending;
  uint64_t seed = 1;            // node tie-break ranks and the Random policy
  int32_t max_replicas = 4096;
  std::string sharing_policy = "seed-000";  // PART-3 mode table for auto_sharing jobs
  ReclaimConfig reclaim;
  // OPS-4: a node without a heartbeat for this long is down (0: no failure
  // detection, e.g. in simulations without failures).
  Duration heartbeat_timeout{0};
  // TOPO-1: a gang job (two or more GPU replicas) goes to one NVLink domain
  // (a node whose GPUs are joined by NVLink) when one takes it, else to one
  // node, else to one rack, and only then wherever the policy puts each
  // replica. Off: each replica where the policy scores best (topology-blind).
  bool topology_aware = true;
  // Elastic scaling, per pool (SCALE-1..6; see src/engine/scaling.h).
  std::vector<PoolScalingConfig> scaling;
  // FRAG-2: every `defrag_every`, when on, plan migrations of running
  // checkpointable single-replica jobs (src/engine/defrag.h) and carry
  // them out: MigrationStarted, a checkpoint, then the planned GPUs.
  bool defrag = false;
  DefragConfig defrag_config;
  Duration defrag_every = std::chrono::minutes(5);
  RegionPolicy regions;  // TOPO-2
  HotspotConfig hotspots;  // OPS-2 (src/engine/hotspot.h)
  // SCALE-7: an elastic job is not resized again within this long of its
  // last resize (each resize costs a reshard).
  Duration elastic_resize_every = std::chrono::minutes(5);
  // POOL-3: a scaling pool short of capacity borrows empty nodes of other
  // pools before it asks the provider (see NodeLent).
  bool borrow_between_pools = true;
};

class Engine {
 public:
  using Sink = std::function<void(const Event&)>;

  // The FGD-family policies' target workload is learned from the jobs
  // submitted (EngineState::workload, config.workload_learning's prior
  // before any); `attributes` the node classes and job requirements (POOL-4/5); `loops`
  // the control loops, every one set (src/control/control_loops.h builds
  // the standard set: CreateEngine / RestoreEngine there).
  static Result<std::unique_ptr<Engine>> Create(EngineConfig config, AttributeTable attributes, ControlLoops loops);

  // An engine that continues from `state` (e.g. DecodeSnapshot's; the
  // journal's later events may be applied before or after, with Replay) at
  // `now`, as Create's would have after the same events. `now` is the
  // caller's clock at the restart; it may be before state.now (a clock
  // stepped back): events are stamped no earlier than state.now anyway (see
  // Emit). The state's lending config is replaced by config.lending. Fails
  // (deciding nothing) when the
  // configuration is bad (as for Create), when the state breaks an invariant
  // (CheckInvariants), or when it names a node class or job requirement
  // that `attributes` lacks.
  //
  // Soft state starts fresh, as after any restart: every node counts as
  // heard from at `now` (failure detection restarts its clocks), and no job
  // has low-utilization polls yet (an idle job needs idle_polls new ones).
  // Caches (the scheduler's score index, node shapes per pool) are rebuilt
  // when first needed. The node ranking is a function of the seed and the
  // node count, so placements tie-break as before. Not carried: the random
  // stream of policies that draw (Random, the random GPU selector) restarts
  // from the seed, so with those the later decisions differ from an engine
  // that never stopped. With the deterministic policies, and a state from
  // EncodeSnapshot of the running engine (which keeps the queue's blocked
  // groups), the restored engine decides the same events as the original
  // for the same later commands, except where the soft state above matters.
  static Result<std::unique_ptr<Engine>> Restore(EngineConfig config, AttributeTable attributes, EngineState state,
                                                 Instant now, ControlLoops loops);

  // --- set-up ---------------------------------------------------------------
  Result<PoolId> AddPool(std::string name, PoolSelector selector, std::vector<TenantId> dedicated_to, Instant now,
                         const Sink& sink);
  // The node joins the first pool whose selector matches its model and region
  // (PoolFor; nullopt: none does, and AddNode refuses it).
  std::optional<PoolId> PoolFor(GpuModelId model, const std::string& region) const;
  Result<NodeIndex> AddNode(NodeSpec spec, std::string region, std::string zone, std::string rack, Instant now,
                            const Sink& sink);
  Result<TenantId> AddTenant(std::string name, Instant now, const Sink& sink);
  Status SetQuota(TenantId tenant, PoolId pool, Quota quota, Instant now, const Sink& sink);
  // What SetQuota checks, deciding nothing: limit >= guarantee >= 0, a
  // positive weight, dedicated pools, and the pool's guarantees within its
  // GPUs. `tenant` may be the id the next AddTenant will give (a tenant
  // created together with its quotas).
  Status CheckQuota(TenantId tenant, PoolId pool, const Quota& quota) const;

  // --- jobs -----------------------------------------------------------------
  // Returns the job's id; the job is either queued (JobSubmitted) or
  // rejected (JobRejected, with the reason).
  Result<JobId> Submit(JobSpec spec, Instant now, const Sink& sink);
  Status Cancel(JobId job, Instant now, const Sink& sink);
  // A running job ended (its replicas exited); `reason` says why it failed
  // when the node knows (an OOM kill, a start failure).
  Status Finish(JobId job, bool succeeded, Instant now, const Sink& sink, std::string reason = "");
  // A checkpointing victim has saved its state: release it.
  Status CheckpointDone(JobId job, Instant now, const Sink& sink);
  // The control loops and a scheduling pass (see the header comment).
  void Tick(Instant now, const Sink& sink);

  // A running job's GPU utilization, every ReclaimConfig::poll (soft state:
  // never journaled; drives the idle state machine).
  Status ReportUtilization(JobId job, double util_pct, Instant now, const Sink& sink);
  // A node is alive (soft state). A down node that reports again is
  // scrubbed and rejoins (NodeUp).
  Status Heartbeat(NodeIndex node, Instant now, const Sink& sink);
  // OPS-2: a node's GPU telemetry (soft state; see src/engine/hotspot.h).
  // Fails for an unknown node or a GPU index outside it.
  Status ReportNodeTelemetry(NodeIndex node, const std::vector<GpuTelemetry>& gpus, Instant now, const Sink& sink);

  // --- what the node enforces (src/engine/node_reports.cc) ---------------------
  // EXEC-11: node's unhealthy GPUs are `unhealthy` from now on (the whole
  // set, as its agent reports it; `reason` says why). Emits
  // GpuHealthChanged when the set changes and moves the jobs that can move
  // off GPUs that just turned unhealthy (see the event). Fails for an
  // unknown node or a GPU it does not have, deciding nothing.
  Status ReportGpuHealth(NodeIndex node, GpuMask unhealthy, std::string reason, Instant now, const Sink& sink);
  // A running job's replica was seen using `used_mib` of GPU memory per GPU.
  // For a time-sliced or MPS share that uses more than it booked, past the
  // peak charged so far by at least a step (kObservedMemoryStepMib), emits
  // TaskMemoryObserved with the use rounded up to a step. Fails for a job
  // that is not running or a replica it does not have; negative use is
  // refused.
  Status ReportTaskMemory(JobId job, int32_t replica, int64_t used_mib, Instant now, const Sink& sink);
  // EXEC-7: GPU `gpu` of node reports its MIG mode and the instances that
  // exist on it. Emits
  // MigLayoutReported when that differs from what the Engine holds, and a
  // MigLayoutMismatch for each reported instance that overlaps a job's
  // planned instance otherwise (see the events). Fails, deciding nothing,
  // for an unknown node or GPU, MIG mode on a model without MIG, instances
  // without MIG mode, an unknown profile or start, or overlapping instances.
  Status ReportMigLayout(NodeIndex node, int32_t gpu, bool mig_enabled, std::vector<MigSlot> instances, Instant now,
                         const Sink& sink);

  // --- elastic scaling (src/engine/scaling.h) ----------------------------------
  // A node the provider created for a scale-out of `pool` joins it, built
  // from the pool's template with this name and rack (NodeAdded, marked
  // provisioned). Fails when the pool has no scaling settings or asked for
  // no nodes, or the name is taken.
  Result<NodeIndex> AddProvisionedNode(PoolId pool, std::string name, std::string rack, Instant now,
                                       const Sink& sink);
  // The provider could not create `nodes` of the nodes asked for.
  Status FailScaleOut(PoolId pool, int32_t nodes, std::string reason, Instant now, const Sink& sink);
  // The forecasters' accuracy so far (soft state: since the engine started).
  std::vector<ForecastStats> forecast_stats() const;
  // FRAG-3: gpupool::FragmentedRack (src/engine/queries.h) of this state.
  std::string FragmentedRack(PoolId pool) const { return gpupool::FragmentedRack(state_, pool); }

  // --- operators' node commands (issue 19, src/engine/node_ops.cc) ----------
  // An operator's cordon is a mark of its own (EngineState::cordons) beside
  // a hotspot's (hot_nodes) and a scale-in's (draining): the node takes no
  // new work while any holds it, and each one's end clears only its own.
  // `actor` names who asks and `reason` their words (at most
  // kMaxOperatorReasonBytes; ""), both kept in the events. A node held for
  // a preemptor or a gang is let go first (ReservationReleased). Each fails,
  // deciding nothing, with NotFound for an unknown node, FailedPrecondition
  // for a removed one (RemoveNode excepted) and InvalidArgument naming the
  // argument (reason: over the limit or not UTF-8; timeout). Each returns
  // whether it decided anything: false when the node is so already (no
  // event).
  //
  // Cordon: the node takes no new work (NodeCordoned); what runs stays.
  Result<bool> CordonNode(NodeIndex node, std::string actor, std::string reason, Instant now, const Sink& sink);
  // Ends the operator's cordon and a drain under way (NodeUncordoned), then
  // a scheduling pass. False when the operator had not cordoned it (a
  // hotspot's or scale-in's cordon is theirs to end).
  Result<bool> UncordonNode(NodeIndex node, std::string actor, Instant now, const Sink& sink);
  // Cordons the node and drains it (NodeDrainRequested): what can move
  // moves as for a scale-in (elastic jobs shrink off, checkpointable ones
  // checkpoint then queue again, stateless online inference at once); the
  // rest may run until `timeout` (0 .. kMaxDrainTimeout) from now, when
  // the next Tick stops it (PreemptionStarted + JobPreempted, its work since
  // its last checkpoint lost). NodeDrained once empty (at once when it is);
  // the node stays cordoned. False while a drain is under way.
  Result<bool> DrainNode(NodeIndex node, std::string actor, std::string reason, Duration timeout, Instant now,
                         const Sink& sink);
  // The node leaves its pool for good (NodeRemovalRequested, NodeRemoved;
  // the node provider's delete runs for it). A node with work on it is
  // refused (FailedPrecondition naming each job, its tenant and replicas)
  // unless `force`: then that work is interrupted as by a node failure
  // (JobInterrupted: queued again, nothing before its last checkpoint
  // lost), then a scheduling pass. False for a node removed already.
  Result<bool> RemoveNode(NodeIndex node, std::string actor, std::string reason, bool force, Instant now,
                          const Sink& sink);
  static constexpr size_t kMaxOperatorReasonBytes = 256;
  static constexpr Duration kMaxDrainTimeout = std::chrono::hours(24 * 7);

  // Applies an event decided earlier (recovery by replay). Requires the
  // event to be the next one (seq) and to fit the state.
  void Replay(const Event& e);

  // TOPO-2: replaces the region table from now on (RegionsSet). Fails,
  // deciding nothing, when CheckRegionPolicy does.
  Status SetRegions(RegionPolicy policy, Instant now, const Sink& sink);
  // The region table in force: the last one set, else the configuration's.
  const RegionPolicy& regions() const { return state_.regions ? *state_.regions : config_.regions; }

  const EngineState& state() const { return state_; }
  const AttributeTable& attributes() const { return attributes_; }
  const EngineConfig& config() const { return config_; }
  // Why a pending job waits, for users: the scheduler's view right now,
  // per candidate pool, with the framework's structured rejection (how many
  // nodes fail each check). O(nodes) per pool.
  struct PendingReason {
    PoolId pool = 0;
    enum class Kind : uint8_t {
      kQuotaExhausted,  // the tenant's elastic limit in the pool is reached
      kNoFittingNode,   // no node passes every check (see rejection)
      kQueued,          // some node fits: other jobs go first
    } kind = Kind::kQueued;
    int64_t used_milli = 0, limit_milli = 0;  // kQuotaExhausted
    Rejection rejection;                      // kNoFittingNode, kQueued
  };
  struct PendingExplanation {
    bool pending = false;
    int32_t victims_pending = 0;  // > 0: waiting for preempted jobs to checkpoint
    std::vector<PendingReason> pools;
    std::string text;  // the same, as one sentence
  };
  PendingExplanation WhyPending(JobId job) const;
  std::string ExplainPending(JobId job) const { return WhyPending(job).text; }

 private:
  // The EngineView and Actions the control loops get for one command
  // (src/engine/engine_loops.cc).
  class LoopContext;
  // One try at placing a job's replicas in a pool (src/engine/placement.cc).
  class PlacementTrial;

  Engine(EngineConfig config, AttributeTable attributes, ControlLoops loops);
  // Builds the policy and mode policy and checks the configuration (Create
  // and Restore).
  Status Init();

  enum class Outcome { kPlaced, kWaiting, kBlocked };
  // A pool the job was admitted to, and whether within its guarantee.
  struct Candidate {
    PoolId pool;
    bool within;
  };
  struct Admission {
    std::vector<Candidate> candidates;  // guarantee first, then by region (OrderByRegion)
    std::optional<PoolId> quota_limited;  // the first pool the tenant's elastic limit kept it out of
  };
  // What a PostFilter strategy did for a job that did not fit: placed it,
  // started something it now waits for (victims' checkpoints, a re-cut),
  // freed capacity so that admission and placement should run again, or
  // nothing (the next strategy is tried).
  enum class PostFilterResult { kPlaced, kWaiting, kRetry, kCannotHelp };
  struct PostFilterInput {
    Job& job;
    const Admission& admission;
    bool retried;  // this is the attempt after a kRetry
    Instant now;
    const Sink& sink;
  };
  struct PostFilter {
    const char* name;
    PostFilterResult (Engine::*run)(const PostFilterInput&);
  };
  static const PostFilter kPostFilters[];

  // Stamps, applies, tells the loops (ControlLoop::Observe), then the sink.
  void Emit(EventBody body, Instant now, const Sink& sink);
  // One pass over the queue, tenants in `tenant_order`'s order.
  void SchedulePass(Instant now, const Sink& sink, const TenantOrder& tenant_order = {});
  // Admission, placement, then the PostFilter strategies (kPostFilters).
  Outcome TryStart(Job& j, Instant now, const Sink& sink);
  Admission Admit(const Job& j) const;
  PostFilterResult YieldElasticFor(const PostFilterInput& in);
  PostFilterResult WaitForVictims(const PostFilterInput& in);
  PostFilterResult RecutMigFor(const PostFilterInput& in);
  PostFilterResult PreemptFor(const PostFilterInput& in);
  PostFilterResult HoldForGang(const PostFilterInput& in);
  // Places every replica of j in `pool` (src/engine/placement.cc): true
  // when it emitted JobPlaced.
  bool TryPlaceIn(Job& j, PoolId pool, bool within, Instant now, const Sink& sink);
  // Carries out PlanPreemption (src/engine/preemption.h): holds the nodes,
  // stops the victims. True when it preempted.
  bool TryPreempt(Job& j, PoolId pool, bool within, Instant now, const Sink& sink);
  // PART-5: re-cuts one MIG GPU of `pool` for j (see the header comment).
  // Requires j pending and admitted to `pool`, with no victims pending.
  // Returns true when it started a re-cut (j now waits for the moved jobs'
  // checkpoints); false when no GPU qualifies, deciding nothing.
  // Defined in src/engine/mig_recut.cc.
  bool TryMigRecut(Job& j, PoolId pool, Instant now, const Sink& sink);
  // Holds `hold`, with any nodes j already held, for j while what it stopped
  // checkpoints (a preemptor, a re-cut): nobody else takes the room. A node
  // already held for another job stays with it.
  void HoldNodesFor(const Job& j, std::set<NodeIndex> hold, Instant now, const Sink& sink);
  void MaybeReserveForGang(Job& j, PoolId pool, Instant now, const Sink& sink);
  // Submit's checks and what it derives (sharing mode, a pipeline's and an
  // elastic job's replica count): InvalidArgument naming the field.
  Status PrepareSpec(JobSpec& spec);
  // The pools `spec` may use: those it names (every pool when none), less
  // the pools dedicated to other tenants (POOL-2). InvalidArgument for an
  // unknown pool.
  Result<uint64_t> PoolsFor(const JobSpec& spec) const;
  // Why `spec` can never run ("" never: at least "no pool may run it"), and
  // in `fitting_pools` the pools whose empty nodes (and scaling templates)
  // could hold it; 0 when none.
  std::string NeverFitsReason(const JobSpec& spec, uint64_t* fitting_pools);
  // Rebuilds pool_shapes_ when nodes were added or removed since.
  void RefreshPoolShapes();
  // How many of spec's replicas the empty nodes of `pool` hold together
  // (pool_shapes_), and the first reason a shape refuses it.
  int64_t ReplicasHostable(const JobSpec& spec, PoolId pool, FitFailure* first_failure) const;
  // TOPO-1 tiers for a gang job (see topology_aware): tries `trial` on
  // NVLink nodes, then nodes, then racks that take every replica. False
  // when none does (src/engine/placement.cc).
  bool TryPlaceGangByTopology(const Job& j, PoolId pool, PlacementTrial& trial);
  // TOPO-2: orders (and for online work within a latency budget, filters)
  // candidate pools by region (src/engine/regions.cc).
  template <class C>
  void OrderByRegion(const Job& j, std::vector<C>& candidates) const;
  // The region of pool p (its selector's only region), or "".
  const RegionInfo* PoolRegion(PoolId p) const;
  // Online inference with a latency budget may not use pool p (its region
  // is farther from the tenant's users than the budget, or unknown).
  bool OutsideLatencyBudget(const Job& j, PoolId p) const;
  // The scaling settings of `pool`, or null (EngineView::ScalingOf).
  const PoolScalingConfig* ScalingOf(PoolId pool) const;
  // The MIG-capable GPU models of the nodes in `pools` (a pool-id mask).
  // O(nodes); for MIG submissions only.
  GpuModelMask MigModelsIn(uint64_t pools) const;
  // SCALE-7 (src/engine/elastic.cc): shrinks `j` by the replicas on `node`
  // (-1: every replica above its minimum). True when it resized.
  bool ShrinkElastic(const Job& j, NodeIndex node, const std::string& reason, Instant now, const Sink& sink);
  // Before preempting for `j` in pool p (one it may use): elastic jobs there
  // give back the replicas they grew beyond their minimum, when that leaves
  // room for j. True when any did.
  bool YieldElastic(const Job& j, PoolId p, Instant now, const Sink& sink);
  // Actions::MoveOff (src/engine/elastic.cc).
  void MoveOff(const Job& j, NodeIndex n, PreemptReason reason, const std::string& where, Instant now,
               const Sink& sink);
  // EXEC-11 (src/engine/node_reports.cc): moves what can move off node n's
  // GPUs `gpus`, which just turned unhealthy.
  void MoveOffUnhealthyGpus(NodeIndex n, GpuMask gpus, Instant now, const Sink& sink);
  // Operators' node commands (src/engine/node_ops.cc): the checks they
  // share; the hold on a node let go; one drain's progress (past its
  // deadline what runs is stopped; empty: NodeDrained), and every drain's,
  // at each Tick (nothing when no operator cordoned a node).
  Status CheckNodeCommand(NodeIndex node, const std::string& reason) const;
  void ReleaseHoldOn(NodeIndex node, Instant now, const Sink& sink);
  void ProgressOperatorDrain(NodeIndex node, Instant now, const Sink& sink);
  void ProgressOperatorDrains(Instant now, const Sink& sink);
  // EngineView::PlaceTentatively (src/engine/engine_loops.cc).
  std::vector<PlacedReplica> PlaceTentatively(const Demand& d, int32_t count,
                                              const std::function<bool(NodeIndex)>& prefer);
  Scheduler& scheduler();
  // The policy for the learner's last rebuild (state_.workload): the
  // target, the policy built on it, and a fresh scheduler (its scores
  // depend on the target). After Apply, when the learner rebuilt.
  Status RebuildTarget();
  void FollowLearnedTarget();

  EngineConfig config_;
  ModePolicy mode_policy_;
  TargetWorkload target_;
  uint64_t target_builds_ = 0;  // the learner's builds() that target_ reflects
  std::vector<Demand> prior_;   // config_.workload_learning.prior, or the default
  AttributeTable attributes_;
  Policy policy_;
  EngineState state_;
  Rng rng_;
  ControlLoops loops_;
  std::unique_ptr<Scheduler> scheduler_;
  int scheduler_nodes_ = -1;  // node count the scheduler was built for
  // Distinct untouched node shapes per pool (for "can it ever fit"), rebuilt
  // when nodes are added.
  std::vector<std::vector<std::pair<Node, int>>> pool_shapes_;
  int64_t pool_shapes_nodes_ = -1;  // node count and removed nodes the shapes were built for
  NodeTopology topology_;  // TOPO-1, extended as nodes are added
  // EXEC-7, per (node, GPU): the last MIG report and the clashes it had
  // (soft state: a report that repeats the last one decides nothing).
  struct MigReportMemo {
    bool seen = false;
    bool enabled = false;
    uint64_t bytes = 0;
    std::vector<std::string> clashes;
  };
  std::map<std::pair<NodeIndex, int32_t>, MigReportMemo> mig_reports_;
  bool any_elastic_ = false;  // an elastic job was submitted (SCALE-7 work is skipped until then)
};

}  // namespace gpupool
