// The agent protocol (docs/agent.md): JSON bodies of the agent endpoints.
//
//   POST /v1/agent/register   RegisterRequest   -> AgentReply (the whole desired state)
//   POST /v1/agent/heartbeat  HeartbeatRequest  -> AgentReply
//   POST /v1/agent/watch      WatchRequest      -> WatchReply (protocol 2)
//   POST /v1/agent/report     TaskReportRequest -> AgentReply without desired state (protocol 2)
//
// All are authenticated with the node's token (POST /v1/nodes/{name}/token)
// and answered only once everything they caused is durable.
//
// Versions (`protocol`): 1 is the protocol of agents older than the field:
// every reply carries the node's whole desired state (the tasks that should
// run there, with what each should do, and the scrubs to perform), so a
// lost message or an agent restart heals at the next heartbeat. 2 adds the
// watch: the agent holds one request that the server answers as soon as the
// node's desired state changes, with a revision (src/server/watch_hub.h),
// and reports task starts and exits at once (`report`); heartbeats keep
// health, utilization, logs and liveness, and their replies carry no
// desired state. A server accepts agents of its version and the one before
// (kOldestAgentProtocol); an agent speaks the server's version when it is
// older (the registration's reply says it). A reply acknowledges every
// report of the request it answers; an agent keeps reporting the final
// state of a task for as long as the task is desired.
//
// Unknown fields are ignored on both sides (UnknownKeys::kIgnore, the
// default here; unlike the API's requests), so that either side may be
// newer. An agent of protocol 1 refused them: the server sends such an
// agent only the fields its registration showed it knows (issue 14's
// RegisterRequest.isolation and TaskOrder's container fields; issue 15's
// RegisterRequest.metrics_url and AgentReply.pool; issue 18's fields go
// only to protocol 2). Every error names the field as a JSON path.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "src/api/json_fields.h"
#include "src/model/device.h"
#include "src/model/job.h"

namespace gpupool {

// This build's protocol, and the oldest an agent may speak to it.
inline constexpr int kAgentProtocol = 2;
inline constexpr int kOldestAgentProtocol = 1;

struct RegisterRequest {
  int protocol = 1;  // absent: 1 (an agent older than the field)
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
  int protocol = 1;  // absent: 1; 2: the reply carries no desired state (the watch does)
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

// One replica of a job and the node it runs on (TaskOrder::members).
struct ReplicaMember {
  int32_t replica = 0;
  std::string node;
  friend bool operator==(const ReplicaMember&, const ReplicaMember&) = default;
};

struct TaskOrder {
  JobId job = -1;
  // The replica's stable id (ReplicaPlacement::id): it never changes while
  // the replica runs, whatever other replicas join or leave.
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
  // Every replica of the job now (ascending ids) and how many times the job
  // was resized in this run (SCALE-7): the agent gives them to the task at
  // start (GPUPOOL_REPLICAS, GPUPOOL_MEMBERS) and keeps its membership file
  // up to date, without restarting it, when they change. Protocol 2 only
  // (an agent of protocol 1 refuses unknown fields).
  std::vector<ReplicaMember> members;
  int32_t generation = 0;
  friend bool operator==(const TaskOrder&, const TaskOrder&) = default;
};

// Names a task replica's attempt: what the agent keeps its tasks by.
struct TaskRef {
  JobId job = -1;
  int32_t replica = 0, attempt = 0;
  friend auto operator<=>(const TaskRef&, const TaskRef&) = default;
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
  // Protocol 2 only (0 / empty: not written, for an agent of protocol 1):
  // the server's protocol, its incarnation (a run of the server: revisions
  // count within one) and the node's desired-state revision.
  int protocol = 0;
  std::string incarnation;
  int64_t revision = 0;
  // False: the reply carries no desired state (a protocol-2 heartbeat's or
  // report's; on the wire, no "tasks" and no "scrubs"): keep the one held.
  bool has_desired = true;
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

// Protocol 2: a held request for the node's desired state after `revision`.
struct WatchRequest {
  int protocol = kAgentProtocol;
  std::string node, session;
  std::string incarnation;   // of the server that gave `revision`; empty: none yet
  int64_t revision = 0;      // the revision the agent holds (0: none: the whole state is answered)
  int64_t wait_ms = 25000;   // hold at most this long (the server caps it); 0: answer at once
};

// The answer to a watch. With `changed` false nothing changed after the
// watch's revision (the hold ended) and only incarnation and revision are
// set. Otherwise: `tasks` holds every desired task (`full`: a resync, the
// agent replaces what it holds) or those added or changed after `since`;
// `task_keys` names every desired task (one the agent holds and that is
// not named left the desired state), `scrubs` every pending scrub order.
struct WatchReply {
  std::string incarnation;
  int64_t revision = 0;
  bool changed = false;
  bool full = false;
  int64_t since = 0;
  std::string session, pool;
  int64_t heartbeat_interval_ms = 5000;
  int64_t fence_after_ms = 0;
  std::vector<TaskOrder> tasks;
  std::vector<TaskRef> task_keys;
  std::vector<ScrubOrder> scrubs;
};

// Protocol 2: task phases and scrub results as they happen, between
// heartbeats (one request for everything that changed meanwhile), with the
// output not yet uploaded of the tasks that ended (so that a job's logs are
// there when it is seen to end; acknowledged in the reply's `logs`).
struct TaskReportRequest {
  int protocol = kAgentProtocol;
  std::string node, session;
  std::vector<TaskReport> tasks;
  std::vector<ScrubReport> scrubs;
  std::vector<LogChunk> logs;
};

nlohmann::json ToJson(const RegisterRequest& r);
nlohmann::json ToJson(const HeartbeatRequest& r);
nlohmann::json ToJson(const AgentReply& r);
nlohmann::json ToJson(const WatchRequest& r);
nlohmann::json ToJson(const WatchReply& r);
nlohmann::json ToJson(const TaskReportRequest& r);
// `unknown`: kIgnore, the protocol's rule; kRefuse is how agents of
// protocol 1 read replies (tests use it to play one).
ApiResult<RegisterRequest> ParseRegisterRequest(const nlohmann::json& j, UnknownKeys unknown = UnknownKeys::kIgnore);
ApiResult<HeartbeatRequest> ParseHeartbeatRequest(const nlohmann::json& j,
                                                  UnknownKeys unknown = UnknownKeys::kIgnore);
ApiResult<AgentReply> ParseAgentReply(const nlohmann::json& j, UnknownKeys unknown = UnknownKeys::kIgnore);
ApiResult<WatchRequest> ParseWatchRequest(const nlohmann::json& j, UnknownKeys unknown = UnknownKeys::kIgnore);
ApiResult<WatchReply> ParseWatchReply(const nlohmann::json& j, UnknownKeys unknown = UnknownKeys::kIgnore);
ApiResult<TaskReportRequest> ParseTaskReportRequest(const nlohmann::json& j,
                                                    UnknownKeys unknown = UnknownKeys::kIgnore);

// Log bytes as a JSON string can carry them: every byte of an invalid
// UTF-8 sequence becomes '?', so the length is unchanged. An incomplete
// sequence at the very end is cut off (it is sent with the next chunk);
// the result may therefore be up to 3 bytes shorter than `bytes`.
std::string SanitizeUtf8(std::string_view bytes);

}  // namespace gpupool
