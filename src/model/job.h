// Jobs: what a tenant submits (JobSpec) and what the engine tracks (Job).
//
// A job is a gang of `replicas` identical replicas (all placed together or
// none), each asking for `demand`. Time fields are on the engine timeline
// (src/base/time.h).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "src/base/time.h"
#include "src/model/cluster.h"
#include "src/model/demand.h"

namespace gpupool {

using JobId = int64_t;
using TenantId = int32_t;
using PoolId = uint8_t;

enum class JobKind : uint8_t {
  kTraining,         // long, compute-bound, often gangs; checkpointable
  kOnlineInference,  // long-lived, latency-sensitive services
  kBatchInference,   // throughput jobs with deadlines
  kDevelopment,      // notebooks and debugging sessions
  kCpu,              // CPU-only work (data preparation, ...)
};
inline constexpr int kJobKindCount = 5;
const char* JobKindName(JobKind k);
std::optional<JobKind> JobKindFromName(std::string_view name);
template <>
struct EnumNames<JobKind> {
  static constexpr int kCount = kJobKindCount;
  static const char* Name(JobKind k) { return JobKindName(k); }
};

enum class JobState : uint8_t {
  kPending,        // queued
  kRunning,        // every replica placed
  kCheckpointing,  // being preempted: saving state, still holding resources
  kSucceeded,
  kFailed,
  kCancelled,
  kRejected,       // could never fit; never queued
  kEvicted,        // reclaimed while idle, or stopped past its deadline (checkpointed first)
};
const char* JobStateName(JobState s);
inline bool IsTerminal(JobState s) { return s >= JobState::kSucceeded; }

// Labels for affinity rules, interned by the engine; at most 64 per job set.
using LabelMask = uint64_t;

// What each replica runs on its node (OPS-1): a child process that the
// node's agent starts, signals and stops. Empty for simulated jobs.
struct TaskSpec {
  std::vector<std::string> command;                      // argv; command[0] is looked up on PATH
  std::vector<std::pair<std::string, std::string>> env;  // by name, ascending, unique
  std::string working_dir;                               // empty: the agent's directory for the task
  int32_t checkpoint_signal = 10;                        // asks the task to checkpoint (SIGUSR1)
  Duration checkpoint_timeout = std::chrono::seconds(60);  // wait this long for its acknowledgement
  Duration stop_grace = std::chrono::seconds(10);          // SIGTERM, then SIGKILL after this
  // The container (EXEC-1..6): its root file system ("host" or an absolute
  // path to an image on the node; empty: not given), /dev/shm size, and
  // whether it gets a network namespace of its own.
  std::string image;
  int64_t shm_mib = 1024;
  bool network_isolated = false;
  bool empty() const { return command.empty(); }
  friend bool operator==(const TaskSpec&, const TaskSpec&) = default;

  // The journal's names (src/base/fields.h). The container's fields are
  // written only away from their defaults: journals written before them
  // keep their text.
  GP_FIELDS(t) {
    v("command", t.command);
    v("env", t.env);
    v("working_dir", t.working_dir);
    v("checkpoint_signal", t.checkpoint_signal);
    v("checkpoint_timeout_ms", t.checkpoint_timeout);
    v("stop_grace_ms", t.stop_grace);
    v("image", t.image, !t.image.empty());
    v("shm_mib", t.shm_mib, t.shm_mib != TaskSpec{}.shm_mib);
    v("network_isolated", t.network_isolated, t.network_isolated);
    v.Check(!t.command.empty(), "command", "must not be empty");
  }
};

struct JobSpec {
  std::string name;  // free text for humans; need not be unique
  TenantId tenant = -1;
  JobKind kind = JobKind::kTraining;
  int32_t priority = 0;              // higher runs first (within a tenant)
  std::optional<Instant> deadline;   // earlier runs first among equal priority
  int32_t replicas = 1;              // gang size (of an elastic job: its size now)
  // SCALE-7 elastic training: a job with max_replicas > 0 is elastic. It
  // starts as a gang of min_replicas, grows toward max_replicas onto free
  // capacity nobody queued needs, and shrinks (never below min_replicas)
  // off nodes that leave or fail and for queued work, each time with a
  // checkpoint-and-reshard step instead of a restart (JobResized).
  int32_t min_replicas = 0;
  int32_t max_replicas = 0;
  Demand demand;                     // per replica (allowed_pools is set by the engine)
  // A pipeline (PART-4): one replica per stage, each with its own demand,
  // all placed together on one node. Empty for an ordinary job. The stages'
  // constraints (pools, models, requirement) are taken from `demand`.
  std::vector<Demand> stages;
  std::vector<PoolId> pools;         // candidate pools; empty = every pool of the tenant's virtual pool
  // Sharing (PART-3): let the engine's mode policy choose how this job uses
  // GPUs (whole, time-slice, MPS or MIG) from its kind, GPU memory need
  // (demand.gpu_memory_mib) and expected duration.
  bool auto_sharing = false;
  std::optional<Duration> expected_duration;
  bool checkpointable = false;
  Duration checkpoint_interval{0};   // periodic checkpoints while running (0 = none)
  Duration checkpoint_duration{0};   // time to take a checkpoint when preempted
  LabelMask labels = 0;              // this job's labels
  LabelMask affinity = 0;            // must land on nodes running a job with one of these labels
  LabelMask anti_affinity = 0;       // must not land on nodes running a job with one of these labels
  TaskSpec task;                     // what runs (servers with agents); empty in simulations

  bool is_pipeline() const { return !stages.empty(); }
  bool elastic() const { return max_replicas > 0; }
  // Replica i's demand: the job's demand, or stage i's resources with the
  // job's constraints.
  Demand replica_demand(int i) const {
    if (stages.empty()) return demand;
    Demand d = stages[i];
    d.allowed_models = demand.allowed_models;
    d.allowed_pools = demand.allowed_pools;
    d.requirement = demand.requirement;
    d.reservation = demand.reservation;
    return d;
  }
  int64_t total_gpu_milli() const {
    if (stages.empty()) return int64_t{replicas} * demand.total_gpu_milli();
    int64_t sum = 0;
    for (const Demand& d : stages) sum += d.total_gpu_milli();
    return sum;
  }
  int64_t total_cpu_milli() const {
    if (stages.empty()) return int64_t{replicas} * demand.cpu_milli;
    int64_t sum = 0;
    for (const Demand& d : stages) sum += d.cpu_milli;
    return sum;
  }
  int64_t total_memory_mib() const {
    if (stages.empty()) return int64_t{replicas} * demand.memory_mib;
    int64_t sum = 0;
    for (const Demand& d : stages) sum += d.memory_mib;
    return sum;
  }

  // The journal's names (src/base/fields.h). The optional ones are written
  // only when they say something, so that simulation logs keep their text.
  GP_FIELDS(s) {
    v("name", s.name);
    v("tenant", s.tenant);
    v("kind", s.kind);
    v("priority", s.priority);
    v("replicas", s.replicas);
    v("demand", s.demand);
    v("pools", s.pools);
    v("checkpointable", s.checkpointable);
    v("auto_sharing", s.auto_sharing);
    v("checkpoint_interval_ms", s.checkpoint_interval);
    v("checkpoint_duration_ms", s.checkpoint_duration);
    v("labels", s.labels);
    v("affinity", s.affinity);
    v("anti_affinity", s.anti_affinity);
    v("deadline_ms", s.deadline);
    v("min_replicas", s.min_replicas, s.elastic());
    v("max_replicas", s.max_replicas, s.elastic());
    v("expected_duration_ms", s.expected_duration);
    v("stages", s.stages, !s.stages.empty());
    v("task", s.task, !s.task.empty());  // only for jobs that run something
  }
};

// Sets Demand::mps_tenant of the spec's demand and stages: the job's tenant
// for MPS shares, -1 for everything else. Idempotent; the engine applies it
// to every spec it takes in (submission, replay, snapshot).
void ScopeMpsShares(JobSpec& spec);
// Sets the gpu_milli of the spec's MIG shares (demand and stages) to what
// they are charged: MigChargedMilli (src/model/mig.h), over the models the
// job allows among `present` (the MIG-capable models of the pools it may
// use). The engine applies it at submission.
void ChargeMigAsSlices(JobSpec& spec, GpuModelMask present);

struct ReplicaPlacement {
  NodeIndex node = -1;
  GpuMask gpus = 0;
  AllocationId allocation = -1;
  // The replica's identity for its whole run: 0..n-1 when the job is
  // placed, then Job::next_replica_id for each one a resize adds. It never
  // shifts when another replica leaves (the placement's index may), so a
  // surviving replica's task is never restarted by a resize.
  int32_t id = 0;
};

struct Job {
  JobId id = -1;
  JobSpec spec;
  JobState state = JobState::kPending;
  Instant submitted{};
  Instant queued_since{};             // last time it (re-)entered the queue
  Instant started{};                  // start of the current run
  std::optional<Instant> first_started;
  PoolId pool = 0;                    // where it runs (valid while running)
  bool borrowed = false;              // runs (partly) beyond its tenant's guarantee: preemptible
  std::vector<ReplicaPlacement> placements;
  int32_t preemptions = 0;
  JobId preempted_by = -1;            // while checkpointing: who it makes room for
  int32_t victims_pending = 0;        // victims still checkpointing to make room for this job
  // Why it is checkpointing: it was preempted (and will queue again), or it
  // is being reclaimed (idle) or evicted (past its deadline) and will end.
  enum class Stop : uint8_t { kNone, kPreempt, kReclaimIdle, kEvictDeadline } stopping = Stop::kNone;
  bool idle_suspected = false;        // RECLAIM-1: the tenant has been notified
  Instant idle_since{};               // when it was suspected
  int32_t interruptions = 0;          // node failures it lived through
  int32_t resizes = 0;                // SCALE-7: JobResized events of its current run
  int32_t next_replica_id = 0;        // the id the next added replica gets (ReplicaPlacement::id)
  Instant resharding_until{};         // SCALE-7: after its last resize, computing resumes then
};

}  // namespace gpupool
