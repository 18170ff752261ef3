// Reads the sections of a cluster configuration (cluster_config.h) from a
// YAML document, strictly (yaml_reader.h): every unknown key, wrong type,
// value out of range or unknown name is an error naming the file, line,
// column and the key's path. The shells read their own sections with the
// same reader: the simulator's scenario files (src/sim/scenario.h) and the
// server's configuration (src/server/server_config.h) derive from it.
//
// Not thread-safe while reading (it keeps references between sections);
// one reader per document.
#pragma once

#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "src/config/cluster_config.h"
#include "src/config/yaml_reader.h"

namespace gpupool {

// What the file's shell changes in the shared sections.
struct ClusterReadOptions {
  // A server configuration: `tenants` and `cluster` are optional (the API
  // adds them later), and `regions.users` may name tenants not declared.
  bool server = false;
  // Keys of the `engine` section the shell reads itself (the simulator's
  // tick, start_latency, sample_every and costs), after the shared ones.
  std::vector<std::string_view> engine_keys;
  std::function<Status(const YamlFields& engine)> read_engine_keys;
};

// The root keys of the shared sections, in the order messages list them.
inline const std::vector<std::string_view> kClusterRootKeys = {
    "name", "description", "seed", "engine", "priorities", "node_classes", "requirements", "job_labels", "cluster",
    "pools", "tenants", "scaling", "regions"};

class ClusterReader : public YamlReader {
 public:
  ClusterReader(std::string_view source, std::string base_dir, ClusterReadOptions options)
      : YamlReader(source, std::move(base_dir)), options_(std::move(options)) {}

  // The shared sections of `root` (a map whose keys the caller checked),
  // in this order: name, description, seed, engine, priorities,
  // node_classes, requirements, pools, tenants, cluster; then the checks
  // across them (dedicated tenants exist and hold the pool, guarantees fit
  // the pools' capacity). `scaling` and `regions` are read separately,
  // because each shell reads them at its own point (ReadScaling,
  // ReadRegions).
  Status ReadSections(const YamlFields& root, ClusterConfig& s);
  // `scaling:` (SCALE-1..6): a list of pool autoscaling rules.
  Status ReadScaling(const YAML::Node& n, const std::string& path, ClusterConfig& s) const;
  // `regions:` (TOPO-2): the region table, the policy and users' locations.
  Status ReadRegions(const YAML::Node& n, const std::string& path, ClusterConfig& s) const;

  // The optional `kind` key: leaves `out` as it is when absent.
  Status KindField(const YamlFields& f, JobKind& out) const;
  // The optional `priority` key, a class of s.priorities; "normal" when
  // absent and there is such a class.
  Result<std::string> PriorityField(const YamlFields& f, const ClusterConfig& s) const;
  // The optional list of label names `key` (labels, affinity,
  // anti_affinity) as a mask over s.job_labels; 0 when absent.
  Result<LabelMask> LabelsField(const YamlFields& f, std::string_view key, const ClusterConfig& s) const;

 protected:
  const ClusterReadOptions& options() const { return options_; }

 private:
  Status ReadEngine(const YAML::Node& n, const std::string& path, ClusterConfig& s) const;
  Status ReadLending(const YAML::Node& n, const std::string& path, LendingConfig& c) const;
  Status ReadDefrag(const YAML::Node& n, const std::string& path, EngineConfig& e) const;
  Status ReadReclaim(const YAML::Node& n, const std::string& path, ReclaimConfig& c) const;
  Status ReadHotspots(const YAML::Node& n, const std::string& path, HotspotConfig& c) const;
  Status ReadPriorities(const YAML::Node& n, const std::string& path, ClusterConfig& s) const;
  Result<std::vector<EcosystemComponent>> ReadEcosystem(const YAML::Node& n, const std::string& path) const;
  Status ReadNodeClasses(const YAML::Node& n, const std::string& path, ClusterConfig& s) const;
  Status ReadRequirements(const YAML::Node& n, const std::string& path, ClusterConfig& s) const;
  Status ReadJobLabels(const YAML::Node& n, const std::string& path, ClusterConfig& s) const;
  Status ReadAttributeBounds(const YamlFields& f, Requirement& r) const;
  Status ReadPools(const YAML::Node& n, const std::string& path, ClusterConfig& s);
  Status ReadTenants(const YAML::Node& n, const std::string& path, ClusterConfig& s);
  Status ReadQuota(const YAML::Node& n, const std::string& path, const ClusterConfig& s, TenantConfig& t);
  Status ReadCluster(const YAML::Node& n, const std::string& path, ClusterConfig& s) const;
  Status ReadNodeGroup(const YAML::Node& n, const std::string& path, ClusterConfig& s) const;
  Status CheckDedicated(const ClusterConfig& s) const;
  Status CheckGuarantees(const ClusterConfig& s) const;
  Status ReadScalingNode(const YamlFields& f, const ClusterConfig& s, size_t pool, PoolScalingConfig& c) const;
  Status ReadScalingRule(const YamlFields& f, PoolScalingConfig& c) const;
  Status ReadRegionTable(const YAML::Node& table, const std::string& path, RegionPolicy& r) const;
  Status ReadRegionUsers(const YAML::Node& n, const std::string& path, const ClusterConfig& s,
                         RegionPolicy& r) const;

  ClusterReadOptions options_;
  // Kept for checks that need later sections.
  std::vector<std::vector<YamlRef>> dedicated_refs_;  // per pool, its dedicated_to items
  struct QuotaRef {
    size_t tenant;
    std::string pool;
    YamlRef guaranteed;  // the guaranteed_gpus node, or the quota's own node
  };
  std::vector<QuotaRef> quota_refs_;
};

}  // namespace gpupool
