#include "src/sim/scenario_runner.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <filesystem>

#include "src/sim/alibaba_gpu_trace.h"
#include "src/sim/runtime_samples.h"
#include "src/sim/serving_trace.h"
#include "src/sim/simulator.h"
#include "src/sim/traces_dir.h"
#include "src/sim/workload.h"

namespace gpupool {

Result<std::vector<NodePlan>> PlanNodes(const Scenario& s, const std::map<std::string, uint16_t>& classes) {
  std::vector<NodePlan> plan;
  if (!s.trace_nodes_path.empty()) {
    GP_ASSIGN_OR_RETURN(auto nodes, LoadOpenbNodesFile(s.trace_nodes_path, Catalog::Builtin()));
    for (size_t i = 0; i < nodes.size(); i += static_cast<size_t>(s.trace_nodes_every)) {
      plan.push_back({std::move(nodes[i]), "region-1", "zone-1", "rack-1"});
    }
  }
  for (const ScenarioNodeGroup& g : s.nodes) {
    std::string prefix = g.name_prefix;
    if (prefix.empty()) {
      prefix = g.model.empty() ? "cpu" : g.model;
      std::transform(prefix.begin(), prefix.end(), prefix.begin(), [](unsigned char c) { return std::tolower(c); });
    }
    const GpuModelId model = g.model.empty() ? kNoGpuModel : *Catalog::Builtin().Find(g.model);
    const uint16_t attr = g.attributes.empty() ? 0 : classes.at(g.attributes);
    for (int i = 0; i < g.count; ++i) {
      NodeSpec spec{prefix + "-" + std::to_string(i), g.cpu_milli, g.memory_mib, g.gpus, model, 0, attr};
      plan.push_back({std::move(spec), g.region, g.zone, g.zone + "-rack-" + std::to_string(i % std::max(1, g.racks))});
    }
  }
  return plan;
}

Status BuildWorld(const Scenario& s, const std::vector<NodePlan>& nodes, Engine& e, Instant now,
                  const Engine::Sink& sink) {
  std::map<std::string, TenantId> tenants;
  for (const ScenarioTenant& t : s.tenants) {
    GP_ASSIGN_OR_RETURN(auto id, e.AddTenant(t.name, now, sink));
    tenants[t.name] = id;
  }
  std::map<std::string, PoolId> pools;
  for (const ScenarioPool& p : s.pools) {
    PoolSelector sel;
    if (!p.models.empty()) {
      sel.models = 0;
      for (const std::string& m : p.models) sel.models |= GpuModelMask{1} << *Catalog::Builtin().Find(m);
    }
    sel.regions = p.regions;
    std::vector<TenantId> dedicated;
    for (const std::string& t : p.dedicated_to) dedicated.push_back(tenants.at(t));
    GP_ASSIGN_OR_RETURN(auto id, e.AddPool(p.name, sel, dedicated, now, sink));
    pools[p.name] = id;
  }
  for (const NodePlan& n : nodes) {
    GP_TRY(e.AddNode(n.spec, n.region, n.zone, n.rack, now, sink));
  }
  for (const ScenarioTenant& t : s.tenants) {
    for (const auto& [pool, q] : t.quota) {
      const Quota quota{std::llround(q.guaranteed_gpus * kMilliPerGpu), std::llround(q.limit_gpus * kMilliPerGpu),
                        q.weight, q.reserved};
      if (auto ok = e.SetQuota(tenants.at(t.name), pools.at(pool), quota, now, sink); !ok) {
        return std::unexpected(Error{ok.error().code, "tenant '" + t.name + "', pool '" + pool + "': " +
                                                          ok.error().message});
      }
    }
  }
  return {};
}

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
      return FailedPrecondition(s.path + ": the trace file " + *path +
                                " is not here: set GPUPOOL_TRACES or put ../shared/traces beside the checkout");
    }
  }
  // Ids follow declaration order.
  WorkloadIds ids;
  AttributeTable attributes;
  std::map<std::string, uint16_t> classes;
  for (const NodeAttributes& c : s.node_classes) classes[c.name] = attributes.AddNodeClass(c);
  for (const Requirement& r : s.requirements) ids.requirements[r.name] = attributes.AddRequirement(r);
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
      return FailedPrecondition(s.path + ": the workload samples durations from the Philly run times (" +
                                std::string(kRuntimeTraceFile) +
                                "), which are not here: set GPUPOOL_TRACES or put ../shared/traces beside the checkout");
    }
    GP_ASSIGN_OR_RETURN(auto loaded, LoadRuntimeSamples(path));
    runtimes = std::move(loaded);
  }
  std::vector<std::vector<double>> duty_cycles;
  if (WantsDutyCycles(s)) {
    const std::string path = TraceFile(kGpuDutyCycleTraceFile);
    if (path.empty()) {
      return FailedPrecondition(s.path + ": the workload replays the GenAI GPU duty cycles (" +
                                std::string(kGpuDutyCycleTraceFile) +
                                "), which are not here: set GPUPOOL_TRACES or put ../shared/traces beside the checkout");
    }
    GP_ASSIGN_OR_RETURN(auto loaded, LoadDutyCycles(path));
    duty_cycles = std::move(loaded);
  }
  std::vector<double> lifetimes;
  if (WantsServingLifetimes(s)) {
    const std::string path = TraceFile(kDlrmTraceFile);
    if (path.empty()) {
      return FailedPrecondition(s.path + ": the workload samples lifetimes from the DLRM serving trace (" +
                                std::string(kDlrmTraceFile) +
                                "), which are not here: set GPUPOOL_TRACES or put ../shared/traces beside the checkout");
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
  GP_ASSIGN_OR_RETURN(auto plan, PlanNodes(s, classes));
  int64_t cpu = 0, gpu = 0;
  for (const NodePlan& n : plan) {
    cpu += n.spec.cpu_milli;
    gpu += int64_t{n.spec.gpu_count} * kMilliPerGpu;
  }
  std::vector<Demand> demands;
  demands.reserve(jobs.size());
  for (const SimJob& j : jobs) {
    for (int r = 0; r < std::min(j.spec.replicas, 64); ++r) demands.push_back(j.spec.replica_demand(r));
  }
  GP_ASSIGN_OR_RETURN(auto target, TargetWorkloadOf(demands, cpu, gpu));

  EngineConfig config = s.engine;
  if (options.policy) config.policy = *options.policy;
  if (options.lending) config.lending.enabled = *options.lending;
  if (options.reclaim_idle) config.reclaim.idle = *options.reclaim_idle;
  GP_ASSIGN_OR_RETURN(auto engine, Engine::Create(config, std::move(target), std::move(attributes)));

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
  sim_options.provider = s.provider;
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
