// A history replayed through the simulator under a configuration (see replay.h).
#include <algorithm>
#include <cmath>
#include <set>

#include "src/config/world.h"
#include "src/control/control_loops.h"
#include "src/sim/replay.h"
#include "src/sim/simulator.h"

namespace gpupool {
namespace {

// The names a run's engine gives ids, predicted before the run: the
// configuration's pools and tenants in order, then the tenants the history
// created later, in the order it did.
struct RunIds {
  std::map<std::string, PoolId> pools;
  std::map<std::string, TenantId> tenants;
};

Result<RunIds> PredictIds(const History& h, const ClusterConfig& c, bool new_config) {
  RunIds ids;
  for (size_t p = 0; p < c.pools.size(); ++p) ids.pools[c.pools[p].name] = static_cast<PoolId>(p);
  for (size_t t = 0; t < c.tenants.size(); ++t) ids.tenants[c.tenants[t].name] = static_cast<TenantId>(t);
  if (!new_config) {
    std::vector<std::string> boot_tenants;
    for (const Event& e : h.bootstrap) {
      if (const auto* t = std::get_if<TenantAdded>(&e.body)) boot_tenants.push_back(t->name);
    }
    std::vector<std::string> want_pools, want_tenants;
    for (const PoolConfig& p : c.pools) want_pools.push_back(p.name);
    for (const TenantConfig& t : c.tenants) want_tenants.push_back(t.name);
    const auto list = [](const std::vector<std::string>& v) {
      std::string s;
      for (const std::string& x : v) s += (s.empty() ? "" : ", ") + x;
      return "[" + s + "]";
    };
    if (want_pools != h.pools) {
      return FailedPrecondition("the configuration's pools " + list(want_pools) + " are not the journal's " +
                                list(h.pools) + ": it is not the configuration the journal was written under");
    }
    if (want_tenants != boot_tenants) {
      return FailedPrecondition("the configuration's tenants " + list(want_tenants) + " are not those the journal "
                                "started with " + list(boot_tenants) + ": it is not the configuration in force");
    }
  }
  for (const Event& e : h.changes) {
    const auto* t = std::get_if<TenantAdded>(&e.body);
    if (t != nullptr && !ids.tenants.contains(t->name)) {
      const TenantId next = static_cast<TenantId>(ids.tenants.size());
      ids.tenants[t->name] = next;
    }
  }
  return ids;
}

std::string PriorityClass(const ClusterConfig& c, int32_t priority) {
  for (const auto& [name, value] : c.priorities) {
    if (value == priority) return name;
  }
  return "priority " + std::to_string(priority);
}

// The history's jobs as the simulator's, with the run's ids and times from
// the origin; `index` gets each sim job's position in h.jobs.
Result<std::vector<SimJob>> ReplayJobs(const History& h, const ClusterConfig& c, const RunIds& ids,
                                       std::vector<size_t>& index) {
  const Duration horizon = h.end - h.origin;
  const Duration forever = horizon * 2 + std::chrono::hours(1);  // never ends within the run
  std::vector<SimJob> jobs;
  for (size_t i = 0; i < h.jobs.size(); ++i) {
    const ObservedJob& o = h.jobs[i];
    if (o.cancelled_pending) continue;
    SimJob j;
    j.spec = o.spec;
    auto tenant = ids.tenants.find(o.tenant);
    if (tenant == ids.tenants.end()) return NotFound("job " + std::to_string(o.job) + ": tenant '" + o.tenant + "' is in no configuration");
    j.spec.tenant = tenant->second;
    for (PoolId& p : j.spec.pools) {
      const std::string& name = h.pools.at(p);
      auto it = ids.pools.find(name);
      if (it == ids.pools.end()) return NotFound("job " + std::to_string(o.job) + ": pool '" + name + "' is not in the configuration");
      p = it->second;
    }
    if (j.spec.deadline) j.spec.deadline = kTimeOrigin + (*j.spec.deadline - h.origin);
    j.arrival = kTimeOrigin + (o.submitted - h.origin);
    j.work = o.ended && o.last_placed ? o.kept_work + (*o.ended - *o.last_placed) : forever;
    j.priority_class = PriorityClass(c, o.spec.priority);
    jobs.push_back(std::move(j));
    index.push_back(i);
  }
  return jobs;
}

bool ConfigDeclaresQuota(const ClusterConfig& c, const std::string& tenant, const std::string& pool) {
  for (const TenantConfig& t : c.tenants) {
    if (t.name == tenant) return t.quota.contains(pool);
  }
  return false;
}

// The history's later set-up events as the simulator's world changes.
std::vector<SimOptions::WorldChange> WorldChanges(const History& h, const ClusterConfig& c, const RunIds& ids,
                                                  bool new_config) {
  std::vector<SimOptions::WorldChange> out;
  for (const Event& e : h.changes) {
    const Duration at = e.at - h.origin;
    if (const auto* n = std::get_if<NodeAdded>(&e.body)) {
      if (n->provisioned) continue;
      out.push_back({at, [n](Engine& engine, Instant now, const Engine::Sink& sink) -> Status {
                       GP_TRY(engine.AddNode(n->spec, n->region, n->zone, n->rack, now, sink));
                       return {};
                     }});
    } else if (const auto* t = std::get_if<TenantAdded>(&e.body)) {
      const TenantId want = ids.tenants.at(t->name);
      out.push_back({at, [t, want](Engine& engine, Instant now, const Engine::Sink& sink) -> Status {
                       if (want < static_cast<TenantId>(engine.state().tenants.size())) return {};  // the configuration's
                       GP_ASSIGN_OR_RETURN(const TenantId got, engine.AddTenant(t->name, now, sink));
                       if (got != want) return FailedPrecondition("tenant '" + t->name + "' got id " + std::to_string(got));
                       return {};
                     }});
    } else if (const auto* q = std::get_if<QuotaSet>(&e.body)) {
      const std::string& tenant = h.tenants.at(q->tenant);
      const std::string& pool = h.pools.at(q->pool);
      if (new_config && ConfigDeclaresQuota(c, tenant, pool)) continue;  // the new configuration's word
      auto p = ids.pools.find(pool);
      if (p == ids.pools.end()) continue;  // a pool the new configuration lacks
      const TenantId tid = ids.tenants.at(tenant);
      const PoolId pid = p->second;
      out.push_back({at, [q, tid, pid](Engine& engine, Instant now, const Engine::Sink& sink) -> Status {
                       return engine.SetQuota(tid, pid, q->quota, now, sink);
                     }});
    }
  }
  return out;
}

std::vector<NodePlan> BootstrapNodes(const History& h) {
  std::vector<NodePlan> plan;
  for (const Event& e : h.bootstrap) {
    if (const auto* n = std::get_if<NodeAdded>(&e.body)) plan.push_back({n->spec, n->region, n->zone, n->rack});
  }
  return plan;
}

}  // namespace

Result<ReplayRun> ReplayHistory(const History& h, const ClusterConfig& config, const ReplayOptions& o) {
  GP_ASSIGN_OR_RETURN(const RunIds ids, PredictIds(h, config, o.new_config));
  std::vector<size_t> index;  // sim job -> h.jobs
  GP_ASSIGN_OR_RETURN(auto jobs, ReplayJobs(h, config, ids, index));
  WorldAttributes world = BuildAttributes(config);
  GP_ASSIGN_OR_RETURN(auto engine, CreateEngine(config.engine, std::move(world.table)));

  ReplayRun run;
  run.jobs.resize(h.jobs.size());
  std::map<JobId, size_t> sim_job;  // the replay engine's job id -> sim job
  std::vector<std::string> names;   // the replay's node names, by index
  SimOptions so;
  so.tick = o.tick;
  so.start_latency = Duration(0);  // the observed run time holds the agent's start
  so.horizon = h.end - h.origin;
  so.sample_every = std::max(o.tick, so.horizon / 500);
  so.costs.time_slice_overhead = 0;  // jobs end at their observed run time, whatever shares them
  so.costs.mig_setup = Duration(0);
  so.costs.scrub = Duration(0);
  so.costs.checkpoint_overhead = 0;
  so.costs.restore_factor = 0;
  so.check_invariants = o.check_invariants;
  so.event_log_path = o.event_log_path;
  so.world_changes = WorldChanges(h, config, ids, o.new_config);
  so.on_submitted = [&](JobId job, size_t sim_index) { sim_job[job] = sim_index; };
  so.on_event = [&](const Event& e) {
    const auto* p = std::get_if<JobPlaced>(&e.body);
    if (p == nullptr) return;
    auto it = sim_job.find(p->job);
    if (it == sim_job.end()) return;
    ReplayedJob& r = run.jobs[index[it->second]];
    if (r.first_placed) return;
    r.first_placed = h.origin + (e.at - kTimeOrigin);
    const Cluster& cluster = engine->state().cluster;
    for (NodeIndex n = static_cast<NodeIndex>(names.size()); n < cluster.node_count(); ++n) {
      names.push_back(cluster.node_name(n));  // nodes are only ever added
    }
    r.first_placement = PlacementText(p->replicas, names);
  };
  Simulator sim(engine.get(), std::move(jobs), std::move(so));
  GP_TRY(BuildWorld(config, BootstrapNodes(h), *engine, kTimeOrigin, sim.sink()));
  GP_ASSIGN_OR_RETURN(run.report, sim.Run(config.name.empty() ? "replay" : config.name));
  return run;
}

}  // namespace gpupool
