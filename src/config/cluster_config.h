// The cluster configuration both shells start from: node classes and
// requirements (the attribute table), node groups, pools, tenants and their
// quotas, priority classes and the engine's settings. A scenario
// (src/sim/scenario.h) is this plus a workload, faults, a provider model and
// a horizon; a server configuration (src/server/server_config.h) is this
// plus the server's settings. The YAML keys are documented in
// docs/scenarios.md and docs/server.md; cluster_reader.h reads them and
// world.h builds an Engine from them.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "src/engine/engine.h"
#include "src/sched/attributes.h"

namespace gpupool {

// `count` nodes alike, named "<name_prefix>-<index>".
struct NodeGroupConfig {
  int count = 0;
  std::string name_prefix;  // default: model name, lower case
  std::string model;        // a catalog name
  int gpus = 0;
  int64_t cpu_milli = 0;
  int64_t memory_mib = 0;
  std::string region = "region-1", zone = "zone-1";
  int racks = 1;            // nodes are spread round-robin over this many racks
  std::string attributes;   // a node class name, or empty
};

struct PoolConfig {
  std::string name;
  std::vector<std::string> models;  // empty = any model
  std::vector<std::string> regions;
  std::vector<std::string> dedicated_to;
  // `isolation: required` (servers; EXEC-1): only nodes whose agent runs
  // tasks in containers take work here (an agent that reports isolation
  // none is refused at registration). Default `optional`.
  bool isolation_required = false;
};

struct QuotaConfig {
  double guaranteed_gpus = 0;
  double limit_gpus = 0;
  double weight = 1;
  bool reserved = false;
};

struct TenantConfig {
  std::string name;
  std::map<std::string, QuotaConfig> quota;  // by pool name
};

struct ClusterConfig {
  std::string name;
  std::string description;
  uint64_t seed = 1;
  EngineConfig engine;
  std::map<std::string, int32_t> priorities = {{"low", 0}, {"normal", 100}, {"high", 1000}};
  std::vector<NodeAttributes> node_classes;
  std::vector<Requirement> requirements;
  // The labels jobs may carry and name in affinity rules (QUOTA-6), in
  // order: label i is bit i of a job's LabelMask. At most kMaxJobLabels.
  std::vector<std::string> job_labels;
  std::vector<NodeGroupConfig> nodes;
  std::vector<PoolConfig> pools;
  std::vector<TenantConfig> tenants;
  // Optional: the openb node list to build the cluster from instead of
  // `nodes` (every node into the pools by model).
  std::string trace_nodes_path;
  int trace_nodes_every = 1;  // only every N-th node of the list (a sample of the cluster)
};

inline constexpr size_t kMaxJobLabels = 64;  // the bits of a LabelMask

// The pool a node group's nodes join, as the engine decides it (the first
// whose selector takes the model and region), or -1.
int PoolOfGroup(const ClusterConfig& c, const NodeGroupConfig& g);

// Is `name` a node that the cluster's node groups create ("<prefix>-<index>")?
bool NodeGroupsName(const ClusterConfig& c, std::string_view name);

}  // namespace gpupool
