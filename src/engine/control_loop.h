// The seam between the Engine and its control loops (issue 21).
//
// A control loop watches the state over time and asks the Engine to act:
// quota lending, idle reclamation, deadline eviction, failure detection,
// pool autoscaling, defragmentation, hotspot detection, elastic growth.
// Each is a component in src/control that owns its soft state (clocks,
// windows, counters: never journaled, fresh after a restart) and sees the
// Engine only through the two interfaces below:
//  - EngineView: the state and the queries a loop may ask (read-only);
//  - Actions: what a loop may ask the Engine to do. Every decision is an
//    event emitted through the Engine (stamped, applied by
//    EngineState::Apply, handed to the caller's sink, in order), so that a
//    loop's decisions are journaled and replayed like any other.
// The interfaces are declared here, and the Engine holds its loops through
// ControlLoops, so that src/engine does not depend on src/control; whoever
// creates an Engine hands the loops in (src/control/control_loops.h builds
// the standard set from the EngineConfig).
//
// Rules for a loop: it changes nothing but its own soft state; it never
// reads another loop's state (what it needs from another comes from the
// view, or from the events it observes); it is deterministic (no clock but
// view.now(), no unordered iteration in decisions).
//
// Thread-safety: none; the Engine calls its loops from the command being
// served, which its caller serialises.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "src/base/status.h"
#include "src/base/time.h"
#include "src/engine/event.h"
#include "src/engine/hotspot.h"
#include "src/engine/scaling.h"
#include "src/engine/state.h"
#include "src/sched/target_workload.h"

namespace gpupool {

// What a loop sees. Valid for the duration of the call it is passed to.
class EngineView {
 public:
  virtual ~EngineView() = default;
  // The time of the command being served (events are stamped with it).
  virtual Instant now() const = 0;
  virtual const EngineState& state() const = 0;
  // The scaling settings of `pool` (EngineConfig::scaling), or null when
  // the pool does not scale.
  virtual const PoolScalingConfig* ScalingOf(PoolId pool) const = 0;
  // The engine policy's filters for `d` on `n` (requirements, ecosystem,
  // capacity): kNone when it may go there.
  virtual FitFailure Feasibility(const Node& n, const Demand& d) const = 0;
  // The expected workload (its fragmentation model, for FRAG-2).
  virtual const TargetWorkload& target() const = 0;
  // Has an elastic job ever been submitted? (SCALE-7 work is skipped
  // until then.)
  virtual bool AnyElastic() const = 0;
  // Racks (TOPO-1): a dense id per node and how many there are.
  virtual int32_t RackOf(NodeIndex n) const = 0;
  virtual int32_t RackCount() const = 0;
  // Where up to `count` replicas of `d` would go, placed one after another
  // as the scheduler places them (each on a node `prefer` accepts when one
  // takes it, else wherever the policy puts it), stopping at the first that
  // fits nowhere. The cluster is left exactly as it was (the allocation
  // slots included, see Cluster::TrimFreeSlots).
  virtual std::vector<PlacedReplica> PlaceTentatively(const Demand& d, int32_t count,
                                                      const std::function<bool(NodeIndex)>& prefer) const = 0;
};

// What a loop may ask of the Engine. Each call decides at once; the state
// the view shows includes its events when it returns.
class Actions {
 public:
  virtual ~Actions() = default;
  // Emits one event (see the Engine header: stamped no earlier than the
  // state's time, applied, then to the sink).
  virtual void Emit(EventBody body) = 0;
  // A scheduling pass now (what a loop freed is offered at once).
  virtual void SchedulePass() = 0;
  // SCALE-7: shrinks elastic job `j` by its replicas on `node` (-1: every
  // replica above its minimum) when it keeps its minimum (JobResized with
  // `reason`). False, deciding nothing, when it cannot.
  virtual bool ShrinkElastic(const Job& j, NodeIndex node, const std::string& reason) = 0;
  // Moves running job `j` off node `n`: a shrink when it is elastic and can
  // shrink, else PreemptionStarted for `reason` (checkpointed when it can
  // be; a job that cannot checkpoint is preempted at once). `where`
  // explains a shrink.
  virtual void MoveOff(const Job& j, NodeIndex n, PreemptReason reason, const std::string& where) = 0;
};

// One control loop. Tick runs at every Engine::Tick (in the order of
// ControlLoops), Observe after every event the Engine decides.
class ControlLoop {
 public:
  virtual ~ControlLoop() = default;
  virtual void Tick(const EngineView& view, Actions& act) = 0;
  // Every event the Engine decided, once applied (not events replayed with
  // Engine::Replay): soft state that depends on the facts follows them
  // here. May be called while the loop's own Tick or feed is emitting;
  // decides nothing.
  virtual void Observe(const Event& e) { (void)e; }
  // The Engine continues from a restored state (Engine::Restore) at
  // view.now().
  virtual void Restarted(const EngineView& view) { (void)view; }
};

// QUOTA-3: lends idle guarantees each Tick, and recalls them when the
// lender submits work.
class QuotaLender : public ControlLoop {
 public:
  // `submitted` was just queued (JobSubmitted).
  virtual void Submitted(const Job& submitted, const EngineView& view, Actions& act) = 0;
};

// RECLAIM-1: idle jobs, from utilization reports.
class IdleReclaimer : public ControlLoop {
 public:
  // A live job's GPU utilization (validated: a percentage).
  virtual void Utilization(const Job& j, double util_pct, const EngineView& view, Actions& act) = 0;
};

// OPS-4: nodes that stop sending heartbeats are down.
class FailureDetector : public ControlLoop {
 public:
  // Node `node` (one the cluster has) is alive. Fails for a removed node.
  virtual Status Heartbeat(NodeIndex node, const EngineView& view, Actions& act) = 0;
};

// OPS-2: hot nodes, from telemetry reports. Its Tick does nothing.
class HotspotDetector : public ControlLoop {
 public:
  // Node `node`'s GPU telemetry (validated: GPUs it has).
  virtual void Telemetry(NodeIndex node, const std::vector<GpuTelemetry>& gpus, const EngineView& view,
                         Actions& act) = 0;
};

// FRAG-2: plans migrations and places migrated jobs.
class Defragmenter : public ControlLoop {
 public:
  // Job `job` was just preempted after its checkpoint (JobPreempted): when
  // it was migrating, places it at its planned GPUs if they still take it.
  // True when it did.
  virtual bool Checkpointed(JobId job, const EngineView& view, Actions& act) = 0;
};

// SCALE-1..6, POOL-3: per-pool autoscaling, drains, borrowing between pools.
class PoolAutoscaler : public ControlLoop {
 public:
  // The forecasters' accuracy so far (soft state: since the engine started).
  virtual std::vector<ForecastStats> forecast_stats() const = 0;
};

// The loops an Engine runs, each required (src/control/control_loops.h
// builds them). Engine::Tick runs them in this order, with the scheduling
// pass before `elastic` (growth takes only what the pass left).
struct ControlLoops {
  std::unique_ptr<QuotaLender> lending;
  std::unique_ptr<ControlLoop> deadlines;
  std::unique_ptr<IdleReclaimer> idle;
  std::unique_ptr<FailureDetector> failures;
  std::unique_ptr<PoolAutoscaler> scaling;
  std::unique_ptr<Defragmenter> defrag;
  std::unique_ptr<HotspotDetector> hotspots;
  std::unique_ptr<ControlLoop> elastic;

  // Every loop, in the order above (null entries included).
  std::vector<ControlLoop*> all() const {
    return {lending.get(), deadlines.get(), idle.get(), failures.get(),
            scaling.get(), defrag.get(),    hotspots.get(), elastic.get()};
  }
};

}  // namespace gpupool
