#include "src/api/job_request.h"

#include <algorithm>
#include <cmath>
#include <type_traits>

#include "src/api/task_request.h"
#include "src/base/time_text.h"
#include "src/model/gpu_catalog.h"

namespace gpupool {
namespace {

constexpr size_t kMaxName = 253;
constexpr double kMaxCores = 1 << 20;      // per replica
constexpr double kMaxMemoryGib = 1 << 24;  // 16 EiB
constexpr double kMaxGpuMemoryGib = 4096;

using nlohmann::json;

bool DurationOf(const FieldReader& f, std::string_view key, Duration& out, ApiError* err) {
  return f.DurationText(key, out, err);
}

bool SharingOf(const FieldReader& f, std::string_view key, std::string& out, ApiError* err) {
  if (!f.String(key, out, 32, err)) return false;
  static constexpr std::string_view kModes[] = {"any", "time-slice", "mps", "mig", "auto"};
  if (std::find(std::begin(kModes), std::end(kModes), out) == std::end(kModes)) {
    *err = BadField(f.PathOf(key), "unknown sharing mode '" + out + "' (known: any, time-slice, mps, mig, auto)");
    return false;
  }
  return true;
}

ShareMode ModeOf(const std::string& sharing) {
  if (sharing == "time-slice") return ShareMode::kTimeSlice;
  if (sharing == "mps") return ShareMode::kMps;
  if (sharing == "mig") return ShareMode::kMig;
  return ShareMode::kAny;
}

// Reads the resource fields shared by a job and a stage into `d`.
bool ResourcesOf(const FieldReader& f, bool cpu_kind, Demand& d, std::string& sharing, ApiError* err) {
  int64_t gpus = cpu_kind ? 0 : 1;
  if (!f.Int("gpus", gpus, 0, kMaxGpusPerNode, err)) return false;
  d.gpu_count = static_cast<int32_t>(gpus);
  d.gpu_milli = gpus == 0 ? 0 : kMilliPerGpu;
  if (f.Has("gpu_fraction")) {
    if (f.Has("gpus")) {
      *err = BadField(f.PathOf("gpu_fraction"), "give either gpus or gpu_fraction, not both");
      return false;
    }
    double fr = 0;
    if (!f.Number("gpu_fraction", fr, 0, 1, err, /*lo_open=*/true, /*hi_open=*/true)) return false;
    const int64_t milli = std::llround(fr * kMilliPerGpu);
    if (milli < 1 || milli >= kMilliPerGpu) {
      *err = BadField(f.PathOf("gpu_fraction"), "must be at least 0.001 and below 1");
      return false;
    }
    d.gpu_count = 1;
    d.gpu_milli = static_cast<int32_t>(milli);
  }
  if (cpu_kind && d.gpu_count > 0) {
    const std::string key = f.Has("gpus") ? "gpus" : "gpu_fraction";
    *err = BadField(f.PathOf(key), "a cpu job takes no GPUs");
    return false;
  }
  double cores = 4, mem = 16;
  if (!f.Number("cpu_cores", cores, 0, kMaxCores, err)) return false;
  if (!f.Number("memory_gib", mem, 0, kMaxMemoryGib, err)) return false;
  d.cpu_milli = std::llround(cores * 1000);
  d.memory_mib = std::llround(mem * 1024);
  sharing = "any";
  if (!SharingOf(f, "sharing", sharing, err)) return false;
  const bool share = d.gpu_count == 1 && d.gpu_milli < kMilliPerGpu;
  if (sharing == "auto") {
    if (d.gpu_count == 0) {
      *err = BadField(f.PathOf("sharing"), "auto needs a job with GPUs (this one takes none)");
      return false;
    }
  } else if (sharing != "any" && !share) {
    *err = BadField(f.PathOf("sharing"), sharing + " needs a share of one GPU (gpu_fraction)");
    return false;
  }
  d.mode = ModeOf(sharing);
  if (f.Has("gpu_memory_gib")) {
    double g = 0;
    if (!f.Number("gpu_memory_gib", g, 0, kMaxGpuMemoryGib, err)) return false;
    if (d.gpu_count == 0) {
      *err = BadField(f.PathOf("gpu_memory_gib"), "the job takes no GPUs");
      return false;
    }
    if (!share && sharing != "auto") {
      *err = BadField(f.PathOf("gpu_memory_gib"), "only for a share of one GPU (gpu_fraction) or with sharing: auto");
      return false;
    }
    d.gpu_memory_mib = static_cast<int32_t>(std::llround(g * 1024));
  }
  return true;
}

}  // namespace

std::optional<PoolId> ApiNames::pool_id(std::string_view name) const {
  for (size_t i = 0; i < pools.size(); ++i) {
    if (pools[i] == name) return static_cast<PoolId>(i);
  }
  return std::nullopt;
}

std::string ApiNames::requirement_name(uint16_t id) const {
  for (const auto& [name, r] : requirements) {
    if (r == id) return name;
  }
  return "";
}

std::vector<std::string> ApiNames::label_names(LabelMask mask) const {
  std::vector<std::string> out;
  for (size_t i = 0; i < labels.size() && i < 64; ++i) {
    if (mask & (LabelMask{1} << i)) out.push_back(labels[i]);
  }
  return out;
}

namespace {

// A list of label names (labels, affinity, anti_affinity) as a mask over
// names.labels; each unknown or repeated name is an error naming its index.
bool LabelsOf(const FieldReader& f, const char* key, const ApiNames& names, LabelMask& out, ApiError* err) {
  std::vector<std::string> given;
  if (!f.StringList(key, given, 64, err)) return false;
  out = 0;
  for (size_t i = 0; i < given.size(); ++i) {
    const auto it = std::find(names.labels.begin(), names.labels.end(), given[i]);
    const std::string field = std::string(key) + "[" + std::to_string(i) + "]";
    if (it == names.labels.end()) {
      std::string known;
      for (const std::string& n : names.labels) known += (known.empty() ? "" : ", ") + n;
      *err = BadField(field, "unknown label '" + given[i].substr(0, 64) + "' (the configuration's job_labels: " +
                                 (known.empty() ? "none" : known) + ")");
      return false;
    }
    const LabelMask bit = LabelMask{1} << (it - names.labels.begin());
    if (out & bit) {
      *err = BadField(field, "label '" + given[i] + "' given twice");
      return false;
    }
    out |= bit;
  }
  return true;
}

}  // namespace

namespace {

// The names a message lists as known: "a, b, c".
template <typename Names>
std::string KnownNames(const Names& names) {
  std::string known;
  for (const auto& n : names) {
    if constexpr (std::is_same_v<std::decay_t<decltype(n)>, std::string>) {
      known += (known.empty() ? "" : ", ") + n;
    } else {
      known += (known.empty() ? "" : ", ") + n.first;
    }
  }
  return known;
}

// priority: a class name, or an integer within the configured classes.
bool PriorityOf(const FieldReader& f, const ApiNames& names, int32_t& priority, ApiError* err) {
  priority = names.priorities.contains("normal") ? names.priorities.at("normal") : 0;
  const json* p = f.Find("priority");
  if (p == nullptr) return true;
  if (p->is_string()) {
    const std::string& name = p->get_ref<const std::string&>();
    auto it = names.priorities.find(name);
    if (it == names.priorities.end()) {
      *err = BadField("priority", "unknown priority class '" + name.substr(0, 64) + "' (known: " +
                                      KnownNames(names.priorities) + "; or an integer)");
      return false;
    }
    priority = it->second;
    return true;
  }
  // SEC: an integer lies within the configured classes (lowest to
  // highest), so a tenant cannot rank itself above every class.
  int64_t lo = -1000000, hi = 1000000;
  if (!names.priorities.empty()) {
    lo = hi = names.priorities.begin()->second;
    for (const auto& [n, v] : names.priorities) {
      lo = std::min<int64_t>(lo, v);
      hi = std::max<int64_t>(hi, v);
    }
  }
  int64_t v = 0;
  if (!f.Int("priority", v, lo, hi, err)) return false;
  priority = static_cast<int32_t>(v);
  return true;
}

// stages: one replica per stage, each with its own resources.
bool StagesOf(const FieldReader& f, const json& stages, JobSpec& s, ApiError* err) {
  for (const char* key : {"gpus", "gpu_fraction", "replicas", "gpu_memory_gib", "cpu_cores", "memory_gib", "sharing"}) {
    if (f.Has(key)) {
      *err = BadField(key, "not with stages (each stage gives its own resources; one replica runs per stage)");
      return false;
    }
  }
  if (s.kind == JobKind::kCpu) {
    *err = BadField("stages", "a cpu job takes no GPUs");
    return false;
  }
  if (!stages.is_array() || stages.empty() || stages.size() > kMaxGpusPerNode) {
    *err = BadField("stages", "expected a list of 1 to " + std::to_string(kMaxGpusPerNode) + " stages");
    return false;
  }
  for (size_t i = 0; i < stages.size(); ++i) {
    FieldReader sf;
    const std::string path = "stages[" + std::to_string(i) + "]";
    if (!FieldReader::Open(stages[i], path,
                           {"gpus", "gpu_fraction", "gpu_memory_gib", "sharing", "cpu_cores", "memory_gib"}, &sf,
                           err)) {
      return false;
    }
    Demand d;
    std::string sharing;
    if (!ResourcesOf(sf, false, d, sharing, err)) return false;
    if (sharing == "auto") {
      *err = BadField(path + ".sharing", "a stage needs a concrete mode (any, time-slice, mps or mig)");
      return false;
    }
    if (d.gpu_count == 0) {
      *err = BadField(path + ".gpus", "a stage needs GPUs");
      return false;
    }
    s.stages.push_back(d);
  }
  s.replicas = static_cast<int32_t>(s.stages.size());
  s.demand = s.stages[0];
  return true;
}

// The job's shape: stages, or replicas (elastic up to max_replicas) of one demand.
bool ShapeOf(const FieldReader& f, const ApiNames& names, JobSpec& s, ApiError* err) {
  if (const json* stages = f.Find("stages")) return StagesOf(f, *stages, s, err);
  int64_t replicas = 1;
  if (!f.Int("replicas", replicas, 1, names.max_replicas, err)) return false;
  s.replicas = static_cast<int32_t>(replicas);
  // SCALE-7: an elastic job runs with `replicas` at least and grows up to max_replicas.
  int64_t max_replicas = 0;
  if (!f.Int("max_replicas", max_replicas, replicas, names.max_replicas, err)) return false;
  if (max_replicas > 0) {
    s.min_replicas = s.replicas;
    s.max_replicas = static_cast<int32_t>(max_replicas);
  }
  std::string sharing;
  if (!ResourcesOf(f, s.kind == JobKind::kCpu, s.demand, sharing, err)) return false;
  s.auto_sharing = sharing == "auto";
  return true;
}

// gpu_models, pools and requirement: where the job may run.
bool PlacesOf(const FieldReader& f, const ApiNames& names, JobSpec& s, ApiError* err) {
  std::vector<std::string> models;
  if (!f.StringList("gpu_models", models, 64, err)) return false;
  if (!models.empty()) {
    s.demand.allowed_models = 0;
    for (size_t i = 0; i < models.size(); ++i) {
      const auto id = Catalog::Builtin().Find(models[i]);
      if (!id) {
        *err = BadField("gpu_models[" + std::to_string(i) + "]", "unknown GPU model '" + models[i].substr(0, 64) +
                                                                     "' (known: " + Catalog::Builtin().Names() + ")");
        return false;
      }
      s.demand.allowed_models |= GpuModelMask{1} << *id;
    }
  }
  std::vector<std::string> pools;
  if (!f.StringList("pools", pools, 64, err)) return false;
  for (size_t i = 0; i < pools.size(); ++i) {
    const auto id = names.pool_id(pools[i]);
    const std::string field = "pools[" + std::to_string(i) + "]";
    if (!id) {
      *err = BadField(field, "unknown pool '" + pools[i].substr(0, 64) + "' (known: " + KnownNames(names.pools) + ")");
      return false;
    }
    if (std::find(s.pools.begin(), s.pools.end(), *id) != s.pools.end()) {
      *err = BadField(field, "pool '" + pools[i] + "' given twice");
      return false;
    }
    s.pools.push_back(*id);
  }
  std::string requirement;
  if (!f.String("requirement", requirement, 64, err)) return false;
  if (!f.Has("requirement")) return true;
  auto it = names.requirements.find(requirement);
  if (it == names.requirements.end()) {
    const std::string known = KnownNames(names.requirements);
    *err = BadField("requirement", "unknown requirement '" + requirement + "' (known: " +
                                       (known.empty() ? "none configured" : known) + ")");
    return false;
  }
  s.demand.requirement = it->second;
  return true;
}

// checkpointable and its interval and duration.
bool CheckpointsOf(const FieldReader& f, JobSpec& s, ApiError* err) {
  if (!f.Bool("checkpointable", s.checkpointable, err)) return false;
  s.checkpoint_duration = std::chrono::seconds(30);
  if (!DurationOf(f, "checkpoint_interval", s.checkpoint_interval, err)) return false;
  if (!DurationOf(f, "checkpoint_duration", s.checkpoint_duration, err)) return false;
  if (s.checkpointable) return true;
  for (const char* key : {"checkpoint_interval", "checkpoint_duration"}) {
    if (f.Has(key)) {
      *err = BadField(key, "only for checkpointable jobs (set checkpointable: true)");
      return false;
    }
  }
  return true;
}

// deadline (a time) or deadline_after (from `now`), and expected_duration.
bool TimesOf(const FieldReader& f, Instant now, JobSpec& s, ApiError* err) {
  if (f.Has("deadline") && f.Has("deadline_after")) {
    *err = BadField("deadline_after", "give either deadline or deadline_after, not both");
    return false;
  }
  if (const json* d = f.Find("deadline")) {
    if (!d->is_string()) {
      *err = BadField("deadline", "expected an RFC 3339 time string, got " + JsonTypeName(*d));
      return false;
    }
    auto t = ParseRfc3339(d->get_ref<const std::string&>());
    if (!t) {
      *err = BadField("deadline", t.error().message);
      return false;
    }
    s.deadline = *t;
  }
  if (f.Has("deadline_after")) {
    Duration after{0};
    if (!DurationOf(f, "deadline_after", after, err)) return false;
    if (after <= Duration(0)) {
      *err = BadField("deadline_after", "must be positive");
      return false;
    }
    s.deadline = now + after;
  }
  if (f.Has("expected_duration")) {
    Duration d{0};
    if (!DurationOf(f, "expected_duration", d, err)) return false;
    s.expected_duration = d;
  }
  return true;
}

// A job that runs a command runs it in an image (EXEC-1): its own, else the
// server's default, decided now (a later default_image changes no
// submitted job).
bool ImageOf(const ApiNames& names, TaskSpec& task, ApiError* err) {
  if (task.empty() || !task.image.empty()) return true;
  if (names.default_image.empty()) {
    *err = BadField("image", "no image given and the server has no default_image (give image: host, or an "
                             "absolute path to an image on the nodes)");
    return false;
  }
  task.image = names.default_image;
  return true;
}

}  // namespace

ApiResult<JobRequest> ParseJobRequest(const json& body, const ApiNames& names, Instant now) {
  ApiResult<JobRequest> out;
  ApiError* err = &out.error;
  FieldReader f;
  if (!FieldReader::Open(
          body, "",
          {"name", "tenant", "kind", "priority", "replicas", "max_replicas", "gpus", "gpu_fraction", "gpu_memory_gib",
           "sharing", "cpu_cores", "memory_gib", "gpu_models", "pools", "requirement", "labels", "affinity",
           "anti_affinity", "checkpointable", "checkpoint_interval", "checkpoint_duration", "deadline",
           "deadline_after", "expected_duration", "stages", "command", "env", "working_dir", "checkpoint_signal",
           "checkpoint_timeout", "stop_grace", "image", "shm_gib", "network"},
          &f, err)) {
    return out;
  }
  JobRequest r;
  JobSpec& s = r.spec;
  if (!f.Require("name", err) || !f.String("name", s.name, kMaxName, err)) return out;
  if (s.name.empty()) {
    *err = BadField("name", "must not be empty");
    return out;
  }
  if (!f.String("tenant", r.tenant, 63, err)) return out;
  std::string kind = "training";
  if (!f.String("kind", kind, 32, err)) return out;
  const auto k = JobKindFromName(kind);
  if (!k) {
    *err = BadField("kind", "unknown job kind '" + kind +
                                "' (known: training, online-inference, batch-inference, development, cpu)");
    return out;
  }
  s.kind = *k;
  if (!PriorityOf(f, names, s.priority, err) || !ShapeOf(f, names, s, err) || !PlacesOf(f, names, s, err) ||
      !LabelsOf(f, "labels", names, s.labels, err) || !LabelsOf(f, "affinity", names, s.affinity, err) ||
      !LabelsOf(f, "anti_affinity", names, s.anti_affinity, err) || !CheckpointsOf(f, s, err) ||
      !TimesOf(f, now, s, err) || !ParseTaskFields(f, s.task, err) || !ImageOf(names, s.task, err)) {
    return out;
  }
  out.value = std::move(r);
  return out;
}

json JobSpecToRequest(const JobSpec& s, const std::string& tenant, const ApiNames& names) {
  auto resources = [](const Demand& d, json& j) {
    if (d.gpu_count == 1 && d.gpu_milli < kMilliPerGpu) {
      j["gpu_fraction"] = d.gpu_milli / 1000.0;
    } else {
      j["gpus"] = d.gpu_count;
    }
    j["cpu_cores"] = d.cpu_milli / 1000.0;
    j["memory_gib"] = d.memory_mib / 1024.0;
    if (d.gpu_memory_mib) j["gpu_memory_gib"] = d.gpu_memory_mib / 1024.0;
    if (d.mode != ShareMode::kAny) j["sharing"] = ShareModeName(d.mode);
  };
  json j{{"name", s.name}, {"tenant", tenant}, {"kind", JobKindName(s.kind)}, {"priority", s.priority}};
  if (s.is_pipeline()) {
    json stages = json::array();
    for (const Demand& d : s.stages) {
      json st = json::object();
      resources(d, st);
      stages.push_back(std::move(st));
    }
    j["stages"] = std::move(stages);
  } else {
    j["replicas"] = s.elastic() ? s.min_replicas : s.replicas;
    if (s.elastic()) j["max_replicas"] = s.max_replicas;
    resources(s.demand, j);
    if (s.auto_sharing) j["sharing"] = "auto";
  }
  if (s.demand.allowed_models != kAnyGpuModel) {
    json models = json::array();
    for (int m = 0; m < Catalog::Builtin().size(); ++m) {
      if (s.demand.allowed_models >> m & 1) models.push_back(Catalog::Builtin().Get(static_cast<GpuModelId>(m)).name);
    }
    j["gpu_models"] = std::move(models);
  }
  if (!s.pools.empty()) {
    json pools = json::array();
    for (PoolId p : s.pools) pools.push_back(p < names.pools.size() ? names.pools[p] : std::to_string(p));
    j["pools"] = std::move(pools);
  }
  if (s.demand.requirement) j["requirement"] = names.requirement_name(s.demand.requirement);
  if (s.labels) j["labels"] = names.label_names(s.labels);
  if (s.affinity) j["affinity"] = names.label_names(s.affinity);
  if (s.anti_affinity) j["anti_affinity"] = names.label_names(s.anti_affinity);
  j["checkpointable"] = s.checkpointable;
  if (s.checkpointable) {
    j["checkpoint_interval"] = FormatDuration(s.checkpoint_interval);
    j["checkpoint_duration"] = FormatDuration(s.checkpoint_duration);
  }
  if (s.deadline) j["deadline"] = FormatRfc3339(*s.deadline);
  if (s.expected_duration) j["expected_duration"] = FormatDuration(*s.expected_duration);
  TaskToRequest(s.task, j);
  return j;
}

}  // namespace gpupool
