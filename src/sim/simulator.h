// The discrete-event simulator around the Engine: a virtual clock and an
// event heap keyed by (time, kind, sequence). It plays the part of the
// world: jobs arrive, start after a modelled start latency (plus a memory
// scrub when the engine scrubbed their GPUs, plus MIG instance set-up, plus
// reading back a checkpoint when they saved work: SharingCosts::
// restore_factor x their checkpoint duration), run
// for their work, checkpoint when asked (for their checkpoint duration),
// report their GPU utilization, nodes heartbeat and fail, and the control
// loops tick. Everything it learns comes back from the Engine's events.
//
// Progress: a job computes at a rate: 1 alone, less when it shares a GPU
// (GpuLoad: time-slice switching and contention, MPS contention), less on
// a MIG instance or MPS share smaller than its load (share / load), and
// less by SharingCosts::checkpoint_overhead when it checkpoints periodically.
// It keeps the work it saved: a checkpoint (before preemption or
// reclamation) saves everything computed so far; otherwise the work since
// its last periodic checkpoint (or since start) is lost, and reported.
// Online inference is stateless: it loses nothing, and its duration is a
// lifetime on the wall clock from its first start (it serves until then,
// whether or not it was reclaimed in between).
//
// Utilization (RECLAIM-1): each job's model (constant, bursty, a GenAI
// duty-cycle series) runs on the wall clock from the job's first start.
// With idle reclamation on, running jobs report it every poll (polls that
// cannot change the engine's view are skipped: those during a busy stretch
// after the first). A job reclaimed while idle is submitted again by its
// owner after a think time (SimOptions::think_time, drawn when it is
// reclaimed, whatever its utilization will do) and resumes from what it
// saved; online inference whose lifetime ends first does not come back.
// The time it would have been busy while away is reported.
//
// Failures (OPS-4): every node heartbeats each tick when the engine has a
// heartbeat timeout; a fault stops a node's heartbeats (its jobs stop
// computing at once) until it comes back.
//
// At one instant the order is: completions, finished checkpoints, faults
// and recoveries, utilization polls, resubmissions, provisioned nodes,
// operators' node commands, world changes, arrivals, then the tick. Same
// inputs, same events.
#pragma once

#include <cstdint>
#include <fstream>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <queue>
#include <set>
#include <string>
#include <unordered_map>
#include <vector>

#include "src/base/rng.h"
#include "src/base/sha256.h"
#include "src/base/status.h"
#include "src/engine/engine.h"
#include "src/sim/gpu_load.h"
#include "src/sim/metrics.h"
#include "src/sim/utilization.h"
#include "src/sim/workload.h"

namespace gpupool {

struct SimOptions {
  Duration tick{std::chrono::seconds(30)};
  Duration start_latency{std::chrono::seconds(10)};
  Duration sample_every{std::chrono::minutes(5)};
  Duration horizon{std::chrono::hours(24)};
  std::string event_log_path;     // when set, every event as one JSON line
  bool check_invariants = false;  // CheckInvariants after every event (tests)
  SharingCosts costs;             // interference, MIG set-up, scrub, checkpoint overhead
  // The GenAI duty-cycle series that kTrace utilization models index
  // (must outlive the simulator when any job uses one).
  const std::vector<std::vector<double>>* duty_cycles = nullptr;
  std::vector<FaultSpec> faults;  // by node name
  std::vector<HotSpell> hot_spells;  // by node name; reported at each tick with engine.hotspots
  std::vector<GpuFaultSpec> gpu_faults;  // by node name: reported as the node's agent would (EXEC-11)
  // Operators' node commands (issue 19), by node name; one the Engine
  // refuses (a remove without force of a node with work on it) fails the run.
  std::vector<NodeOpSpec> node_ops;
  // Changes to the world at given times (`sim replay`: nodes that joined,
  // tenants created and quotas set after the start), sorted by `at`; each
  // runs before the arrivals of its instant, and one that fails fails the run.
  struct WorldChange {
    Duration at{0};
    std::function<Status(Engine&, Instant, const Engine::Sink&)> apply;
  };
  std::vector<WorldChange> world_changes;
  // When set, told which sim job (index into the jobs) each JobSubmitted
  // event's job is, resubmissions included.
  std::function<void(JobId, size_t)> on_submitted;
  // When set, also handed every event as it arrives (tests that need the
  // events themselves, not their log lines).
  std::function<void(const Event&)> on_event;
  // The node provider for engine scaling (SCALE-1, SCALE-5).
  ProviderModel provider;
  // How long the owner of a job reclaimed while idle takes to submit it
  // again (fixed or lognormal), drawn from a stream seeded by `seed`.
  DurationModel think_time = DefaultThinkTime();
  uint64_t seed = 1;
};

class Simulator {
 public:
  // `engine` must be set up (pools, nodes, tenants, quotas) and outlive the
  // simulator; `jobs` sorted by arrival.
  Simulator(Engine* engine, std::vector<SimJob> jobs, SimOptions options);

  // The sink for set-up commands issued before Run (pools, nodes, tenants,
  // quotas), so that the event log holds the whole history.
  Engine::Sink sink() const { return sink_; }

  // Runs to the horizon. Fails when the event log cannot be written, an
  // invariant breaks (with check_invariants), a fault names an unknown
  // node (or a GPU fault a GPU the node lacks), or the engine refuses a job.
  Result<SimReport> Run(const std::string& scenario_name);

  const std::vector<SimJob>& jobs() const { return jobs_; }

 private:
  enum class Kind : uint8_t {
    kCompletion = 0,
    kCheckpointDone = 1,
    kFault = 2,
    kRecover = 3,
    kGpuFault = 4,    // id: node * kMaxGpusPerNode + gpu; token: the XID
    kGpuRecover = 5,  // id as for kGpuFault
    kPoll = 6,
    kResubmit = 7,
    kProvision = 8,  // a requested node is ready to join (id: pool)
    kWarmReady = 9,  // a warm-pool node finished initialising (id: pool)
    kNodeOp = 10,    // an operator's node command (id: index into node_ops)
    kWorldChange = 11,  // id: index into world_changes
    kTick = 12,
  };
  struct Item {
    Instant at;
    Kind kind;
    int64_t seq;
    int64_t id;      // a job id; a node (faults); a sim job index (resubmissions)
    uint64_t token;  // completions and polls: must match the job's current one
    bool operator>(const Item& o) const {
      if (at != o.at) return at > o.at;
      if (kind != o.kind) return kind > o.kind;
      return seq > o.seq;
    }
  };
  // A job the engine knows (queued, running, stopping), or one parked
  // between an idle reclaim and its resubmission.
  struct Running {
    size_t index = 0;               // into jobs_
    Duration done{0};               // work saved
    // The current placement (valid while `placed`).
    bool placed = false;
    std::vector<PlacedReplica> replicas;
    Instant placed_at{};
    double gpus = 0;                // GPUs held (whole GPUs' worth)
    Instant run_start{};            // computing begins (after the start latency)
    bool computing = false;         // placed, and neither stopped nor on a failed node
    Instant stopped_at{};           // when computing stopped (valid while placed and not computing)
    bool checkpointed = false;      // the stop saved everything computed
    double progress_ms = 0;         // work computed in this placement up to rate_since
    Instant rate_since{};
    double rate = 1, factor = 1;    // work per wall time; speed relative to no co-located tasks
    double limit_speed = 1;         // speed on its share relative to an unlimited GPU (ShareLimitSpeed)
    double load = 0;                // what it keeps busy on each of its GPUs (limited to its share)
    uint64_t token = 0;             // the live completion
    uint64_t poll_token = 0;        // the live poll chain
    std::optional<Instant> failed_at;   // its node failed; until re-placed
    std::optional<Instant> idle_from;   // reclaimed while idle since then
    std::optional<Instant> wants_back;  // resubmitted at (its owner came back)
    std::optional<Instant> away_since;  // released by an idle reclaim, not running again yet
    std::optional<Instant> moved_at;    // stopped for a move (defrag, drain, hotspot), not running again yet
    PreemptReason moved_for = PreemptReason::kDefrag;
    Utilization util;
    Instant util_origin{};          // the utilization clock's zero: first start
    // TOPO-1, for the current placement of a communicating job: per step,
    // bytes over cross-rack and cross-node links and seconds of all-reduce.
    double cross_rack_bytes = 0, cross_node_bytes = 0, comm_s = 0;
  };
  // GPUs an idle reclaim released while jobs waited.
  struct Released {
    Instant at;
    std::vector<PlacedReplica> where;
  };

  void Push(Instant at, Kind kind, int64_t id = -1, uint64_t token = 0);
  // Run's parts: the scenario's faults, node operations, world changes and
  // hot spells as heap items (or spells_), checked against the cluster; one
  // heap item coming due; a tick (heartbeats, telemetry, the engine's
  // tick); what is still held at the horizon; the report.
  Status ScheduleFaultsAndSpells();
  Status OnItem(const Item& item, Instant now);
  Status OnProvision(PoolId pool, Instant now);
  Status OnTick(Instant now);
  Status ReportTelemetry(Instant now);
  void SettleAtHorizon(Instant horizon);
  SimReport Report(Instant horizon, const std::string& scenario_name);
  void OnEvent(const Event& e);
  // OnEvent's parts, one per kind of event with more than a line to it.
  void LogEvent(const Event& e);
  void OnSubmitted(const JobSubmitted& s, Instant now);
  void OnRejected();
  void OnNodeAdded(const NodeAdded& na);
  void OnWarmPoolSized(const WarmPoolSized& w, Instant now);
  void OnPreemptionStarted(const PreemptionStarted& ps, Instant now);
  void OnPreempted(const JobPreempted& pr, Instant now);
  void OnReclaimStarted(const ReclaimStarted& rs, Instant now);
  void OnInterrupted(const JobInterrupted& ji, Instant now);
  void OnFinished(const JobFinished& f, Instant now);
  void OnCancelled(const JobCancelled& c, Instant now);
  void OnPlaced(const JobPlaced& p, Instant now);
  // SCALE-7: an elastic job changed size: what it computed is kept (the
  // reshard saves it), it computes again after the reshard, at a rate in
  // proportion to its replicas over its minimum.
  void OnResized(const JobResized& e, Instant now);
  Status OnPoll(JobId id, uint64_t token, Instant now);
  // Issue 19: options_.node_ops as heap items, and one of them coming due.
  Status ScheduleNodeOps();
  Status OnNodeOp(size_t index, Instant now);
  // EXEC-11: options_.gpu_faults as heap items, and one of them coming due.
  Status ScheduleGpuFaults();
  Status OnGpuFault(const Item& item, Instant now);
  void OnFault(NodeIndex node, Instant now);
  // RECLAIM-1: a job was reclaimed (idle, or past its deadline).
  void OnReclaimed(const JobReclaimed& rc, Instant now);
  // A reclaimed job is back (or will never be) at `until`: reports how long
  // it would have been busy since it was released.
  void AwayUntil(Running& r, Instant until);
  Status Resubmit(size_t index, Instant now);

  // Brings `progress_ms` and the slowdown accounting up to `now`.
  void Settle(Running& r, Instant now);
  // Recomputes the rate of each computing job of `ids` and reschedules its completion.
  void UpdateRates(const std::vector<JobId>& ids, Instant now);
  void UpdateRate(JobId id, Running& r, Instant now);
  // TOPO-1: the communication of a data-parallel job in placement `p`.
  void SetCommunication(Running& r, const SimJob& job, const JobSpec& spec, const JobPlaced& p);
  void StopComputing(JobId id, Running& r, Instant now);
  // Stops computing and saves everything computed; done after the job's
  // checkpoint duration (CheckpointDone).
  void StartCheckpoint(JobId id, Running& r, Instant now);
  // Saves what a stop without a checkpoint keeps (periodic checkpoints);
  // returns the work lost.
  Duration SavePeriodic(Running& r);
  // The placement ends at `now`: GPU accounting, no longer placed.
  void Release(JobId id, Running& r, Instant now);
  double IdleThreshold() const { return engine_->config().reclaim.idle_below_pct / 100.0; }
  // The job's utilization model; without one, constant at 90% of its
  // per-GPU share `gpu_share`.
  Utilization MakeUtilization(const SimJob& job, double gpu_share) const;

  Engine* engine_;
  Engine::Sink sink_;
  std::vector<SimJob> jobs_;
  SimOptions options_;
  Rng think_rng_;  // owners' think times
  std::priority_queue<Item, std::vector<Item>, std::greater<Item>> heap_;
  int64_t seq_ = 0;
  std::unordered_map<JobId, Running> live_;
  std::map<size_t, Running> parked_;  // by sim job index
  size_t submitting_ = 0;             // the sim job being submitted
  bool resubmitting_ = false;
  GpuLoad load_;
  std::vector<bool> failed_;          // per node: stopped heartbeating
  // OPS-2: a node's temperature during a hot spell (options_.hot_spells).
  struct Spell {
    NodeIndex node;
    Instant from, to;
    double temperature_c;
  };
  std::vector<Spell> spells_;
  // As the configuration said when Run began: ticks heartbeat every live
  // node, and report GPU telemetry (OPS-2).
  bool heartbeats_ = false;
  bool telemetry_ = false;
  std::vector<GpuMask> gpu_unhealthy_;  // per node: its GPUs in a GPU fault (EXEC-11)
  Instant scrub_at_{};                // the GPUs the engine scrubbed at that instant
  std::map<NodeIndex, GpuMask> scrubbed_;
  std::vector<Released> released_;    // waiting for their next task
  // The simulated node provider, per pool: warm nodes ready and coming,
  // the warm pool's target, and how many nodes it has named.
  struct PoolProvider {
    int32_t warm_ready = 0, warm_coming = 0, warm_target = 0;
    int64_t serial = 0;
  };
  void OnScaleOut(const ScaleOutRequested& s, Instant now);
  void RefillWarmPool(PoolId pool, Instant now);
  void UpdateNodeCounts();
  std::map<PoolId, PoolProvider> provider_;
  int64_t provisioning_ = 0, in_service_ = 0;
  std::set<JobId> drained_;    // jobs moving off draining nodes
  std::set<JobId> migrating_;  // jobs moving for defragmentation
  bool scaling_ = false;
  MetricsCollector metrics_;
  Sha256 hash_;
  std::ofstream log_;
  int64_t events_ = 0;
  Status failure_;
};

}  // namespace gpupool
