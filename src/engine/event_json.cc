// Canonical JSON encoding of events (nlohmann::json objects keep keys
// sorted, so the text is a pure function of the event), and its inverse.
#include <algorithm>
#include <array>
#include <concepts>
#include <limits>
#include <optional>
#include <utility>

#include <nlohmann/json.hpp>

#include "src/engine/event.h"
#include "src/engine/region_json.h"

namespace gpupool {
namespace {

using nlohmann::json;

json DemandJson(const Demand& d) {
  json j{{"cpu_milli", d.cpu_milli},
         {"memory_mib", d.memory_mib},
         {"gpu_count", d.gpu_count},
         {"gpu_milli", d.gpu_milli},
         {"models", d.allowed_models},
         {"pools", d.allowed_pools},
         {"requirement", d.requirement}};
  if (d.mode != ShareMode::kAny) j["mode"] = ShareModeName(d.mode);
  if (d.gpu_memory_mib != 0) j["gpu_memory_mib"] = d.gpu_memory_mib;
  // Only when set (the engine clears it at submission), so that logs
  // written before it was carried keep their canonical text.
  if (d.reservation != -1) j["reservation"] = d.reservation;
  return j;
}

json SpecJson(const JobSpec& s) {
  json j{{"name", s.name},
         {"tenant", s.tenant},
         {"kind", JobKindName(s.kind)},
         {"priority", s.priority},
         {"replicas", s.replicas},
         {"demand", DemandJson(s.demand)},
         {"pools", s.pools},
         {"checkpointable", s.checkpointable},
         {"auto_sharing", s.auto_sharing},
         {"checkpoint_interval_ms", ToMillis(s.checkpoint_interval)},
         {"checkpoint_duration_ms", ToMillis(s.checkpoint_duration)},
         {"labels", s.labels},
         {"affinity", s.affinity},
         {"anti_affinity", s.anti_affinity}};
  if (s.deadline) j["deadline_ms"] = ToMillis(*s.deadline);
  if (s.elastic()) {
    j["min_replicas"] = s.min_replicas;
    j["max_replicas"] = s.max_replicas;
  }
  if (s.expected_duration) j["expected_duration_ms"] = ToMillis(*s.expected_duration);
  if (!s.stages.empty()) {
    json stages = json::array();
    for (const Demand& d : s.stages) stages.push_back(DemandJson(d));
    j["stages"] = std::move(stages);
  }
  // Only for jobs that run something, so that simulation logs keep their text.
  if (!s.task.empty()) {
    json env = json::array();
    for (const auto& [k, v] : s.task.env) env.push_back(json::array({k, v}));
    j["task"] = json{{"command", s.task.command},
                     {"env", std::move(env)},
                     {"working_dir", s.task.working_dir},
                     {"checkpoint_signal", s.task.checkpoint_signal},
                     {"checkpoint_timeout_ms", ToMillis(s.task.checkpoint_timeout)},
                     {"stop_grace_ms", ToMillis(s.task.stop_grace)}};
    // The container (EXEC-1..6), each only away from its default: journals
    // written before these fields keep their text.
    if (!s.task.image.empty()) j["task"]["image"] = s.task.image;
    if (s.task.shm_mib != TaskSpec{}.shm_mib) j["task"]["shm_mib"] = s.task.shm_mib;
    if (s.task.network_isolated) j["task"]["network_isolated"] = true;
  }
  return j;
}

json ReplicasJson(const std::vector<PlacedReplica>& replicas) {
  json out = json::array();
  for (const auto& r : replicas) out.push_back(json{{"node", r.node}, {"gpus", r.gpus}});
  return out;
}

json QuotaJson(const Quota& q) {
  return json{{"guaranteed_milli", q.guaranteed_milli},
              {"elastic_limit_milli", q.elastic_limit_milli},
              {"weight", q.weight},
              {"reserved", q.reserved}};
}

struct BodyJson {
  json& j;
  void operator()(const PoolAdded& e) {
    j["pool"] = e.pool.id;
    j["name"] = e.pool.name;
    j["models"] = e.pool.selector.models;
    j["regions"] = e.pool.selector.regions;
    j["dedicated_to"] = e.pool.dedicated_to;
  }
  void operator()(const NodeAdded& e) {
    j["node"] = e.spec.name;
    j["cpu_milli"] = e.spec.cpu_milli;
    j["memory_mib"] = e.spec.memory_mib;
    j["gpus"] = e.spec.gpu_count;
    j["model"] = e.spec.gpu_model;
    j["pool"] = e.spec.pool;
    j["attr_class"] = e.spec.attr_class;
    j["region"] = e.region;
    j["zone"] = e.zone;
    j["rack"] = e.rack;
    if (e.provisioned) j["provisioned"] = true;
  }
  void operator()(const TenantAdded& e) {
    j["tenant"] = e.tenant;
    j["name"] = e.name;
  }
  void operator()(const QuotaSet& e) {
    j["tenant"] = e.tenant;
    j["pool"] = e.pool;
    j["quota"] = QuotaJson(e.quota);
  }
  void operator()(const JobSubmitted& e) {
    j["job"] = e.job;
    j["spec"] = SpecJson(e.spec);
  }
  void operator()(const JobRejected& e) {
    j["job"] = e.job;
    j["spec"] = SpecJson(e.spec);
    j["reason"] = e.reason;
  }
  void operator()(const JobPlaced& e) {
    j["job"] = e.job;
    j["pool"] = e.pool;
    j["borrowed"] = e.borrowed;
    j["replicas"] = ReplicasJson(e.replicas);
  }
  void operator()(const JobFinished& e) {
    j["job"] = e.job;
    j["succeeded"] = e.succeeded;
    if (!e.reason.empty()) j["reason"] = e.reason;  // absent in simulation logs: their text stays
  }
  void operator()(const JobCancelled& e) { j["job"] = e.job; }
  void operator()(const PreemptionStarted& e) {
    j["victim"] = e.victim;
    j["preemptor"] = e.preemptor;
    j["reason"] = PreemptReasonName(e.reason);
    j["checkpoint"] = e.checkpoint;
  }
  void operator()(const JobPreempted& e) {
    j["victim"] = e.victim;
    j["lost_work_ms"] = ToMillis(e.lost_work);
  }
  void operator()(const QuotaLent& e) {
    j["tenant"] = e.tenant;
    j["pool"] = e.pool;
    j["milli"] = e.milli;
  }
  void operator()(const QuotaRecalled& e) {
    j["tenant"] = e.tenant;
    j["pool"] = e.pool;
    j["milli"] = e.milli;
  }
  void operator()(const QuotaExhausted& e) {
    j["tenant"] = e.tenant;
    j["pool"] = e.pool;
    j["job"] = e.job;
  }
  void operator()(const NodesReserved& e) {
    j["job"] = e.job;
    j["nodes"] = e.nodes;
  }
  void operator()(const ReservationReleased& e) { j["job"] = e.job; }
  void operator()(const JobIdleSuspected& e) { j["job"] = e.job; }
  void operator()(const JobIdleRecovered& e) { j["job"] = e.job; }
  void operator()(const ReclaimStarted& e) {
    j["job"] = e.job;
    j["reason"] = ReclaimReasonName(e.reason);
    j["checkpoint"] = e.checkpoint;
  }
  void operator()(const JobReclaimed& e) { j["job"] = e.job; }
  void operator()(const NodeDown& e) { j["node"] = e.node; }
  void operator()(const JobInterrupted& e) {
    j["job"] = e.job;
    j["node"] = e.node;
    j["lost_work_ms"] = ToMillis(e.lost_work);
  }
  void operator()(const NodeUp& e) { j["node"] = e.node; }
  void operator()(const GpusScrubbed& e) {
    j["node"] = e.node;
    j["gpus"] = e.gpus;
  }
  void operator()(const MigRecutStarted& e) {
    j["job"] = e.job;
    j["node"] = e.node;
    j["gpu"] = e.gpu;
    j["profile"] = e.profile;
    j["start"] = e.start;
    j["moved"] = e.moved;
  }
  void operator()(const ScaleOutRequested& e) {
    j["pool"] = e.pool;
    j["nodes"] = e.nodes;
    j["reason"] = e.reason;
  }
  void operator()(const ScaleOutFailed& e) {
    j["pool"] = e.pool;
    j["nodes"] = e.nodes;
    j["reason"] = e.reason;
  }
  void operator()(const NodeDrainStarted& e) {
    j["node"] = e.node;
    j["reason"] = e.reason;
  }
  void operator()(const NodeRemoved& e) { j["node"] = e.node; }
  void operator()(const WarmPoolSized& e) {
    j["pool"] = e.pool;
    j["nodes"] = e.nodes;
  }
  void operator()(const MigrationStarted& e) {
    j["job"] = e.job;
    j["node"] = e.node;
    j["gpus"] = e.gpus;
    j["frag_pct"] = e.frag_pct;
  }
  void operator()(const JobResized& e) {
    j["job"] = e.job;
    j["removed"] = e.removed;
    j["added"] = ReplicasJson(e.added);
    j["borrowed"] = e.borrowed;
    j["reshard_ms"] = ToMillis(e.reshard);
    j["reason"] = e.reason;
  }
  void operator()(const HotspotDetected& e) {
    j["node"] = e.node;
    j["gpus"] = e.gpus;
    j["reason"] = e.reason;
  }
  void operator()(const HotspotCleared& e) { j["node"] = e.node; }
  void operator()(const NodeLent& e) {
    j["node"] = e.node;
    j["to"] = e.to;
    j["reason"] = e.reason;
  }
  void operator()(const NodeReturned& e) { j["node"] = e.node; }
  void operator()(const RegionsSet& e) { j["policy"] = RegionPolicyToJson(e.policy); }
  void operator()(const GpuHealthChanged& e) {
    j["node"] = e.node;
    j["unhealthy"] = e.unhealthy;
    j["reason"] = e.reason;
  }
  void operator()(const TaskMemoryObserved& e) {
    j["job"] = e.job;
    j["replica"] = e.replica;
    j["used_mib"] = e.used_mib;
  }
  void operator()(const MigLayoutReported& e) {
    j["node"] = e.node;
    j["gpu"] = e.gpu;
    j["mig_enabled"] = e.mig_enabled;
    json list = json::array();
    for (const MigSlot& m : e.instances) list.push_back(json{{"profile", m.profile}, {"start", m.start}});
    j["instances"] = std::move(list);
  }
  void operator()(const MigLayoutMismatch& e) {
    j["node"] = e.node;
    j["gpu"] = e.gpu;
    j["reported"] = e.reported;
    j["planned"] = e.planned;
  }
};

}  // namespace

const char* PreemptReasonName(PreemptReason r) {
  switch (r) {
    case PreemptReason::kGuaranteeReclaim: return "guarantee-reclaim";
    case PreemptReason::kPriority: return "priority";
    case PreemptReason::kMigRecut: return "mig-recut";
    case PreemptReason::kDrain: return "drain";
    case PreemptReason::kDefrag: return "defrag";
    case PreemptReason::kHotspot: return "hotspot";
    case PreemptReason::kGpuUnhealthy: return "gpu-unhealthy";
  }
  return "unknown";
}

const char* ReclaimReasonName(ReclaimReason r) {
  return r == ReclaimReason::kIdle ? "idle" : "deadline";
}

const char* EventName(const EventBody& body) {
  static constexpr const char* kNames[] = {
      "PoolAdded",   "NodeAdded",    "TenantAdded",       "QuotaSet",     "JobSubmitted", "JobRejected",
      "JobPlaced",   "JobFinished",  "JobCancelled",      "PreemptionStarted", "JobPreempted", "QuotaLent",
      "QuotaRecalled", "QuotaExhausted", "NodesReserved", "ReservationReleased", "GpusScrubbed",
      "JobIdleSuspected", "JobIdleRecovered", "ReclaimStarted", "JobReclaimed", "NodeDown", "JobInterrupted",
      "NodeUp", "MigRecutStarted", "ScaleOutRequested", "ScaleOutFailed", "NodeDrainStarted", "NodeRemoved",
      "WarmPoolSized", "MigrationStarted", "JobResized", "HotspotDetected", "HotspotCleared", "NodeLent",
      "NodeReturned", "RegionsSet", "GpuHealthChanged", "TaskMemoryObserved", "MigLayoutReported",
      "MigLayoutMismatch"};
  static_assert(std::size(kNames) == std::variant_size_v<EventBody>);
  return kNames[body.index()];
}

std::string ToJsonLine(const Event& e) {
  json j{{"seq", e.seq}, {"at", ToMillis(e.at)}, {"type", EventName(e.body)}};
  std::visit(BodyJson{j}, e.body);
  return j.dump();
}

// --- decoding -------------------------------------------------------------------

namespace {

// The first error met while decoding one event; reads after it are no-ops
// that return defaults, so a decoder reads straight through and checks once.
struct Errors {
  std::optional<std::string> first;
  void Fail(const std::string& path, const std::string& why) {
    if (!first) first = path + ": " + why;
  }
};

std::string Index(const std::string& path, size_t i) { return path + "[" + std::to_string(i) + "]"; }

template <std::integral T>
T ToInt(Errors& errors, const json& v, const std::string& path) {
  if (v.is_number_unsigned()) {
    const auto u = v.get<uint64_t>();
    if (std::in_range<T>(u)) return static_cast<T>(u);
  } else if (v.is_number_integer()) {
    const auto i = v.get<int64_t>();
    if (std::in_range<T>(i)) return static_cast<T>(i);
  }
  errors.Fail(path, "expected an integer in [" + std::to_string(std::numeric_limits<T>::min()) + ", " +
                        std::to_string(std::numeric_limits<T>::max()) + "]");
  return T{};
}

// A strict reader of one JSON object. Each field is read at most once;
// Done() reports a field that nothing read (unknown to this version).
class Obj {
 public:
  Obj(Errors& errors, const json* j, std::string path) : errors_(errors), path_(std::move(path)) {
    if (j == nullptr) return;  // a missing field, reported by the caller
    if (j->is_object()) {
      j_ = j;
    } else {
      errors_.Fail(path_.empty() ? "event" : path_, "expected an object");
    }
  }

  std::string Path(const char* key) const { return path_.empty() ? std::string(key) : path_ + "." + key; }

  // The field's value; nullptr (and, when required, an error) if absent.
  const json* Find(const char* key, bool required = true) {
    if (j_ == nullptr) return nullptr;
    auto it = j_->find(key);
    if (it == j_->end()) {
      if (required) errors_.Fail(Path(key), "missing");
      return nullptr;
    }
    read_.push_back(key);
    return &*it;
  }

  template <std::integral T>
  T Int(const char* key) {
    const json* v = Find(key);
    return v ? ToInt<T>(errors_, *v, Path(key)) : T{};
  }
  template <std::integral T>
  std::optional<T> OptInt(const char* key) {
    const json* v = Find(key, false);
    if (!v) return std::nullopt;
    return ToInt<T>(errors_, *v, Path(key));
  }
  Duration Millis(const char* key) { return Duration(Int<int64_t>(key)); }
  bool Bool(const char* key) {
    const json* v = Find(key);
    if (v && !v->is_boolean()) errors_.Fail(Path(key), "expected true or false");
    return v && v->is_boolean() && v->get<bool>();
  }
  std::optional<bool> OptBool(const char* key) {
    const json* v = Find(key, false);
    if (!v) return std::nullopt;
    if (!v->is_boolean()) errors_.Fail(Path(key), "expected true or false");
    return v->is_boolean() && v->get<bool>();
  }
  double Double(const char* key) {
    const json* v = Find(key);
    if (v && !v->is_number()) errors_.Fail(Path(key), "expected a number");
    return v && v->is_number() ? v->get<double>() : 0.0;
  }
  std::string Str(const char* key) {
    const json* v = Find(key);
    return v ? AsStr(*v, Path(key)) : std::string();
  }
  std::optional<std::string> OptStr(const char* key) {
    const json* v = Find(key, false);
    if (!v) return std::nullopt;
    return AsStr(*v, Path(key));
  }
  template <std::integral T>
  std::vector<T> IntArray(const char* key) {
    std::vector<T> out;
    ForEach(key, [&](const json& item, const std::string& path) { out.push_back(ToInt<T>(errors_, item, path)); });
    return out;
  }
  std::vector<std::string> StrArray(const char* key) {
    std::vector<std::string> out;
    ForEach(key, [&](const json& item, const std::string& path) { out.push_back(AsStr(item, path)); });
    return out;
  }
  // Calls fn(item, path) for each element of the array field `key`.
  template <class Fn>
  void ForEach(const char* key, Fn fn, bool required = true) {
    const json* v = Find(key, required);
    if (!v) return;
    if (!v->is_array()) {
      errors_.Fail(Path(key), "expected an array");
      return;
    }
    const std::string path = Path(key);
    for (size_t i = 0; i < v->size() && !errors_.first; ++i) fn((*v)[i], Index(path, i));
  }
  Obj Child(const char* key) { return Obj(errors_, Find(key), Path(key)); }

  void Done() {
    if (j_ == nullptr || read_.size() == j_->size()) return;
    for (const auto& [key, value] : j_->items()) {
      if (std::find(read_.begin(), read_.end(), key) == read_.end()) {
        errors_.Fail(Path(key.c_str()), "unknown field");
        return;
      }
    }
  }

  Errors& errors() { return errors_; }

 private:
  std::string AsStr(const json& v, const std::string& path) {
    if (v.is_string()) return v.get<std::string>();
    errors_.Fail(path, "expected a string");
    return {};
  }

  Errors& errors_;
  const json* j_ = nullptr;
  std::string path_;
  std::vector<std::string_view> read_;
};

// The enum value among the first `count` whose name (by `name_of`) is
// `name`; an error at `path` listing the known names otherwise.
template <class E, class NameOf>
E EnumFromName(Errors& errors, const std::string& name, const std::string& path, int count, NameOf name_of) {
  for (int i = 0; i < count; ++i) {
    if (name == name_of(static_cast<E>(i))) return static_cast<E>(i);
  }
  std::string known;
  for (int i = 0; i < count; ++i) known += std::string(i ? ", " : "") + name_of(static_cast<E>(i));
  errors.Fail(path, "unknown value '" + name + "' (known: " + known + ")");
  return E{};
}
template <class E, class NameOf>
E Enum(Obj& o, const char* key, int count, NameOf name_of) {
  const std::string name = o.Str(key);
  if (o.errors().first) return E{};
  return EnumFromName<E>(o.errors(), name, o.Path(key), count, name_of);
}

Demand ReadDemand(Obj o) {
  Demand d;
  d.cpu_milli = o.Int<int64_t>("cpu_milli");
  d.memory_mib = o.Int<int64_t>("memory_mib");
  d.gpu_count = o.Int<int32_t>("gpu_count");
  d.gpu_milli = o.Int<int32_t>("gpu_milli");
  d.allowed_models = o.Int<GpuModelMask>("models");
  d.allowed_pools = o.Int<uint64_t>("pools");
  d.requirement = o.Int<uint16_t>("requirement");
  if (auto r = o.OptInt<int64_t>("reservation")) d.reservation = *r;
  if (auto m = o.OptStr("mode")) d.mode = EnumFromName<ShareMode>(o.errors(), *m, o.Path("mode"), 4, ShareModeName);
  if (auto m = o.OptInt<int32_t>("gpu_memory_mib")) d.gpu_memory_mib = *m;
  o.Done();
  return d;
}

JobSpec ReadSpec(Obj o) {
  JobSpec s;
  s.name = o.Str("name");
  s.tenant = o.Int<TenantId>("tenant");
  s.kind = Enum<JobKind>(o, "kind", kJobKindCount, JobKindName);
  s.priority = o.Int<int32_t>("priority");
  s.replicas = o.Int<int32_t>("replicas");
  s.demand = ReadDemand(o.Child("demand"));
  s.pools = o.IntArray<PoolId>("pools");
  s.checkpointable = o.Bool("checkpointable");
  s.auto_sharing = o.Bool("auto_sharing");
  s.checkpoint_interval = o.Millis("checkpoint_interval_ms");
  s.checkpoint_duration = o.Millis("checkpoint_duration_ms");
  s.labels = o.Int<LabelMask>("labels");
  s.affinity = o.Int<LabelMask>("affinity");
  s.anti_affinity = o.Int<LabelMask>("anti_affinity");
  if (auto d = o.OptInt<int64_t>("deadline_ms")) s.deadline = InstantFromMillis(*d);
  if (auto m = o.OptInt<int32_t>("min_replicas")) s.min_replicas = *m;
  if (auto m = o.OptInt<int32_t>("max_replicas")) s.max_replicas = *m;
  if (auto d = o.OptInt<int64_t>("expected_duration_ms")) s.expected_duration = Duration(*d);
  o.ForEach(
      "stages",
      [&](const json& item, const std::string& path) { s.stages.push_back(ReadDemand(Obj(o.errors(), &item, path))); },
      /*required=*/false);
  if (o.Find("task", false)) {
    Obj t = o.Child("task");
    s.task.command = t.StrArray("command");
    t.ForEach("env", [&](const json& item, const std::string& path) {
      if (!item.is_array() || item.size() != 2 || !item[0].is_string() || !item[1].is_string()) {
        o.errors().Fail(path, "expected [name, value]");
        return;
      }
      s.task.env.emplace_back(item[0].get<std::string>(), item[1].get<std::string>());
    });
    s.task.working_dir = t.Str("working_dir");
    s.task.checkpoint_signal = t.Int<int32_t>("checkpoint_signal");
    s.task.checkpoint_timeout = t.Millis("checkpoint_timeout_ms");
    s.task.stop_grace = t.Millis("stop_grace_ms");
    s.task.image = t.OptStr("image").value_or("");
    if (auto m = t.OptInt<int64_t>("shm_mib")) s.task.shm_mib = *m;
    s.task.network_isolated = t.OptBool("network_isolated").value_or(false);
    t.Done();
    if (s.task.command.empty() && !o.errors().first) o.errors().Fail(o.Path("task.command"), "must not be empty");
  }
  o.Done();
  return s;
}

Quota ReadQuota(Obj o) {
  Quota q;
  q.guaranteed_milli = o.Int<int64_t>("guaranteed_milli");
  q.elastic_limit_milli = o.Int<int64_t>("elastic_limit_milli");
  q.weight = o.Double("weight");
  q.reserved = o.Bool("reserved");
  o.Done();
  return q;
}

// One Read per event type, the inverse of BodyJson's operator(). The body's
// fields sit beside "seq", "at" and "type" in the same object.
void Read(Obj& o, PoolAdded& e) {
  e.pool.id = o.Int<PoolId>("pool");
  e.pool.name = o.Str("name");
  e.pool.selector.models = o.Int<GpuModelMask>("models");
  e.pool.selector.regions = o.StrArray("regions");
  e.pool.dedicated_to = o.IntArray<TenantId>("dedicated_to");
}
void Read(Obj& o, NodeAdded& e) {
  e.spec.name = o.Str("node");
  e.spec.cpu_milli = o.Int<int64_t>("cpu_milli");
  e.spec.memory_mib = o.Int<int64_t>("memory_mib");
  e.spec.gpu_count = o.Int<int>("gpus");
  e.spec.gpu_model = o.Int<GpuModelId>("model");
  e.spec.pool = o.Int<uint8_t>("pool");
  e.spec.attr_class = o.Int<uint16_t>("attr_class");
  e.region = o.Str("region");
  e.zone = o.Str("zone");
  e.rack = o.Str("rack");
  if (o.Find("provisioned", false)) e.provisioned = o.Bool("provisioned");
}
void Read(Obj& o, TenantAdded& e) {
  e.tenant = o.Int<TenantId>("tenant");
  e.name = o.Str("name");
}
void Read(Obj& o, QuotaSet& e) {
  e.tenant = o.Int<TenantId>("tenant");
  e.pool = o.Int<PoolId>("pool");
  e.quota = ReadQuota(o.Child("quota"));
}
void Read(Obj& o, JobSubmitted& e) {
  e.job = o.Int<JobId>("job");
  e.spec = ReadSpec(o.Child("spec"));
}
void Read(Obj& o, JobRejected& e) {
  e.job = o.Int<JobId>("job");
  e.spec = ReadSpec(o.Child("spec"));
  e.reason = o.Str("reason");
}
std::vector<PlacedReplica> ReadReplicas(Obj& o, const char* key) {
  std::vector<PlacedReplica> out;
  o.ForEach(key, [&](const json& item, const std::string& path) {
    Obj r(o.errors(), &item, path);
    PlacedReplica p;
    p.node = r.Int<NodeIndex>("node");
    p.gpus = r.Int<GpuMask>("gpus");
    r.Done();
    out.push_back(p);
  });
  return out;
}
void Read(Obj& o, JobPlaced& e) {
  e.job = o.Int<JobId>("job");
  e.pool = o.Int<PoolId>("pool");
  e.borrowed = o.Bool("borrowed");
  e.replicas = ReadReplicas(o, "replicas");
}
void Read(Obj& o, JobFinished& e) {
  e.job = o.Int<JobId>("job");
  e.succeeded = o.Bool("succeeded");
  e.reason = o.OptStr("reason").value_or("");
}
void Read(Obj& o, JobCancelled& e) { e.job = o.Int<JobId>("job"); }
void Read(Obj& o, PreemptionStarted& e) {
  e.victim = o.Int<JobId>("victim");
  e.preemptor = o.Int<JobId>("preemptor");
  e.reason = Enum<PreemptReason>(o, "reason", 7, PreemptReasonName);
  e.checkpoint = o.Bool("checkpoint");
}
void Read(Obj& o, JobPreempted& e) {
  e.victim = o.Int<JobId>("victim");
  e.lost_work = o.Millis("lost_work_ms");
}
void Read(Obj& o, QuotaLent& e) {
  e.tenant = o.Int<TenantId>("tenant");
  e.pool = o.Int<PoolId>("pool");
  e.milli = o.Int<int64_t>("milli");
}
void Read(Obj& o, QuotaRecalled& e) {
  e.tenant = o.Int<TenantId>("tenant");
  e.pool = o.Int<PoolId>("pool");
  e.milli = o.Int<int64_t>("milli");
}
void Read(Obj& o, QuotaExhausted& e) {
  e.tenant = o.Int<TenantId>("tenant");
  e.pool = o.Int<PoolId>("pool");
  e.job = o.Int<JobId>("job");
}
void Read(Obj& o, NodesReserved& e) {
  e.job = o.Int<JobId>("job");
  e.nodes = o.IntArray<NodeIndex>("nodes");
}
void Read(Obj& o, ReservationReleased& e) { e.job = o.Int<JobId>("job"); }
void Read(Obj& o, GpusScrubbed& e) {
  e.node = o.Int<NodeIndex>("node");
  e.gpus = o.Int<GpuMask>("gpus");
}
void Read(Obj& o, JobIdleSuspected& e) { e.job = o.Int<JobId>("job"); }
void Read(Obj& o, JobIdleRecovered& e) { e.job = o.Int<JobId>("job"); }
void Read(Obj& o, ReclaimStarted& e) {
  e.job = o.Int<JobId>("job");
  e.reason = Enum<ReclaimReason>(o, "reason", 2, ReclaimReasonName);
  e.checkpoint = o.Bool("checkpoint");
}
void Read(Obj& o, JobReclaimed& e) { e.job = o.Int<JobId>("job"); }
void Read(Obj& o, NodeDown& e) { e.node = o.Int<NodeIndex>("node"); }
void Read(Obj& o, JobInterrupted& e) {
  e.job = o.Int<JobId>("job");
  e.node = o.Int<NodeIndex>("node");
  e.lost_work = o.Millis("lost_work_ms");
}
void Read(Obj& o, NodeUp& e) { e.node = o.Int<NodeIndex>("node"); }
void Read(Obj& o, MigRecutStarted& e) {
  e.job = o.Int<JobId>("job");
  e.node = o.Int<NodeIndex>("node");
  e.gpu = o.Int<int32_t>("gpu");
  e.profile = o.Str("profile");
  e.start = o.Int<uint8_t>("start");
  e.moved = o.IntArray<JobId>("moved");
}
void Read(Obj& o, ScaleOutRequested& e) {
  e.pool = o.Int<PoolId>("pool");
  e.nodes = o.Int<int32_t>("nodes");
  e.reason = o.Str("reason");
}
void Read(Obj& o, ScaleOutFailed& e) {
  e.pool = o.Int<PoolId>("pool");
  e.nodes = o.Int<int32_t>("nodes");
  e.reason = o.Str("reason");
}
void Read(Obj& o, NodeDrainStarted& e) {
  e.node = o.Int<NodeIndex>("node");
  e.reason = o.Str("reason");
}
void Read(Obj& o, NodeRemoved& e) { e.node = o.Int<NodeIndex>("node"); }
void Read(Obj& o, WarmPoolSized& e) {
  e.pool = o.Int<PoolId>("pool");
  e.nodes = o.Int<int32_t>("nodes");
}
void Read(Obj& o, MigrationStarted& e) {
  e.job = o.Int<JobId>("job");
  e.node = o.Int<NodeIndex>("node");
  e.gpus = o.Int<GpuMask>("gpus");
  e.frag_pct = o.Double("frag_pct");
}
void Read(Obj& o, JobResized& e) {
  e.job = o.Int<JobId>("job");
  e.removed = o.IntArray<int32_t>("removed");
  e.added = ReadReplicas(o, "added");
  e.borrowed = o.Bool("borrowed");
  e.reshard = o.Millis("reshard_ms");
  e.reason = o.Str("reason");
}
void Read(Obj& o, HotspotDetected& e) {
  e.node = o.Int<NodeIndex>("node");
  e.gpus = o.Int<GpuMask>("gpus");
  e.reason = o.Str("reason");
}
void Read(Obj& o, HotspotCleared& e) { e.node = o.Int<NodeIndex>("node"); }
void Read(Obj& o, NodeLent& e) {
  e.node = o.Int<NodeIndex>("node");
  e.to = o.Int<PoolId>("to");
  e.reason = o.Str("reason");
}
void Read(Obj& o, NodeReturned& e) { e.node = o.Int<NodeIndex>("node"); }
void Read(Obj& o, RegionsSet& e) {
  Obj p = o.Child("policy");
  const std::string kind = p.Str("policy");
  bool known = false;
  for (auto k : {RegionPolicy::Kind::kOff, RegionPolicy::Kind::kCostAware, RegionPolicy::Kind::kNearest}) {
    if (kind == RegionPolicyKindName(k)) {
      e.policy.kind = k;
      known = true;
    }
  }
  if (!known && !o.errors().first) o.errors().Fail(p.Path("policy"), "unknown region policy '" + kind + "'");
  p.ForEach("regions", [&](const json& item, const std::string& path) {
    Obj r(o.errors(), &item, path);
    RegionInfo info;
    info.name = r.Str("name");
    info.price_per_gpu_hour = r.Double("price_per_gpu_hour");
    if (const json* l = r.Find("latency_ms", true)) {
      if (!l->is_object()) {
        o.errors().Fail(r.Path("latency_ms"), "expected an object");
      } else {
        for (const auto& [location, ms] : l->items()) {
          if (!ms.is_number()) {
            o.errors().Fail(r.Path("latency_ms") + "." + location, "expected a number");
            continue;
          }
          info.latency_ms[location] = ms.get<double>();
        }
      }
    }
    r.Done();
    e.policy.regions.push_back(std::move(info));
  });
  p.ForEach("users", [&](const json& item, const std::string& path) {
    Obj u(o.errors(), &item, path);
    TenantUsers users;
    users.tenant = u.Str("tenant");
    users.location = u.Str("location");
    users.latency_budget_ms = u.Double("latency_budget_ms");
    u.Done();
    e.policy.users.push_back(std::move(users));
  });
  p.Done();
}

void Read(Obj& o, GpuHealthChanged& e) {
  e.node = o.Int<NodeIndex>("node");
  e.unhealthy = o.Int<GpuMask>("unhealthy");
  e.reason = o.Str("reason");
}
void Read(Obj& o, TaskMemoryObserved& e) {
  e.job = o.Int<JobId>("job");
  e.replica = o.Int<int32_t>("replica");
  e.used_mib = o.Int<int64_t>("used_mib");
}

void Read(Obj& o, MigLayoutReported& e) {
  e.node = o.Int<NodeIndex>("node");
  e.gpu = o.Int<int32_t>("gpu");
  e.mig_enabled = o.Bool("mig_enabled");
  o.ForEach("instances", [&](const json& item, const std::string& path) {
    Obj m(o.errors(), &item, path);
    MigSlot slot;
    slot.profile = m.Str("profile");
    slot.start = m.Int<int32_t>("start");
    m.Done();
    e.instances.push_back(std::move(slot));
  });
}
void Read(Obj& o, MigLayoutMismatch& e) {
  e.node = o.Int<NodeIndex>("node");
  e.gpu = o.Int<int32_t>("gpu");
  e.reported = o.Str("reported");
  e.planned = o.Str("planned");
}

constexpr size_t kEventTypes = std::variant_size_v<EventBody>;

// The type names, by variant index.
const std::array<std::string_view, kEventTypes>& TypeNames() {
  static const auto names = []<size_t... I>(std::index_sequence<I...>) {
    return std::array<std::string_view, kEventTypes>{EventName(EventBody(std::in_place_index<I>))...};
  }(std::make_index_sequence<kEventTypes>());
  return names;
}

template <size_t... I>
EventBody ReadBody(size_t index, Obj& o, std::index_sequence<I...>) {
  EventBody body;
  // Exactly one I matches; each alternative must have its Read overload.
  ((index == I ? (void)([&] {
     std::variant_alternative_t<I, EventBody> e;
     Read(o, e);
     body = std::move(e);
   }())
               : (void)0),
   ...);
  return body;
}

}  // namespace

Result<Event> EventFromJson(std::string_view line) {
  json j;
  try {
    j = json::parse(line);
  } catch (const json::exception& e) {
    return InvalidArgument(std::string("event: not valid JSON: ") + e.what());
  }
  Errors errors;
  Obj o(errors, &j, "");
  Event e;
  e.seq = o.Int<int64_t>("seq");
  e.at = InstantFromMillis(o.Int<int64_t>("at"));
  const std::string type = o.Str("type");
  if (errors.first) return InvalidArgument("event: " + *errors.first);
  const auto& names = TypeNames();
  const size_t index = static_cast<size_t>(std::find(names.begin(), names.end(), type) - names.begin());
  if (index == kEventTypes) return InvalidArgument("event: type: unknown event type '" + type + "'");
  e.body = ReadBody(index, o, std::make_index_sequence<kEventTypes>());
  o.Done();
  if (errors.first) return InvalidArgument(type + " event: " + *errors.first);
  return e;
}

}  // namespace gpupool
