// The agent protocol (docs/agent.md): JSON bodies of the agent endpoints.
//
//   POST /v1/agent/register   RegisterRequest  -> AgentReply
//   POST /v1/agent/heartbeat  HeartbeatRequest -> AgentReply
//
// Both are authenticated with the node's token (POST /v1/nodes/{name}/token)
// and answered only once everything they caused is durable. Every reply
// carries the node's desired state in full (the tasks that should run
// there, with what each should do, and the scrubs to perform), so a lost
// message or an agent restart heals at the next heartbeat. A reply also
// acknowledges every report of the request it answers; an agent keeps
// reporting the final state of a task for as long as the task is desired.
//
// Parsing is strict (unknown fields are errors) and every error names the
// field as a JSON path, on both sides. Fields added later are optional (a
// missing one takes its default) and the server sends an agent only the
// fields its registration showed it knows, so a server may be upgraded
// before its agents (issue 14's fields: RegisterRequest.isolation, the
// container fields of TaskOrder; issue 15's: RegisterRequest.metrics_url,
// AgentReply.pool).
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "src/api/json_fields.h"
#include "src/model/device.h"
#include "src/model/job.h"

namespace gpupool {

struct RegisterRequest {
  std::string node;
  std::string backend;     // "nvml" or "fake"
  std::string node_class;  // empty: none
  std::string region = "region-1", zone = "zone-1", rack = "rack-1";
  int64_t cpu_milli = 0;
  int64_t memory_mib = 0;
  std::vector<GpuDevice> gpus;
  std::string isolation = "none";  // how its tasks run: "container" (oci runtime) or "none" (plain processes)
  // Set by ParseRegisterRequest when the body has "isolation" (ToJson always
  // writes it): an agent that knows TaskOrder's container fields. An older
  // agent's registration has no such key, and its replies get none of them
  // (its parser refuses fields it does not know).
  bool isolation_given = false;
  // Where the agent serves its DCGM-named device metrics
  // ("http://node-7:9400/metrics"); empty: no listener (--metrics-listen off).
  std::string metrics_url;
  // Set by ParseRegisterRequest when the body has "metrics_url" (ToJson
  // always writes it): an agent that knows AgentReply.pool. An older one's
  // replies carry no pool.
  bool metrics_url_given = false;
};

enum class TaskPhase : uint8_t {
  kRunning,       // its process runs
  kExited,        // its process exited by itself (exit_code, signal)
  kCheckpointed,  // it was asked to checkpoint and acknowledged (or the wait timed out)
  kStartFailed,   // its process could not be started (error)
};
const char* TaskPhaseName(TaskPhase p);

struct TaskReport {
  JobId job = -1;
  int32_t replica = 0;
  int32_t attempt = 0;
  TaskPhase phase = TaskPhase::kRunning;
  int32_t pid = 0;
  int32_t exit_code = 0;         // kExited
  int32_t signal = 0;            // kExited: the signal that ended it, 0 if none
  bool checkpoint_acked = false; // kCheckpointed: false when the wait timed out
  std::string error;             // kStartFailed: why; kExited: what the node knows (e.g. "out of memory (limit 2 GiB)")
  double util_pct = -1;          // kRunning: GPU utilization since the last report; -1 unknown
  int64_t gpu_memory_mib = 0;
};

struct ScrubReport {
  int64_t id = 0;  // the ScrubOrder's id
  bool ok = true;
  int64_t bytes = 0;
  double seconds = 0;
  std::string error;
};

// New bytes of a task's log (stdout and stderr), from `offset`.
struct LogChunk {
  JobId job = -1;
  int32_t replica = 0;
  int32_t attempt = 0;
  int64_t offset = 0;
  std::string data;
};

struct HeartbeatRequest {
  std::string node;
  std::string session;  // from the registration's reply: one agent per node
  std::vector<GpuSample> gpus;  // processes are not sent
  std::vector<TaskReport> tasks;
  std::vector<ScrubReport> scrubs;
  std::vector<LogChunk> logs;
  // Per GPU index in MIG mode, its MIG instances now (uuid, profile, start,
  // memory_mib), carried as the optional "mig" of that GPU's sample; GPUs
  // not in MIG mode have none. Issue 15's field: absent from older agents.
  std::map<int, std::vector<MigInstance>> mig;
};

enum class TaskAction : uint8_t {
  kRun,         // start it (once per attempt) and keep it running
  kCheckpoint,  // ask it to checkpoint (once per attempt), then report kCheckpointed
};

struct TaskOrder {
  JobId job = -1;
  int32_t replica = 0;
  int32_t attempt = 0;  // 1 + the job's earlier placements; a new attempt is a new process
  std::string name, tenant;
  TaskAction action = TaskAction::kRun;
  bool idle_notice = false;  // the job looks idle and will be reclaimed unless it gets busy
  std::vector<int> gpus;     // GPU indexes on the node
  std::string gpu_mode;      // "whole", "time-slice", "mps", "mig" or "none" (CPU only)
  int32_t gpu_milli = 0;     // per GPU
  int64_t gpu_memory_mib = 0;  // per GPU, for MPS limits; 0 = unset
  std::string mig_profile;     // "mig": the instance's profile and first memory slice
  int32_t mig_start = 0;
  TaskSpec task;
  // The container (EXEC-1..6; an agent without one ignores them). On the
  // wire each is written only when it differs from its default, and a
  // missing one takes its default, so either side may be older; an agent
  // that registered without "isolation" gets none of them.
  std::string image;              // "host" or a path on the node; empty (an older server): the host's
  int64_t shm_mib = 1024;         // /dev/shm
  bool network_isolated = false;  // a network namespace of its own
  int64_t memory_mib = 0;         // the replica's memory: a hard limit; 0 = none
  int64_t cpu_milli = 0;          // the replica's CPU: a quota; 0 = none
  int64_t uid = 0;                // host uid and gid of the container's root (the tenant's range)
  int64_t uid_count = 0;          // the range's size; 0 = no user namespace
};

struct ScrubOrder {
  int64_t id = 0;  // the GpusScrubbed event's seq
  std::vector<int> gpus;
};

struct LogAck {
  JobId job = -1;
  int32_t replica = 0, attempt = 0;
  int64_t bytes = 0;  // what the server holds; the next chunk starts here
};

struct AgentReply {
  int32_t node_index = -1;
  // Names this agent's registration. A heartbeat with another session than
  // the node's latest is refused (409): a second agent registered for the
  // node, and only the latest may act for it.
  std::string session;
  int64_t heartbeat_interval_ms = 5000;
  // Without a successful heartbeat for this long, the agent stops its tasks:
  // the server has marked the node down and placed them elsewhere (0: never).
  int64_t fence_after_ms = 0;
  std::vector<TaskOrder> tasks;
  std::vector<ScrubOrder> scrubs;
  std::vector<LogAck> logs;
  // The node's pool, for the `pool` label of the agent's metrics. Written
  // only when non-empty, which the server leaves it for an agent that
  // registered without "metrics_url"; missing: empty.
  std::string pool;
};

nlohmann::json ToJson(const RegisterRequest& r);
nlohmann::json ToJson(const HeartbeatRequest& r);
nlohmann::json ToJson(const AgentReply& r);
ApiResult<RegisterRequest> ParseRegisterRequest(const nlohmann::json& j);
ApiResult<HeartbeatRequest> ParseHeartbeatRequest(const nlohmann::json& j);
ApiResult<AgentReply> ParseAgentReply(const nlohmann::json& j);

// Log bytes as a JSON string can carry them: every byte of an invalid
// UTF-8 sequence becomes '?', so the length is unchanged. An incomplete
// sequence at the very end is cut off (it is sent with the next chunk);
// the result may therefore be up to 3 bytes shorter than `bytes`.
std::string SanitizeUtf8(std::string_view bytes);

}  // namespace gpupool
