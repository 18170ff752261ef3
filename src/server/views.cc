#include "src/server/views.h"

#include "src/base/time_text.h"
#include "src/model/gpu_catalog.h"
#include "src/server/auth.h"

namespace gpupool {

using nlohmann::json;

namespace {

json GpuList(GpuMask m) {
  json a = json::array();
  for (int g = 0; g < kMaxGpusPerNode; ++g) {
    if (m >> g & 1) a.push_back(g);
  }
  return a;
}

double Gpus(int64_t milli) { return static_cast<double>(milli) / kMilliPerGpu; }

}  // namespace

json QuotaView(const Quota& q) {
  return json{{"guaranteed_gpus", Gpus(q.guaranteed_milli)},
              {"limit_gpus", Gpus(q.elastic_limit_milli)},
              {"weight", q.weight},
              {"reserved", q.reserved}};
}

// Why the job last stopped, for its tenant: the preemptor only when it is
// the tenant's own job (another tenant's job ids are not the tenant's to see).
namespace {
json JobStopView(const JobRecord& j, const JobStop& stop, const ReadModel& m) {
  json v{{"cause", JobStopCauseName(stop.cause)}, {"reason", stop.reason}, {"at", FormatRfc3339(stop.at)}};
  const JobRecord* by = stop.by_job >= 1 ? m.job(stop.by_job) : nullptr;
  if (by != nullptr && by->spec.tenant == j.spec.tenant) v["by_job"] = stop.by_job;
  return v;
}
}  // namespace

json JobView(const JobRecord& j, const ReadModel& m, const ApiNames& names) {
  const std::string tenant =
      j.spec.tenant >= 0 && j.spec.tenant < static_cast<TenantId>(m.tenants().size()) ? m.tenants()[j.spec.tenant] : "";
  json v{{"id", j.id},
         {"name", j.spec.name},
         {"tenant", tenant},
         {"state", JobStateName(j.state)},
         {"kind", JobKindName(j.spec.kind)},
         {"priority", j.spec.priority},
         {"replicas", j.spec.replicas},
         {"submitted_at", FormatRfc3339(j.submitted)},
         {"borrowed", j.borrowed},
         {"preemptions", j.preemptions},
         {"interruptions", j.interruptions}};
  if (j.has_started) v["started_at"] = FormatRfc3339(j.started);
  if (j.has_ended) v["ended_at"] = FormatRfc3339(j.ended);
  json placements = json::array();
  if (j.state == JobState::kRunning || j.state == JobState::kCheckpointing) {
    v["pool"] = j.pool < m.pools().size() ? m.pools()[j.pool].name : "";
    for (const PlacedReplica& r : j.placements) {
      const std::string node = r.node >= 0 && r.node < static_cast<NodeIndex>(m.nodes().size())
                                   ? m.nodes()[r.node].spec.name
                                   : "";
      placements.push_back(json{{"node", node}, {"gpus", GpuList(r.gpus)}});
    }
  }
  v["placements"] = std::move(placements);
  if (!j.reason.empty()) v["reason"] = j.reason;
  if (j.last_stop) v["last_stop"] = JobStopView(j, *j.last_stop, m);
  v["request"] = JobSpecToRequest(j.spec, tenant, names);
  return v;
}

json TenantView(TenantId t, const ReadModel& m) {
  json quota = json::object(), usage = json::object();
  const auto& s = *m.summary();
  for (size_t p = 0; p < m.pools().size(); ++p) {
    const std::string& pool = m.pools()[p].name;
    if (p < m.quotas()[t].size()) {
      const Quota& q = m.quotas()[t][p];
      if (q.elastic_limit_milli > 0 || q.guaranteed_milli > 0) quota[pool] = QuotaView(q);
    }
    if (static_cast<size_t>(t) < s.usage.size() && p < s.usage[t].size()) {
      const auto& u = s.usage[t][p];
      if (u.used_milli || u.borrowed_milli || u.lent_milli || quota.contains(pool)) {
        usage[pool] = json{{"used_gpus", Gpus(u.used_milli)},
                           {"borrowed_gpus", Gpus(u.borrowed_milli)},
                           {"lent_gpus", Gpus(u.lent_milli)}};
      }
    }
  }
  return json{{"name", m.tenants()[t]}, {"quota", std::move(quota)}, {"usage", std::move(usage)}};
}

namespace {

// Who holds the node cordoned and why, each holder on its own (issue 19):
// an operator (with the drain's progress), a hotspot (OPS-2), a scale-in.
json CordonsView(const NodeRecord& r) {
  json out = json::array();
  if (r.cordon) {
    const NodeRecord::OperatorCordon& c = *r.cordon;
    json o{{"by", "operator"}, {"actor", c.actor}, {"reason", c.reason}, {"since", FormatRfc3339(c.since)}};
    using Drain = NodeRecord::OperatorCordon::Drain;
    if (c.drain != Drain::kNone) {
      o["drain"] = c.drain == Drain::kDraining ? "draining" : "drained";
      o["drain_deadline"] = FormatRfc3339(c.drain_deadline);
    }
    if (c.removing) o["removed"] = true;
    out.push_back(std::move(o));
  }
  if (r.hot) out.push_back(json{{"by", "hotspot"}, {"reason", r.hot_reason}, {"since", FormatRfc3339(r.hot_since)}});
  if (r.scale_in) {
    out.push_back(
        json{{"by", "scale-in"}, {"reason", r.scale_in->first}, {"since", FormatRfc3339(r.scale_in->second)}});
  }
  return out;
}

}  // namespace

json NodeView(NodeIndex i, const ReadModel& m) {
  const NodeRecord& r = m.nodes()[i];
  json v{{"name", r.spec.name},
         {"pool", r.spec.pool < m.pools().size() ? m.pools()[r.spec.pool].name : ""},
         {"model", r.spec.gpu_count > 0 ? Catalog::Builtin().Get(r.spec.gpu_model).name : ""},
         {"gpus", r.spec.gpu_count},
         {"cpu_cores", r.spec.cpu_milli / 1000.0},
         {"memory_gib", r.spec.memory_mib / 1024.0},
         {"region", r.region},
         {"zone", r.zone},
         {"rack", r.rack}};
  if (r.home_pool >= 0 && static_cast<size_t>(r.home_pool) < m.pools().size()) {
    v["lent_from"] = m.pools()[r.home_pool].name;  // POOL-3: borrowed by `pool` from this pool
  }
  const auto& s = *m.summary();
  if (static_cast<size_t>(i) < s.nodes.size()) {
    const Node& n = s.nodes[i];
    static constexpr const char* kConditions[] = {"ready", "cordoned", "down", "removed"};
    v["condition"] = kConditions[static_cast<int>(n.condition)];
    v["free_gpus"] = Gpus(n.gpu_milli_free_total);
    json gpus = json::array();
    for (int g = 0; g < n.gpu_count; ++g) {
      gpus.push_back(json{{"index", g},
                          {"mode", GpuModeName(n.gpu_mode[g])},
                          {"free_milli", n.gpu_free_milli[g]},
                          {"memory_free_mib", n.gpu_mode[g] == GpuMode::kWhole ? 0 : n.gpu_memory_free_mib[g]},
                          {"healthy", !(n.gpu_unhealthy >> g & 1)}});
    }
    v["gpu"] = std::move(gpus);
    // EXEC-11: these take no new work (the agent's words are under agent.gpus).
    if (n.gpu_unhealthy != 0) v["unhealthy_gpus"] = GpuList(n.gpu_unhealthy);
  } else {
    v["condition"] = "ready";  // registered after the latest summary
    v["free_gpus"] = r.spec.gpu_count;
    v["gpu"] = json::array();
  }
  if (r.hot) {
    // OPS-2: cordoned until its GPUs report below the thresholds.
    v["condition"] = "cordoned";
    v["hotspot"] = json{{"gpus", GpuList(r.hot_gpus)}, {"reason", r.hot_reason}, {"since", FormatRfc3339(r.hot_since)}};
  }
  v["cordons"] = CordonsView(r);
  // Issue 19: an operator's cordon shows at once, before the next summary.
  if (r.cordon && v["condition"] == "ready") v["condition"] = "cordoned";
  return v;
}

json PoolView(PoolId p, const ReadModel& m) {
  const Pool& pool = m.pools()[p];
  json models = json::array();
  if (pool.selector.models != kAnyGpuModel) {
    for (int i = 0; i < Catalog::Builtin().size(); ++i) {
      if (pool.selector.models >> i & 1) models.push_back(Catalog::Builtin().Get(static_cast<GpuModelId>(i)).name);
    }
  }
  json dedicated = json::array();
  for (TenantId t : pool.dedicated_to) dedicated.push_back(m.tenants()[t]);
  const auto& s = *m.summary();
  json v{{"name", pool.name}, {"models", models}, {"regions", pool.selector.regions}, {"dedicated_to", dedicated}};
  v["nodes"] = p < s.pool_nodes.size() ? s.pool_nodes[p] : 0;
  if (p < s.capacity.size()) {
    const PoolCapacity& c = s.capacity[p];
    v["capacity"] = json{{"total_gpus", Gpus(c.total_milli)},
                         {"allocated_gpus", Gpus(c.allocated_milli)},
                         {"reserved_gpus", Gpus(c.reserved_milli)},
                         {"fragmented_gpus", Gpus(c.fragmented_milli)},
                         {"available_gpus", Gpus(c.available_milli)}};
  }
  return v;
}

nlohmann::json TokenView(const TokenRecord& t) {
  const std::string_view role = TokenRole(t);
  nlohmann::json v = {{"id", TokenId(t)},
                      {"name", TokenName(t)},
                      {"role", std::string(role)},
                      {"created_at", FormatRfc3339(InstantFromMillis(t.created_ms))}};
  if (role == kRoleNode) {
    v["node"] = t.tenant.substr(kNodeTokenPrefix.size());
  } else if (!t.tenant.empty()) {
    v["tenant"] = t.tenant;
  }
  if (t.expires_ms != 0) v["expires_at"] = FormatRfc3339(InstantFromMillis(t.expires_ms));
  if (t.revoked_ms != 0) v["revoked_at"] = FormatRfc3339(InstantFromMillis(t.revoked_ms));
  if (t.salt_hex.empty()) v["legacy"] = true;  // unsalted: issued by an earlier release
  return v;
}

}  // namespace gpupool
