#include "src/api/agent_protocol.h"

#include <cstdint>
#include <string_view>

#include "src/api/agent_wire.h"

namespace gpupool {

using namespace agent_wire;  // the items' readers and writers

namespace {

// The protocol an agent names: absent means 1 (older than the field).
bool ReadProtocol(const FieldReader& f, int& out, ApiError* err) {
  out = 1;
  return IntAs(f, "protocol", out, 1, 1000, err);
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
  json out{{"node", r.node},           {"backend", r.backend},       {"class", r.node_class},
           {"region", r.region},       {"zone", r.zone},             {"rack", r.rack},
           {"cpu_milli", r.cpu_milli}, {"memory_mib", r.memory_mib}, {"gpus", ListJson(r.gpus, GpuJson)},
           {"isolation", r.isolation}, {"metrics_url", r.metrics_url}};
  if (r.protocol >= 2) out["protocol"] = r.protocol;  // a server of protocol 1 refuses the key
  return out;
}

ApiResult<RegisterRequest> ParseRegisterRequest(const json& j, UnknownKeys u) {
  ApiResult<RegisterRequest> out;
  ApiError* err = &out.error;
  RegisterRequest r;
  FieldReader f;
  if (!FieldReader::Open(j, "", {"node", "backend", "class", "region", "zone", "rack", "cpu_milli", "memory_mib",
                                 "gpus", "isolation", "metrics_url", "protocol"},
                         &f, err, u) ||
      !ReadProtocol(f, r.protocol, err) || !f.Require("node", err) || !f.String("node", r.node, 253, err) ||
      !f.String("backend", r.backend, 16, err) || !f.String("class", r.node_class, 63, err) ||
      !f.String("region", r.region, 63, err) || !f.String("zone", r.zone, 63, err) ||
      !f.String("rack", r.rack, 63, err) || !f.Require("cpu_milli", err) ||
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
  if (!ReadList(f, "gpus", r.gpus, err, u, ReadGpu)) return out;
  out.value = std::move(r);
  return out;
}

json ToJson(const HeartbeatRequest& r) {
  json gpus = json::array();
  for (const GpuSample& g : r.gpus) gpus.push_back(GpuSampleJson(g, r.mig));
  json out{{"node", r.node},
           {"session", r.session},
           {"gpus", std::move(gpus)},
           {"tasks", ListJson(r.tasks, TaskReportJson)},
           {"scrubs", ListJson(r.scrubs, ScrubReportJson)},
           {"logs", ListJson(r.logs, LogChunkJson)}};
  if (r.protocol >= 2) out["protocol"] = r.protocol;
  return out;
}

ApiResult<HeartbeatRequest> ParseHeartbeatRequest(const json& j, UnknownKeys u) {
  ApiResult<HeartbeatRequest> out;
  ApiError* err = &out.error;
  HeartbeatRequest r;
  FieldReader f;
  if (!FieldReader::Open(j, "", {"node", "session", "gpus", "tasks", "scrubs", "logs", "protocol"}, &f, err, u) ||
      !ReadProtocol(f, r.protocol, err) || !f.Require("node", err) || !f.String("node", r.node, 253, err) ||
      !f.Require("session", err) || !f.String("session", r.session, 128, err)) {
    return out;
  }
  const bool ok = Each(f, "gpus", err,
                       [&](const json& g, const std::string& path) {
                         GpuSample s;
                         if (!ReadGpuSample(g, path, s, r.mig, err, u)) return false;
                         r.gpus.push_back(std::move(s));
                         return true;
                       }) &&
                  ReadList(f, "tasks", r.tasks, err, u, ReadTaskReport) &&
                  ReadList(f, "scrubs", r.scrubs, err, u, ReadScrubReport) &&
                  ReadList(f, "logs", r.logs, err, u, ReadLogChunk);
  if (!ok) return out;
  out.value = std::move(r);
  return out;
}

json ToJson(const AgentReply& r) {
  json out{{"node_index", r.node_index},
           {"session", r.session},
           {"heartbeat_interval_ms", r.heartbeat_interval_ms},
           {"fence_after_ms", r.fence_after_ms},
           {"logs", ListJson(r.logs, LogAckJson)}};
  if (r.has_desired) {
    out["tasks"] = ListJson(r.tasks, TaskOrderJson);
    out["scrubs"] = ListJson(r.scrubs, ScrubOrderJson);
  }
  if (!r.pool.empty()) out["pool"] = r.pool;  // an older agent refuses the key
  if (r.protocol > 0) {  // protocol 2's fields: never to an agent of protocol 1
    out["protocol"] = r.protocol;
    out["incarnation"] = r.incarnation;
    out["revision"] = r.revision;
  }
  return out;
}

ApiResult<AgentReply> ParseAgentReply(const json& j, UnknownKeys u) {
  ApiResult<AgentReply> out;
  ApiError* err = &out.error;
  AgentReply r;
  FieldReader f;
  if (!FieldReader::Open(j, "", {"node_index", "session", "heartbeat_interval_ms", "fence_after_ms", "tasks", "scrubs",
                                 "logs", "pool", "protocol", "incarnation", "revision"},
                         &f, err, u) ||
      !IntAs(f, "node_index", r.node_index, 0, INT32_MAX, err) || !f.String("session", r.session, 128, err) ||
      !f.String("pool", r.pool, 253, err) ||
      !IntAs(f, "heartbeat_interval_ms", r.heartbeat_interval_ms, 1, 86'400'000, err) ||
      !IntAs(f, "fence_after_ms", r.fence_after_ms, 0, INT64_MAX, err) || !IntAs(f, "protocol", r.protocol, 0, 1000, err) ||
      !f.String("incarnation", r.incarnation, 128, err) || !IntAs(f, "revision", r.revision, 0, INT64_MAX, err)) {
    return out;
  }
  // Protocol 2's heartbeat replies carry no desired state (the watch does).
  r.has_desired = f.Has("tasks") || r.protocol < 2;
  const bool ok = ReadList(f, "tasks", r.tasks, err, u, ReadTaskOrder) &&
                  ReadList(f, "scrubs", r.scrubs, err, u, ReadScrubOrder) &&
                  ReadList(f, "logs", r.logs, err, u, ReadLogAck);
  if (!ok) return out;
  out.value = std::move(r);
  return out;
}

json ToJson(const WatchRequest& r) {
  return json{{"protocol", r.protocol},         {"node", r.node},         {"session", r.session},
              {"incarnation", r.incarnation},   {"revision", r.revision}, {"wait_ms", r.wait_ms}};
}

ApiResult<WatchRequest> ParseWatchRequest(const json& j, UnknownKeys u) {
  ApiResult<WatchRequest> out;
  ApiError* err = &out.error;
  WatchRequest r;
  FieldReader f;
  if (!FieldReader::Open(j, "", {"protocol", "node", "session", "incarnation", "revision", "wait_ms"}, &f, err, u) ||
      !ReadProtocol(f, r.protocol, err) || !f.Require("node", err) || !f.String("node", r.node, 253, err) ||
      !f.Require("session", err) || !f.String("session", r.session, 128, err) ||
      !f.String("incarnation", r.incarnation, 128, err) || !IntAs(f, "revision", r.revision, 0, INT64_MAX, err) ||
      !IntAs(f, "wait_ms", r.wait_ms, 0, 3'600'000, err)) {
    return out;
  }
  out.value = std::move(r);
  return out;
}

json ToJson(const WatchReply& r) {
  json out{{"incarnation", r.incarnation}, {"revision", r.revision}, {"changed", r.changed}};
  if (!r.changed) return out;
  out["full"] = r.full;
  out["since"] = r.since;
  out["session"] = r.session;
  out["heartbeat_interval_ms"] = r.heartbeat_interval_ms;
  out["fence_after_ms"] = r.fence_after_ms;
  if (!r.pool.empty()) out["pool"] = r.pool;
  out["tasks"] = ListJson(r.tasks, TaskOrderJson);
  out["task_keys"] = ListJson(r.task_keys, TaskRefJson);
  out["scrubs"] = ListJson(r.scrubs, ScrubOrderJson);
  return out;
}

ApiResult<WatchReply> ParseWatchReply(const json& j, UnknownKeys u) {
  ApiResult<WatchReply> out;
  ApiError* err = &out.error;
  WatchReply r;
  FieldReader f;
  if (!FieldReader::Open(j, "", {"incarnation", "revision", "changed", "full", "since", "session", "pool",
                                 "heartbeat_interval_ms", "fence_after_ms", "tasks", "task_keys", "scrubs"},
                         &f, err, u) ||
      !f.Require("incarnation", err) || !f.String("incarnation", r.incarnation, 128, err) ||
      !f.Require("revision", err) || !IntAs(f, "revision", r.revision, 0, INT64_MAX, err) ||
      !f.Bool("changed", r.changed, err) || !f.Bool("full", r.full, err) ||
      !IntAs(f, "since", r.since, 0, INT64_MAX, err) || !f.String("session", r.session, 128, err) ||
      !f.String("pool", r.pool, 253, err) ||
      !IntAs(f, "heartbeat_interval_ms", r.heartbeat_interval_ms, 1, 86'400'000, err) ||
      !IntAs(f, "fence_after_ms", r.fence_after_ms, 0, INT64_MAX, err) ||
      !ReadList(f, "tasks", r.tasks, err, u, ReadTaskOrder) ||
      !ReadList(f, "task_keys", r.task_keys, err, u, ReadTaskRef) ||
      !ReadList(f, "scrubs", r.scrubs, err, u, ReadScrubOrder)) {
    return out;
  }
  out.value = std::move(r);
  return out;
}

json ToJson(const TaskReportRequest& r) {
  return json{{"protocol", r.protocol},
              {"node", r.node},
              {"session", r.session},
              {"tasks", ListJson(r.tasks, TaskReportJson)},
              {"scrubs", ListJson(r.scrubs, ScrubReportJson)},
              {"logs", ListJson(r.logs, LogChunkJson)}};
}

ApiResult<TaskReportRequest> ParseTaskReportRequest(const json& j, UnknownKeys u) {
  ApiResult<TaskReportRequest> out;
  ApiError* err = &out.error;
  TaskReportRequest r;
  FieldReader f;
  if (!FieldReader::Open(j, "", {"protocol", "node", "session", "tasks", "scrubs", "logs"}, &f, err, u) ||
      !ReadProtocol(f, r.protocol, err) || !f.Require("node", err) || !f.String("node", r.node, 253, err) ||
      !f.Require("session", err) || !f.String("session", r.session, 128, err) ||
      !ReadList(f, "tasks", r.tasks, err, u, ReadTaskReport) ||
      !ReadList(f, "scrubs", r.scrubs, err, u, ReadScrubReport) || !ReadList(f, "logs", r.logs, err, u, ReadLogChunk)) {
    return out;
  }
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
