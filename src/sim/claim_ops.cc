#include "src/sim/claim_ops.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "src/sim/claim_math.h"
#include "src/sim/scenario_runner.h"

namespace gpupool {
namespace {

// GPUs of the node groups that join each pool, by pool name.
std::map<std::string, int64_t> GpusByPool(const Scenario& s) {
  std::map<std::string, int64_t> out;
  for (const NodeGroupConfig& g : s.nodes) {
    const int p = PoolOfGroup(s, g);
    if (p >= 0) out[s.pools.at(static_cast<size_t>(p)).name] += static_cast<int64_t>(g.count) * g.gpus;
  }
  return out;
}

// Splits `total` whole GPUs in proportion to `weights` (largest remainders
// first, ties to the earlier entry).
std::vector<int64_t> SplitInProportion(int64_t total, const std::vector<double>& weights) {
  double sum = 0;
  for (double w : weights) sum += w;
  std::vector<int64_t> out(weights.size(), 0);
  if (weights.empty() || sum <= 0) return out;
  std::vector<std::pair<double, size_t>> remainders;
  int64_t given = 0;
  for (size_t i = 0; i < weights.size(); ++i) {
    const double exact = static_cast<double>(total) * weights[i] / sum;
    out[i] = static_cast<int64_t>(std::floor(exact));
    given += out[i];
    remainders.emplace_back(-(exact - static_cast<double>(out[i])), i);
  }
  std::sort(remainders.begin(), remainders.end());
  for (size_t k = 0; given < total && k < remainders.size(); ++k, ++given) ++out[remainders[k].second];
  return out;
}

// Events of ours' run that stand for an operator's task, by name.
struct AutomaticActions {
  int64_t lends = 0, recalls = 0, guarantee_preemptions = 0, idle_reclaims = 0;
  int64_t scale_outs = 0, drains = 0, migrations = 0, mig_recuts = 0, shared_placements = 0;
  int64_t borrowed_placements = 0;  // beyond the tenant's guarantee
  std::set<JobId> sharing_jobs;     // submitted asking for part of a GPU
};

void Count(const Event& e, AutomaticActions& a) {
  if (std::holds_alternative<QuotaLent>(e.body)) ++a.lends;
  if (std::holds_alternative<QuotaRecalled>(e.body)) ++a.recalls;
  if (const auto* p = std::get_if<PreemptionStarted>(&e.body)) {
    a.guarantee_preemptions += p->reason == PreemptReason::kGuaranteeReclaim;
  }
  if (const auto* r = std::get_if<ReclaimStarted>(&e.body)) a.idle_reclaims += r->reason == ReclaimReason::kIdle;
  if (std::holds_alternative<ScaleOutRequested>(e.body)) ++a.scale_outs;
  if (std::holds_alternative<NodeDrainStarted>(e.body)) ++a.drains;
  if (std::holds_alternative<MigrationStarted>(e.body)) ++a.migrations;
  if (std::holds_alternative<MigRecutStarted>(e.body)) ++a.mig_recuts;
  if (const auto* sub = std::get_if<JobSubmitted>(&e.body)) {
    const Demand& d = sub->spec.demand;
    if (d.gpu_count > 0 && d.gpu_milli < kMilliPerGpu) a.sharing_jobs.insert(sub->job);
  }
  if (const auto* p = std::get_if<JobPlaced>(&e.body)) {
    a.shared_placements += a.sharing_jobs.contains(p->job);
    a.borrowed_placements += p->borrowed;
  }
}

nlohmann::json Service(const SimReport& r) {
  nlohmann::json by_tenant = nlohmann::json::object();
  for (const auto& [name, t] : r.by_tenant) {
    by_tenant[name] = {{"jobs_completed", t.jobs.completed},
                       {"wait_p50_s", Round2(t.jobs.wait_s.p50)},
                       {"wait_p95_s", Round2(t.jobs.wait_s.p95)}};
  }
  const double busy_gpu_hours = r.gpu_hours_in_service * r.sharing.gpu_busy_pct_mean / 100.0;
  return nlohmann::json{{"gpu_utilization_pct", Round2(r.sharing.gpu_busy_pct_mean)},
                        {"gpu_allocation_pct", Round2(r.allocation_pct_mean)},
                        {"busy_gpu_hours", Round2(busy_gpu_hours)},
                        {"gpu_hours_in_service", Round2(r.gpu_hours_in_service)},
                        {"jobs_completed", r.all.completed},
                        {"gpu_hours_completed", Round2(r.all.gpu_hours_completed)},
                        {"unfinished", r.unfinished},
                        {"wait_p50_s", Round2(r.all.wait_s.p50)},
                        {"wait_p95_s", Round2(r.all.wait_s.p95)},
                        {"by_tenant", by_tenant}};
}

// Which operator tasks a configuration hands to the system (the rest are
// left to a person).
struct Mechanisms {
  bool lending = false, reclaim = false, scaling = false, sharing = false, defrag = false;
  int64_t left_to_a_person() const { return !lending + !reclaim + !scaling + !sharing + !defrag; }
};

Mechanisms MechanismsOf(const Scenario& s, const RunOptions& o) {
  Mechanisms m;
  m.lending = o.lending.value_or(s.engine.lending.enabled);
  m.reclaim = o.reclaim_idle.value_or(s.engine.reclaim.idle);
  m.scaling = !s.engine.scaling.empty();
  m.sharing = o.sharing != RunOptions::Sharing::kWholeGpusOnly;
  m.defrag = s.engine.defrag;
  return m;
}

// One row per operator task: whether each configuration automates it, what
// ours did about it by itself, and how large the problem grew in the
// baseline where it is left to a person.
nlohmann::json OperatorTasks(const SimReport& ours, const SimReport& base, const AutomaticActions& a,
                             const Mechanisms& ours_m, const Mechanisms& base_m) {
  auto task = [](const char* name, bool ours_on, bool base_on, nlohmann::json done, nlohmann::json left) {
    return nlohmann::json{{"task", name},
                          {"automatic_in_ours", ours_on},
                          {"automatic_in_baseline", base_on},
                          {"ours_did", std::move(done)},
                          {"baseline_problem", std::move(left)}};
  };
  const double base_unallocated_h = base.gpu_hours_in_service * (100.0 - base.allocation_pct_mean) / 100.0;
  const double base_allocated_h = base.gpu_hours_in_service * base.allocation_pct_mean / 100.0;
  const double base_busy_h = base.gpu_hours_in_service * base.sharing.gpu_busy_pct_mean / 100.0;
  const nlohmann::json stranded = {
      {"unallocated_gpu_hours_while_jobs_waited", Round2(base.defrag.unallocated_gpu_hours_while_waiting)},
      {"hours_with_jobs_waiting", Round2(base.defrag.waiting_hours)}};
  return nlohmann::json::array({
      task("move quota between teams as their demand shifts", ours_m.lending, base_m.lending,
           {{"borrowed_placements", a.borrowed_placements},
            {"lends", a.lends},
            {"recalls", a.recalls},
            {"guarantee_preemptions", a.guarantee_preemptions}},
           stranded),
      task("find GPUs held idle and have their owners release them", ours_m.reclaim, base_m.reclaim,
           {{"idle_reclaims", a.idle_reclaims}, {"idle_gpu_hours_left", Round2(ours.reclaim.idle_gpu_hours)}},
           {{"idle_gpu_hours_held", Round2(base.reclaim.idle_gpu_hours)}}),
      task("resize the pool for the day and the night (order nodes, drain and return them)", ours_m.scaling,
           base_m.scaling, {{"scale_outs", a.scale_outs}, {"drains", a.drains}},
           {{"unallocated_gpu_hours_in_service", Round2(base_unallocated_h)}}),
      task("decide which jobs share a GPU and cut MIG instances for them", ours_m.sharing, base_m.sharing,
           {{"shared_placements", a.shared_placements},
            {"mig_setups", ours.sharing.mig_setups},
            {"mig_recuts", a.mig_recuts}},
           {{"allocated_but_not_busy_gpu_hours", Round2(std::max(0.0, base_allocated_h - base_busy_h))}}),
      task("move running jobs to merge fragmented free GPUs", ours_m.defrag, base_m.defrag,
           {{"migrations", a.migrations}}, stranded),
  });
}

}  // namespace

Result<Scenario> StaticBaseline(const Scenario& s) {
  if (s.tenants.empty()) return InvalidArgument("C-OPS needs tenants");
  if (!s.trace_nodes_path.empty() || s.nodes.empty()) return InvalidArgument("C-OPS needs node groups");
  Scenario b = s;
  b.engine.scaling.clear();
  b.engine.defrag = false;
  b.engine.lending.enabled = false;
  for (const auto& [pool, gpus] : GpusByPool(s)) {
    std::vector<size_t> members;
    std::vector<double> weights;
    for (size_t t = 0; t < b.tenants.size(); ++t) {
      auto it = b.tenants[t].quota.find(pool);
      if (it == b.tenants[t].quota.end()) continue;
      members.push_back(t);
      weights.push_back(it->second.guaranteed_gpus);
    }
    if (members.empty()) continue;
    double sum = 0;
    for (double w : weights) sum += w;
    if (sum <= 0) std::fill(weights.begin(), weights.end(), 1.0);  // no guarantees: equal parts
    const std::vector<int64_t> parts = SplitInProportion(gpus, weights);
    for (size_t k = 0; k < members.size(); ++k) {
      QuotaConfig& q = b.tenants[members[k]].quota.at(pool);
      q.guaranteed_gpus = static_cast<double>(parts[k]);
      q.limit_gpus = static_cast<double>(parts[k]);
      q.reserved = false;
    }
  }
  return b;
}

Result<ClaimResult> RunOperations(const Scenario& s) {
  GP_ASSIGN_OR_RETURN(Scenario base_scenario, StaticBaseline(s));
  AutomaticActions actions;
  RunOptions ours_options;
  ours_options.on_event = [&](const Event& e) { Count(e, actions); };
  GP_ASSIGN_OR_RETURN(auto ours, RunScenario(s, ours_options));
  RunOptions base_options;
  base_options.sharing = RunOptions::Sharing::kWholeGpusOnly;
  base_options.lending = false;
  base_options.reclaim_idle = false;
  GP_ASSIGN_OR_RETURN(auto base, RunScenario(base_scenario, base_options));
  nlohmann::json quotas = nlohmann::json::object();
  for (const TenantConfig& t : base_scenario.tenants) {
    for (const auto& [pool, q] : t.quota) quotas[t.name][pool] = q.limit_gpus;
  }
  ClaimResult c;
  c.baseline = Service(base);
  c.baseline["static_quota_gpus"] = quotas;
  c.measured = Service(ours);
  c.measured["gpu_utilization_gain_pct"] =
      Round2(ChangePct(base.sharing.gpu_busy_pct_mean, ours.sharing.gpu_busy_pct_mean));
  c.measured["gpu_utilization_gain_points"] = Round2(ours.sharing.gpu_busy_pct_mean - base.sharing.gpu_busy_pct_mean);
  c.measured["gpu_hours_in_service_change_pct"] = Round2(ChangePct(base.gpu_hours_in_service, ours.gpu_hours_in_service));
  c.measured["costs_to_users"] = {{"sharing_slowdown_pct", Round2(ours.sharing.sharing_slowdown_pct)},
                                  {"reclaimed_busy_while_away_hours", Round2(ours.reclaim.busy_while_away_hours)},
                                  {"gpu_hours_lost_to_preemption", Round2(ours.gpu_hours_lost)},
                                  {"drain_downtime_hours", Round2(ours.scaling.drain_moves.downtime_hours)},
                                  {"migration_downtime_hours", Round2(ours.defrag.moved.downtime_hours)}};
  const Mechanisms ours_m = MechanismsOf(s, ours_options), base_m = MechanismsOf(base_scenario, base_options);
  c.measured["operator_tasks"] = OperatorTasks(ours, base, actions, ours_m, base_m);
  c.measured["operator_tasks_left_to_a_person"] = ours_m.left_to_a_person();
  c.baseline["operator_tasks_left_to_a_person"] = base_m.left_to_a_person();
  c.note = "same jobs and seed; ours = the scenario as written (hybrid sharing, three-tier quotas with lending, "
           "idle reclamation, defragmentation, pool autoscaling that may only shrink the pool); baseline = whole "
           "GPUs only (a share rounds up to one GPU), static quotas (each pool split between its tenants in "
           "proportion to their guarantees, each capped at its part, no lending or borrowing), no reclamation, no "
           "defragmentation, a fixed pool; utilization = time-weighted busy GPUs (sum over GPUs of min(1, the "
           "tasks' utilization)) over GPUs in service; the gain is relative (gain_pct) and in points; operator "
           "tasks = what each configuration leaves to a person: for ours, how often the system did it itself, "
           "for the baseline, how large the problem grew unattended (GPU-hours left unallocated while jobs "
           "waited, held idle, in service but unallocated, allocated but not busy); costs to users = what ours' "
           "mechanisms cost the jobs (sharing slowdown, serving time lost while reclaimed and away, work lost "
           "to preemption, downtime of drained and migrated jobs)";
  return c;
}

}  // namespace gpupool
