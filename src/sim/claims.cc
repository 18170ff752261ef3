#include "src/sim/claims.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <functional>

#include "src/sim/scenario.h"
#include "src/sim/scenario_runner.h"

namespace gpupool {
namespace {

double Round2(double v) { return std::round(v * 100.0) / 100.0; }

// Reduction of `ours` relative to `baseline`, in percent (positive = lower).
double ReductionPct(double baseline, double ours) {
  return baseline > 0 ? 100.0 * (baseline - ours) / baseline : 0.0;
}

using ClaimFn = std::function<Result<ClaimResult>(const Scenario&)>;

struct ClaimDef {
  std::string id;
  std::string seed_claim;
  ClaimFn run;
};

Result<ClaimResult> RunPriority(const Scenario& s) {
  auto ours = RunScenario(s, {});
  if (!ours) return std::unexpected(ours.error());
  RunOptions fifo;
  fifo.fifo = true;
  auto base = RunScenario(s, fifo);
  if (!base) return std::unexpected(base.error());
  auto cls = [](const SimReport& r, const char* name) {
    auto it = r.by_priority.find(name);
    return it == r.by_priority.end() ? ClassReport{} : it->second;
  };
  const ClassReport high = cls(*ours, "high"), high_base = cls(*base, "high");
  const ClassReport low = cls(*ours, "low"), low_base = cls(*base, "low");
  ClaimResult c;
  c.baseline = {{"high_priority_wait_mean_s", Round2(high_base.wait_s.mean)},
                {"high_priority_wait_p95_s", Round2(high_base.wait_s.p95)},
                {"low_priority_gpu_hours_completed", Round2(low_base.gpu_hours_completed)},
                {"low_priority_jobs_completed", low_base.completed},
                {"gpu_allocation_pct", Round2(base->allocation_pct_mean)}};
  c.measured = {{"high_priority_wait_reduction_pct", Round2(ReductionPct(high_base.wait_s.mean, high.wait_s.mean))},
                {"high_priority_wait_p95_reduction_pct", Round2(ReductionPct(high_base.wait_s.p95, high.wait_s.p95))},
                {"low_priority_throughput_drop_pct",
                 Round2(ReductionPct(low_base.gpu_hours_completed, low.gpu_hours_completed))},
                {"high_priority_wait_mean_s", Round2(high.wait_s.mean)},
                {"low_priority_gpu_hours_completed", Round2(low.gpu_hours_completed)},
                {"gpu_allocation_pct", Round2(ours->allocation_pct_mean)}};
  c.note = "same jobs and seed; baseline submits every job with priority 0 and no deadline (first come, first "
           "served); wait = submit to first start (censored at the horizon); throughput = GPU-hours of "
           "low-priority jobs completed within the horizon";
  return c;
}

Result<ClaimResult> RunLending(const Scenario& s) {
  RunOptions on, off;
  on.lending = true;
  off.lending = false;
  auto ours = RunScenario(s, on);
  if (!ours) return std::unexpected(ours.error());
  auto base = RunScenario(s, off);
  if (!base) return std::unexpected(base.error());
  ClaimResult c;
  c.baseline = {{"gpu_allocation_pct", Round2(base->allocation_pct_mean)},
                {"jobs_completed", base->all.completed},
                {"wait_p95_s", Round2(base->all.wait_s.p95)}};
  c.measured = {{"utilization_gain_pct", Round2(ours->allocation_pct_mean - base->allocation_pct_mean)},
                {"gpu_allocation_pct", Round2(ours->allocation_pct_mean)},
                {"jobs_completed", ours->all.completed},
                {"wait_p95_s", Round2(ours->all.wait_s.p95)},
                {"preemptions", ours->preemptions}};
  c.note = "same jobs and seed, lending on vs off; utilization = time-weighted GPU allocation; the gain is in "
           "points of allocation";
  return c;
}

Result<ClaimResult> RunSharing(const Scenario& s) {
  RunOptions whole, sliced;
  whole.sharing = RunOptions::Sharing::kWholeGpusOnly;
  sliced.sharing = RunOptions::Sharing::kTimeSliceOnly;
  auto ours = RunScenario(s, {});
  if (!ours) return std::unexpected(ours.error());
  auto base = RunScenario(s, whole);
  if (!base) return std::unexpected(base.error());
  auto ts = RunScenario(s, sliced);
  if (!ts) return std::unexpected(ts.error());
  // The other shipped mode table on the same jobs: the trade-off between them.
  Scenario other_table = s;
  other_table.engine.sharing_policy = s.engine.sharing_policy == "seed-002" ? "seed-000" : "seed-002";
  auto alt = RunScenario(other_table, {});
  if (!alt) return std::unexpected(alt.error());
  ClaimResult c;
  c.baseline = {{"gpu_utilization_pct", Round2(base->sharing.gpu_busy_pct_mean)},
                {"gpu_allocation_pct", Round2(base->allocation_pct_mean)},
                {"jobs_completed", base->all.completed},
                {"wait_p50_s", Round2(base->all.wait_s.p50)},
                {"time_slice_only_interference_slowdown_pct", Round2(ts->sharing.interference_slowdown_pct)},
                {"time_slice_only_gpu_utilization_pct", Round2(ts->sharing.gpu_busy_pct_mean)}};
  c.measured = {{"gpu_utilization_pct", Round2(ours->sharing.gpu_busy_pct_mean)},
                {"interference_reduction_pct",
                 Round2(ReductionPct(ts->sharing.interference_slowdown_pct, ours->sharing.interference_slowdown_pct))},
                {"interference_slowdown_pct", Round2(ours->sharing.interference_slowdown_pct)},
                {"gpu_allocation_pct", Round2(ours->allocation_pct_mean)},
                {"jobs_completed", ours->all.completed},
                {"wait_p50_s", Round2(ours->all.wait_s.p50)},
                {"mig_setups", ours->sharing.mig_setups},
                {"mig_recuts", ours->sharing.mig_recuts},
                {"mode_table", s.engine.sharing_policy},
                {"other_table", {{"mode_table", other_table.engine.sharing_policy},
                                 {"gpu_utilization_pct", Round2(alt->sharing.gpu_busy_pct_mean)},
                                 {"interference_reduction_pct",
                                  Round2(ReductionPct(ts->sharing.interference_slowdown_pct,
                                                      alt->sharing.interference_slowdown_pct))}}}};
  c.note = "same jobs and seed, four runs: hybrid with the scenario's mode table, whole GPUs only (every share "
           "rounded up to one GPU: the baseline), time-slicing wherever a job shares, and hybrid with the other "
           "shipped table; utilization = time-weighted busy GPUs (sum over GPUs of min(1, the tasks' "
           "utilization)) / GPUs; interference = GPU jobs' run time over their run time alone, minus 1; "
           "reduction = hybrid vs time-slice only";
  return c;
}

Result<ClaimResult> RunReclaim(const Scenario& s) {
  RunOptions on, off;
  on.reclaim_idle = true;
  off.reclaim_idle = false;
  auto ours = RunScenario(s, on);
  if (!ours) return std::unexpected(ours.error());
  auto base = RunScenario(s, off);
  if (!base) return std::unexpected(base.error());
  // The same with idleness required for 5 minutes before the notice: fewer
  // reclaims of briefly idle tasks, at the price of a later release.
  Scenario patient = s;
  patient.engine.reclaim.idle_polls =
      std::max<int>(1, static_cast<int>(std::chrono::minutes(5) / s.engine.reclaim.poll));
  auto slow = RunScenario(patient, on);
  if (!slow) return std::unexpected(slow.error());
  auto completed = [](const SimReport& rep) {
    nlohmann::json j = nlohmann::json::object();
    for (const auto& [name, t] : rep.by_tenant) j[name] = t.jobs.completed;
    return j;
  };
  const ReclaimReport& r = ours->reclaim;
  ClaimResult c;
  c.baseline = {{"idle_gpu_hours", Round2(base->reclaim.idle_gpu_hours)},
                {"held_gpu_hours", Round2(base->reclaim.held_gpu_hours)},
                {"jobs_completed", completed(*base)},
                {"wait_p50_s", Round2(base->all.wait_s.p50)}};
  c.measured = {{"reclaim_latency_s", Round2(r.reclaim_latency_s.p50)},
                {"reclaim_latency_s_p95", Round2(r.reclaim_latency_s.p95)},
                {"reallocation_latency_s", Round2(r.reallocation_latency_s.p50)},
                {"reallocation_latency_s_p95", Round2(r.reallocation_latency_s.p95)},
                {"reallocations", r.reallocation_latency_s.count},
                {"idle_gpu_time_reduction_pct", Round2(ReductionPct(base->reclaim.idle_gpu_hours, r.idle_gpu_hours))},
                {"idle_gpu_hours", Round2(r.idle_gpu_hours)},
                {"idle_reclaims", r.idle_reclaims},
                {"resumed", r.resumed},
                {"resume_latency_s_p50", Round2(r.resume_latency_s.p50)},
                {"jobs_completed", completed(*ours)},
                {"wait_p50_s", Round2(ours->all.wait_s.p50)},
                {"idle_for_5m_first",
                 {{"reclaim_latency_s", Round2(slow->reclaim.reclaim_latency_s.p50)},
                  {"idle_gpu_time_reduction_pct",
                   Round2(ReductionPct(base->reclaim.idle_gpu_hours, slow->reclaim.idle_gpu_hours))},
                  {"idle_reclaims", slow->reclaim.idle_reclaims},
                  {"jobs_completed", completed(*slow)}}}};
  c.note = "same jobs, seed and duty-cycle series, idle reclamation on vs off; reclaim latency = from the moment "
           "a task's utilization fell below the idle threshold to the release of its GPUs; reallocation latency "
           "= from that release (while jobs waited) to the next task starting on those GPUs, scrub included; "
           "idle GPU time = GPU-hours held while below the idle threshold (and while starting or stopping); "
           "resume latency = busy again to running again; idle_for_5m_first: the same with idle_polls raised "
           "so that a task must idle 5 minutes before its notice";
  return c;
}

Result<ClaimResult> RunRecovery(const Scenario& s) {
  auto ours = RunScenario(s, {});
  if (!ours) return std::unexpected(ours.error());
  const RecoveryReport& r = ours->recovery;
  ClaimResult c;
  c.baseline = nlohmann::json::object();
  c.measured = {{"replace_latency_s_p99", Round2(r.replace_latency_s.p99)},
                {"replace_latency_s_p95", Round2(r.replace_latency_s.p95)},
                {"replaced_within_30s_pct", Round2(r.replaced_within_30s_pct)},
                {"replace_latency_s_p50", Round2(r.replace_latency_s.p50)},
                {"lost_work_s_mean", Round2(r.lost_work_s.mean)},
                {"node_failures", r.node_failures},
                {"interruptions", r.interruptions},
                {"not_replaced", r.not_replaced},
                {"heartbeat_timeout_s", ToSeconds(s.engine.heartbeat_timeout)}};
  c.note = "node failure drill: nodes stop heartbeating at the scenario's fault times; replace latency = from "
           "the failure to the interrupted job's next placement (detection by heartbeat timeout included); lost "
           "work = run time since the job's last checkpoint (or start); the goal is p99 <= 30 s; the latency includes "
           "waiting for room when the failure leaves the pool too full for the job (borrowed work does not "
           "preempt), which is what the slowest re-placements are";
  return c;
}

Result<ClaimResult> RunTopology(const Scenario& s) {
  Scenario aware = s, blind = s;
  aware.engine.topology_aware = true;
  blind.engine.topology_aware = false;
  auto ours = RunScenario(aware, {});
  if (!ours) return std::unexpected(ours.error());
  auto base = RunScenario(blind, {});
  if (!base) return std::unexpected(base.error());
  auto figures = [](const SimReport& r) {
    const TopologyReport& t = r.topology;
    const double placements = static_cast<double>(std::max<int64_t>(1, t.placements));
    return nlohmann::json{{"cross_rack_gib_per_step", Round2(t.cross_rack_gib_per_step())},
                          {"cross_node_gib_per_step", Round2(t.steps > 0 ? t.cross_node_gib / t.steps : 0)},
                          {"comm_overhead_pct", Round2(t.comm_overhead_pct())},
                          {"gang_placements", t.placements},
                          {"spanning_racks_pct", Round2(100.0 * static_cast<double>(t.spanning_racks) / placements)},
                          {"spanning_nodes_pct", Round2(100.0 * static_cast<double>(t.spanning_nodes) / placements)},
                          {"jobs_completed", r.all.completed},
                          {"jct_p50_s", Round2(r.all.jct_s.p50)},
                          {"wait_p95_s", Round2(r.all.wait_s.p95)},
                          {"gpu_allocation_pct", Round2(r.allocation_pct_mean)}};
  };
  ClaimResult c;
  c.baseline = figures(*base);
  c.measured = figures(*ours);
  c.measured["cross_rack_traffic_reduction_pct"] =
      Round2(ReductionPct(base->topology.cross_rack_gib_per_step(), ours->topology.cross_rack_gib_per_step()));
  c.measured["comm_overhead_reduction_pct"] =
      Round2(ReductionPct(base->topology.comm_overhead_pct(), ours->topology.comm_overhead_pct()));
  c.note = "same jobs and seed, engine.topology aware vs blind; traffic = gradient bytes over links between racks "
           "per training step (ring all-reduce, ordered by rack and node), summed over the run's steps of "
           "data-parallel jobs with 2+ workers; communication overhead = all-reduce time / step time (compute "
           "+ all-reduce, no overlap), over the same steps";
  return c;
}

const std::vector<ClaimDef>& Claims() {
  static const auto* const kClaims = new std::vector<ClaimDef>{
      {"C-PRIO", "priority + deadline ordering: high-priority waiting time -60%, low-priority throughput -8%",
       RunPriority},
      {"C-LEND", "dynamic lending of idle guarantees: overall GPU utilization +18%", RunLending},
      {"C-PART", "hybrid sharing (time-slice, MPS, MIG) vs whole GPUs: utilization 55% -> 82%, interference -70% vs "
                 "time-slicing only",
       RunSharing},
      {"C-RECLAIM", "idle reclamation: reclaim latency 120 s -> 15 s, re-allocation ~3 s, idle GPU time -85%",
       RunReclaim},
      {"C-RECOVERY", "node failure: tasks re-placed within 30 s (p99), resuming from their last checkpoint",
       RunRecovery},
      {"C-TOPO", "topology-aware gang placement: cross-rack traffic -60%, communication overhead -25%", RunTopology},
  };
  return *kClaims;
}

}  // namespace

std::vector<std::string> ClaimIds() {
  std::vector<std::string> ids;
  for (const ClaimDef& c : Claims()) ids.push_back(c.id);
  return ids;
}

Result<std::vector<ClaimResult>> RunClaims(const std::string& scenarios_dir, const std::vector<std::string>& ids) {
  std::vector<const ClaimDef*> chosen;
  for (const std::string& id : ids) {
    const ClaimDef* found = nullptr;
    for (const ClaimDef& c : Claims()) {
      if (c.id == id) found = &c;
    }
    if (!found) return NotFound("unknown claim '" + id + "'");
    chosen.push_back(found);
  }
  if (ids.empty()) {
    for (const ClaimDef& c : Claims()) chosen.push_back(&c);
  }
  std::vector<ClaimResult> out;
  for (const ClaimDef* def : chosen) {
    const std::string path = scenarios_dir + "/claims/" + def->id + ".yaml";
    auto scenario = LoadScenario(path);
    if (!scenario) return std::unexpected(scenario.error());
    auto result = def->run(*scenario);
    ClaimResult c;
    if (!result) {
      // Only a missing trace is a reason to skip; anything else is a failure.
      if (result.error().code != ErrorCode::kFailedPrecondition ||
          result.error().message.find("not here") == std::string::npos) {
        return std::unexpected(Error{result.error().code, def->id + ": " + result.error().message});
      }
      c.skipped = true;
      c.skip_reason = result.error().message;
    } else {
      c = std::move(*result);
    }
    c.id = def->id;
    c.seed_claim = def->seed_claim;
    c.scenario_path = path;
    out.push_back(std::move(c));
  }
  return out;
}

}  // namespace gpupool
