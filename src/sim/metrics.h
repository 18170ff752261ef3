// What a simulation measured: per cluster, per priority class and per tenant.
//
// Waiting time is submit to first start; a job still waiting at the horizon
// counts with the wait it had so far (censored there), so a policy cannot
// look good by never starting jobs. JCT is submit to completion, over
// completed jobs. GPU allocation is time-weighted over the run. A tenant's
// share received is its time-averaged GPU usage over the cluster's GPUs; its
// entitlements are its guarantee over the GPUs of its pools and its weight
// over the weights of all tenants.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "src/base/time.h"
#include "src/engine/event.h"
#include "src/engine/state.h"
#include "src/sim/workload.h"

namespace gpupool {

struct Percentiles {
  double p50 = 0, p95 = 0, p99 = 0, mean = 0;
  int64_t count = 0;
};
// Nearest-rank percentiles of `values` (sorted in place).
Percentiles ComputePercentiles(std::vector<double>& values);
// The 0th..100th nearest-rank percentiles of sorted `values` (101 of them;
// none when `values` is empty).
std::vector<double> PercentileSteps(const std::vector<double>& sorted);

struct ClassReport {
  int64_t submitted = 0, rejected = 0, started = 0, completed = 0;
  Percentiles wait_s, jct_s;
  // The 0th, 1st, ..., 100th percentile of the wait (nearest rank; empty
  // when no job waited), for CDF plots (the HTML report; not in ToJson).
  std::vector<double> wait_quantiles_s;
  double gpu_hours_completed = 0;
};

struct TenantReport {
  ClassReport jobs;
  double share_received_pct = 0;
  double entitlement_guaranteed_pct = 0;
  double entitlement_weight_pct = 0;
  int64_t preemptions = 0;
  double gpu_hours_lost = 0;
};

struct PoolReport {
  double allocation_pct_mean = 0;  // time-weighted
  double gpu_hours_used = 0;       // allocated GPU-hours over the run
  PoolCapacity at_end;              // the capacity model (POOL-3) at the horizon
};

// Sharing (PART-1..4): how busy GPUs really were, and what co-location cost.
struct SharingReport {
  double gpu_busy_pct_mean = 0;          // time-weighted sum of min(1, load) per GPU / GPUs
  // GPU jobs, time-weighted: run time / run time without co-located tasks - 1
  // (time-slice switching, contention), the run time without co-located
  // tasks / run time on unlimited GPUs - 1 (MIG or MPS shares smaller than
  // the task's load), and run time / run time alone on unlimited GPUs - 1
  // (both: (1 + a)(1 + b) - 1).
  double interference_slowdown_pct = 0;
  double share_limit_slowdown_pct = 0;
  double sharing_slowdown_pct = 0;
  int64_t scrubs = 0;                    // placements that waited for a memory scrub
  int64_t mig_setups = 0;                // placements that created MIG instances
  int64_t mig_recuts = 0;                // GPUs re-cut for a waiting MIG job (PART-5)
};

// Reclamation (RECLAIM-1..4).
struct ReclaimReport {
  int64_t idle_reclaims = 0, deadline_evictions = 0;
  int64_t resumed = 0;        // reclaimed while idle, submitted again by its owner and running again
  int64_t never_resumed = 0;  // reclaimed online inference whose lifetime ended before its owner was back
  Percentiles reclaim_latency_s;       // idle start to release
  Percentiles reallocation_latency_s;  // release (with jobs waiting) to the next task's process start on those GPUs
  Percentiles resume_latency_s;        // submitted again to running again
  // Summed over reclaimed jobs: the time each would have been busy (at or
  // above the idle threshold) between its release and running again.
  double busy_while_away_hours = 0;
  double idle_gpu_hours = 0;  // GPUs held while idle (below the idle threshold, starting, stopping)
  double held_gpu_hours = 0;  // GPUs held at all
};

// Node failures (OPS-4).
struct RecoveryReport {
  int64_t node_failures = 0, interruptions = 0;
  int64_t not_replaced = 0;            // still waiting at the horizon (counted there)
  Percentiles replace_latency_s;       // the node's failure to the job running again (its process started)
  Percentiles placement_latency_s;     // the node's failure to the job's re-placement (the decision)
  double replaced_within_30s_pct = 0;  // running again within 30 s, of interruptions
  Percentiles lost_work_s;             // run time since the last checkpoint, per interruption
};

// Topology (TOPO-1): communication of data-parallel jobs (those with a
// model size and two or more workers), from the ring all-reduce model.
struct TopologyReport {
  int64_t placements = 0;                        // placements of communicating jobs
  int64_t spanning_nodes = 0, spanning_racks = 0;  // of those, over 2+ nodes / 2+ racks
  double steps = 0;                              // training steps computed
  double cross_rack_gib = 0, cross_node_gib = 0; // traffic over links between racks / nodes
  double comm_hours = 0;                         // time spent in all-reduce
  double step_hours = 0;                         // wall time of those steps (compute + communication)
  double cross_rack_gib_per_step() const { return steps > 0 ? cross_rack_gib / steps : 0; }
  double comm_overhead_pct() const { return step_hours > 0 ? 100.0 * comm_hours / step_hours : 0; }
};

// Jobs the engine moved for one reason (defragmentation, a drain, a
// hotspot): the downtime each move cost the moved job, from when it stopped
// computing (its checkpoint began, or it stopped at once) to its process
// starting again elsewhere (start latency, scrub, MIG set-up and restore
// included); a job not running again by the horizon counts to the horizon.
struct MoveReport {
  int64_t moves = 0;
  int64_t stateless_moves = 0;  // of them, online inference: it serves no one meanwhile
  Percentiles downtime_s;
  double downtime_hours = 0;            // summed over the moves
  double stateless_downtime_hours = 0;  // of online inference
};

// Elastic scaling (SCALE-1..6): the pool's nodes over time and what they cost.
struct ScalingReport {
  int64_t scale_outs = 0, nodes_requested = 0, nodes_added = 0, warm_starts = 0;
  int64_t drains = 0, nodes_removed = 0;
  int64_t drained_jobs = 0;        // jobs moved off draining nodes
  int64_t elastic_resizes = 0;     // SCALE-7: JobResized events
  double elastic_reshard_hours = 0;  // running elastic jobs paused to reshard, summed
  MoveReport drain_moves;          // jobs moved off draining nodes
  double drained_lost_work_s = 0;  // their work lost (0 when every one resumed from a checkpoint)
  double node_hours = 0;           // billed: from the request to the removal
  double warm_node_hours = 0;      // warm-pool nodes waiting
  double cost = 0;                 // node_hours x price + warm_node_hours x price x warm fraction
  // The same two, hour by hour of the run (index = hour), for costs over a window.
  std::vector<double> billed_node_hours_by_hour, warm_node_hours_by_hour;
  double nodes_min = 0, nodes_max = 0;  // nodes in service, over the samples
  std::vector<std::pair<double, double>> node_series;  // (hours, nodes in service)
  int64_t forecasts = 0;
  double forecast_mae_gpus = 0, forecast_mean_actual_gpus = 0;
};

// Defragmentation (FRAG-2) and the free capacity it is meant to make usable.
struct DefragReport {
  int64_t migrations = 0;
  double migrations_per_hour = 0;
  double migration_lost_work_s = 0;
  MoveReport moved;  // what the migrations cost the moved jobs
  // Time-weighted share of the GPUs left unallocated while jobs waited.
  double unallocated_while_waiting_pct = 0;
  double unallocated_gpu_hours_while_waiting = 0;  // the same, as GPU-hours
  double waiting_hours = 0;  // how long some job waited
};

// Hotspots (OPS-2): what the engine found and did.
struct HotspotReport {
  int64_t detected = 0, cleared = 0;
  int64_t moves = 0;  // jobs moved off hot GPUs (PreemptionStarted, reason hotspot)
  MoveReport moved;   // what those moves cost them
};

struct SimReport {
  std::string scenario;
  std::map<std::string, PoolReport> pools;
  double horizon_h = 0;
  ClassReport all;
  std::map<std::string, ClassReport> by_priority;
  std::map<std::string, TenantReport> by_tenant;
  double allocation_pct_mean = 0;
  double gpu_hours_in_service = 0;  // GPUs of the nodes in service, integrated over the run
  std::vector<std::pair<double, double>> allocation_series;  // (hours, allocated % of GPUs)
  std::vector<std::pair<double, double>> busy_series;        // (hours, busy % of GPUs), same samples; not in ToJson
  double jobs_completed_per_hour = 0;
  int64_t preemptions = 0;
  double gpu_hours_lost = 0;  // run time lost to preemption x GPUs
  int64_t unfinished = 0;     // pending or running at the horizon
  int64_t ended = 0;          // reclaimed or evicted and not run again
  SharingReport sharing;
  ReclaimReport reclaim;
  RecoveryReport recovery;
  TopologyReport topology;
  ScalingReport scaling;
  DefragReport defrag;
  HotspotReport hotspots;
  int64_t events = 0;
  std::string event_log_sha256;
};

nlohmann::json ToJson(const SimReport& r);
std::string FormatReport(const SimReport& r);

// Collects a report from the simulator's hooks.
class MetricsCollector {
 public:
  MetricsCollector(const std::vector<SimJob>* jobs, const EngineState* state, Duration sample_every);

  void Submitted(size_t job, Instant now);
  void Rejected(size_t job);
  void Started(size_t job, Instant now);
  void Completed(size_t job, Instant now);
  void Preempted(size_t job, Duration lost);
  // The job stopped for good without completing (evicted; reclaimed and
  // never busy again).
  void Ended(size_t job);
  // GPUs kept busy from now on (whole GPUs' worth), read at the next Observe.
  void SetGpuBusy(double gpus) { busy_next_ = gpus; }
  // A GPU job computed for `wall_ms` what it would have done without
  // co-located tasks in `uncrowded_ms`, and alone on unlimited GPUs (no
  // MIG or MPS share smaller than its load) in `alone_ms`.
  void Computed(double wall_ms, double uncrowded_ms, double alone_ms) {
    wall_ms_ += wall_ms;
    uncrowded_ms_ += uncrowded_ms;
    alone_ms_ += alone_ms;
  }
  void Held(double idle_gpu_ms, double held_gpu_ms) {
    idle_gpu_ms_ += idle_gpu_ms;
    held_gpu_ms_ += held_gpu_ms;
  }
  void Scrubbed() { ++scrubs_; }
  void MigSetUp() { ++mig_setups_; }
  void MigRecut() { ++mig_recuts_; }
  void IdleReclaimed(Duration latency) { reclaim_latency_s_.push_back(ToSeconds(latency)); }
  void DeadlineEvicted() { ++deadline_evictions_; }
  void Resumed(Duration latency) { resume_latency_s_.push_back(ToSeconds(latency)); }
  void NeverResumed() { ++never_resumed_; }
  // A job the engine moved for `why` (defrag, drain or hotspot) is running
  // again (or the run ended) `downtime` after it stopped.
  void MovedBack(PreemptReason why, Duration downtime, bool stateless);
  void BusyWhileAway(Duration d) { busy_while_away_ms_ += static_cast<double>(ToMillis(d)); }
  void Reallocated(Duration latency) { reallocation_latency_s_.push_back(ToSeconds(latency)); }
  void NodeFailed() { ++node_failures_; }
  void Interrupted(Duration lost) { lost_work_s_.push_back(ToSeconds(lost)); }
  // Running again `latency` after its node failed (its process started:
  // start latency, scrub, MIG set-up and restore included), placed
  // `placement` after it; `censored`: not re-placed by the horizon, counted
  // with the wait so far.
  void Replaced(Duration latency, Duration placement, bool censored) {
    replace_latency_s_.push_back(ToSeconds(latency));
    placement_latency_s_.push_back(ToSeconds(placement));
    not_replaced_ += censored;
  }
  // A communicating job was placed over `nodes` nodes and `racks` racks.
  void CommPlaced(int nodes, int racks) {
    ++topology_.placements;
    topology_.spanning_nodes += nodes > 1;
    topology_.spanning_racks += racks > 1;
  }
  // It computed `steps` steps in `wall_ms`, moving these bytes per step
  // and communicating `comm_s` seconds per step.
  void Communicated(double steps, double wall_ms, double cross_rack_bytes, double cross_node_bytes, double comm_s) {
    topology_.steps += steps;
    topology_.step_hours += wall_ms / 3.6e6;
    topology_.cross_rack_gib += steps * cross_rack_bytes / (1 << 30);
    topology_.cross_node_gib += steps * cross_node_bytes / (1 << 30);
    topology_.comm_hours += steps * comm_s / 3600.0;
  }
  // Nodes in service (joined, not removed), billed (those plus the ones
  // being provisioned) and warm, from now on (read at the next Observe).
  void SetNodes(double in_service, double billed, double warm) {
    nodes_next_ = in_service;
    billed_next_ = billed;
    warm_next_ = warm;
  }
  ScalingReport& scaling() { return scaling_; }
  DefragReport& defrag() { return defrag_; }
  HotspotReport& hotspots() { return hotspots_; }
  // After every engine event: integrates allocation and usage up to `now`.
  void Observe(Instant now);
  SimReport Finish(Instant horizon, std::string scenario, int64_t events, std::string sha256);

 private:
  // Finish's parts, each filling its sections of the report.
  void ReportPools(SimReport& r) const;
  void ReportJobs(Instant horizon, SimReport& r) const;
  void ReportTenants(SimReport& r) const;
  void ReportSharingAndReclaim(SimReport& r);  // sorts the latency samples
  void ReportRecovery(SimReport& r);
  void ReportMovesAndScaling(SimReport& r);
  struct JobRecord {
    Instant submitted{};
    std::optional<Instant> started, completed;
    bool rejected = false, seen = false, ended = false;
  };
  void Integrate(Instant now);
  // Adds the billed and warm nodes in force to the hourly ledgers over
  // [from_ms, from_ms + dt_ms).
  void Bill(double from_ms, double dt_ms);

  const std::vector<SimJob>* jobs_;
  const EngineState* state_;
  Duration sample_every_;
  std::vector<JobRecord> records_;
  std::vector<std::pair<double, double>> series_, busy_series_;
  Instant next_sample_{};
  Instant last_{};
  int64_t last_allocated_ = 0;
  double allocated_area_ = 0;             // milli x ms
  std::vector<int64_t> pool_last_;        // allocated at last_, per pool
  std::vector<double> pool_area_;         // milli x ms, per pool
  std::vector<int64_t> tenant_last_;      // usage at last_, per tenant
  std::vector<double> tenant_area_;       // milli x ms, per tenant
  std::vector<int64_t> tenant_preemptions_;
  std::vector<double> tenant_lost_;       // milli x ms
  int64_t preemptions_ = 0;
  double lost_ = 0;                       // milli x ms
  double busy_next_ = 0, busy_last_ = 0, busy_area_ = 0;  // GPUs, GPUs x ms
  double busy_while_away_ms_ = 0;
  double wall_ms_ = 0, uncrowded_ms_ = 0, alone_ms_ = 0, idle_gpu_ms_ = 0, held_gpu_ms_ = 0;
  int64_t scrubs_ = 0, mig_setups_ = 0, mig_recuts_ = 0, deadline_evictions_ = 0, never_resumed_ = 0, node_failures_ = 0,
          not_replaced_ = 0;
  TopologyReport topology_;
  ScalingReport scaling_;
  DefragReport defrag_;
  HotspotReport hotspots_;
  bool waiting_last_ = false;
  double waiting_ms_ = 0, free_while_waiting_ = 0, capacity_while_waiting_ = 0;  // ms; milli x ms; milli x ms
  double nodes_next_ = 0, nodes_last_ = 0, billed_next_ = 0, billed_last_ = 0, warm_next_ = 0, warm_last_ = 0;
  double billed_area_ = 0, warm_area_ = 0;  // nodes x ms
  int64_t capacity_last_ = 0;               // GPU milli of the nodes in service
  double capacity_area_ = 0;                // milli x ms
  std::vector<double> pool_capacity_area_;  // milli x ms, per pool
  std::vector<int64_t> pool_capacity_last_; // GPU milli per pool, in force since last_
  std::map<PreemptReason, std::vector<double>> move_downtime_s_;  // per move reason
  std::map<PreemptReason, MoveReport> moves_;                     // counts and sums
  std::vector<double> reclaim_latency_s_, resume_latency_s_, reallocation_latency_s_, lost_work_s_,
      replace_latency_s_, placement_latency_s_;
};

}  // namespace gpupool
