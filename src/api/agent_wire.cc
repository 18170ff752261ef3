#include "src/api/agent_wire.h"

#include "src/api/task_request.h"

namespace gpupool::agent_wire {
namespace {

constexpr size_t kMaxImageBytes = 4096;
constexpr int64_t kMaxShmMib = 64 * 1024;
constexpr int64_t kMaxCpuMilli = int64_t{1} << 40;
constexpr int64_t kMaxUid = (int64_t{1} << 31) - 1;

bool ReadTaskSpec(const json& j, const std::string& path, TaskSpec& t, ApiError* err, UnknownKeys u) {
  FieldReader f;
  if (!FieldReader::Open(j, path, {"command", "env", "working_dir", "checkpoint_signal", "checkpoint_timeout",
                                   "stop_grace"},
                         &f, err, u)) {
    return false;
  }
  if (!f.Require("command", err)) return false;
  return ParseTaskFields(f, t, err);
}

bool ReadPhase(const std::string& phase, const std::string& path, TaskPhase& out, ApiError* err) {
  for (TaskPhase p : {TaskPhase::kRunning, TaskPhase::kExited, TaskPhase::kCheckpointed, TaskPhase::kStartFailed}) {
    if (phase == TaskPhaseName(p)) {
      out = p;
      return true;
    }
  }
  *err = BadField(path, "unknown phase '" + phase + "' (known: running, exited, checkpointed, start_failed)");
  return false;
}

// The checks of a task order's fields beyond their ranges.
bool ReadMember(const json& j, const std::string& path, TaskOrder& x, ApiError* err, UnknownKeys u) {
  FieldReader f;
  ReplicaMember m;
  if (!FieldReader::Open(j, path, {"replica", "node"}, &f, err, u) || !f.Require("replica", err) ||
      !IntAs(f, "replica", m.replica, 0, INT32_MAX, err) || !f.Require("node", err) ||
      !f.String("node", m.node, 253, err)) {
    return false;
  }
  if (!x.members.empty() && x.members.back().replica >= m.replica) {
    *err = BadField(path + ".replica", "members must be listed by ascending replica id");
    return false;
  }
  x.members.push_back(std::move(m));
  return true;
}

bool CheckTaskOrder(const TaskOrder& x, const std::string& path, ApiError* err) {
  if (!x.image.empty()) {
    if (std::string why = ImageProblem(x.image); !why.empty()) {
      *err = BadField(path + ".image", why);
      return false;
    }
  }
  if ((x.uid == 0) != (x.uid_count == 0) || x.uid + x.uid_count > kMaxUid + 1) {
    *err = BadField(path + ".uid_count", "uid and uid_count are both 0 (no user namespace) or both set, "
                                         "the range ending at or below 2^31");
    return false;
  }
  return true;
}

}  // namespace

bool IntList(const FieldReader& f, std::string_view key, std::vector<int>& out, int hi, ApiError* err) {
  return Each(f, key, err, [&](const json& v, const std::string& path) {
    if (!v.is_number_integer() || v.get<int64_t>() < 0 || v.get<int64_t>() > hi) {
      *err = BadField(path, "expected an integer between 0 and " + std::to_string(hi));
      return false;
    }
    out.push_back(v.get<int>());
    return true;
  });
}

json MigJson(const std::vector<MigInstance>& instances) {
  json mig = json::array();
  for (const MigInstance& m : instances) {
    mig.push_back(json{{"uuid", m.uuid}, {"profile", m.profile}, {"start", m.start}, {"memory_mib", m.memory_mib}});
  }
  return mig;
}

bool ReadMigList(const FieldReader& f, std::vector<MigInstance>& out, ApiError* err, UnknownKeys u) {
  return Each(f, "mig", err, [&](const json& m, const std::string& p) {
    MigInstance mi;
    FieldReader mf;
    if (!FieldReader::Open(m, p, {"uuid", "profile", "start", "memory_mib"}, &mf, err, u) ||
        !mf.Require("uuid", err) || !mf.String("uuid", mi.uuid, 128, err) || !mf.String("profile", mi.profile, 32, err) ||
        !IntAs(mf, "start", mi.start, 0, 63, err) || !IntAs(mf, "memory_mib", mi.memory_mib, 0, kMaxMib, err)) {
      return false;
    }
    out.push_back(std::move(mi));
    return true;
  });
}

json GpuJson(const GpuDevice& g) {
  json mig = MigJson(g.mig);
  return json{{"index", g.index},        {"uuid", g.uuid},
              {"product", g.product},    {"model", g.model},
              {"memory_mib", g.memory_mib}, {"mig_enabled", g.mig_enabled},
              {"mig", std::move(mig)},   {"nvlink_peers", g.nvlink_peers}};
}

bool ReadGpu(const json& j, const std::string& path, GpuDevice& g, ApiError* err, UnknownKeys u) {
  FieldReader f;
  if (!FieldReader::Open(j, path, {"index", "uuid", "product", "model", "memory_mib", "mig_enabled", "mig",
                                   "nvlink_peers"},
                         &f, err, u) ||
      !f.Require("index", err) || !IntAs(f, "index", g.index, 0, kMaxGpuIndex, err) || !f.Require("uuid", err) ||
      !f.String("uuid", g.uuid, 128, err) || !f.String("product", g.product, 256, err) ||
      !f.String("model", g.model, 64, err) || !f.Require("memory_mib", err) ||
      !IntAs(f, "memory_mib", g.memory_mib, 0, kMaxMib, err) || !f.Bool("mig_enabled", g.mig_enabled, err) ||
      !IntList(f, "nvlink_peers", g.nvlink_peers, kMaxGpuIndex, err)) {
    return false;
  }
  return ReadMigList(f, g.mig, err, u);
}

json GpuSampleJson(const GpuSample& g, const std::map<int, std::vector<MigInstance>>& mig) {
  json x{{"index", g.index},
         {"util_pct", g.util_pct},
         {"memory_used_mib", g.memory_used_mib},
         {"memory_total_mib", g.memory_total_mib},
         {"temperature_c", g.temperature_c},
         {"healthy", g.healthy},
         {"health_detail", g.health_detail}};
  if (auto m = mig.find(g.index); m != mig.end()) x["mig"] = MigJson(m->second);
  return x;
}

bool ReadGpuSample(const json& j, const std::string& path, GpuSample& s, std::map<int, std::vector<MigInstance>>& mig,
                   ApiError* err, UnknownKeys u) {
  FieldReader f;
  if (!FieldReader::Open(j, path, {"index", "util_pct", "memory_used_mib", "memory_total_mib", "temperature_c",
                                   "healthy", "health_detail", "mig"},
                         &f, err, u) ||
      !f.Require("index", err) || !IntAs(f, "index", s.index, 0, kMaxGpuIndex, err) ||
      !f.Number("util_pct", s.util_pct, 0, 100, err) ||
      !IntAs(f, "memory_used_mib", s.memory_used_mib, 0, kMaxMib, err) ||
      !IntAs(f, "memory_total_mib", s.memory_total_mib, 0, kMaxMib, err) ||
      !IntAs(f, "temperature_c", s.temperature_c, -1, 1000, err) || !f.Bool("healthy", s.healthy, err) ||
      !f.String("health_detail", s.health_detail, 1024, err)) {
    return false;
  }
  if (f.Has("mig")) {
    std::vector<MigInstance> instances;
    if (!ReadMigList(f, instances, err, u)) return false;
    mig[s.index] = std::move(instances);
  }
  return true;
}

json TaskReportJson(const TaskReport& t) {
  json x{{"job", t.job},         {"replica", t.replica},       {"attempt", t.attempt},
         {"phase", TaskPhaseName(t.phase)}, {"pid", t.pid}, {"util_pct", t.util_pct},
         {"gpu_memory_mib", t.gpu_memory_mib}};
  if (t.phase == TaskPhase::kExited) {
    x["exit_code"] = t.exit_code;
    x["signal"] = t.signal;
  }
  if (t.phase == TaskPhase::kCheckpointed) x["checkpoint_acked"] = t.checkpoint_acked;
  if (!t.error.empty()) x["error"] = t.error;
  return x;
}

bool ReadTaskReport(const json& j, const std::string& path, TaskReport& x, ApiError* err, UnknownKeys u) {
  FieldReader f;
  std::string phase;
  if (!FieldReader::Open(j, path, {"job", "replica", "attempt", "phase", "pid", "exit_code", "signal",
                                   "checkpoint_acked", "error", "util_pct", "gpu_memory_mib"},
                         &f, err, u) ||
      !f.Require("job", err) || !IntAs(f, "job", x.job, 1, INT64_MAX, err) ||
      !IntAs(f, "replica", x.replica, 0, INT32_MAX, err) || !IntAs(f, "attempt", x.attempt, 0, INT32_MAX, err) ||
      !f.Require("phase", err) || !f.String("phase", phase, 16, err) || !IntAs(f, "pid", x.pid, 0, INT32_MAX, err) ||
      !IntAs(f, "exit_code", x.exit_code, -1, 255, err) || !IntAs(f, "signal", x.signal, 0, 128, err) ||
      !f.Bool("checkpoint_acked", x.checkpoint_acked, err) || !f.String("error", x.error, 4096, err) ||
      !f.Number("util_pct", x.util_pct, -1, 100, err) ||
      !IntAs(f, "gpu_memory_mib", x.gpu_memory_mib, 0, kMaxMib, err)) {
    return false;
  }
  return ReadPhase(phase, path + ".phase", x.phase, err);
}

json ScrubReportJson(const ScrubReport& s) {
  json x{{"id", s.id}, {"ok", s.ok}, {"bytes", s.bytes}, {"seconds", s.seconds}};
  if (!s.error.empty()) x["error"] = s.error;
  return x;
}

bool ReadScrubReport(const json& j, const std::string& path, ScrubReport& x, ApiError* err, UnknownKeys u) {
  FieldReader f;
  return FieldReader::Open(j, path, {"id", "ok", "bytes", "seconds", "error"}, &f, err, u) && f.Require("id", err) &&
         IntAs(f, "id", x.id, 1, INT64_MAX, err) && f.Bool("ok", x.ok, err) &&
         IntAs(f, "bytes", x.bytes, 0, INT64_MAX, err) && f.Number("seconds", x.seconds, 0, 1e9, err) &&
         f.String("error", x.error, 4096, err);
}

// JSON strings are UTF-8: the agent sends log bytes made valid
// (SanitizeUtf8), so that offsets count the same bytes on both sides.
json LogChunkJson(const LogChunk& l) {
  return json{{"job", l.job}, {"replica", l.replica}, {"attempt", l.attempt}, {"offset", l.offset}, {"data", l.data}};
}

bool ReadLogChunk(const json& j, const std::string& path, LogChunk& x, ApiError* err, UnknownKeys u) {
  FieldReader f;
  return FieldReader::Open(j, path, {"job", "replica", "attempt", "offset", "data"}, &f, err, u) &&
         f.Require("job", err) && IntAs(f, "job", x.job, 1, INT64_MAX, err) &&
         IntAs(f, "replica", x.replica, 0, INT32_MAX, err) && IntAs(f, "attempt", x.attempt, 0, INT32_MAX, err) &&
         IntAs(f, "offset", x.offset, 0, INT64_MAX, err) && f.String("data", x.data, kMaxLogChunkBytes, err);
}

json TaskOrderJson(const TaskOrder& t) {
  // The task object keeps its first keys (an agent of protocol 1 refuses
  // others): the container fields travel beside it.
  TaskSpec bare = t.task;
  bare.image.clear();
  bare.shm_mib = kDefaultShmMib;
  bare.network_isolated = false;
  json task = json::object();
  TaskToRequest(bare, task);
  json x{{"job", t.job},
         {"replica", t.replica},
         {"attempt", t.attempt},
         {"name", t.name},
         {"tenant", t.tenant},
         {"action", t.action == TaskAction::kRun ? "run" : "checkpoint"},
         {"idle_notice", t.idle_notice},
         {"gpus", t.gpus},
         {"gpu_mode", t.gpu_mode},
         {"gpu_milli", t.gpu_milli},
         {"gpu_memory_mib", t.gpu_memory_mib},
         {"task", std::move(task)}};
  if (t.gpu_mode == "mig") {
    x["mig_profile"] = t.mig_profile;
    x["mig_start"] = t.mig_start;
  }
  // Only away from their defaults, so that a reply to an agent older than
  // them (which the server leaves at the defaults) has none of them.
  if (!t.image.empty()) x["image"] = t.image;
  if (t.shm_mib != kDefaultShmMib) x["shm_mib"] = t.shm_mib;
  if (t.network_isolated) x["network_isolated"] = true;
  if (t.memory_mib != 0) x["memory_mib"] = t.memory_mib;
  if (t.cpu_milli != 0) x["cpu_milli"] = t.cpu_milli;
  if (t.uid != 0 || t.uid_count != 0) {
    x["uid"] = t.uid;
    x["uid_count"] = t.uid_count;
  }
  if (!t.members.empty()) {
    json members = json::array();
    for (const ReplicaMember& m : t.members) members.push_back(json{{"replica", m.replica}, {"node", m.node}});
    x["members"] = std::move(members);
    x["generation"] = t.generation;
  }
  return x;
}

bool ReadTaskOrder(const json& j, const std::string& path, TaskOrder& x, ApiError* err, UnknownKeys u) {
  FieldReader f;
  std::string action;
  if (!FieldReader::Open(j, path, {"job", "replica", "attempt", "name", "tenant", "action", "idle_notice", "gpus",
                                   "gpu_mode", "gpu_milli", "gpu_memory_mib", "mig_profile", "mig_start", "task",
                                   "image", "shm_mib", "network_isolated", "memory_mib", "cpu_milli", "uid",
                                   "uid_count", "members", "generation"},
                         &f, err, u) ||
      !f.Require("job", err) || !IntAs(f, "job", x.job, 1, INT64_MAX, err) ||
      !IntAs(f, "replica", x.replica, 0, INT32_MAX, err) || !IntAs(f, "attempt", x.attempt, 0, INT32_MAX, err) ||
      !f.String("name", x.name, 253, err) || !f.String("tenant", x.tenant, 63, err) ||
      !f.String("action", action, 16, err) || !f.Bool("idle_notice", x.idle_notice, err) ||
      !IntList(f, "gpus", x.gpus, kMaxGpuIndex, err) || !f.String("gpu_mode", x.gpu_mode, 16, err) ||
      !IntAs(f, "gpu_milli", x.gpu_milli, 0, 1000, err) ||
      !IntAs(f, "gpu_memory_mib", x.gpu_memory_mib, 0, kMaxMib, err) ||
      !f.String("mig_profile", x.mig_profile, 32, err) || !IntAs(f, "mig_start", x.mig_start, 0, 63, err) ||
      !f.String("image", x.image, kMaxImageBytes, err) || !IntAs(f, "shm_mib", x.shm_mib, 1, kMaxShmMib, err) ||
      !f.Bool("network_isolated", x.network_isolated, err) ||
      !IntAs(f, "memory_mib", x.memory_mib, 0, kMaxMib, err) ||
      !IntAs(f, "cpu_milli", x.cpu_milli, 0, kMaxCpuMilli, err) || !IntAs(f, "uid", x.uid, 0, kMaxUid, err) ||
      !IntAs(f, "uid_count", x.uid_count, 0, kMaxUid, err) ||
      !IntAs(f, "generation", x.generation, 0, INT32_MAX, err) ||
      !Each(f, "members", err, [&](const json& item, const std::string& at) { return ReadMember(item, at, x, err, u); }) ||
      !CheckTaskOrder(x, path, err)) {
    return false;
  }
  if (action != "run" && action != "checkpoint") {
    *err = BadField(path + ".action", "unknown action '" + action + "' (known: run, checkpoint)");
    return false;
  }
  x.action = action == "run" ? TaskAction::kRun : TaskAction::kCheckpoint;
  const json* task = f.Find("task");
  if (!task) {
    *err = BadField(path + ".task", "missing");
    return false;
  }
  return ReadTaskSpec(*task, path + ".task", x.task, err, u);
}

json ScrubOrderJson(const ScrubOrder& s) { return json{{"id", s.id}, {"gpus", s.gpus}}; }

bool ReadScrubOrder(const json& j, const std::string& path, ScrubOrder& x, ApiError* err, UnknownKeys u) {
  FieldReader f;
  return FieldReader::Open(j, path, {"id", "gpus"}, &f, err, u) && f.Require("id", err) &&
         IntAs(f, "id", x.id, 1, INT64_MAX, err) && IntList(f, "gpus", x.gpus, kMaxGpuIndex, err);
}

json LogAckJson(const LogAck& l) {
  return json{{"job", l.job}, {"replica", l.replica}, {"attempt", l.attempt}, {"bytes", l.bytes}};
}

bool ReadLogAck(const json& j, const std::string& path, LogAck& x, ApiError* err, UnknownKeys u) {
  FieldReader f;
  return FieldReader::Open(j, path, {"job", "replica", "attempt", "bytes"}, &f, err, u) &&
         IntAs(f, "job", x.job, 1, INT64_MAX, err) && IntAs(f, "replica", x.replica, 0, INT32_MAX, err) &&
         IntAs(f, "attempt", x.attempt, 0, INT32_MAX, err) && IntAs(f, "bytes", x.bytes, 0, INT64_MAX, err);
}

json TaskRefJson(const TaskRef& k) { return json::array({k.job, k.replica, k.attempt}); }

bool ReadTaskRef(const json& j, const std::string& path, TaskRef& k, ApiError* err, UnknownKeys) {
  const bool ok = j.is_array() && j.size() == 3 && j[0].is_number_integer() && j[1].is_number_integer() &&
                  j[2].is_number_integer() && j[0].get<int64_t>() >= 1 && j[1].get<int64_t>() >= 0 &&
                  j[1].get<int64_t>() <= INT32_MAX && j[2].get<int64_t>() >= 0 && j[2].get<int64_t>() <= INT32_MAX;
  if (!ok) {
    *err = BadField(path, "expected [job, replica, attempt] (integers, job at least 1)");
    return false;
  }
  k = TaskRef{j[0].get<int64_t>(), j[1].get<int32_t>(), j[2].get<int32_t>()};
  return true;
}

}  // namespace gpupool::agent_wire
