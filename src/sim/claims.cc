#include "src/sim/claims.h"

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

const std::vector<ClaimDef>& Claims() {
  static const auto* const kClaims = new std::vector<ClaimDef>{
      {"C-PRIO", "priority + deadline ordering: high-priority waiting time -60%, low-priority throughput -8%",
       RunPriority},
      {"C-LEND", "dynamic lending of idle guarantees: overall GPU utilization +18%", RunLending},
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
