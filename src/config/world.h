// The world builder: what a cluster configuration (cluster_config.h)
// declares, set up in a fresh Engine. Both shells build their world here:
// the simulator at the start of every run, the server when it bootstraps an
// empty data directory.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "src/base/status.h"
#include "src/config/cluster_config.h"
#include "src/engine/engine.h"
#include "src/sched/attributes.h"

namespace gpupool {

// The attribute table a configuration declares: node classes, then
// requirements, in declaration order, with their ids by name.
struct WorldAttributes {
  AttributeTable table;
  std::map<std::string, uint16_t> classes;       // node class name -> id
  std::map<std::string, uint16_t> requirements;  // requirement name -> id
};
WorldAttributes BuildAttributes(const ClusterConfig& c);

// The nodes a configuration's cluster section describes, named and placed
// (region, zone, rack), in declaration order: the openb node list first
// (trace_nodes, every trace_nodes_every-th node), then the node groups.
// `classes` maps node class names to attribute-table ids.
struct NodePlan {
  NodeSpec spec;
  std::string region, zone, rack;
};
Result<std::vector<NodePlan>> PlanNodes(const ClusterConfig& c, const std::map<std::string, uint16_t>& classes);

// Sets up what a configuration declares in a fresh engine, in this order:
// tenants, pools, `nodes` (from PlanNodes), quotas. Tenant and pool ids
// follow declaration order. An error names the tenant and pool it is about.
Status BuildWorld(const ClusterConfig& c, const std::vector<NodePlan>& nodes, Engine& e, Instant now,
                  const Engine::Sink& sink);

}  // namespace gpupool
