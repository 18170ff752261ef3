#include "src/api/agent_protocol.h"

#include <cstdint>
#include <string_view>

#include "src/api/task_request.h"

namespace gpupool {
namespace {

using nlohmann::json;

constexpr size_t kMaxItems = 4096;           // tasks, scrubs, logs per message
constexpr size_t kMaxLogChunkBytes = 1 << 20;

std::string At(const std::string& path, size_t i) { return path + "[" + std::to_string(i) + "]"; }

// Calls fn(item, path) for each element of the array `key` (absent: none).
template <class Fn>
bool Each(const FieldReader& f, std::string_view key, ApiError* err, Fn fn) {
  const json* v = f.Find(key);
  if (!v) return true;
  if (!v->is_array()) {
    *err = BadField(f.PathOf(key), "expected an array, got " + JsonTypeName(*v));
    return false;
  }
  if (v->size() > kMaxItems) {
    *err = BadField(f.PathOf(key), "too many entries (at most " + std::to_string(kMaxItems) + ")");
    return false;
  }
  for (size_t i = 0; i < v->size(); ++i) {
    if (!fn((*v)[i], At(f.PathOf(key), i))) return false;
  }
  return true;
}

template <class T>
bool IntAs(const FieldReader& f, std::string_view key, T& out, int64_t lo, int64_t hi, ApiError* err) {
  int64_t v = out;
  if (!f.Int(key, v, lo, hi, err)) return false;
  out = static_cast<T>(v);
  return true;
}

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

constexpr int64_t kMaxMib = int64_t{1} << 40;
constexpr int kMaxGpuIndex = 1023;
constexpr size_t kMaxImageBytes = 4096;
constexpr int64_t kMaxShmMib = 64 * 1024;
constexpr int64_t kMaxCpuMilli = int64_t{1} << 40;
constexpr int64_t kMaxUid = (int64_t{1} << 31) - 1;

json MigJson(const std::vector<MigInstance>& instances) {
  json mig = json::array();
  for (const MigInstance& m : instances) {
    mig.push_back(json{{"uuid", m.uuid}, {"profile", m.profile}, {"start", m.start}, {"memory_mib", m.memory_mib}});
  }
  return mig;
}

bool ReadMigList(const FieldReader& f, std::vector<MigInstance>& out, ApiError* err) {
  return Each(f, "mig", err, [&](const json& m, const std::string& p) {
    MigInstance mi;
    FieldReader mf;
    if (!FieldReader::Open(m, p, {"uuid", "profile", "start", "memory_mib"}, &mf, err) ||
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

bool ReadGpu(const json& j, const std::string& path, GpuDevice& g, ApiError* err) {
  FieldReader f;
  if (!FieldReader::Open(j, path, {"index", "uuid", "product", "model", "memory_mib", "mig_enabled", "mig",
                                   "nvlink_peers"},
                         &f, err) ||
      !f.Require("index", err) || !IntAs(f, "index", g.index, 0, kMaxGpuIndex, err) || !f.Require("uuid", err) ||
      !f.String("uuid", g.uuid, 128, err) || !f.String("product", g.product, 256, err) ||
      !f.String("model", g.model, 64, err) || !f.Require("memory_mib", err) ||
      !IntAs(f, "memory_mib", g.memory_mib, 0, kMaxMib, err) || !f.Bool("mig_enabled", g.mig_enabled, err) ||
      !IntList(f, "nvlink_peers", g.nvlink_peers, kMaxGpuIndex, err)) {
    return false;
  }
  return ReadMigList(f, g.mig, err);
}

bool ReadTaskSpec(const json& j, const std::string& path, TaskSpec& t, ApiError* err) {
  FieldReader f;
  if (!FieldReader::Open(j, path, {"command", "env", "working_dir", "checkpoint_signal", "checkpoint_timeout",
                                   "stop_grace"},
                         &f, err)) {
    return false;
  }
  if (!f.Require("command", err)) return false;
  return ParseTaskFields(f, t, err);
}

}  // namespace

const char* TaskPhaseName(TaskPhase p) {
  switch (p) {
    case TaskPhase::kRunning: return "running";
    case TaskPhase::kExited: return "exited";
    case TaskPhase::kCheckpointed: return "checkpointed";
    case TaskPhase::kStartFailed: return "start_failed";
  }
  return "?";
}

json ToJson(const RegisterRequest& r) {
  json gpus = json::array();
  for (const GpuDevice& g : r.gpus) gpus.push_back(GpuJson(g));
  return json{{"node", r.node},           {"backend", r.backend},       {"class", r.node_class},
              {"region", r.region},       {"zone", r.zone},             {"rack", r.rack},
              {"cpu_milli", r.cpu_milli}, {"memory_mib", r.memory_mib}, {"gpus", std::move(gpus)},
              {"isolation", r.isolation}, {"metrics_url", r.metrics_url}};
}

ApiResult<RegisterRequest> ParseRegisterRequest(const json& j) {
  ApiResult<RegisterRequest> out;
  ApiError* err = &out.error;
  RegisterRequest r;
  FieldReader f;
  if (!FieldReader::Open(j, "", {"node", "backend", "class", "region", "zone", "rack", "cpu_milli", "memory_mib",
                                 "gpus", "isolation", "metrics_url"},
                         &f, err) ||
      !f.Require("node", err) || !f.String("node", r.node, 253, err) || !f.String("backend", r.backend, 16, err) ||
      !f.String("class", r.node_class, 63, err) || !f.String("region", r.region, 63, err) ||
      !f.String("zone", r.zone, 63, err) || !f.String("rack", r.rack, 63, err) || !f.Require("cpu_milli", err) ||
      !IntAs(f, "cpu_milli", r.cpu_milli, 1, int64_t{1} << 40, err) || !f.Require("memory_mib", err) ||
      !IntAs(f, "memory_mib", r.memory_mib, 1, kMaxMib, err) || !f.String("isolation", r.isolation, 16, err) ||
      !f.String("metrics_url", r.metrics_url, 2048, err)) {
    return out;
  }
  r.metrics_url_given = f.Has("metrics_url");
  if (!r.metrics_url.empty() && !r.metrics_url.starts_with("http://") && !r.metrics_url.starts_with("https://")) {
    *err = BadField("metrics_url", "'" + r.metrics_url.substr(0, 100) + "' is not an http:// or https:// URL");
    return out;
  }
  // Absent: an agent older than the field, which runs plain processes.
  r.isolation_given = f.Has("isolation");
  if (r.isolation != "container" && r.isolation != "none") {
    *err = BadField("isolation", "unknown isolation '" + r.isolation + "' (known: container, none)");
    return out;
  }
  if (!Each(f, "gpus", err, [&](const json& g, const std::string& path) {
        GpuDevice d;
        if (!ReadGpu(g, path, d, err)) return false;
        r.gpus.push_back(std::move(d));
        return true;
      })) {
    return out;
  }
  out.value = std::move(r);
  return out;
}

json ToJson(const HeartbeatRequest& r) {
  json gpus = json::array();
  for (const GpuSample& g : r.gpus) {
    gpus.push_back(json{{"index", g.index},
                        {"util_pct", g.util_pct},
                        {"memory_used_mib", g.memory_used_mib},
                        {"memory_total_mib", g.memory_total_mib},
                        {"temperature_c", g.temperature_c},
                        {"healthy", g.healthy},
                        {"health_detail", g.health_detail}});
    if (auto m = r.mig.find(g.index); m != r.mig.end()) gpus.back()["mig"] = MigJson(m->second);
  }
  json tasks = json::array();
  for (const TaskReport& t : r.tasks) {
    json x{{"job", t.job},         {"replica", t.replica},       {"attempt", t.attempt},
           {"phase", TaskPhaseName(t.phase)}, {"pid", t.pid}, {"util_pct", t.util_pct},
           {"gpu_memory_mib", t.gpu_memory_mib}};
    if (t.phase == TaskPhase::kExited) {
      x["exit_code"] = t.exit_code;
      x["signal"] = t.signal;
    }
    if (t.phase == TaskPhase::kCheckpointed) x["checkpoint_acked"] = t.checkpoint_acked;
    if (!t.error.empty()) x["error"] = t.error;
    tasks.push_back(std::move(x));
  }
  json scrubs = json::array();
  for (const ScrubReport& s : r.scrubs) {
    json x{{"id", s.id}, {"ok", s.ok}, {"bytes", s.bytes}, {"seconds", s.seconds}};
    if (!s.error.empty()) x["error"] = s.error;
    scrubs.push_back(std::move(x));
  }
  json logs = json::array();
  for (const LogChunk& l : r.logs) {
    // JSON strings are UTF-8: the agent sends log bytes made valid
    // (SanitizeUtf8), so that offsets count the same bytes on both sides.
    logs.push_back(json{{"job", l.job}, {"replica", l.replica}, {"attempt", l.attempt}, {"offset", l.offset},
                        {"data", l.data}});
  }
  return json{{"node", r.node}, {"session", r.session}, {"gpus", std::move(gpus)}, {"tasks", std::move(tasks)},
              {"scrubs", std::move(scrubs)}, {"logs", std::move(logs)}};
}

ApiResult<HeartbeatRequest> ParseHeartbeatRequest(const json& j) {
  ApiResult<HeartbeatRequest> out;
  ApiError* err = &out.error;
  HeartbeatRequest r;
  FieldReader f;
  if (!FieldReader::Open(j, "", {"node", "session", "gpus", "tasks", "scrubs", "logs"}, &f, err) ||
      !f.Require("node", err) || !f.String("node", r.node, 253, err) || !f.Require("session", err) ||
      !f.String("session", r.session, 128, err)) {
    return out;
  }
  const bool ok =
      Each(f, "gpus", err,
           [&](const json& g, const std::string& path) {
             GpuSample s;
             FieldReader gf;
             if (!FieldReader::Open(g, path, {"index", "util_pct", "memory_used_mib", "memory_total_mib",
                                              "temperature_c", "healthy", "health_detail", "mig"},
                                    &gf, err) ||
                 !gf.Require("index", err) || !IntAs(gf, "index", s.index, 0, kMaxGpuIndex, err) ||
                 !gf.Number("util_pct", s.util_pct, 0, 100, err) ||
                 !IntAs(gf, "memory_used_mib", s.memory_used_mib, 0, kMaxMib, err) ||
                 !IntAs(gf, "memory_total_mib", s.memory_total_mib, 0, kMaxMib, err) ||
                 !IntAs(gf, "temperature_c", s.temperature_c, -1, 1000, err) || !gf.Bool("healthy", s.healthy, err) ||
                 !gf.String("health_detail", s.health_detail, 1024, err)) {
               return false;
             }
             if (gf.Has("mig")) {
               std::vector<MigInstance> mig;
               if (!ReadMigList(gf, mig, err)) return false;
               r.mig[s.index] = std::move(mig);
             }
             r.gpus.push_back(std::move(s));
             return true;
           }) &&
      Each(f, "tasks", err,
           [&](const json& t, const std::string& path) {
             TaskReport x;
             FieldReader tf;
             std::string phase;
             if (!FieldReader::Open(t, path, {"job", "replica", "attempt", "phase", "pid", "exit_code", "signal",
                                              "checkpoint_acked", "error", "util_pct", "gpu_memory_mib"},
                                    &tf, err) ||
                 !tf.Require("job", err) || !IntAs(tf, "job", x.job, 1, INT64_MAX, err) ||
                 !IntAs(tf, "replica", x.replica, 0, INT32_MAX, err) ||
                 !IntAs(tf, "attempt", x.attempt, 0, INT32_MAX, err) || !tf.Require("phase", err) ||
                 !tf.String("phase", phase, 16, err) || !IntAs(tf, "pid", x.pid, 0, INT32_MAX, err) ||
                 !IntAs(tf, "exit_code", x.exit_code, -1, 255, err) || !IntAs(tf, "signal", x.signal, 0, 128, err) ||
                 !tf.Bool("checkpoint_acked", x.checkpoint_acked, err) || !tf.String("error", x.error, 4096, err) ||
                 !tf.Number("util_pct", x.util_pct, -1, 100, err) ||
                 !IntAs(tf, "gpu_memory_mib", x.gpu_memory_mib, 0, kMaxMib, err)) {
               return false;
             }
             bool known = false;
             for (TaskPhase p : {TaskPhase::kRunning, TaskPhase::kExited, TaskPhase::kCheckpointed,
                                 TaskPhase::kStartFailed}) {
               if (phase == TaskPhaseName(p)) x.phase = p, known = true;
             }
             if (!known) {
               *err = BadField(path + ".phase",
                               "unknown phase '" + phase + "' (known: running, exited, checkpointed, start_failed)");
               return false;
             }
             r.tasks.push_back(std::move(x));
             return true;
           }) &&
      Each(f, "scrubs", err,
           [&](const json& s, const std::string& path) {
             ScrubReport x;
             FieldReader sf;
             if (!FieldReader::Open(s, path, {"id", "ok", "bytes", "seconds", "error"}, &sf, err) ||
                 !sf.Require("id", err) || !IntAs(sf, "id", x.id, 1, INT64_MAX, err) || !sf.Bool("ok", x.ok, err) ||
                 !IntAs(sf, "bytes", x.bytes, 0, INT64_MAX, err) || !sf.Number("seconds", x.seconds, 0, 1e9, err) ||
                 !sf.String("error", x.error, 4096, err)) {
               return false;
             }
             r.scrubs.push_back(std::move(x));
             return true;
           }) &&
      Each(f, "logs", err, [&](const json& l, const std::string& path) {
        LogChunk x;
        FieldReader lf;
        if (!FieldReader::Open(l, path, {"job", "replica", "attempt", "offset", "data"}, &lf, err) ||
            !lf.Require("job", err) || !IntAs(lf, "job", x.job, 1, INT64_MAX, err) ||
            !IntAs(lf, "replica", x.replica, 0, INT32_MAX, err) ||
            !IntAs(lf, "attempt", x.attempt, 0, INT32_MAX, err) ||
            !IntAs(lf, "offset", x.offset, 0, INT64_MAX, err) || !lf.String("data", x.data, kMaxLogChunkBytes, err)) {
          return false;
        }
        r.logs.push_back(std::move(x));
        return true;
      });
  if (!ok) return out;
  out.value = std::move(r);
  return out;
}

json ToJson(const AgentReply& r) {
  json tasks = json::array();
  for (const TaskOrder& t : r.tasks) {
    // The task object keeps its first keys (an older agent refuses others):
    // the container fields travel beside it.
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
    tasks.push_back(std::move(x));
  }
  json scrubs = json::array();
  for (const ScrubOrder& s : r.scrubs) scrubs.push_back(json{{"id", s.id}, {"gpus", s.gpus}});
  json logs = json::array();
  for (const LogAck& l : r.logs) {
    logs.push_back(json{{"job", l.job}, {"replica", l.replica}, {"attempt", l.attempt}, {"bytes", l.bytes}});
  }
  json out{{"node_index", r.node_index},
           {"session", r.session},
           {"heartbeat_interval_ms", r.heartbeat_interval_ms},
           {"fence_after_ms", r.fence_after_ms},
           {"tasks", std::move(tasks)},
           {"scrubs", std::move(scrubs)},
           {"logs", std::move(logs)}};
  if (!r.pool.empty()) out["pool"] = r.pool;  // an older agent refuses the key
  return out;
}

ApiResult<AgentReply> ParseAgentReply(const json& j) {
  ApiResult<AgentReply> out;
  ApiError* err = &out.error;
  AgentReply r;
  FieldReader f;
  if (!FieldReader::Open(j, "", {"node_index", "session", "heartbeat_interval_ms", "fence_after_ms", "tasks", "scrubs",
                                 "logs", "pool"},
                         &f, err) ||
      !IntAs(f, "node_index", r.node_index, 0, INT32_MAX, err) || !f.String("session", r.session, 128, err) ||
      !f.String("pool", r.pool, 253, err) ||
      !IntAs(f, "heartbeat_interval_ms", r.heartbeat_interval_ms, 1, 86'400'000, err) ||
      !IntAs(f, "fence_after_ms", r.fence_after_ms, 0, INT64_MAX, err)) {
    return out;
  }
  const bool ok =
      Each(f, "tasks", err,
           [&](const json& t, const std::string& path) {
             TaskOrder x;
             FieldReader tf;
             std::string action;
             if (!FieldReader::Open(t, path, {"job", "replica", "attempt", "name", "tenant", "action", "idle_notice",
                                              "gpus", "gpu_mode", "gpu_milli", "gpu_memory_mib", "mig_profile",
                                              "mig_start", "task", "image", "shm_mib", "network_isolated",
                                              "memory_mib", "cpu_milli", "uid", "uid_count"},
                                    &tf, err) ||
                 !tf.Require("job", err) || !IntAs(tf, "job", x.job, 1, INT64_MAX, err) ||
                 !IntAs(tf, "replica", x.replica, 0, INT32_MAX, err) ||
                 !IntAs(tf, "attempt", x.attempt, 0, INT32_MAX, err) || !tf.String("name", x.name, 253, err) ||
                 !tf.String("tenant", x.tenant, 63, err) || !tf.String("action", action, 16, err) ||
                 !tf.Bool("idle_notice", x.idle_notice, err) || !IntList(tf, "gpus", x.gpus, kMaxGpuIndex, err) ||
                 !tf.String("gpu_mode", x.gpu_mode, 16, err) || !IntAs(tf, "gpu_milli", x.gpu_milli, 0, 1000, err) ||
                 !IntAs(tf, "gpu_memory_mib", x.gpu_memory_mib, 0, kMaxMib, err) ||
                 !tf.String("mig_profile", x.mig_profile, 32, err) || !IntAs(tf, "mig_start", x.mig_start, 0, 63, err) ||
                 !tf.String("image", x.image, kMaxImageBytes, err) ||
                 !IntAs(tf, "shm_mib", x.shm_mib, 1, kMaxShmMib, err) ||
                 !tf.Bool("network_isolated", x.network_isolated, err) ||
                 !IntAs(tf, "memory_mib", x.memory_mib, 0, kMaxMib, err) ||
                 !IntAs(tf, "cpu_milli", x.cpu_milli, 0, kMaxCpuMilli, err) ||
                 !IntAs(tf, "uid", x.uid, 0, kMaxUid, err) || !IntAs(tf, "uid_count", x.uid_count, 0, kMaxUid, err)) {
               return false;
             }
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
             if (action != "run" && action != "checkpoint") {
               *err = BadField(path + ".action", "unknown action '" + action + "' (known: run, checkpoint)");
               return false;
             }
             x.action = action == "run" ? TaskAction::kRun : TaskAction::kCheckpoint;
             if (const json* task = tf.Find("task"); !task || !ReadTaskSpec(*task, path + ".task", x.task, err)) {
               if (!task) *err = BadField(path + ".task", "missing");
               return false;
             }
             r.tasks.push_back(std::move(x));
             return true;
           }) &&
      Each(f, "scrubs", err,
           [&](const json& s, const std::string& path) {
             ScrubOrder x;
             FieldReader sf;
             if (!FieldReader::Open(s, path, {"id", "gpus"}, &sf, err) || !sf.Require("id", err) ||
                 !IntAs(sf, "id", x.id, 1, INT64_MAX, err) || !IntList(sf, "gpus", x.gpus, kMaxGpuIndex, err)) {
               return false;
             }
             r.scrubs.push_back(std::move(x));
             return true;
           }) &&
      Each(f, "logs", err, [&](const json& l, const std::string& path) {
        LogAck x;
        FieldReader lf;
        if (!FieldReader::Open(l, path, {"job", "replica", "attempt", "bytes"}, &lf, err) ||
            !IntAs(lf, "job", x.job, 1, INT64_MAX, err) || !IntAs(lf, "replica", x.replica, 0, INT32_MAX, err) ||
            !IntAs(lf, "attempt", x.attempt, 0, INT32_MAX, err) || !IntAs(lf, "bytes", x.bytes, 0, INT64_MAX, err)) {
          return false;
        }
        r.logs.push_back(std::move(x));
        return true;
      });
  if (!ok) return out;
  out.value = std::move(r);
  return out;
}

}  // namespace gpupool

namespace gpupool {

std::string SanitizeUtf8(std::string_view b) {
  std::string out(b);
  size_t i = 0;
  const size_t n = out.size();
  while (i < n) {
    const auto c = static_cast<unsigned char>(out[i]);
    int len = c < 0x80 ? 1 : (c >> 5) == 0x6 ? 2 : (c >> 4) == 0xe ? 3 : (c >> 3) == 0x1e ? 4 : 0;
    if (len == 0 || (len == 2 && c < 0xc2) || (len == 4 && c > 0xf4)) {
      out[i++] = '?';
      continue;
    }
    if (len == 1) {
      ++i;
      continue;
    }
    if (i + len > n) {  // incomplete at the end: leave it for the next chunk, unless it is already invalid
      bool prefix_ok = true;
      for (size_t k = i + 1; k < n; ++k) prefix_ok = prefix_ok && (static_cast<unsigned char>(out[k]) >> 6) == 0x2;
      if (prefix_ok) {
        out.resize(i);
        return out;
      }
    }
    bool ok = i + len <= n;
    for (int k = 1; ok && k < len; ++k) ok = (static_cast<unsigned char>(out[i + k]) >> 6) == 0x2;
    if (ok && len == 3) {
      const auto c1 = static_cast<unsigned char>(out[i + 1]);
      ok = !(c == 0xe0 && c1 < 0xa0) && !(c == 0xed && c1 >= 0xa0);  // overlong, surrogates
    }
    if (ok && len == 4) {
      const auto c1 = static_cast<unsigned char>(out[i + 1]);
      ok = !(c == 0xf0 && c1 < 0x90) && !(c == 0xf4 && c1 >= 0x90);
    }
    if (!ok) {
      out[i++] = '?';
      continue;
    }
    i += len;
  }
  return out;
}

}  // namespace gpupool
