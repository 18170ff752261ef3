#include "src/sim/scenario.h"

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdint>
#include <string_view>
#include <utility>

#include "src/config/cluster_reader.h"
#include "src/model/demand.h"
#include "src/model/gpu_catalog.h"

namespace gpupool {
namespace {

// The engine section's keys that are simulator settings (Scenario::tick,
// start_latency, sample_every, costs).
const std::vector<std::string_view> kSimEngineKeys = {"tick", "start_latency", "sample_every", "costs"};

// The scenario's own sections; the shared ones are ClusterReader's.
class ScenarioReader : public ClusterReader {
 public:
  ScenarioReader(std::string_view source, std::string base_dir)
      : ClusterReader(source, std::move(base_dir), ClusterReadOptions{.server = false, .engine_keys = kSimEngineKeys}) {}

  Result<Scenario> Parse(const YAML::Node& root);

 private:
  Status ParseSimEngineKeys(const YAML::Node& n, Scenario& s) const;
  Status ParseCosts(const YAML::Node& n, const std::string& path, SharingCosts& k) const;
  Status ParseWorkloads(const YAML::Node& n, const std::string& path, Scenario& s) const;
  Status ParseArrivals(const YAML::Node& n, const std::string& path, const Scenario& s, ArrivalProcess& a) const;
  Status ParseJob(const YAML::Node& n, const std::string& path, const Scenario& s, const TenantConfig& tenant,
                  JobTemplate& t) const;
  Status ParseDurationModel(const YAML::Node& n, const std::string& path, DurationModel& m) const;
  Status ParseEstimate(const YAML::Node& n, const std::string& path, EstimateModel& m) const;
  Status ParseStages(const YAML::Node& n, const std::string& path, JobTemplate& t) const;
  Status ParseUtilization(const YAML::Node& n, const std::string& path, UtilizationModel& m) const;
  Status ParseFaults(const YAML::Node& n, const std::string& path, Scenario& s) const;
  Status ParseHotSpells(const YAML::Node& n, const std::string& path, Scenario& s) const;
  Status ParseGpuFaults(const YAML::Node& n, const std::string& path, Scenario& s) const;
  Status ParseNodeOps(const YAML::Node& n, const std::string& path, Scenario& s) const;
  Status ParseTrace(const YAML::Node& n, const std::string& path, Scenario& s) const;
  Status ParseProvider(const YAML::Node& n, const std::string& path, Scenario& s) const;
};

Result<Scenario> ScenarioReader::Parse(const YAML::Node& root) {
  Scenario s;
  if (root.IsNull() || !root.IsDefined()) return Fail(root, "", "empty scenario (expected a map with at least 'name')");
  YamlFields f;
  GP_ASSIGN_OR_RETURN(f, Map(root, "",
                             {"name", "description", "seed", "horizon", "engine", "priorities", "node_classes",
                              "requirements", "job_labels", "cluster", "pools", "tenants", "workload", "trace", "faults", "scaling",
                              "provider", "regions", "hot_spells", "gpu_faults", "node_ops", "think_time"}));
  GP_TRY(ReadSections(f, s));
  GP_TRY(DurationField(f, "horizon", s.horizon, PositiveDuration));
  if (auto* n = f.Find("engine")) GP_TRY(ParseSimEngineKeys(*n, s));
  if (auto* n = f.Find("workload")) GP_TRY(ParseWorkloads(*n, "workload", s));
  if (auto* n = f.Find("trace")) GP_TRY(ParseTrace(*n, "trace", s));
  if (auto* n = f.Find("faults")) GP_TRY(ParseFaults(*n, "faults", s));
  if (auto* n = f.Find("hot_spells")) GP_TRY(ParseHotSpells(*n, "hot_spells", s));
  if (auto* n = f.Find("gpu_faults")) GP_TRY(ParseGpuFaults(*n, "gpu_faults", s));
  if (auto* n = f.Find("node_ops")) GP_TRY(ParseNodeOps(*n, "node_ops", s));
  if (auto* n = f.Find("scaling")) GP_TRY(ReadScaling(*n, "scaling", s));
  if (auto* n = f.Find("provider")) GP_TRY(ParseProvider(*n, "provider", s));
  if (auto* n = f.Find("think_time")) {
    GP_TRY(ParseDurationModel(*n, "think_time", s.think_time));
    if (s.think_time.kind != DurationModel::Kind::kFixed && s.think_time.kind != DurationModel::Kind::kLogNormal) {
      return Fail(*n, "think_time", "only fixed or lognormal (a think time samples no trace)");
    }
  }
  if (auto* n = f.Find("regions")) GP_TRY(ReadRegions(*n, "regions", s));
  if (s.workloads.empty() && !s.trace) return Fail(root, "", "nothing to run: give a workload or a trace");
  return s;
}

// The engine section's simulator settings; ReadSections checked its keys.
Status ScenarioReader::ParseSimEngineKeys(const YAML::Node& n, Scenario& s) const {
  YamlFields f;
  GP_ASSIGN_OR_RETURN(f, Map(n, "engine", {}));
  GP_TRY(DurationField(f, "tick", s.tick, PositiveDuration));
  GP_TRY(DurationField(f, "start_latency", s.start_latency, AnyDuration));
  GP_TRY(DurationField(f, "sample_every", s.sample_every, PositiveDuration));
  if (const YAML::Node* c = f.Find("costs")) GP_TRY(ParseCosts(*c, f.PathOf("costs"), s.costs));
  return {};
}

Status ScenarioReader::ParseCosts(const YAML::Node& n, const std::string& path, SharingCosts& k) const {
  YamlFields cf;
  GP_ASSIGN_OR_RETURN(cf, Map(n, path,
                              {"time_slice_overhead", "mig_setup", "scrub", "checkpoint_overhead", "restore_factor",
                               "links"}));
  GP_TRY(NumberField(cf, "time_slice_overhead", k.time_slice_overhead, UpToHalf));
  GP_TRY(DurationField(cf, "mig_setup", k.mig_setup, AnyDuration));
  GP_TRY(DurationField(cf, "scrub", k.scrub, AnyDuration));
  GP_TRY(NumberField(cf, "checkpoint_overhead", k.checkpoint_overhead, UpToHalf));
  GP_TRY(NumberField(cf, "restore_factor", k.restore_factor, [](double v) -> std::string {
    return v >= 0 && v <= 10 ? "" : "must be between 0 and 10";
  }));
  if (const YAML::Node* l = cf.Find("links")) {
    YamlFields lf;
    GP_ASSIGN_OR_RETURN(
        lf, Map(*l, cf.PathOf("links"), {"nvlink_gbps", "pcie_gbps", "intra_rack_gbps", "inter_rack_gbps"}));
    GP_TRY(NumberField(lf, "nvlink_gbps", k.links.nvlink_gbps, Positive));
    GP_TRY(NumberField(lf, "pcie_gbps", k.links.pcie_gbps, Positive));
    GP_TRY(NumberField(lf, "intra_rack_gbps", k.links.intra_rack_gbps, Positive));
    GP_TRY(NumberField(lf, "inter_rack_gbps", k.links.inter_rack_gbps, Positive));
  }
  return {};
}

Status ScenarioReader::ParseWorkloads(const YAML::Node& n, const std::string& path, Scenario& s) const {
  if (n.IsNull()) return {};
  if (!n.IsSequence()) return Fail(n, path, "expected a list of tenant workloads");
  for (size_t i = 0; i < n.size(); ++i) {
    YamlFields f;
    GP_ASSIGN_OR_RETURN(f, Map(n[i], ItemPath(path, i), {"tenant", "arrivals", "jobs"}));
    TenantWorkload w;
    GP_TRY(Require(f, "tenant"));
    GP_TRY(StringField(f, "tenant", w.tenant));
    const auto tenant =
        std::find_if(s.tenants.begin(), s.tenants.end(), [&](const TenantConfig& t) { return t.name == w.tenant; });
    if (tenant == s.tenants.end()) {
      std::vector<std::string> known;
      for (const auto& t : s.tenants) known.push_back(t.name);
      return Fail(*f.Find("tenant"), f.PathOf("tenant"),
                  "unknown tenant '" + w.tenant + "' (known: " + JoinNames(known) + ")");
    }
    GP_TRY(Require(f, "arrivals"));
    GP_TRY(ParseArrivals(*f.Find("arrivals"), f.PathOf("arrivals"), s, w.arrivals));
    GP_TRY(Require(f, "jobs"));
    const YAML::Node& jobs = *f.Find("jobs");
    const std::string jpath = f.PathOf("jobs");
    if (!jobs.IsSequence() || jobs.size() == 0) return Fail(jobs, jpath, "expected a list of at least one job");
    for (size_t j = 0; j < jobs.size(); ++j) {
      JobTemplate t;
      GP_TRY(ParseJob(jobs[j], ItemPath(jpath, j), s, *tenant, t));
      for (const auto& other : w.jobs) {
        if (other.name == t.name) {
          return Fail(jobs[j]["name"], ItemPath(jpath, j) + ".name", "duplicate job name '" + t.name + "'");
        }
      }
      w.jobs.push_back(std::move(t));
    }
    s.workloads.push_back(std::move(w));
  }
  return {};
}

Status ScenarioReader::ParseArrivals(const YAML::Node& n, const std::string& path, const Scenario& s, ArrivalProcess& a) const {
  YamlFields f;
  GP_ASSIGN_OR_RETURN(f, Map(n, path, {"process", "rate_per_hour", "amplitude", "peak_hour", "start", "stop"}));
  GP_TRY(Require(f, "process"));
  std::string process;
  GP_ASSIGN_OR_RETURN(process, String(*f.Find("process"), f.PathOf("process")));
  if (process == "poisson") {
    a.kind = ArrivalProcess::Kind::kPoisson;
    for (const char* key : {"amplitude", "peak_hour"}) {
      if (f.Has(key)) return Fail(*f.Find(key), f.PathOf(key), "only for process: diurnal");
    }
  } else if (process == "diurnal") {
    a.kind = ArrivalProcess::Kind::kDiurnal;
  } else {
    return Fail(*f.Find("process"), f.PathOf("process"), "unknown process '" + process + "' (known: poisson, diurnal)");
  }
  GP_TRY(Require(f, "rate_per_hour"));
  GP_TRY(NumberField(f, "rate_per_hour", a.rate_per_hour, Positive));
  GP_TRY(NumberField(f, "amplitude", a.amplitude, Fraction01));
  GP_TRY(NumberField(f, "peak_hour", a.peak_hour,
                     [](double v) -> std::string { return v >= 0 && v < 24 ? "" : "must be in [0, 24)"; }));
  GP_TRY(DurationField(f, "start", a.start, AnyDuration));
  a.stop = s.horizon;
  GP_TRY(DurationField(f, "stop", a.stop, AnyDuration));
  if (a.stop < a.start) {
    const YAML::Node& at = f.Has("stop") ? *f.Find("stop") : *f.Find("start");
    return Fail(at, f.PathOf(f.Has("stop") ? "stop" : "start"), "must not be before start");
  }
  return {};
}

Status ScenarioReader::ParseJob(const YAML::Node& n, const std::string& path, const Scenario& s, const TenantConfig& tenant,
                        JobTemplate& t) const {
  YamlFields f;
  GP_ASSIGN_OR_RETURN(f, Map(n, path,
                             {"name",
                              "weight",
                              "kind",
                              "priority",
                              "gpus",
                              "gpu_fraction",
                              "cpu_cores",
                              "memory_gib",
                              "replicas",
                              "checkpointable",
                              "checkpoint_interval",
                              "checkpoint_duration",
                              "deadline_after",
                              "pools",
                              "requirement",
                              "duration",
                              "expected_duration",
                              "sharing",
                              "gpu_memory_gib",
                              "stages",
                              "utilization",
                              "model_gib",
                              "step_compute",
                              "max_replicas",
                              "labels",
                              "affinity",
                              "anti_affinity"}));
  GP_TRY(Require(f, "name"));
  GP_TRY(StringField(f, "name", t.name));
  GP_TRY(NumberField(f, "weight", t.weight, Positive));
  GP_TRY(KindField(f, t.kind));
  GP_ASSIGN_OR_RETURN(t.priority, PriorityField(f, s));
  const YAML::Node* stages = f.Find("stages");
  if (stages) {
    // A pipeline's resources are its stages'; job-level ones would be ignored.
    for (const auto& e : f.entries) {
      for (const char* key : {"gpus", "gpu_fraction", "replicas", "gpu_memory_gib", "cpu_cores", "memory_gib"}) {
        if (e.key == key) {
          return Fail(e.value, f.PathOf(e.key),
                      "not with stages (each stage gives its own resources; one replica runs per stage)");
        }
      }
    }
    if (t.kind == JobKind::kCpu) return Fail(*stages, f.PathOf("stages"), "a cpu job takes no GPUs");
  }
  GP_TRY(IntField(f, "gpus", t.gpus, IntRange(0, kMaxGpusPerNode)));
  t.gpu_milli = t.gpus == 0 ? 0 : kMilliPerGpu;
  if (const YAML::Node* fr = f.Find("gpu_fraction")) {
    if (f.Has("gpus")) return Fail(*fr, f.PathOf("gpu_fraction"), "give either gpus or gpu_fraction, not both");
    GP_TRY(GpuFractionField(f, "gpu_fraction", t.gpu_milli));
    t.gpus = 1;
  }
  if (t.kind == JobKind::kCpu) {  // CPU-only work: no GPUs by default, and asking for some is an error
    for (const char* key : {"gpu_fraction", "gpus"}) {
      if (f.Has(key) && t.gpus > 0) return Fail(*f.Find(key), f.PathOf(key), "a cpu job takes no GPUs");
    }
    t.gpus = 0;
    t.gpu_milli = 0;
  }
  GP_TRY(ScaledField(f, "cpu_cores", t.cpu_milli, 1000, NonNegative));
  GP_TRY(ScaledField(f, "memory_gib", t.memory_mib, 1024, NonNegative));
  if (const YAML::Node* r = f.Find("replicas")) {
    const std::string rpath = f.PathOf("replicas");
    const auto check = IntRange(1, EngineConfig{}.max_replicas);
    t.replicas.clear();
    if (r->IsSequence()) {
      if (r->size() == 0) return Fail(*r, rpath, "expected at least one replica count");
      for (size_t i = 0; i < r->size(); ++i) {
        int64_t v = 0;
        GP_ASSIGN_OR_RETURN(v, Integer((*r)[i], ItemPath(rpath, i)));
        if (std::string problem = check(v); !problem.empty()) return Fail((*r)[i], ItemPath(rpath, i), problem);
        t.replicas.push_back(static_cast<int32_t>(v));
      }
    } else {
      int64_t v = 0;
      GP_ASSIGN_OR_RETURN(v, Integer(*r, rpath));
      if (std::string problem = check(v); !problem.empty()) return Fail(*r, rpath, problem);
      t.replicas.push_back(static_cast<int32_t>(v));
    }
  }
  GP_TRY(IntField(f, "max_replicas", t.max_replicas, IntRange(1, EngineConfig{}.max_replicas)));
  if (const YAML::Node* m = f.Find("max_replicas")) {
    if (stages) return Fail(*m, f.PathOf("max_replicas"), "a pipeline cannot be elastic");
    for (int32_t r : t.replicas) {
      if (r > t.max_replicas) {
        return Fail(*m, f.PathOf("max_replicas"),
                    "must be at least every replica count (" + std::to_string(r) + "): replicas is the minimum");
      }
    }
  }
  GP_TRY(BoolField(f, "checkpointable", t.checkpointable));
  GP_TRY(DurationField(f, "checkpoint_interval", t.checkpoint_interval, AnyDuration));
  GP_TRY(DurationField(f, "checkpoint_duration", t.checkpoint_duration, AnyDuration));
  GP_TRY(NumberField(f, "model_gib", t.model_gib, NonNegative));
  GP_TRY(DurationField(f, "step_compute", t.step_compute, PositiveDuration));
  if (f.Has("deadline_after")) {
    Duration d{0};
    GP_TRY(DurationField(f, "deadline_after", d, PositiveDuration));
    t.deadline_after = d;
  }
  if (const YAML::Node* p = f.Find("pools")) {
    std::vector<YamlRef> refs;
    GP_ASSIGN_OR_RETURN(t.pools, StringList(*p, f.PathOf("pools"), &refs));
    for (const YamlRef& r : refs) {
      const std::string& name = r.node.Scalar();
      if (std::none_of(s.pools.begin(), s.pools.end(), [&](const PoolConfig& x) { return x.name == name; })) {
        std::vector<std::string> known;
        for (const auto& x : s.pools) known.push_back(x.name);
        return Fail(r.node, r.path, "unknown pool '" + name + "' (known: " + JoinNames(known) + ")");
      }
      if (!tenant.quota.contains(name)) {
        return Fail(r.node, r.path, "tenant '" + tenant.name + "' has no quota in pool '" + name + "'");
      }
    }
  }
  GP_ASSIGN_OR_RETURN(t.labels, LabelsField(f, "labels", s));
  GP_ASSIGN_OR_RETURN(t.affinity, LabelsField(f, "affinity", s));
  GP_ASSIGN_OR_RETURN(t.anti_affinity, LabelsField(f, "anti_affinity", s));
  if (const YAML::Node* r = f.Find("requirement")) {
    GP_ASSIGN_OR_RETURN(t.requirement, String(*r, f.PathOf("requirement")));
    if (std::none_of(s.requirements.begin(), s.requirements.end(),
                     [&](const Requirement& x) { return x.name == t.requirement; })) {
      std::vector<std::string> known;
      for (const auto& x : s.requirements) known.push_back(x.name);
      return Fail(*r, f.PathOf("requirement"),
                  "unknown requirement '" + t.requirement + "' (known: " + JoinNames(known) + ")");
    }
  }
  if (const YAML::Node* d = f.Find("duration")) GP_TRY(ParseDurationModel(*d, f.PathOf("duration"), t.duration));
  if (const YAML::Node* e = f.Find("expected_duration")) {
    GP_TRY(ParseEstimate(*e, f.PathOf("expected_duration"), t.expected_duration));
  }
  const bool share = t.gpus == 1 && t.gpu_milli < kMilliPerGpu;
  if (const YAML::Node* sh = f.Find("sharing")) {
    const std::string spath = f.PathOf("sharing");
    GP_ASSIGN_OR_RETURN(t.sharing, String(*sh, spath));
    static constexpr std::string_view kModes[] = {"any", "time-slice", "mps", "mig", "auto"};
    if (std::find(std::begin(kModes), std::end(kModes), t.sharing) == std::end(kModes)) {
      return Fail(*sh, spath, "unknown sharing mode '" + t.sharing + "' (known: any, time-slice, mps, mig, auto)");
    }
    if (stages && t.sharing != "any")
      return Fail(*sh, spath, "a pipeline's stages choose their own mode (stages[].mode)");
    if (t.sharing == "auto") {
      if (t.gpus == 0) return Fail(*sh, spath, "auto needs a job with GPUs (this one takes none)");
    } else if (t.sharing != "any" && !share) {
      return Fail(*sh, spath, t.sharing + " needs a share of one GPU (gpu_fraction)");
    }
  }
  if (const YAML::Node* m = f.Find("gpu_memory_gib")) {
    GP_TRY(GpuMemoryField(f, "gpu_memory_gib", t.gpu_memory_mib));
    if (t.gpus == 0) return Fail(*m, f.PathOf("gpu_memory_gib"), "the job takes no GPUs");
    if (!share && t.sharing != "auto") {
      return Fail(*m, f.PathOf("gpu_memory_gib"), "only for a share of one GPU (gpu_fraction) or with sharing: auto");
    }
  }
  if (stages) GP_TRY(ParseStages(*stages, f.PathOf("stages"), t));
  if (const YAML::Node* u = f.Find("utilization")) {
    if (t.gpus == 0) return Fail(*u, f.PathOf("utilization"), "the job takes no GPUs");
    GP_TRY(ParseUtilization(*u, f.PathOf("utilization"), t.utilization));
  }
  return {};
}

Status ScenarioReader::ParseStages(const YAML::Node& n, const std::string& path, JobTemplate& t) const {
  const std::string range = "1 to " + std::to_string(kMaxGpusPerNode);
  if (!n.IsSequence() || n.size() == 0) return Fail(n, path, "expected a list of " + range + " stages");
  if (n.size() > static_cast<size_t>(kMaxGpusPerNode)) {
    return Fail(n, path,
                "at most " + std::to_string(kMaxGpusPerNode) + " stages (a pipeline runs on one node; got " +
                    std::to_string(n.size()) + ")");
  }
  for (size_t i = 0; i < n.size(); ++i) {
    YamlFields f;
    GP_ASSIGN_OR_RETURN(
        f, Map(n[i], ItemPath(path, i), {"name", "gpu_fraction", "gpu_memory_gib", "mode", "cpu_cores", "memory_gib"}));
    StageTemplate st;
    GP_TRY(Require(f, "name"));
    GP_TRY(StringField(f, "name", st.name));
    for (const auto& other : t.stages) {
      if (other.name == st.name) return Fail(*f.Find("name"), f.PathOf("name"), "duplicate stage '" + st.name + "'");
    }
    GP_TRY(Require(f, "gpu_fraction"));
    GP_TRY(GpuFractionField(f, "gpu_fraction", st.gpu_milli));
    GP_TRY(GpuMemoryField(f, "gpu_memory_gib", st.gpu_memory_mib));
    if (const YAML::Node* m = f.Find("mode")) {
      GP_ASSIGN_OR_RETURN(st.mode, String(*m, f.PathOf("mode")));
      if (st.mode != "time-slice" && st.mode != "mps" && st.mode != "mig") {
        return Fail(*m, f.PathOf("mode"), "unknown mode '" + st.mode + "' (known: time-slice, mps, mig)");
      }
    }
    GP_TRY(ScaledField(f, "cpu_cores", st.cpu_milli, 1000, NonNegative));
    GP_TRY(ScaledField(f, "memory_gib", st.memory_mib, 1024, NonNegative));
    t.stages.push_back(std::move(st));
  }
  return {};
}

Status ScenarioReader::ParseUtilization(const YAML::Node& n, const std::string& path, UtilizationModel& m) const {
  YamlFields f;
  GP_ASSIGN_OR_RETURN(f, Map(n, path, {"constant", "bursty", "trace"}));
  std::string chosen;
  for (const auto& e : f.entries) {
    if (!chosen.empty()) {
      return Fail(e.key_node, f.PathOf(e.key), "give only one of constant, bursty, trace (already: " + chosen + ")");
    }
    chosen = e.key;
  }
  if (chosen.empty()) return Fail(n, path, "needs one of constant, bursty, trace");
  m = UtilizationModel{};
  m.given = true;
  if (chosen == "constant") {
    m.kind = UtilizationModel::Kind::kConstant;
    GP_TRY(NumberField(f, "constant", m.busy, Fraction01));
  } else if (chosen == "bursty") {
    m.kind = UtilizationModel::Kind::kBursty;
    YamlFields bf;
    GP_ASSIGN_OR_RETURN(bf,
                        Map(*f.Find("bursty"), f.PathOf("bursty"), {"busy", "idle", "busy_for", "idle_for", "jitter"}));
    GP_TRY(NumberField(bf, "busy", m.busy, Fraction01));
    GP_TRY(NumberField(bf, "idle", m.idle, Fraction01));
    GP_TRY(DurationField(bf, "busy_for", m.busy_for, PositiveDuration));
    GP_TRY(DurationField(bf, "idle_for", m.idle_for, PositiveDuration));
    GP_TRY(DurationField(bf, "jitter", m.phase_jitter, AnyDuration));
  } else {
    m.kind = UtilizationModel::Kind::kTrace;
    std::string name;
    GP_ASSIGN_OR_RETURN(name, String(*f.Find("trace"), f.PathOf("trace")));
    if (name != "genai")
      return Fail(*f.Find("trace"), f.PathOf("trace"), "unknown utilization trace '" + name + "' (known: genai)");
  }
  return {};
}

Status ScenarioReader::ParseFaults(const YAML::Node& n, const std::string& path, Scenario& s) const {
  if (n.IsNull()) return {};
  if (!n.IsSequence()) return Fail(n, path, "expected a list of faults");
  if (n.size() > 0 && s.engine.heartbeat_timeout <= Duration(0)) {
    return Fail(n, path,
                "faults need engine.heartbeat_timeout above 0 (with it off the engine never notices a node is down)");
  }
  for (size_t i = 0; i < n.size(); ++i) {
    YamlFields f;
    GP_ASSIGN_OR_RETURN(f, Map(n[i], ItemPath(path, i), {"node", "at", "down_for"}));
    FaultSpec x;
    GP_TRY(Require(f, "node"));
    GP_TRY(StringField(f, "node", x.node));
    // With trace_nodes the node names are known only once the trace is read.
    if (s.trace_nodes_path.empty() && !NodeGroupsName(s, x.node)) {
      std::vector<std::string> known;
      for (const NodeGroupConfig& g : s.nodes) {
        if (g.count == 0) continue;
        known.push_back(g.name_prefix + "-0" +
                        (g.count > 1 ? ".." + g.name_prefix + "-" + std::to_string(g.count - 1) : ""));
      }
      return Fail(*f.Find("node"), f.PathOf("node"), "unknown node '" + x.node + "' (nodes: " + JoinNames(known) + ")");
    }
    GP_TRY(Require(f, "at"));
    GP_TRY(DurationField(f, "at", x.at, AnyDuration));
    GP_TRY(DurationField(f, "down_for", x.down_for, PositiveDuration));
    for (size_t j = 0; j < s.faults.size(); ++j) {
      const FaultSpec& o = s.faults[j];
      if (o.node == x.node && x.at < o.at + o.down_for && o.at < x.at + x.down_for) {
        return Fail(*f.Find("at"), f.PathOf("at"),
                    "node '" + x.node + "' is already down then (" + ItemPath(path, j) + ")");
      }
    }
    s.faults.push_back(std::move(x));
  }
  return {};
}

Status ScenarioReader::ParseGpuFaults(const YAML::Node& n, const std::string& path, Scenario& s) const {
  if (n.IsNull()) return {};
  if (!n.IsSequence()) return Fail(n, path, "expected a list of GPU faults");
  for (size_t i = 0; i < n.size(); ++i) {
    YamlFields f;
    GP_ASSIGN_OR_RETURN(f, Map(n[i], ItemPath(path, i), {"node", "gpu", "at", "for", "xid"}));
    GpuFaultSpec x;
    GP_TRY(Require(f, "node"));
    GP_TRY(StringField(f, "node", x.node));
    if (s.trace_nodes_path.empty() && !NodeGroupsName(s, x.node)) {
      return Fail(*f.Find("node"), f.PathOf("node"), "unknown node '" + x.node + "'");
    }
    GP_TRY(IntField(f, "gpu", x.gpu, IntRange(0, kMaxGpusPerNode - 1)));
    GP_TRY(Require(f, "at"));
    GP_TRY(DurationField(f, "at", x.at, AnyDuration));
    GP_TRY(DurationField(f, "for", x.unhealthy_for, PositiveDuration));
    GP_TRY(IntField(f, "xid", x.xid, IntRange(1, 1000)));
    for (size_t j = 0; j < s.gpu_faults.size(); ++j) {
      const GpuFaultSpec& o = s.gpu_faults[j];
      if (o.node == x.node && o.gpu == x.gpu && x.at < o.at + o.unhealthy_for && o.at < x.at + x.unhealthy_for) {
        return Fail(*f.Find("at"), f.PathOf("at"), "that GPU is already unhealthy then (" + ItemPath(path, j) + ")");
      }
    }
    s.gpu_faults.push_back(std::move(x));
  }
  return {};
}

Status ScenarioReader::ParseNodeOps(const YAML::Node& n, const std::string& path, Scenario& s) const {
  if (n.IsNull()) return {};
  if (!n.IsSequence()) return Fail(n, path, "expected a list of node commands");
  for (size_t i = 0; i < n.size(); ++i) {
    YamlFields f;
    GP_ASSIGN_OR_RETURN(f, Map(n[i], ItemPath(path, i), {"node", "at", "action", "timeout", "force", "reason"}));
    NodeOpSpec x;
    GP_TRY(Require(f, "node"));
    GP_TRY(StringField(f, "node", x.node));
    if (s.trace_nodes_path.empty() && !NodeGroupsName(s, x.node)) {
      return Fail(*f.Find("node"), f.PathOf("node"), "unknown node '" + x.node + "'");
    }
    GP_TRY(Require(f, "at"));
    GP_TRY(DurationField(f, "at", x.at, AnyDuration));
    GP_TRY(Require(f, "action"));
    std::string action;
    GP_TRY(StringField(f, "action", action));
    static constexpr std::pair<const char*, NodeOpSpec::Action> kActions[] = {
        {"cordon", NodeOpSpec::Action::kCordon},
        {"uncordon", NodeOpSpec::Action::kUncordon},
        {"drain", NodeOpSpec::Action::kDrain},
        {"remove", NodeOpSpec::Action::kRemove}};
    bool known = false;
    for (const auto& [name, a] : kActions) {
      if (action == name) x.action = a, known = true;
    }
    if (!known) {
      return Fail(*f.Find("action"), f.PathOf("action"),
                  "unknown action '" + action + "' (known: cordon, uncordon, drain, remove)");
    }
    if (f.Has("timeout") && x.action != NodeOpSpec::Action::kDrain) {
      return Fail(*f.Find("timeout"), f.PathOf("timeout"), "only for action: drain");
    }
    if (f.Has("force") && x.action != NodeOpSpec::Action::kRemove) {
      return Fail(*f.Find("force"), f.PathOf("force"), "only for action: remove");
    }
    GP_TRY(DurationField(f, "timeout", x.timeout, AnyDuration));
    if (x.timeout < Duration(0) || x.timeout > std::chrono::hours(24 * 7)) {
      return Fail(*f.Find("timeout"), f.PathOf("timeout"), "must be between 0s and 168h");
    }
    GP_TRY(BoolField(f, "force", x.force));
    GP_TRY(StringField(f, "reason", x.reason, /*allow_empty=*/true));
    if (x.reason.size() > 256) return Fail(*f.Find("reason"), f.PathOf("reason"), "at most 256 bytes");
    s.node_ops.push_back(std::move(x));
  }
  return {};
}

Status ScenarioReader::ParseHotSpells(const YAML::Node& n, const std::string& path, Scenario& s) const {
  if (n.IsNull()) return {};
  if (!n.IsSequence()) return Fail(n, path, "expected a list of hot spells");
  if (n.size() > 0 && !s.engine.hotspots.enabled) {
    return Fail(n, path, "hot spells need engine.hotspots (without it nothing watches the telemetry)");
  }
  for (size_t i = 0; i < n.size(); ++i) {
    YamlFields f;
    GP_ASSIGN_OR_RETURN(f, Map(n[i], ItemPath(path, i), {"node", "at", "for", "temperature_c"}));
    HotSpell x;
    GP_TRY(Require(f, "node"));
    GP_TRY(StringField(f, "node", x.node));
    if (s.trace_nodes_path.empty() && !NodeGroupsName(s, x.node)) {
      return Fail(*f.Find("node"), f.PathOf("node"), "unknown node '" + x.node + "'");
    }
    GP_TRY(Require(f, "at"));
    GP_TRY(DurationField(f, "at", x.at, AnyDuration));
    GP_TRY(DurationField(f, "for", x.hot_for, PositiveDuration));
    GP_TRY(NumberField(f, "temperature_c", x.temperature_c,
                       [](double v) -> std::string { return v >= 0 && v <= 150 ? "" : "must be between 0 and 150"; }));
    s.hot_spells.push_back(std::move(x));
  }
  return {};
}

Status ScenarioReader::ParseDurationModel(const YAML::Node& n, const std::string& path, DurationModel& m) const {
  YamlFields f;
  GP_ASSIGN_OR_RETURN(f, Map(n, path, {"fixed", "lognormal", "philly", "serving_lifetimes", "min", "max"}));
  const char* chosen = nullptr;
  for (const auto& e : f.entries) {
    if (e.key != "fixed" && e.key != "lognormal" && e.key != "philly" && e.key != "serving_lifetimes") continue;
    if (chosen)
      return Fail(e.key_node, f.PathOf(e.key),
                  std::string("give only one of fixed, lognormal, philly, serving_lifetimes (already: ") + chosen + ")");
    chosen = e.key == "fixed"       ? "fixed"
             : e.key == "lognormal" ? "lognormal"
             : e.key == "philly"    ? "philly"
                                    : "serving_lifetimes";
  }
  if (!chosen) return Fail(n, path, "needs one of fixed, lognormal, philly, serving_lifetimes");
  if (f.Has("fixed")) {
    m.kind = DurationModel::Kind::kFixed;
    GP_TRY(DurationField(f, "fixed", m.fixed, PositiveDuration));
  } else if (const YAML::Node* l = f.Find("lognormal")) {
    m.kind = DurationModel::Kind::kLogNormal;
    YamlFields lf;
    GP_ASSIGN_OR_RETURN(lf, Map(*l, f.PathOf("lognormal"), {"median", "sigma"}));
    GP_TRY(Require(lf, "median"));
    Duration median{0};
    GP_TRY(DurationField(lf, "median", median, PositiveDuration));
    m.median_s = ToSeconds(median);
    GP_TRY(Require(lf, "sigma"));
    GP_TRY(NumberField(lf, "sigma", m.sigma, NonNegative));
  } else {
    const bool philly = f.Has("philly");
    m.kind = philly ? DurationModel::Kind::kPhilly : DurationModel::Kind::kServingLifetimes;
    const char* key = philly ? "philly" : "serving_lifetimes";
    YamlFields pf;
    if (philly) {
      GP_ASSIGN_OR_RETURN(pf, Map(*f.Find(key), f.PathOf(key), {"scale"}));
    } else {
      GP_ASSIGN_OR_RETURN(pf, Map(*f.Find(key), f.PathOf(key), {"scale", "below"}));
      GP_TRY(DurationField(pf, "below", m.below, AnyDuration));
    }
    GP_TRY(NumberField(pf, "scale", m.scale, Positive));
  }
  GP_TRY(DurationField(f, "min", m.min, AnyDuration));
  GP_TRY(DurationField(f, "max", m.max, PositiveDuration));
  if (m.max < m.min) {
    const char* key = f.Has("max") ? "max" : "min";
    return Fail(*f.Find(key), f.PathOf(key), "must not be below min");
  }
  return {};
}

Status ScenarioReader::ParseEstimate(const YAML::Node& n, const std::string& path, EstimateModel& m) const {
  YamlFields f;
  GP_ASSIGN_OR_RETURN(f, Map(n, path, {"fixed", "lognormal_error"}));
  if (f.Has("fixed") == f.Has("lognormal_error")) {
    return Fail(n, path, "give exactly one of fixed, lognormal_error");
  }
  if (f.Has("fixed")) {
    m.kind = EstimateModel::Kind::kFixed;
    return DurationField(f, "fixed", m.fixed, PositiveDuration);
  }
  m.kind = EstimateModel::Kind::kLogNormalError;
  YamlFields ef;
  GP_ASSIGN_OR_RETURN(ef, Map(*f.Find("lognormal_error"), f.PathOf("lognormal_error"), {"sigma", "bias"}));
  GP_TRY(Require(ef, "sigma"));
  GP_TRY(NumberField(ef, "sigma", m.sigma, [](double v) -> std::string {
    return v >= 0 && v <= 5 ? "" : "must be between 0 and 5";
  }));
  return NumberField(ef, "bias", m.bias, Positive);
}

Status ScenarioReader::ParseProvider(const YAML::Node& n, const std::string& path, Scenario& s) const {
  YamlFields f;
  GP_ASSIGN_OR_RETURN(f, Map(n, path, {"cold_start", "warm_start", "price_per_node_hour", "warm_price_fraction"}));
  ProviderModel& p = s.provider;
  GP_TRY(DurationField(f, "cold_start", p.cold_start, AnyDuration));
  GP_TRY(DurationField(f, "warm_start", p.warm_start, AnyDuration));
  GP_TRY(NumberField(f, "price_per_node_hour", p.price_per_node_hour, NonNegative));
  GP_TRY(NumberField(f, "warm_price_fraction", p.warm_price_fraction, Fraction01));
  return {};
}

Status ScenarioReader::ParseTrace(const YAML::Node& n, const std::string& path, Scenario& s) const {
  YamlFields f;
  GP_ASSIGN_OR_RETURN(f, Map(n, path,
                             {"pods", "tenant", "priority", "limit", "arrival_speedup", "checkpointable",
                              "checkpoint_duration", "skip"}));
  TraceWorkload t;
  GP_TRY(Require(f, "pods"));
  std::string pods;
  GP_ASSIGN_OR_RETURN(pods, String(*f.Find("pods"), f.PathOf("pods")));
  t.pods_path = ResolvePath(pods);
  GP_TRY(Require(f, "tenant"));
  GP_TRY(StringField(f, "tenant", t.tenant));
  if (std::none_of(s.tenants.begin(), s.tenants.end(), [&](const TenantConfig& x) { return x.name == t.tenant; })) {
    std::vector<std::string> known;
    for (const auto& x : s.tenants) known.push_back(x.name);
    return Fail(*f.Find("tenant"), f.PathOf("tenant"),
                "unknown tenant '" + t.tenant + "' (known: " + JoinNames(known) + ")");
  }
  GP_ASSIGN_OR_RETURN(t.priority, PriorityField(f, s));
  if (f.Has("limit")) {
    int limit = 0;
    GP_TRY(IntField(f, "limit", limit, IntRange(1, INT32_MAX)));
    t.limit = limit;
  }
  GP_TRY(NumberField(f, "arrival_speedup", t.arrival_speedup, Positive));
  GP_TRY(DurationField(f, "skip", t.skip, AnyDuration));
  GP_TRY(BoolField(f, "checkpointable", t.checkpointable));
  GP_TRY(DurationField(f, "checkpoint_duration", t.checkpoint_duration, AnyDuration));
  s.trace = std::move(t);
  return {};
}

}  // namespace

Result<Scenario> ParseScenario(std::string_view text, std::string_view source, const std::string& base_dir) {
  return ReadYamlDocument(text, source,
                          [&](const YAML::Node& root) { return ScenarioReader(source, base_dir).Parse(root); });
}

Result<Scenario> LoadScenario(const std::string& path) {
  GP_ASSIGN_OR_RETURN(const std::string text, ReadConfigFile(path));
  auto s = ParseScenario(text, path, ConfigFileDir(path));
  if (s) s->path = path;
  return s;
}

}  // namespace gpupool
