#include "src/sim/scenario_runner.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <filesystem>

#include "src/config/alibaba_gpu_trace.h"
#include "src/control/control_loops.h"
#include "src/sim/runtime_samples.h"
#include "src/sim/serving_trace.h"
#include "src/sim/simulator.h"
#include "src/config/traces_dir.h"
#include "src/sim/workload.h"

namespace gpupool {

namespace {

// The sharing baselines of RunOptions, applied to one job.
void ApplySharingBaseline(RunOptions::Sharing sharing, const ModePolicy& policy, JobSpec& spec) {
  auto whole = [](Demand& d) {
    if (d.gpu_count == 0 || d.gpu_milli >= kMilliPerGpu) return;
    d.gpu_milli = kMilliPerGpu;
    d.mode = ShareMode::kAny;
    d.gpu_memory_mib = 0;
  };
  auto time_slice = [](Demand& d) {
    if (d.gpu_count > 0 && d.gpu_milli < kMilliPerGpu) d.mode = ShareMode::kTimeSlice;
  };
  if (sharing == RunOptions::Sharing::kWholeGpusOnly) {
    spec.auto_sharing = false;
    whole(spec.demand);
    for (Demand& d : spec.stages) whole(d);
    return;
  }
  if (spec.auto_sharing && spec.demand.gpu_count > 0 && !spec.is_pipeline()) {
    const SharingChoice c = ChooseSharing(policy, spec).second;
    ApplySharing(c == SharingChoice::kWhole ? c : SharingChoice::kTimeSlice, spec);
    spec.auto_sharing = false;
  }
  time_slice(spec.demand);
  for (Demand& d : spec.stages) time_slice(d);
}

}  // namespace

Result<SimReport> RunScenario(const Scenario& s, const RunOptions& options) {
  // Trace files that are not there: a clear precondition, not a read error.
  for (const std::string* path : {&s.trace_nodes_path, s.trace ? &s.trace->pods_path : nullptr}) {
    if (path != nullptr && !path->empty() && !std::filesystem::exists(*path)) {
      return FailedPrecondition(s.path + ": " + MissingTraceFile(*path));
    }
  }
  // Ids follow declaration order.
  WorkloadIds ids;
  WorldAttributes world = BuildAttributes(s);
  ids.requirements = world.requirements;
  for (size_t t = 0; t < s.tenants.size(); ++t) ids.tenants[s.tenants[t].name] = static_cast<TenantId>(t);
  for (size_t p = 0; p < s.pools.size(); ++p) ids.pools[s.pools[p].name] = static_cast<PoolId>(p);

  // The jobs first: the policies' model of the workload comes from them.
  std::vector<double> runtimes;
  const bool wants_runtimes = std::any_of(s.workloads.begin(), s.workloads.end(), [](const TenantWorkload& w) {
    return std::any_of(w.jobs.begin(), w.jobs.end(),
                       [](const JobTemplate& j) { return j.duration.kind == DurationModel::Kind::kPhilly; });
  });
  if (wants_runtimes) {
    const std::string path = TraceFile(kRuntimeTraceFile);
    if (path.empty()) {
      return FailedPrecondition(s.path + ": the workload samples durations from the Philly run times: " + MissingTrace(kRuntimeTraceFile));
    }
    GP_ASSIGN_OR_RETURN(auto loaded, LoadRuntimeSamples(path));
    runtimes = std::move(loaded);
  }
  std::vector<std::vector<double>> duty_cycles;
  if (WantsDutyCycles(s)) {
    const std::string path = TraceFile(kGpuDutyCycleTraceFile);
    if (path.empty()) {
      return FailedPrecondition(s.path + ": the workload replays the GenAI GPU duty cycles: " + MissingTrace(kGpuDutyCycleTraceFile));
    }
    GP_ASSIGN_OR_RETURN(auto loaded, LoadDutyCycles(path));
    duty_cycles = std::move(loaded);
  }
  std::vector<double> lifetimes;
  if (WantsServingLifetimes(s)) {
    const std::string path = TraceFile(kDlrmTraceFile);
    if (path.empty()) {
      return FailedPrecondition(s.path + ": the workload samples lifetimes from the DLRM serving trace: " + MissingTrace(kDlrmTraceFile));
    }
    GP_ASSIGN_OR_RETURN(auto loaded, LoadDlrmTrace(path));
    lifetimes = ServingLifetimes(loaded);
  }
  GP_ASSIGN_OR_RETURN(auto generated, GenerateJobs(s, ids, runtimes.empty() ? nullptr : &runtimes, s.seed,
                                                   duty_cycles.empty() ? nullptr : &duty_cycles,
                                                   lifetimes.empty() ? nullptr : &lifetimes));
  std::vector<SimJob> jobs = std::move(generated);
  if (s.trace) {
    GP_ASSIGN_OR_RETURN(auto traced, TraceJobs(*s.trace, ids, s.priorities));
    jobs.insert(jobs.end(), traced.begin(), traced.end());
    std::stable_sort(jobs.begin(), jobs.end(), [](const SimJob& a, const SimJob& b) { return a.arrival < b.arrival; });
  }

  if (options.fifo) {
    for (SimJob& j : jobs) {
      j.spec.priority = 0;
      j.spec.deadline.reset();
    }
  }
  if (options.sharing != RunOptions::Sharing::kAsWritten) {
    GP_ASSIGN_OR_RETURN(auto policy, FindModePolicy(s.engine.sharing_policy));
    for (SimJob& j : jobs) ApplySharingBaseline(options.sharing, policy, j.spec);
  }
  GP_ASSIGN_OR_RETURN(auto plan, PlanNodes(s, world.classes));
  // No oracle: the placement policy learns the workload from the jobs as
  // they arrive (EngineState::workload), as the daemon does.

  EngineConfig config = s.engine;
  if (options.policy) config.policy = *options.policy;
  if (options.lending) config.lending.enabled = *options.lending;
  if (options.reclaim_idle) config.reclaim.idle = *options.reclaim_idle;
  GP_ASSIGN_OR_RETURN(auto engine, CreateEngine(config, std::move(world.table)));

  SimOptions sim_options;
  sim_options.tick = s.tick;
  sim_options.start_latency = s.start_latency;
  sim_options.sample_every = s.sample_every;
  sim_options.horizon = s.horizon;
  sim_options.event_log_path = options.event_log_path;
  sim_options.check_invariants = options.check_invariants;
  sim_options.costs = s.costs;
  sim_options.duty_cycles = duty_cycles.empty() ? nullptr : &duty_cycles;
  sim_options.faults = s.faults;
  sim_options.hot_spells = s.hot_spells;
  sim_options.gpu_faults = s.gpu_faults;
  sim_options.node_ops = s.node_ops;
  sim_options.provider = s.provider;
  sim_options.think_time = s.think_time;
  sim_options.seed = s.seed;
  sim_options.on_event = options.on_event;
  Simulator sim(engine.get(), std::move(jobs), sim_options);
  const Engine::Sink sink = sim.sink();
  Engine& e = *engine;
  GP_TRY(BuildWorld(s, plan, e, kTimeOrigin, sink));
  auto report = sim.Run(s.name);
  if (report && options.on_finish) options.on_finish(e);
  return report;
}

}  // namespace gpupool
