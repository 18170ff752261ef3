#include "src/config/cluster_reader.h"

#include <algorithm>
#include <cmath>
#include <sstream>

#include "src/engine/mode_policy.h"
#include "src/model/demand.h"
#include "src/model/gpu_catalog.h"
#include "src/sched/policy.h"

namespace gpupool {
namespace {

constexpr int kMaxNodeGroupCount = 1'000'000;

template <class Map>
std::string KeysOf(const Map& m) {
  std::vector<std::string> names;
  for (const auto& [k, v] : m) names.push_back(k);
  return JoinNames(names);
}

std::string Percent(double v) { return v >= 0 && v <= 100 ? "" : "must be between 0 and 100"; }

}  // namespace

Status ClusterReader::ReadSections(const YamlFields& f, ClusterConfig& s) {
  GP_TRY(Require(f, "name"));
  GP_TRY(StringField(f, "name", s.name));
  GP_TRY(StringField(f, "description", s.description, /*allow_empty=*/true));
  GP_TRY(IntField(f, "seed", s.seed, IntRange(0, INT64_MAX)));
  s.engine.seed = s.seed;
  if (auto* n = f.Find("engine")) GP_TRY(ReadEngine(*n, "engine", s));
  if (auto* n = f.Find("priorities")) GP_TRY(ReadPriorities(*n, "priorities", s));
  if (auto* n = f.Find("node_classes")) GP_TRY(ReadNodeClasses(*n, "node_classes", s));
  if (auto* n = f.Find("requirements")) GP_TRY(ReadRequirements(*n, "requirements", s));
  if (auto* n = f.Find("job_labels")) GP_TRY(ReadJobLabels(*n, "job_labels", s));
  GP_TRY(Require(f, "pools"));
  GP_TRY(ReadPools(*f.Find("pools"), "pools", s));
  if (!options_.server || f.Has("tenants")) {
    GP_TRY(Require(f, "tenants"));
    GP_TRY(ReadTenants(*f.Find("tenants"), "tenants", s));
  }
  GP_TRY(CheckDedicated(s));
  if (!options_.server || f.Has("cluster")) {
    GP_TRY(Require(f, "cluster"));
    GP_TRY(ReadCluster(*f.Find("cluster"), "cluster", s));
    GP_TRY(CheckGuarantees(s));
  }
  return {};
}

// Pools name their dedicated tenants before the tenants are declared; a
// tenant with a quota in a dedicated pool must be one of them.
Status ClusterReader::CheckDedicated(const ClusterConfig& s) const {
  for (size_t p = 0; p < s.pools.size(); ++p) {
    for (const YamlRef& r : dedicated_refs_[p]) {
      const std::string name = r.node.Scalar();
      if (std::none_of(s.tenants.begin(), s.tenants.end(), [&](const TenantConfig& t) { return t.name == name; })) {
        std::vector<std::string> known;
        for (const auto& t : s.tenants) known.push_back(t.name);
        return Fail(r.node, r.path, "unknown tenant '" + name + "' (known: " + JoinNames(known) + ")");
      }
    }
  }
  for (const QuotaRef& q : quota_refs_) {
    const auto pool =
        std::find_if(s.pools.begin(), s.pools.end(), [&](const PoolConfig& p) { return p.name == q.pool; });
    const TenantConfig& t = s.tenants[q.tenant];
    if (!pool->dedicated_to.empty() && t.quota.at(q.pool).limit_gpus > 0 &&
        std::find(pool->dedicated_to.begin(), pool->dedicated_to.end(), t.name) == pool->dedicated_to.end()) {
      return Fail(q.guaranteed.node, q.guaranteed.path,
                  "pool '" + q.pool + "' is dedicated to other tenants (" + JoinNames(pool->dedicated_to) + ")");
    }
  }
  return {};
}

Status ClusterReader::ReadEngine(const YAML::Node& n, const std::string& path, ClusterConfig& s) const {
  std::vector<std::string_view> keys = {"policy", "seed", "lending", "sharing_policy", "reclaim", "heartbeat_timeout",
                                        "topology", "defrag", "hotspots", "elastic", "borrow_between_pools",
                                        "workload_learning"};
  keys.insert(keys.end(), options_.engine_keys.begin(), options_.engine_keys.end());
  YamlFields f;
  GP_ASSIGN_OR_RETURN(f, Map(n, path, keys));
  if (const YAML::Node* p = f.Find("policy")) {
    std::string name;
    GP_ASSIGN_OR_RETURN(name, String(*p, f.PathOf("policy")));
    if (auto spec = FindPolicy(name); !spec) return Fail(*p, f.PathOf("policy"), spec.error().message);
    s.engine.policy = name;
  }
  GP_TRY(IntField(f, "seed", s.engine.seed, IntRange(0, INT64_MAX)));
  if (const YAML::Node* l = f.Find("lending")) GP_TRY(ReadLending(*l, f.PathOf("lending"), s.engine.lending));
  if (const YAML::Node* p = f.Find("sharing_policy")) {
    std::string name;
    GP_ASSIGN_OR_RETURN(name, String(*p, f.PathOf("sharing_policy")));
    if (auto table = FindModePolicy(name); !table) return Fail(*p, f.PathOf("sharing_policy"), table.error().message);
    s.engine.sharing_policy = name;
  }
  if (const YAML::Node* d = f.Find("defrag")) GP_TRY(ReadDefrag(*d, f.PathOf("defrag"), s.engine));
  if (const YAML::Node* t = f.Find("topology")) {
    std::string mode;
    GP_ASSIGN_OR_RETURN(mode, String(*t, f.PathOf("topology")));
    if (mode != "aware" && mode != "blind") {
      return Fail(*t, f.PathOf("topology"), "expected 'aware' or 'blind' (got '" + mode + "')");
    }
    s.engine.topology_aware = mode == "aware";
  }
  if (const YAML::Node* r = f.Find("reclaim")) GP_TRY(ReadReclaim(*r, f.PathOf("reclaim"), s.engine.reclaim));
  GP_TRY(DurationField(f, "heartbeat_timeout", s.engine.heartbeat_timeout, AnyDuration));
  if (const YAML::Node* h = f.Find("hotspots")) GP_TRY(ReadHotspots(*h, f.PathOf("hotspots"), s.engine.hotspots));
  if (const YAML::Node* e = f.Find("elastic")) {
    YamlFields ef;
    GP_ASSIGN_OR_RETURN(ef, Map(*e, f.PathOf("elastic"), {"resize_every"}));
    GP_TRY(DurationField(ef, "resize_every", s.engine.elastic_resize_every, AnyDuration));
  }
  GP_TRY(BoolField(f, "borrow_between_pools", s.engine.borrow_between_pools));
  if (const YAML::Node* w = f.Find("workload_learning")) {
    YamlFields wf;
    GP_ASSIGN_OR_RETURN(
        wf, Map(*w, f.PathOf("workload_learning"), {"half_life", "prior_weight", "warmup_arrivals", "refresh_every"}));
    WorkloadLearningConfig& c = s.engine.workload_learning;
    GP_TRY(DurationField(wf, "half_life", c.half_life, PositiveDuration));
    GP_TRY(NumberField(wf, "prior_weight", c.prior_weight, [](double v) -> std::string {
      return v > 0 && v <= 1e9 ? "" : "must be a positive number of arrivals (at most 1e9)";
    }));
    GP_TRY(IntField(wf, "warmup_arrivals", c.warmup_arrivals, IntRange(1, 1'000'000)));
    GP_TRY(DurationField(wf, "refresh_every", c.refresh_every, PositiveDuration));
  }
  if (options_.read_engine_keys) GP_TRY(options_.read_engine_keys(f));
  return {};
}

Status ClusterReader::ReadJobLabels(const YAML::Node& n, const std::string& path, ClusterConfig& s) const {
  GP_ASSIGN_OR_RETURN(s.job_labels, StringList(n, path));
  if (s.job_labels.size() > kMaxJobLabels) {
    return Fail(n, path, "at most " + std::to_string(kMaxJobLabels) + " labels (the bits of a label mask)");
  }
  return {};
}

Result<LabelMask> ClusterReader::LabelsField(const YamlFields& f, std::string_view key, const ClusterConfig& s) const {
  const YAML::Node* n = f.Find(key);
  if (!n) return LabelMask{0};
  std::vector<YamlRef> refs;
  GP_TRY(StringList(*n, f.PathOf(key), &refs));
  LabelMask mask = 0;
  for (const YamlRef& r : refs) {
    const auto it = std::find(s.job_labels.begin(), s.job_labels.end(), r.node.Scalar());
    if (it == s.job_labels.end()) {
      return Fail(r.node, r.path,
                  "unknown label '" + r.node.Scalar() + "' (job_labels: " + JoinNames(s.job_labels) + ")");
    }
    mask |= LabelMask{1} << (it - s.job_labels.begin());
  }
  return mask;
}

Status ClusterReader::ReadLending(const YAML::Node& n, const std::string& path, LendingConfig& c) const {
  YamlFields f;
  GP_ASSIGN_OR_RETURN(f, Map(n, path, {"enabled", "window", "threshold", "fraction"}));
  GP_TRY(BoolField(f, "enabled", c.enabled));
  GP_TRY(DurationField(f, "window", c.window, AnyDuration));
  GP_TRY(NumberField(f, "threshold", c.threshold, Fraction01));
  GP_TRY(NumberField(f, "fraction", c.lend_fraction, Fraction01));
  return {};
}

Status ClusterReader::ReadDefrag(const YAML::Node& n, const std::string& path, EngineConfig& e) const {
  YamlFields f;
  GP_ASSIGN_OR_RETURN(f, Map(n, path,
                             {"enabled", "every", "trigger_frag_pct", "max_migrations_per_hour", "min_gain_per_cost",
                              "horizon", "restart_cost"}));
  DefragConfig& c = e.defrag_config;
  e.defrag = true;
  GP_TRY(BoolField(f, "enabled", e.defrag));
  GP_TRY(DurationField(f, "every", e.defrag_every, PositiveDuration));
  GP_TRY(NumberField(f, "trigger_frag_pct", c.trigger_frag_pct, Percent));
  GP_TRY(IntField(f, "max_migrations_per_hour", c.max_migrations_per_hour, IntRange(0, 100000)));
  GP_TRY(NumberField(f, "min_gain_per_cost", c.min_gain_per_cost, NonNegative));
  GP_TRY(DurationField(f, "horizon", c.horizon, PositiveDuration));
  GP_TRY(DurationField(f, "restart_cost", c.restart_cost, AnyDuration));
  return {};
}

Status ClusterReader::ReadReclaim(const YAML::Node& n, const std::string& path, ReclaimConfig& c) const {
  YamlFields f;
  GP_ASSIGN_OR_RETURN(f, Map(n, path, {"idle", "poll", "idle_below_pct", "idle_polls", "grace", "deadlines"}));
  GP_TRY(BoolField(f, "idle", c.idle));
  GP_TRY(DurationField(f, "poll", c.poll, PositiveDuration));
  GP_TRY(NumberField(f, "idle_below_pct", c.idle_below_pct, Percent));
  GP_TRY(IntField(f, "idle_polls", c.idle_polls, IntRange(1, INT32_MAX)));
  GP_TRY(DurationField(f, "grace", c.grace, AnyDuration));
  GP_TRY(BoolField(f, "deadlines", c.deadlines));
  return {};
}

Status ClusterReader::ReadHotspots(const YAML::Node& n, const std::string& path, HotspotConfig& c) const {
  YamlFields f;
  GP_ASSIGN_OR_RETURN(f, Map(n, path,
                             {"enabled", "util_above_pct", "memory_above_pct", "temperature_above_c", "window",
                              "max_moves", "cooldown"}));
  c.enabled = true;
  GP_TRY(BoolField(f, "enabled", c.enabled));
  const auto pct = [](double v) -> std::string { return v >= 0 && v <= 100 ? "" : "must be between 0 and 100 (0: off)"; };
  GP_TRY(NumberField(f, "util_above_pct", c.util_above_pct, pct));
  GP_TRY(NumberField(f, "memory_above_pct", c.memory_above_pct, pct));
  GP_TRY(NumberField(f, "temperature_above_c", c.temperature_above_c, [](double v) -> std::string {
    return v >= 0 && v <= 150 ? "" : "must be between 0 and 150 (0: off)";
  }));
  GP_TRY(DurationField(f, "window", c.window, PositiveDuration));
  GP_TRY(IntField(f, "max_moves", c.max_moves, IntRange(0, 1000)));
  GP_TRY(DurationField(f, "cooldown", c.cooldown, AnyDuration));
  if (c.enabled) {
    if (auto ok = CheckHotspotConfig(c); !ok) return Fail(n, path, ok.error().message);
  }
  return {};
}

Status ClusterReader::ReadPriorities(const YAML::Node& n, const std::string& path, ClusterConfig& s) const {
  YamlFields f;
  GP_ASSIGN_OR_RETURN(f, Map(n, path, {}));
  if (f.entries.empty()) return Fail(n, path, "needs at least one priority class");
  s.priorities.clear();
  for (const auto& e : f.entries) {
    if (e.key.empty()) return Fail(e.key_node, path, "a priority class needs a name");
    int32_t v = 0;
    GP_TRY(IntField(f, e.key, v, IntRange(INT32_MIN, INT32_MAX)));
    s.priorities[e.key] = v;
  }
  return {};
}

Result<std::vector<EcosystemComponent>> ClusterReader::ReadEcosystem(const YAML::Node& n, const std::string& path) const {
  YamlFields f;
  GP_ASSIGN_OR_RETURN(f, Map(n, path, {}));
  std::vector<EcosystemComponent> out;
  for (const auto& e : f.entries) {
    if (e.key.empty()) return Fail(e.key_node, path, "a component needs a name");
    std::string text;
    GP_ASSIGN_OR_RETURN(text, String(e.value, f.PathOf(e.key)));
    auto v = ParseVersion(text);
    if (!v) return Fail(e.value, f.PathOf(e.key), "expected a version MAJOR[.MINOR[.PATCH]] (got '" + text + "')");
    out.push_back({e.key, *v});
  }
  return out;
}

Status ClusterReader::ReadNodeClasses(const YAML::Node& n, const std::string& path, ClusterConfig& s) const {
  if (n.IsNull()) return {};
  if (!n.IsSequence()) return Fail(n, path, "expected a list of node classes");
  for (size_t i = 0; i < n.size(); ++i) {
    YamlFields f;
    GP_ASSIGN_OR_RETURN(f, Map(n[i], ItemPath(path, i), {"name", "family", "ecosystem", "gpu", "storage", "network"}));
    NodeAttributes a;
    GP_TRY(Require(f, "name"));
    GP_TRY(StringField(f, "name", a.name));
    for (const auto& c : s.node_classes) {
      if (c.name == a.name) return Fail(*f.Find("name"), f.PathOf("name"), "duplicate node class '" + a.name + "'");
    }
    GP_TRY(StringField(f, "family", a.family));
    if (const YAML::Node* e = f.Find("ecosystem")) {
      GP_ASSIGN_OR_RETURN(a.ecosystem, ReadEcosystem(*e, f.PathOf("ecosystem")));
    }
    struct Sub {
      std::string_view section;
      std::vector<std::pair<std::string_view, double*>> keys;
    };
    const Sub subs[] = {
        {"gpu",
         {{"fp16_tflops", &a.value[kFp16Tflops]},
          {"memory_mib", &a.value[kGpuMemoryMib]},
          {"memory_bandwidth_gbps", &a.value[kMemoryBandwidthGbps]},
          {"interconnect_gbps", &a.value[kInterconnectGbps]}}},
        {"storage",
         {{"capacity_gib", &a.value[kStorageCapacityGib]},
          {"iops", &a.value[kStorageIops]},
          {"latency_us", &a.value[kStorageLatencyUs]},
          {"durability_nines", &a.storage_durability_nines}}},
        {"network", {{"bandwidth_gbps", &a.value[kNetworkBandwidthGbps]}, {"latency_us", &a.value[kNetworkLatencyUs]}}},
    };
    for (const Sub& sub : subs) {
      const YAML::Node* sn = f.Find(sub.section);
      if (!sn) continue;
      std::vector<std::string_view> allowed;
      for (const auto& k : sub.keys) allowed.push_back(k.first);
      YamlFields sf;
      GP_ASSIGN_OR_RETURN(sf, Map(*sn, f.PathOf(sub.section), allowed));
      for (const auto& [key, out] : sub.keys) GP_TRY(NumberField(sf, key, *out, NonNegative));
    }
    s.node_classes.push_back(std::move(a));
  }
  return {};
}

Status ClusterReader::ReadRequirements(const YAML::Node& n, const std::string& path, ClusterConfig& s) const {
  if (n.IsNull()) return {};
  if (!n.IsSequence()) return Fail(n, path, "expected a list of requirements");
  for (size_t i = 0; i < n.size(); ++i) {
    YamlFields f;
    GP_ASSIGN_OR_RETURN(
        f, Map(n[i], ItemPath(path, i),
               {"name", "kind", "ecosystem", "min", "max", "min_storage_durability_nines", "preferred_family"}));
    Requirement r;
    GP_TRY(Require(f, "name"));
    GP_TRY(StringField(f, "name", r.name));
    for (const auto& other : s.requirements) {
      if (other.name == r.name)
        return Fail(*f.Find("name"), f.PathOf("name"), "duplicate requirement '" + r.name + "'");
    }
    GP_TRY(KindField(f, r.kind));
    if (const YAML::Node* e = f.Find("ecosystem")) {
      GP_ASSIGN_OR_RETURN(r.ecosystem, ReadEcosystem(*e, f.PathOf("ecosystem")));
    }
    // min: the attributes where more is better; max: the latencies.
    for (const bool max : {false, true}) {
      const char* section = max ? "max" : "min";
      const YAML::Node* sn = f.Find(section);
      if (!sn) continue;
      YamlFields sf;
      GP_ASSIGN_OR_RETURN(sf, Map(*sn, f.PathOf(section), {}));
      for (const auto& e : sf.entries) {
        int attr = -1;
        for (int a = 0; a < kAttrCount; ++a) {
          if (LowerIsBetter(a) == max && e.key == AttrName(a)) attr = a;
        }
        if (attr < 0) {
          for (int a = 0; a < kAttrCount; ++a) {
            if (e.key == AttrName(a)) {
              return Fail(
                  e.key_node, sf.PathOf(e.key),
                  std::string(max ? "a minimum: put it under min" : "a maximum (lower is better): put it under max"));
            }
          }
          std::vector<std::string> known;
          for (int a = 0; a < kAttrCount; ++a) {
            if (LowerIsBetter(a) == max) known.push_back(AttrName(a));
          }
          return Fail(e.key_node, sf.PathOf(e.key),
                      "unknown key '" + e.key + "' (expected one of: " + JoinNames(known) + ")");
        }
        GP_TRY(NumberField(sf, e.key, r.minimum[attr], NonNegative));
      }
    }
    GP_TRY(NumberField(f, "min_storage_durability_nines", r.min_storage_durability_nines, NonNegative));
    GP_TRY(StringField(f, "preferred_family", r.preferred_family));
    s.requirements.push_back(std::move(r));
  }
  return {};
}

Status ClusterReader::ReadPools(const YAML::Node& n, const std::string& path, ClusterConfig& s) {
  if (!n.IsSequence() || n.size() == 0) return Fail(n, path, "expected a list of at least one pool");
  if (n.size() > static_cast<size_t>(kMaxPools))
    return Fail(n, path, "at most " + std::to_string(kMaxPools) + " pools");
  for (size_t i = 0; i < n.size(); ++i) {
    YamlFields f;
    GP_ASSIGN_OR_RETURN(f, Map(n[i], ItemPath(path, i), {"name", "models", "regions", "dedicated_to", "isolation"}));
    PoolConfig p;
    GP_TRY(Require(f, "name"));
    GP_TRY(StringField(f, "name", p.name));
    for (const auto& other : s.pools) {
      if (other.name == p.name) return Fail(*f.Find("name"), f.PathOf("name"), "duplicate pool '" + p.name + "'");
    }
    if (const YAML::Node* m = f.Find("models")) {
      std::vector<YamlRef> refs;
      GP_ASSIGN_OR_RETURN(p.models, StringList(*m, f.PathOf("models"), &refs));
      for (const YamlRef& r : refs) {
        if (!Catalog::Builtin().Find(r.node.Scalar())) {
          return Fail(r.node, r.path,
                      "unknown GPU model '" + r.node.Scalar() + "' (known: " + Catalog::Builtin().Names() + ")");
        }
      }
    }
    if (const YAML::Node* r = f.Find("regions")) {
      GP_ASSIGN_OR_RETURN(p.regions, StringList(*r, f.PathOf("regions")));
    }
    std::vector<YamlRef> dedicated;
    if (const YAML::Node* d = f.Find("dedicated_to")) {
      GP_ASSIGN_OR_RETURN(p.dedicated_to, StringList(*d, f.PathOf("dedicated_to"), &dedicated));
    }
    if (const YAML::Node* iso = f.Find("isolation")) {
      std::string v;
      GP_TRY(StringField(f, "isolation", v));
      if (v != "required" && v != "optional") {
        return Fail(*iso, f.PathOf("isolation"), "unknown isolation '" + v + "' (known: required, optional)");
      }
      p.isolation_required = v == "required";
    }
    dedicated_refs_.push_back(std::move(dedicated));
    s.pools.push_back(std::move(p));
  }
  return {};
}

Status ClusterReader::ReadTenants(const YAML::Node& n, const std::string& path, ClusterConfig& s) {
  if (!n.IsSequence() || n.size() == 0) return Fail(n, path, "expected a list of at least one tenant");
  for (size_t i = 0; i < n.size(); ++i) {
    YamlFields f;
    GP_ASSIGN_OR_RETURN(f, Map(n[i], ItemPath(path, i), {"name", "quota"}));
    TenantConfig t;
    GP_TRY(Require(f, "name"));
    GP_TRY(StringField(f, "name", t.name));
    for (const auto& other : s.tenants) {
      if (other.name == t.name) return Fail(*f.Find("name"), f.PathOf("name"), "duplicate tenant '" + t.name + "'");
    }
    if (const YAML::Node* qn = f.Find("quota")) {
      YamlFields qf;
      GP_ASSIGN_OR_RETURN(qf, Map(*qn, f.PathOf("quota"), {}));
      for (const auto& e : qf.entries) {
        if (std::none_of(s.pools.begin(), s.pools.end(), [&](const PoolConfig& p) { return p.name == e.key; })) {
          std::vector<std::string> known;
          for (const auto& p : s.pools) known.push_back(p.name);
          return Fail(e.key_node, qf.PathOf(e.key), "unknown pool '" + e.key + "' (known: " + JoinNames(known) + ")");
        }
        YamlFields pf;
        GP_ASSIGN_OR_RETURN(pf,
                            Map(e.value, qf.PathOf(e.key), {"guaranteed_gpus", "limit_gpus", "weight", "reserved"}));
        QuotaConfig q;
        GP_TRY(NumberField(pf, "guaranteed_gpus", q.guaranteed_gpus, NonNegative));
        q.limit_gpus = q.guaranteed_gpus;  // no borrowing unless a limit is given
        GP_TRY(NumberField(pf, "limit_gpus", q.limit_gpus, NonNegative));
        if (q.limit_gpus < q.guaranteed_gpus) {
          return Fail(*pf.Find("limit_gpus"), pf.PathOf("limit_gpus"),
                      "must be at least guaranteed_gpus (" + std::to_string(q.guaranteed_gpus) + ")");
        }
        GP_TRY(NumberField(pf, "weight", q.weight, Positive));
        GP_TRY(BoolField(pf, "reserved", q.reserved));
        const YAML::Node* g = pf.Find("guaranteed_gpus");
        quota_refs_.push_back(
            {s.tenants.size(), e.key, g ? YamlRef{*g, pf.PathOf("guaranteed_gpus")} : YamlRef{e.value, pf.path}});
        t.quota[e.key] = q;
      }
    }
    s.tenants.push_back(std::move(t));
  }
  return {};
}

Status ClusterReader::ReadCluster(const YAML::Node& n, const std::string& path, ClusterConfig& s) const {
  YamlFields f;
  GP_ASSIGN_OR_RETURN(f, Map(n, path, {"nodes", "trace_nodes", "trace_nodes_every"}));
  GP_TRY(IntField(f, "trace_nodes_every", s.trace_nodes_every, IntRange(1, 1000000)));
  if (!f.Has("nodes") && !f.Has("trace_nodes")) return Fail(n, path, "needs nodes or trace_nodes (or both)");
  if (const YAML::Node* t = f.Find("trace_nodes")) {
    std::string p;
    GP_ASSIGN_OR_RETURN(p, String(*t, f.PathOf("trace_nodes")));
    s.trace_nodes_path = ResolvePath(p);
  }
  if (!f.Has("nodes")) return {};
  const YAML::Node& nodes = *f.Find("nodes");
  const std::string npath = f.PathOf("nodes");
  if (!nodes.IsSequence() || nodes.size() == 0) return Fail(nodes, npath, "expected a list of at least one node group");
  for (size_t i = 0; i < nodes.size(); ++i) {
    YamlFields g;
    GP_ASSIGN_OR_RETURN(g, Map(nodes[i], ItemPath(npath, i),
                               {"count", "model", "gpus", "cpu_cores", "memory_gib", "region", "zone", "racks",
                                "attributes", "name_prefix"}));
    NodeGroupConfig ng;
    GP_TRY(Require(g, "count"));
    GP_TRY(IntField(g, "count", ng.count, IntRange(0, kMaxNodeGroupCount)));
    GP_TRY(StringField(g, "model", ng.model));
    if (const YAML::Node* m = g.Find("model"); m && !Catalog::Builtin().Find(ng.model)) {
      return Fail(*m, g.PathOf("model"),
                  "unknown GPU model '" + ng.model + "' (known: " + Catalog::Builtin().Names() + ")");
    }
    GP_TRY(IntField(g, "gpus", ng.gpus, IntRange(0, kMaxGpusPerNode)));
    if (ng.gpus > 0 && ng.model.empty()) return Fail(*g.Find("gpus"), g.PathOf("gpus"), "GPUs need a model");
    if (ng.gpus == 0 && !ng.model.empty()) {
      return Fail(*g.Find("model"), g.PathOf("model"), "a model needs gpus (at least 1)");
    }
    GP_TRY(Require(g, "cpu_cores"));
    GP_TRY(ScaledField(g, "cpu_cores", ng.cpu_milli, 1000, Positive));
    GP_TRY(Require(g, "memory_gib"));
    GP_TRY(ScaledField(g, "memory_gib", ng.memory_mib, 1024, Positive));
    GP_TRY(StringField(g, "region", ng.region));
    GP_TRY(StringField(g, "zone", ng.zone));
    GP_TRY(IntField(g, "racks", ng.racks, IntRange(1, kMaxNodeGroupCount)));
    if (const YAML::Node* a = g.Find("attributes")) {
      GP_ASSIGN_OR_RETURN(ng.attributes, String(*a, g.PathOf("attributes")));
      if (std::none_of(s.node_classes.begin(), s.node_classes.end(),
                       [&](const NodeAttributes& c) { return c.name == ng.attributes; })) {
        std::vector<std::string> known;
        for (const auto& c : s.node_classes) known.push_back(c.name);
        return Fail(*a, g.PathOf("attributes"),
                    "unknown node class '" + ng.attributes + "' (known: " + JoinNames(known) + ")");
      }
    }
    ng.name_prefix = ng.model.empty() ? "cpu" : LowerCase(ng.model);
    GP_TRY(StringField(g, "name_prefix", ng.name_prefix));
    for (const auto& other : s.nodes) {
      if (other.name_prefix == ng.name_prefix) {
        const YAML::Node& at = g.Has("name_prefix") ? *g.Find("name_prefix") : g.node;
        return Fail(at, g.PathOf("name_prefix"),
                    "duplicate name prefix '" + ng.name_prefix + "' (set name_prefix to tell the groups apart)");
      }
    }
    if (PoolOfGroup(s, ng) < 0) {
      return Fail(g.node, g.path,
                  "no pool takes " + (ng.model.empty() ? std::string("CPU-only") : ng.model) + " nodes in region '" +
                      ng.region +
                      "' (a pool selects nodes by models and regions; CPU-only nodes need a pool without models)");
    }
    s.nodes.push_back(std::move(ng));
  }
  return {};
}

Status ClusterReader::CheckGuarantees(const ClusterConfig& s) const {
  if (!s.trace_nodes_path.empty()) return {};  // the capacity is known only once the trace is read
  std::vector<int64_t> capacity(s.pools.size(), 0), guaranteed(s.pools.size(), 0);
  for (const auto& g : s.nodes) {
    const int p = PoolOfGroup(s, g);
    if (p >= 0) capacity[p] += int64_t{g.count} * g.gpus * kMilliPerGpu;
  }
  for (const QuotaRef& q : quota_refs_) {
    const size_t p =
        std::find_if(s.pools.begin(), s.pools.end(), [&](const auto& x) { return x.name == q.pool; }) - s.pools.begin();
    guaranteed[p] += std::llround(s.tenants[q.tenant].quota.at(q.pool).guaranteed_gpus * kMilliPerGpu);
    if (guaranteed[p] > capacity[p]) {
      std::ostringstream msg;
      msg << "pool '" << q.pool << "' would guarantee " << guaranteed[p] / 1000.0 << " GPUs of its "
          << capacity[p] / kMilliPerGpu;
      return Fail(q.guaranteed.node, q.guaranteed.path, msg.str());
    }
  }
  return {};
}

Status ClusterReader::KindField(const YamlFields& f, JobKind& out) const {
  const YAML::Node* k = f.Find("kind");
  if (!k) return {};
  std::string name;
  GP_ASSIGN_OR_RETURN(name, String(*k, f.PathOf("kind")));
  auto kind = JobKindFromName(name);
  if (!kind) {
    return Fail(*k, f.PathOf("kind"),
                "unknown job kind '" + name + "' (known: training, online-inference, batch-inference, development, cpu)");
  }
  out = *kind;
  return {};
}

Result<std::string> ClusterReader::PriorityField(const YamlFields& f, const ClusterConfig& s) const {
  const YAML::Node* n = f.Find("priority");
  if (!n) {
    if (s.priorities.contains("normal")) return std::string("normal");
    return Fail(f.node, f.PathOf("priority"), "required (there is no 'normal' class to default to)");
  }
  std::string name;
  GP_ASSIGN_OR_RETURN(name, String(*n, f.PathOf("priority")));
  if (!s.priorities.contains(name)) {
    return Fail(*n, f.PathOf("priority"),
                "unknown priority class '" + name + "' (known: " + KeysOf(s.priorities) + ")");
  }
  return name;
}

Status ClusterReader::ReadScaling(const YAML::Node& n, const std::string& path, ClusterConfig& s) const {
  if (!n.IsSequence() || n.size() == 0) return Fail(n, path, "expected a list of pools to scale");
  for (size_t i = 0; i < n.size(); ++i) {
    const std::string ipath = ItemPath(path, i);
    YamlFields f;
    GP_ASSIGN_OR_RETURN(f,
                        Map(n[i], ipath,
                            {"pool", "node", "min_nodes", "max_nodes", "max_step", "scale_out", "scale_in", "cooldown",
                             "target_utilization", "max_actions_per_hour", "drain_timeout", "forecast", "warm_pool"}));
    PoolScalingConfig c;
    GP_TRY(Require(f, "pool"));
    GP_TRY(StringField(f, "pool", c.pool));
    const auto pool =
        std::find_if(s.pools.begin(), s.pools.end(), [&](const PoolConfig& p) { return p.name == c.pool; });
    if (pool == s.pools.end()) {
      std::vector<std::string> known;
      for (const auto& p : s.pools) known.push_back(p.name);
      return Fail(*f.Find("pool"), f.PathOf("pool"), "unknown pool '" + c.pool + "' (known: " + JoinNames(known) + ")");
    }
    for (const PoolScalingConfig& other : s.engine.scaling) {
      if (other.pool == c.pool) return Fail(*f.Find("pool"), f.PathOf("pool"), "pool '" + c.pool + "' is scaled twice");
    }
    GP_TRY(Require(f, "node"));
    GP_TRY(ReadScalingNode(f, s, static_cast<size_t>(pool - s.pools.begin()), c));
    GP_TRY(ReadScalingRule(f, c));
    if (auto ok = CheckScalingConfig(c); !ok) return Fail(n[i], ipath, ok.error().message);
    s.engine.scaling.push_back(std::move(c));
  }
  return {};
}

// The `node` template of a scaling rule: what a scale-out asks for.
Status ClusterReader::ReadScalingNode(const YamlFields& f, const ClusterConfig& s, size_t pool,
                                      PoolScalingConfig& c) const {
  YamlFields nf;
  const YAML::Node& node = *f.Find("node");
  GP_ASSIGN_OR_RETURN(nf, Map(node, f.PathOf("node"),
                              {"model", "gpus", "cpu_cores", "memory_gib", "region", "zone", "racks", "attributes",
                               "name_prefix"}));
  NodeTemplate& t = c.node;
  std::string model;
  GP_TRY(Require(nf, "model"));
  GP_TRY(StringField(nf, "model", model));
  const auto id = Catalog::Builtin().Find(model);
  if (!id) {
    return Fail(*nf.Find("model"), nf.PathOf("model"),
                "unknown GPU model '" + model + "' (known: " + Catalog::Builtin().Names() + ")");
  }
  t.gpu_model = *id;
  GP_TRY(Require(nf, "gpus"));
  GP_TRY(IntField(nf, "gpus", t.gpus, IntRange(1, kMaxGpusPerNode)));
  GP_TRY(Require(nf, "cpu_cores"));
  GP_TRY(ScaledField(nf, "cpu_cores", t.cpu_milli, 1000, Positive));
  GP_TRY(Require(nf, "memory_gib"));
  GP_TRY(ScaledField(nf, "memory_gib", t.memory_mib, 1024, Positive));
  GP_TRY(StringField(nf, "region", t.region));
  GP_TRY(StringField(nf, "zone", t.zone));
  GP_TRY(IntField(nf, "racks", t.racks, IntRange(1, kMaxNodeGroupCount)));
  if (const YAML::Node* a = nf.Find("attributes")) {
    std::string cls;
    GP_ASSIGN_OR_RETURN(cls, String(*a, nf.PathOf("attributes")));
    const auto it = std::find_if(s.node_classes.begin(), s.node_classes.end(),
                                 [&](const NodeAttributes& x) { return x.name == cls; });
    if (it == s.node_classes.end()) return Fail(*a, nf.PathOf("attributes"), "unknown node class '" + cls + "'");
    t.attr_class = static_cast<uint16_t>(it - s.node_classes.begin());
  }
  t.name_prefix = LowerCase(c.pool) + "-auto";
  GP_TRY(StringField(nf, "name_prefix", t.name_prefix));
  NodeGroupConfig probe;
  probe.model = model;
  probe.region = t.region;
  if (PoolOfGroup(s, probe) != static_cast<int>(pool)) {
    return Fail(node, f.PathOf("node"),
                "pool '" + c.pool + "' does not select " + model + " nodes in region '" + t.region + "'");
  }
  return {};
}

// A scaling rule's limits, triggers, forecast and warm pool.
Status ClusterReader::ReadScalingRule(const YamlFields& f, PoolScalingConfig& c) const {
  AutoscalerConfig& r = c.rule;
  GP_TRY(IntField(f, "min_nodes", r.min_nodes, IntRange(0, kMaxNodeGroupCount)));
  GP_TRY(IntField(f, "max_nodes", r.max_nodes, IntRange(1, kMaxNodeGroupCount)));
  if (r.max_nodes < r.min_nodes) return Fail(*f.Find("max_nodes"), f.PathOf("max_nodes"), "must not be below min_nodes");
  GP_TRY(IntField(f, "max_step", r.max_step, IntRange(1, kMaxNodeGroupCount)));
  if (const YAML::Node* o = f.Find("scale_out")) {
    YamlFields of;
    GP_ASSIGN_OR_RETURN(of, Map(*o, f.PathOf("scale_out"), {"utilization_above", "for", "queue_over"}));
    GP_TRY(NumberField(of, "utilization_above", r.out_util, Fraction01));
    GP_TRY(DurationField(of, "for", r.out_for, PositiveDuration));
    GP_TRY(IntField(of, "queue_over", r.queue_threshold, IntRange(0, INT64_MAX)));
  }
  if (const YAML::Node* in = f.Find("scale_in")) {
    YamlFields inf;
    GP_ASSIGN_OR_RETURN(inf, Map(*in, f.PathOf("scale_in"), {"utilization_below", "for", "safety_window"}));
    GP_TRY(NumberField(inf, "utilization_below", r.in_util, Fraction01));
    GP_TRY(DurationField(inf, "for", r.in_for, PositiveDuration));
    GP_TRY(DurationField(inf, "safety_window", r.safety_window, AnyDuration));
  }
  GP_TRY(DurationField(f, "cooldown", r.cooldown, AnyDuration));
  GP_TRY(NumberField(f, "target_utilization", r.target_util, Fraction01));
  GP_TRY(IntField(f, "max_actions_per_hour", r.max_actions_per_hour, IntRange(1, 3600)));
  GP_TRY(DurationField(f, "drain_timeout", c.drain_timeout, PositiveDuration));
  if (const YAML::Node* fc = f.Find("forecast")) {
    YamlFields ff;
    GP_ASSIGN_OR_RETURN(
        ff, Map(*fc, f.PathOf("forecast"), {"enabled", "ahead", "step", "season", "alpha", "beta", "gamma"}));
    ForecastConfig& x = c.forecast;
    x.enabled = true;
    GP_TRY(BoolField(ff, "enabled", x.enabled));
    GP_TRY(DurationField(ff, "ahead", x.ahead, PositiveDuration));
    GP_TRY(DurationField(ff, "step", x.step, PositiveDuration));
    GP_TRY(DurationField(ff, "season", x.season, PositiveDuration));
    GP_TRY(NumberField(ff, "alpha", x.alpha, Fraction01));
    GP_TRY(NumberField(ff, "beta", x.beta, Fraction01));
    GP_TRY(NumberField(ff, "gamma", x.gamma, Fraction01));
  }
  if (const YAML::Node* w = f.Find("warm_pool")) {
    YamlFields wf;
    GP_ASSIGN_OR_RETURN(wf, Map(*w, f.PathOf("warm_pool"), {"enabled", "lookback", "max_nodes"}));
    c.warm_pool.enabled = true;
    GP_TRY(BoolField(wf, "enabled", c.warm_pool.enabled));
    GP_TRY(DurationField(wf, "lookback", c.warm_pool.lookback, PositiveDuration));
    GP_TRY(IntField(wf, "max_nodes", c.warm_pool.max_nodes, IntRange(0, kMaxNodeGroupCount)));
  }
  return {};
}

Status ClusterReader::ReadRegions(const YAML::Node& n, const std::string& path, ClusterConfig& s) const {
  YamlFields f;
  GP_ASSIGN_OR_RETURN(f, Map(n, path, {"policy", "table", "users"}));
  RegionPolicy& r = s.engine.regions;
  r.kind = RegionPolicy::Kind::kCostAware;
  if (const YAML::Node* p = f.Find("policy")) {
    std::string kind;
    GP_ASSIGN_OR_RETURN(kind, String(*p, f.PathOf("policy")));
    if (kind == "cost-aware") {
      r.kind = RegionPolicy::Kind::kCostAware;
    } else if (kind == "nearest") {
      r.kind = RegionPolicy::Kind::kNearest;
    } else if (kind == "off") {
      r.kind = RegionPolicy::Kind::kOff;
    } else {
      return Fail(*p, f.PathOf("policy"), "expected 'cost-aware', 'nearest' or 'off' (got '" + kind + "')");
    }
  }
  GP_TRY(Require(f, "table"));
  const YAML::Node& table = *f.Find("table");
  const std::string tpath = f.PathOf("table");
  if (!table.IsSequence() || table.size() == 0) return Fail(table, tpath, "expected a list of regions");
  for (size_t i = 0; i < table.size(); ++i) {
    YamlFields rf;
    GP_ASSIGN_OR_RETURN(rf, Map(table[i], ItemPath(tpath, i), {"name", "price_per_gpu_hour", "latency_ms"}));
    RegionInfo info;
    GP_TRY(Require(rf, "name"));
    GP_TRY(StringField(rf, "name", info.name));
    for (const RegionInfo& other : r.regions) {
      if (other.name == info.name) return Fail(*rf.Find("name"), rf.PathOf("name"), "region '" + info.name + "' listed twice");
    }
    GP_TRY(Require(rf, "price_per_gpu_hour"));
    GP_TRY(NumberField(rf, "price_per_gpu_hour", info.price_per_gpu_hour, NonNegative));
    if (const YAML::Node* l = rf.Find("latency_ms")) {
      YamlFields lf;
      GP_ASSIGN_OR_RETURN(lf, Map(*l, rf.PathOf("latency_ms"), {}));
      for (const auto& e : lf.entries) {
        double ms = 0;
        GP_TRY(NumberField(lf, e.key, ms, NonNegative));
        info.latency_ms[e.key] = ms;
      }
    }
    r.regions.push_back(std::move(info));
  }
  if (const YAML::Node* u = f.Find("users")) {
    const std::string upath = f.PathOf("users");
    if (!u->IsSequence()) return Fail(*u, upath, "expected a list of tenants' user locations");
    for (size_t i = 0; i < u->size(); ++i) {
      YamlFields uf;
      GP_ASSIGN_OR_RETURN(uf, Map((*u)[i], ItemPath(upath, i), {"tenant", "at", "latency_budget_ms"}));
      TenantUsers users;
      GP_TRY(Require(uf, "tenant"));
      GP_TRY(StringField(uf, "tenant", users.tenant));
      // A server's tenants may also be created later through its API.
      if (!options_.server && std::none_of(s.tenants.begin(), s.tenants.end(), [&](const TenantConfig& t) { return t.name == users.tenant; })) {
        return Fail(*uf.Find("tenant"), uf.PathOf("tenant"), "unknown tenant '" + users.tenant + "'");
      }
      GP_TRY(Require(uf, "at"));
      GP_TRY(StringField(uf, "at", users.location));
      GP_TRY(NumberField(uf, "latency_budget_ms", users.latency_budget_ms, NonNegative));
      r.users.push_back(std::move(users));
    }
  }
  return {};
}
}  // namespace gpupool
