#include "src/config/world.h"

#include <algorithm>
#include <cctype>
#include <cmath>

#include "src/config/alibaba_gpu_trace.h"
#include "src/model/gpu_catalog.h"

namespace gpupool {

WorldAttributes BuildAttributes(const ClusterConfig& c) {
  WorldAttributes w;
  for (const NodeAttributes& a : c.node_classes) w.classes[a.name] = w.table.AddNodeClass(a);
  for (const Requirement& r : c.requirements) w.requirements[r.name] = w.table.AddRequirement(r);
  return w;
}

Result<std::vector<NodePlan>> PlanNodes(const ClusterConfig& s, const std::map<std::string, uint16_t>& classes) {
  std::vector<NodePlan> plan;
  if (!s.trace_nodes_path.empty()) {
    GP_ASSIGN_OR_RETURN(auto nodes, LoadOpenbNodesFile(s.trace_nodes_path, Catalog::Builtin()));
    for (size_t i = 0; i < nodes.size(); i += static_cast<size_t>(s.trace_nodes_every)) {
      plan.push_back({std::move(nodes[i]), "region-1", "zone-1", "rack-1"});
    }
  }
  for (const NodeGroupConfig& g : s.nodes) {
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

Status BuildWorld(const ClusterConfig& s, const std::vector<NodePlan>& nodes, Engine& e, Instant now,
                  const Engine::Sink& sink) {
  std::map<std::string, TenantId> tenants;
  for (const TenantConfig& t : s.tenants) {
    GP_ASSIGN_OR_RETURN(auto id, e.AddTenant(t.name, now, sink));
    tenants[t.name] = id;
  }
  std::map<std::string, PoolId> pools;
  for (const PoolConfig& p : s.pools) {
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
  for (const TenantConfig& t : s.tenants) {
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

}  // namespace gpupool
