// Events: the facts the Engine decides, and the only way its state changes
// (EngineState::Apply). Replaying a log of events rebuilds the state; the
// log's canonical JSON lines (ToJsonLine) are byte-identical for the same
// inputs and seed.
//
// Each event is declared once, here: its fields, and in its Fields list
// (src/base/fields.h) the name each has in the journal; its type name is
// kType. The JSON codec, the binary codec and equality are generated from
// these. Type names, field names, enum value names and the order of
// EventBody's alternatives (the binary tag) never change: append new
// events at the end (tests/event_format_test.cc pins them).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "src/base/fields.h"
#include "src/base/status.h"
#include "src/base/time.h"
#include "src/engine/regions.h"
#include "src/model/cluster.h"
#include "src/model/job.h"
#include "src/model/pool.h"
#include "src/model/tenant.h"

namespace gpupool {

// --- set-up -----------------------------------------------------------------
struct PoolAdded {
  Pool pool;
  GP_EVENT_FIELDS("PoolAdded", e) {
    v("pool", e.pool.id);
    v("name", e.pool.name);
    v("models", e.pool.selector.models);
    v("regions", e.pool.selector.regions);
    v("dedicated_to", e.pool.dedicated_to);
  }
};
struct NodeAdded {
  NodeSpec spec;  // spec.pool assigned by the engine
  std::string region, zone, rack;
  // Provisioned for a scale-out of spec.pool (ScaleOutRequested): it counts
  // off the nodes still expected from the provider.
  bool provisioned = false;
  GP_EVENT_FIELDS("NodeAdded", e) {
    v("node", e.spec.name);
    v("cpu_milli", e.spec.cpu_milli);
    v("memory_mib", e.spec.memory_mib);
    v("gpus", e.spec.gpu_count);
    v("model", e.spec.gpu_model);
    v("pool", e.spec.pool);
    v("attr_class", e.spec.attr_class);
    v("region", e.region);
    v("zone", e.zone);
    v("rack", e.rack);
    v("provisioned", e.provisioned, e.provisioned);
  }
};
struct TenantAdded {
  TenantId tenant = -1;
  std::string name;
  GP_EVENT_FIELDS("TenantAdded", e) {
    v("tenant", e.tenant);
    v("name", e.name);
  }
};
struct QuotaSet {
  TenantId tenant = -1;
  PoolId pool = 0;
  Quota quota;
  GP_EVENT_FIELDS("QuotaSet", e) {
    v("tenant", e.tenant);
    v("pool", e.pool);
    v("quota", e.quota);
  }
};

// --- jobs -------------------------------------------------------------------
struct JobSubmitted {
  JobId job = -1;
  JobSpec spec;
  GP_EVENT_FIELDS("JobSubmitted", e) {
    v("job", e.job);
    v("spec", e.spec);
  }
};
// The job can never run (e.g. bigger than any node of any pool it may use).
struct JobRejected {
  JobId job = -1;
  JobSpec spec;
  std::string reason;
  GP_EVENT_FIELDS("JobRejected", e) {
    v("job", e.job);
    v("spec", e.spec);
    v("reason", e.reason);
  }
};
struct PlacedReplica {
  NodeIndex node = -1;
  GpuMask gpus = 0;
  GP_FIELDS(e) {
    v("node", e.node);
    v("gpus", e.gpus);
  }
};
struct JobPlaced {
  JobId job = -1;
  PoolId pool = 0;
  bool borrowed = false;  // beyond the tenant's effective guarantee: preemptible
  std::vector<PlacedReplica> replicas;
  GP_EVENT_FIELDS("JobPlaced", e) {
    v("job", e.job);
    v("pool", e.pool);
    v("borrowed", e.borrowed);
    v("replicas", e.replicas);
  }
};
struct JobFinished {
  JobId job = -1;
  bool succeeded = true;
  std::string reason;  // why it failed, as its node reported it (e.g. "out of memory (limit 2 GiB)"); may be empty
  GP_EVENT_FIELDS("JobFinished", e) {
    v("job", e.job);
    v("succeeded", e.succeeded);
    v("reason", e.reason, !e.reason.empty());
  }
};
struct JobCancelled {
  JobId job = -1;
  GP_EVENT_FIELDS("JobCancelled", e) { v("job", e.job); }
};

enum class PreemptReason : uint8_t {
  kGuaranteeReclaim,  // a tenant takes its guarantee back from borrowers
  kPriority,          // a higher-priority job of the same tenant
  // A MIG re-cut (PART-5, see MigRecutStarted): the victim's instance is in
  // the way of the preemptor's on a fragmented GPU. Always checkpointed;
  // the victim queues again at once and is placed again like any preempted
  // job (it keeps its priority and submit time), typically on the same GPU.
  kMigRecut,
  // The victim's node is drained for a scale-in (NodeDrainStarted): it
  // moves elsewhere (checkpointed first when it can be; preemptor -1).
  kDrain,
  // Defragmentation (FRAG-2, MigrationStarted): the victim checkpoints and
  // moves to the planned GPUs (preemptor -1).
  kDefrag,
  // The victim's node is a hotspot (OPS-2, HotspotDetected): it moves off
  // (checkpointed first when it can be; preemptor -1).
  kHotspot,
  // The victim's GPU turned unhealthy (EXEC-11, GpuHealthChanged): it moves
  // off (checkpointed first when it can be; preemptor -1).
  kGpuUnhealthy,
};
const char* PreemptReasonName(PreemptReason r);
template <>
struct EnumNames<PreemptReason> {
  static constexpr int kCount = 7;
  static const char* Name(PreemptReason r) { return PreemptReasonName(r); }
};

// The victim stops for `preemptor` (for a re-cut: the job the re-cut makes
// room for): checkpointable victims first checkpoint
// (state kCheckpointing, resources held until CheckpointDone); others are
// released at once by a JobPreempted that follows.
struct PreemptionStarted {
  JobId victim = -1;
  JobId preemptor = -1;
  PreemptReason reason = PreemptReason::kPriority;
  bool checkpoint = false;
  GP_EVENT_FIELDS("PreemptionStarted", e) {
    v("victim", e.victim);
    v("preemptor", e.preemptor);
    v("reason", e.reason);
    v("checkpoint", e.checkpoint);
  }
};
// The victim's resources are released and it is queued again. lost_work is
// the run time since its last checkpoint (0 when it checkpointed now).
struct JobPreempted {
  JobId victim = -1;
  Duration lost_work{0};
  GP_EVENT_FIELDS("JobPreempted", e) {
    v("victim", e.victim);
    v("lost_work_ms", e.lost_work);
  }
};

// --- vertical scaling (PART-5) ------------------------------------------------
// A MIG job waits although one GPU has enough free memory slices for its
// profile, because the instances there are laid out so that no documented
// start of the profile is free. The engine re-cuts that GPU for it: the
// instances in the way (`moved`, all of checkpointable single-replica jobs)
// stop with a checkpoint (a PreemptionStarted with reason kMigRecut for each
// follows, then JobPreempted at CheckpointDone), the node is held for `job`
// (NodesReserved), `job` then starts there (at `start`, where first fit puts
// it among the instances that stay) and the moved jobs are placed again by
// the ordinary scheduling pass, on the same GPU (the plan guarantees they
// all fit back, in any order) or elsewhere.
//
// Decided before the events it explains. Apply records the moved jobs
// (EngineState::recut_moved): until `job` starts or leaves, they wait for
// the room planned for them instead of preempting or re-cutting themselves.
// `node` and `gpu` say which GPU is re-cut, so that a simulator can model
// the re-partitioning time (destroying and creating the GPU instances)
// before the new and the moved instances start there.
struct MigRecutStarted {
  JobId job = -1;            // the waiting MIG job the re-cut makes room for
  NodeIndex node = -1;
  int32_t gpu = -1;          // GPU index on the node
  std::string profile;       // the job's MIG profile, e.g. "3g.40gb"
  uint8_t start = 0;         // its planned first memory slice
  std::vector<JobId> moved;  // the jobs whose instances move, ascending
  GP_EVENT_FIELDS("MigRecutStarted", e) {
    v("job", e.job);
    v("node", e.node);
    v("gpu", e.gpu);
    v("profile", e.profile);
    v("start", e.start);
    v("moved", e.moved);
  }
};

// --- quotas -----------------------------------------------------------------
struct QuotaLent {
  TenantId tenant = -1;
  PoolId pool = 0;
  int64_t milli = 0;
  GP_EVENT_FIELDS("QuotaLent", e) {
    v("tenant", e.tenant);
    v("pool", e.pool);
    v("milli", e.milli);
  }
};
struct QuotaRecalled {
  TenantId tenant = -1;
  PoolId pool = 0;
  int64_t milli = 0;
  GP_EVENT_FIELDS("QuotaRecalled", e) {
    v("tenant", e.tenant);
    v("pool", e.pool);
    v("milli", e.milli);
  }
};
// A tenant's job waits because the tenant reached its elastic limit in every
// pool it may use (QUOTA-4): the tenant is alerted once per episode.
struct QuotaExhausted {
  TenantId tenant = -1;
  PoolId pool = 0;
  JobId job = -1;
  GP_EVENT_FIELDS("QuotaExhausted", e) {
    v("tenant", e.tenant);
    v("pool", e.pool);
    v("job", e.job);
  }
};

// Nodes held for one waiting job (a gang at the head of its queue, or a
// preemptor waiting for its victims): only that job may start on them.
struct NodesReserved {
  JobId job = -1;
  std::vector<NodeIndex> nodes;
  GP_EVENT_FIELDS("NodesReserved", e) {
    v("job", e.job);
    v("nodes", e.nodes);
  }
};
struct ReservationReleased {
  JobId job = -1;
  GP_EVENT_FIELDS("ReservationReleased", e) { v("job", e.job); }
};

// --- reclamation (RECLAIM-1..3) ------------------------------------------------
// A running job looked idle (low GPU utilization for several polls): its
// tenant is notified and a grace period starts.
struct JobIdleSuspected {
  JobId job = -1;
  GP_EVENT_FIELDS("JobIdleSuspected", e) { v("job", e.job); }
};
// It got busy again within the grace period.
struct JobIdleRecovered {
  JobId job = -1;
  GP_EVENT_FIELDS("JobIdleRecovered", e) { v("job", e.job); }
};
enum class ReclaimReason : uint8_t { kIdle, kDeadline };
const char* ReclaimReasonName(ReclaimReason r);
template <>
struct EnumNames<ReclaimReason> {
  static constexpr int kCount = 2;
  static const char* Name(ReclaimReason r) { return ReclaimReasonName(r); }
};
// The job is stopped to give its GPUs back: idle past the grace period, or
// running past its deadline. Checkpointable jobs checkpoint first (state
// kCheckpointing until CheckpointDone); the JobReclaimed that follows ends it.
struct ReclaimStarted {
  JobId job = -1;
  ReclaimReason reason = ReclaimReason::kIdle;
  bool checkpoint = false;
  GP_EVENT_FIELDS("ReclaimStarted", e) {
    v("job", e.job);
    v("reason", e.reason);
    v("checkpoint", e.checkpoint);
  }
};
struct JobReclaimed {
  JobId job = -1;
  GP_EVENT_FIELDS("JobReclaimed", e) { v("job", e.job); }
};

// --- node failure (OPS-4) --------------------------------------------------------
// No heartbeat for the timeout: the node is down; every job with a replica on
// it stops (JobInterrupted) and queues again to resume from its checkpoint.
struct NodeDown {
  NodeIndex node = -1;
  GP_EVENT_FIELDS("NodeDown", e) { v("node", e.node); }
};
struct JobInterrupted {
  JobId job = -1;
  NodeIndex node = -1;
  Duration lost_work{0};  // run time since its last checkpoint
  GP_EVENT_FIELDS("JobInterrupted", e) {
    v("job", e.job);
    v("node", e.node);
    v("lost_work_ms", e.lost_work);
  }
};
// Heartbeats are back: the node rejoins (its GPUs were scrubbed first).
struct NodeUp {
  NodeIndex node = -1;
  GP_EVENT_FIELDS("NodeUp", e) { v("node", e.node); }
};

// The free memory of these GPUs was zeroed (RECLAIM-4): another tenant's
// data is gone before a new tenant's task starts there. Decided right
// before the placement that needs it; the task starts after the scrub.
struct GpusScrubbed {
  NodeIndex node = -1;
  GpuMask gpus = 0;
  GP_EVENT_FIELDS("GpusScrubbed", e) {
    v("node", e.node);
    v("gpus", e.gpus);
  }
};

// --- defragmentation (FRAG-2) ----------------------------------------------------------
// A running checkpointable job moves to `node`/`gpus` to merge free capacity:
// a PreemptionStarted (reason kDefrag, with a checkpoint) follows; once the
// checkpoint is done the job is placed there if it still fits, else where
// the scheduler puts it. `frag_pct` is the cluster's fragmentation rate when
// the plan was made.
struct MigrationStarted {
  JobId job = -1;
  NodeIndex node = -1;
  GpuMask gpus = 0;
  double frag_pct = 0;
  GP_EVENT_FIELDS("MigrationStarted", e) {
    v("job", e.job);
    v("node", e.node);
    v("gpus", e.gpus);
    v("frag_pct", e.frag_pct);
  }
};

// --- elastic scaling (SCALE-1..6) -------------------------------------------------
// The autoscaler asks the node provider for `nodes` more nodes of the pool's
// template. They join later, each with a NodeAdded marked provisioned, or
// the provider gives up on some (ScaleOutFailed).
struct ScaleOutRequested {
  PoolId pool = 0;
  int32_t nodes = 0;
  std::string reason;
  GP_EVENT_FIELDS("ScaleOutRequested", e) {
    v("pool", e.pool);
    v("nodes", e.nodes);
    v("reason", e.reason);
  }
};
struct ScaleOutFailed {
  PoolId pool = 0;
  int32_t nodes = 0;
  std::string reason;
  GP_EVENT_FIELDS("ScaleOutFailed", e) {
    v("pool", e.pool);
    v("nodes", e.nodes);
    v("reason", e.reason);
  }
};
// Scale-in, step one: the node takes no new work (it is cordoned), holds
// for nobody, and its running jobs move: checkpointable and stateless ones
// at once (PreemptionStarted, reason kDrain), the others when they finish
// or at the drain timeout.
struct NodeDrainStarted {
  NodeIndex node = -1;
  std::string reason;
  GP_EVENT_FIELDS("NodeDrainStarted", e) {
    v("node", e.node);
    v("reason", e.reason);
  }
};
// Step two: the drained node is empty and leaves its pool for good; the
// provider deletes it. Its index stays (removed nodes take nothing).
struct NodeRemoved {
  NodeIndex node = -1;
  GP_EVENT_FIELDS("NodeRemoved", e) { v("node", e.node); }
};
// SCALE-5: how many pre-initialised (warm) nodes the provider should keep
// for the pool, from its recent scale-outs.
struct WarmPoolSized {
  PoolId pool = 0;
  int32_t nodes = 0;
  GP_EVENT_FIELDS("WarmPoolSized", e) {
    v("pool", e.pool);
    v("nodes", e.nodes);
  }
};

// --- elastic training (SCALE-7) ------------------------------------------------
// A running elastic job changes size without a restart: the replicas at
// `removed` (indexes into its placements before the event, ascending) are
// released, the ones in `added` join at the end (in the job's pool), and
// the job reshards its state for `reshard` (its checkpoint duration) before
// it computes again. `borrowed` is the job's borrowed flag afterwards.
struct JobResized {
  JobId job = -1;
  std::vector<int32_t> removed;
  std::vector<PlacedReplica> added;
  bool borrowed = false;
  Duration reshard{0};
  std::string reason;
  GP_EVENT_FIELDS("JobResized", e) {
    v("job", e.job);
    v("removed", e.removed);
    v("added", e.added);
    v("borrowed", e.borrowed);
    v("reshard_ms", e.reshard);
    v("reason", e.reason);
  }
};

// --- hotspots (OPS-2) ----------------------------------------------------------
// A node's GPUs (`gpus`) stayed over a telemetry threshold for the hotspot
// window: the node takes no new work (it is cordoned) until it cools down
// (HotspotCleared). The actions follow as their own events: movable jobs on
// those GPUs move off (PreemptionStarted, reason kHotspot) or, when none
// can, the pool scales out (ScaleOutRequested naming the hotspot).
struct HotspotDetected {
  NodeIndex node = -1;
  GpuMask gpus = 0;
  std::string reason;
  GP_EVENT_FIELDS("HotspotDetected", e) {
    v("node", e.node);
    v("gpus", e.gpus);
    v("reason", e.reason);
  }
};
struct HotspotCleared {
  NodeIndex node = -1;
  GP_EVENT_FIELDS("HotspotCleared", e) { v("node", e.node); }
};

// --- what the node enforces (issue 15) ------------------------------------------
// EXEC-11: the node's agent reports `unhealthy` as the node's unhealthy GPUs
// from now on (a critical XID, a failed device query; a GPU not in the set
// is healthy again), `reason` as the agent said it. Those GPUs take no new
// work. The jobs on GPUs that just turned unhealthy and can move, move:
// PreemptionStarted (reason kGpuUnhealthy) follows, checkpointed first when
// the job can checkpoint; stateless online inference moves at once; the
// rest keep running until they end (they fail by themselves if the GPU
// really is broken). Emitted only when the set changes.
struct GpuHealthChanged {
  NodeIndex node = -1;
  GpuMask unhealthy = 0;
  std::string reason;
  GP_EVENT_FIELDS("GpuHealthChanged", e) {
    v("node", e.node);
    v("unhealthy", e.unhealthy);
    v("reason", e.reason);
  }
};
// A time-sliced or MPS share's task was seen using `used_mib` of GPU memory
// (the peak so far, rounded up to kObservedMemoryStepMib), more than it
// booked: from now on its GPU is charged that much for it
// (Cluster::ChargeObservedMemory), so new shares are placed against what
// its neighbours really use.
struct TaskMemoryObserved {
  JobId job = -1;
  int32_t replica = 0;
  int64_t used_mib = 0;
  GP_EVENT_FIELDS("TaskMemoryObserved", e) {
    v("job", e.job);
    v("replica", e.replica);
    v("used_mib", e.used_mib);
  }
};
inline constexpr int64_t kObservedMemoryStepMib = 256;
// EXEC-7: GPU `gpu` of the node reports its MIG mode and the MIG instances
// that exist on it besides those of jobs the Engine placed there: facts of
// the hardware (only a GPU reset, an operator action, changes the mode). From now on a GPU in MIG mode takes MIG shares
// only and one out of it none; placements use an existing instance of
// their profile first and never cut into one (Node::mig_existing). A
// reported instance that overlaps an instance the Engine placed a job on,
// with another profile or start, is left out (MigLayoutMismatch says so).
// Emitted when the report differs from what the Engine holds.
struct MigSlot {
  std::string profile;  // "3g.40gb"
  int32_t start = 0;    // first memory slice
  friend bool operator==(const MigSlot&, const MigSlot&) = default;
  GP_FIELDS(e) {
    v("profile", e.profile);
    v("start", e.start);
  }
};
struct MigLayoutReported {
  NodeIndex node = -1;
  int32_t gpu = 0;
  bool mig_enabled = false;
  std::vector<MigSlot> instances;  // ascending start
  GP_EVENT_FIELDS("MigLayoutReported", e) {
    v("node", e.node);
    v("gpu", e.gpu);
    v("mig_enabled", e.mig_enabled);
    v("instances", e.instances);
  }
};
// The hardware and the Engine's plan disagree on a GPU: `reported` (an
// instance the node has) overlaps `planned` (the instance of a job the
// Engine placed there). The job's task cannot start until the operator or
// a re-cut resolves it; the next report shows what the GPU has.
struct MigLayoutMismatch {
  NodeIndex node = -1;
  int32_t gpu = 0;
  std::string reported;  // "4g.40gb@0"
  std::string planned;   // "3g.40gb@4 (job 7)"
  GP_EVENT_FIELDS("MigLayoutMismatch", e) {
    v("node", e.node);
    v("gpu", e.gpu);
    v("reported", e.reported);
    v("planned", e.planned);
  }
};

// --- borrowing between pools (POOL-3) -----------------------------------------
// A pool short of capacity borrows an empty ready node of another pool
// (same GPU model, a region the borrower selects, neither pool dedicated)
// before it scales out: the node moves to pool `to` until its home pool
// needs it back; then it is drained (NodeDrainStarted) and, once empty,
// returns (NodeReturned) instead of being removed.
struct NodeLent {
  NodeIndex node = -1;
  PoolId to = 0;
  std::string reason;
  GP_EVENT_FIELDS("NodeLent", e) {
    v("node", e.node);
    v("to", e.to);
    v("reason", e.reason);
  }
};
struct NodeReturned {
  NodeIndex node = -1;
  GP_EVENT_FIELDS("NodeReturned", e) { v("node", e.node); }
};

// --- regions (TOPO-2) ------------------------------------------------------------
// The region table in force from now on, replacing the configuration's.
struct RegionsSet {
  RegionPolicy policy;
  GP_EVENT_FIELDS("RegionsSet", e) { v("policy", e.policy); }
};

// --- operators' node commands (issue 19: node cordon|uncordon|drain|remove) ------
// `actor` (in the journal's JSON "operator", as the audit's own "actor"
// is added beside an event's fields) names who asked (the API's principal,
// "admin"; a scenario's "scenario"), `reason` their words ("" when none
// was given). An
// operator's cordon is its own mark beside a hotspot's and a scale-in's:
// the node takes no new work while any of them holds it, and each one's
// end clears only its own mark.
//
// The node takes no new work until NodeUncordoned; what runs there stays.
struct NodeCordoned {
  NodeIndex node = -1;
  std::string actor;
  std::string reason;
  GP_EVENT_FIELDS("NodeCordoned", e) {
    v("node", e.node);
    v("operator", e.actor);
    v("reason", e.reason);
  }
};
// The operator's cordon (and a drain under way) ends; the node takes new
// work again unless a hotspot or a scale-in still holds it.
struct NodeUncordoned {
  NodeIndex node = -1;
  std::string actor;
  GP_EVENT_FIELDS("NodeUncordoned", e) {
    v("node", e.node);
    v("operator", e.actor);
  }
};
// The operator drains the node: it is cordoned (as NodeCordoned), and its
// running work moves as a scale-in drain moves it: elastic jobs shrink off
// it, checkpointable ones checkpoint and queue again, stateless online
// inference moves at once (those follow as PreemptionStarted, reason
// kDrain, and JobResized); what cannot move may finish until `timeout`
// after this event, when it is stopped (PreemptionStarted and
// JobPreempted with its lost work). NodeDrained follows once it is empty.
struct NodeDrainRequested {
  NodeIndex node = -1;
  std::string actor;
  std::string reason;
  Duration timeout{0};
  GP_EVENT_FIELDS("NodeDrainRequested", e) {
    v("node", e.node);
    v("operator", e.actor);
    v("reason", e.reason);
    v("timeout_ms", e.timeout);
  }
};
// The operator's drain is over: nothing runs on the node. It stays
// cordoned until NodeUncordoned (or removed).
struct NodeDrained {
  NodeIndex node = -1;
  GP_EVENT_FIELDS("NodeDrained", e) { v("node", e.node); }
};
// The operator removes the node: it is cordoned and, with `force`, the
// work still on it is interrupted as by a node failure (JobInterrupted,
// each job queued again with its work since its last checkpoint lost;
// elastic jobs that keep their minimum elsewhere shrink instead); then
// NodeRemoved follows (the node provider's delete runs for it).
struct NodeRemovalRequested {
  NodeIndex node = -1;
  std::string actor;
  std::string reason;
  bool force = false;
  GP_EVENT_FIELDS("NodeRemovalRequested", e) {
    v("node", e.node);
    v("operator", e.actor);
    v("reason", e.reason);
    v("force", e.force);
  }
};

using EventBody = std::variant<PoolAdded, NodeAdded, TenantAdded, QuotaSet, JobSubmitted, JobRejected, JobPlaced,
                               JobFinished, JobCancelled, PreemptionStarted, JobPreempted, QuotaLent, QuotaRecalled,
                               QuotaExhausted, NodesReserved, ReservationReleased, GpusScrubbed, JobIdleSuspected,
                               JobIdleRecovered, ReclaimStarted, JobReclaimed, NodeDown, JobInterrupted, NodeUp,
                               MigRecutStarted, ScaleOutRequested, ScaleOutFailed, NodeDrainStarted, NodeRemoved,
                               WarmPoolSized, MigrationStarted, JobResized, HotspotDetected, HotspotCleared,
                               NodeLent, NodeReturned, RegionsSet, GpuHealthChanged, TaskMemoryObserved,
                               MigLayoutReported, MigLayoutMismatch, NodeCordoned, NodeUncordoned,
                               NodeDrainRequested, NodeDrained, NodeRemovalRequested>;

struct Event {
  int64_t seq = 0;  // 1, 2, 3, ... in the order applied
  Instant at{};
  EventBody body;
};

const char* EventName(const EventBody& body);

// One canonical JSON object per event, keys sorted, no spaces:
// {"at":1500,"job":7,"seq":12,"type":"JobPlaced",...}
// It carries every field of the event, so that EventFromJson gives it back
// whole. Requires the event's strings to be valid UTF-8 (the JSON library
// throws otherwise): commands that take names from outside must check that.
std::string ToJsonLine(const Event& e);

// The exact inverse of ToJsonLine, for journals: for every event e,
// EventFromJson(ToJsonLine(e)) is an event equal to e field by field, so
// ToJsonLine(*EventFromJson(ToJsonLine(e))) == ToJsonLine(e) and replaying
// the decoded events rebuilds the same state.
//
// Strict: the line must be one JSON object with "seq", "at", a known "type"
// and exactly the fields ToJsonLine writes for that type (optional ones may
// be absent; an unknown field is an error, since dropping it could rebuild a
// different state); each integer must fit its C++ field. A malformed line
// is an Error (kInvalidArgument) naming the field, e.g.
// "JobPlaced event: replicas[1].gpus: expected an integer in [0, 65535]";
// nothing throws. Key order and whitespace do not matter.
//
// Decoding checks form, not meaning: whether the event fits a state (the
// node exists, the job is pending, ...) is Apply's precondition, which it
// GP_CHECKs. A journal written by this program satisfies it; a caller that
// replays foreign lines must check them against the state first.
Result<Event> EventFromJson(std::string_view line);

// Equal seq, time, type and every field of the body (src/base/fields.h).
bool operator==(const Event& a, const Event& b);

// The same events in a compact binary form (src/base/fields_binary.h): a
// tag (the body's index in EventBody, u16), seq and at (i64 ms), then the
// body's fields in list order. For every event e, EventFromBinary(
// EventToBinary(e)) == EventFromJson(ToJsonLine(e)), which is e for every
// event the Engine emits (a field written only when its predicate holds
// reads back as its default otherwise, in both forms). Strict like EventFromJson: a short, long or
// damaged input is an Error (kInvalidArgument) naming the field, never a
// crash or a huge allocation.
std::string EventToBinary(const Event& e);
Result<Event> EventFromBinary(std::string_view bytes);

}  // namespace gpupool
