// The node agent (OPS-1, RECLAIM-1..4, OPS-4 on the node side): registers
// its node with the server, heartbeats every interval the server gives
// (device health and utilization, per-task utilization, task outcomes,
// scrub results, new log bytes), and converges the node to the desired
// state each reply carries:
//  - a desired task that is not running starts (once per attempt) through
//    the node's task runtime (task_runtime.h: an OCI container by default,
//    a plain child process where no OCI runtime works), with its GPUs in
//    CUDA_VISIBLE_DEVICES (and, in a container, only their device nodes),
//    the MPS limits for MPS shares, and GPUPOOL_* variables, once no
//    pending scrub covers its GPUs and no stopping task holds them; an MPS
//    share's GPU gets its MPS control daemon first (mps_daemons.h), which
//    stops once the GPU's last MPS task is gone and is restarted if it dies;
//  - a task asked to checkpoint gets its checkpoint signal (once per
//    attempt); it acknowledges by creating $GPUPOOL_CHECKPOINT_DIR/ack, and
//    the agent reports the checkpoint once it does, or when it exits, or
//    after the task's checkpoint timeout;
//  - a task that is no longer desired gets SIGTERM, then SIGKILL after its
//    grace period (the whole task); it holds its GPUs until every process
//    of it is gone (its container's cgroup is empty), even after the first
//    one exits;
//  - a task the kernel's OOM killer ended is reported as exited with the
//    reason "out of memory (limit N GiB)";
//  - a scrub order runs (DeviceBackend::Scrub on each GPU; on a GPU in MIG
//    mode, on each of its idle instances by UUID) once no stopping task
//    holds its GPUs, before any task starts on them;
//  - a new attempt of a replica starts only once the previous attempt's
//    processes are gone (they share the replica's checkpoint directory);
//  - an idle notice is appended to $GPUPOOL_NOTICE_FILE when the job looks
//    idle (and a "busy" line when it recovers);
//  - at each heartbeat's sample, whether each GPU is contended (more than
//    one task, or a process of none, busy on it) is written for the CUDA
//    cap (gpu_contention.h, WORK/contention/gpu-N/state, valid for three
//    heartbeat intervals), so that time-sliced shares are held to their
//    compute share only while others want the GPU.
//  - MIG (agent_mig.cc): a task on a MIG instance gets the instance the
//    Engine planned (profile, first memory slice); when the GPU lacks it,
//    the agent destroys the idle instances overlapping that placement
//    (scrubbed first) and creates it, and fails the task with the driver's
//    reason when it cannot (an overlapping instance is in use, the
//    placement is refused). Instances the agent created are destroyed
//    (scrubbed first) once no task holds them; those it found are kept
//    unless a placement needs their slices. MIG mode is never changed.
//    Heartbeats report each MIG GPU's instances as they are.
// Protocol 2 (issue 18, agent_watch.cc; src/api/agent_protocol.h): a
// second thread holds a watch on the server, which answers as soon as the
// node's desired state changes; the main loop applies each answer at once
// (it is woken, and also wakes when a task's first process exits, through
// a pidfd) and reports what changed (a task started, exited, failed to
// start or checkpointed; a scrub done) in one request right away, so a job
// starts and ends in milliseconds. Heartbeats go on at the server's
// interval with samples, utilization, logs and every report again. The
// desired state is held with its revision: an answer that does not follow
// from the revision held (or a server restart) asks for the whole state
// again. Against a server of protocol 1 the agent heartbeats only.
// Reports repeat until the task or order leaves the desired state, so a
// lost reply or a restarted server heals at the next heartbeat. A
// restarted agent re-adopts the containers its predecessor left
// (TaskRuntime::Recover): a desired task keeps running, untouched, and
// one that exited meanwhile reports its exit; containers no desired task
// accounts for are killed and removed once the first reply has come. With
// the process runtime, the predecessor's process groups are killed instead
// and the tasks start again from their checkpoints. Fencing: without a
// successful heartbeat for the time the server gives (its failure-detection
// timeout), the agent stops its tasks, since the server has marked the
// node down and placed them elsewhere. An agent that is stopped (SIGTERM)
// stops its tasks too.
//
// The checkpoint signal goes to the task's first process only: a wrapper
// script should `exec` the program that handles it.
//
// Each heartbeat carries at most kLogBudgetBytes of log, shared among the
// tasks in turn, so that a backlog never makes it too large to accept.
//
// Every action is logged as a JSON line to WORK/agent.log (16 MiB, then it
// becomes agent.log.1) and stderr.
//
// Thread-safety: Run on one thread; Stop from any. Run starts the watch
// thread and joins it before returning.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <map>
#include <mutex>
#include <thread>
#include <memory>
#include <optional>
#include <random>
#include <set>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "src/agent/action_log.h"
#include "src/agent/device_backend.h"
#include "src/agent/gpu_contention.h"
#include "src/agent/task_runtime.h"
#include "src/api/agent_protocol.h"
#include "src/base/client_tls.h"
#include "src/http/tls.h"

namespace httplib {
class Client;
}

namespace gpupool {

struct AgentOptions {
  std::string server_url;  // http://host:port or https://host:port
  std::string token;       // the node token
  // With an https server_url: the CA that signs the server's certificate and
  // the agent's own certificate for mutual TLS (src/base/client_tls.h).
  ClientTls server_tls;
  std::string node;
  std::string node_class, region = "region-1", zone = "zone-1", rack = "rack-1";
  std::string work_dir;         // task directories, logs, agent.log
  std::string checkpoint_root;  // GPUPOOL_CHECKPOINT_DIR = ROOT/job-J/replica-R (shared storage); empty: WORK/checkpoints
  int64_t cpu_milli = 0;        // 0: the machine's
  int64_t memory_mib = 0;       // 0: the machine's
  bool quiet = false;           // no action lines on stderr
  // The task runtime: "oci" (fails at start when runc does not work),
  // "process", or "auto" (oci when a probe container runs, else process
  // with a warning).
  std::string runtime = "auto";
  std::string oci_runtime;       // the runc binary; empty: runc on PATH
  std::string shim;              // gpupool-shim; empty: beside this executable
  int64_t pids_limit = 4096;     // per task container; 0: none
  // Tests only: bind every GPU's device node into each container (the
  // devices cgroup still allows only the task's own).
  bool expose_all_gpu_nodes = false;
  // nvidia-cuda-mps-control; empty: the one on PATH for NVML GPUs, none for
  // fake GPUs (a real daemon cannot serve them; tests name the fake). With
  // none, MPS tasks get their limits in the environment only.
  std::string mps_control;
  // The metrics listener (metrics_listener.h): the DCGM-named device
  // metrics on HOST:PORT (port 0: any free one); metrics_port < 0: none.
  std::string metrics_host;
  int metrics_port = -1;
  std::optional<http::TlsIdentity> metrics_tls;  // none: the metrics listener serves plain HTTP
  // The agent protocol spoken (src/api/agent_protocol.h): kAgentProtocol;
  // 1 plays an agent older than the watch (heartbeats only, and replies
  // read as that agent read them: unknown fields refused), for upgrade tests.
  int protocol = kAgentProtocol;
};

class MetricsListener;
class MpsDaemons;
struct MpsDaemonsOptions;

class Agent {
 public:
  Agent(AgentOptions options, std::unique_ptr<DeviceBackend> backend);
  ~Agent();

  // Runs until Stop. Returns 0 after Stop, or an exit code with the reason
  // logged when the server refuses the agent for good (bad token: 3; a
  // registration the server rejects, or another agent registered for the
  // node since: 4; `runtime: oci` asked for and runc does not work: 5); its
  // tasks are stopped either way.
  int Run();
  void Stop() { stop_ = true; }
  // Starts the metrics listener (once; Run starts it too) and returns its
  // URL, "http://HOST:PORT/metrics" (https with metrics_tls), which the registration carries. A host
  // that names every interface (0.0.0.0, ::, empty) is given as the
  // machine's host name. Fails with "--metrics-listen: cannot listen on ...".
  Result<std::string> StartMetrics();

 private:
  using Key = std::tuple<JobId, int32_t, int32_t>;  // job, replica, attempt
  // A pidfd of a task's first process: readable once it exits (wakes the loop).
  class ExitFd {
   public:
    ExitFd() = default;
    explicit ExitFd(int pid);
    ExitFd(ExitFd&& o) noexcept : fd_(std::exchange(o.fd_, -1)), fired_(o.fired_) {}
    ExitFd& operator=(ExitFd&& o) noexcept;
    ~ExitFd();
    int fd() const { return fired_ ? -1 : fd_; }  // -1: nothing to wait for
    void Fired() { fired_ = true; }
    bool fired() const { return fired_; }

   private:
    int fd_ = -1;
    bool fired_ = false;
  };
  struct LocalTask {
    TaskOrder order;
    std::unique_ptr<RunningTask> proc;
    ExitFd exit_fd;
    // The phase the server last acknowledged (protocol 2's reports send changes).
    std::optional<TaskPhase> reported;
    enum class State { kWaiting, kRunning, kExited, kStartFailed, kStopping, kDone } state = State::kWaiting;
    bool desired = true;
    ExitStatus exit;
    std::string error;
    std::string dir, checkpoint_dir, scratch_dir, log_file, notice_file;
    int64_t log_uploaded = 0;
    // checkpoint
    bool checkpoint_requested = false, checkpoint_done = false, checkpoint_acked = false;
    std::chrono::steady_clock::time_point checkpoint_deadline{};
    // stop
    std::chrono::steady_clock::time_point kill_at{};
    bool killed = false;
    bool notice_written = false;
    std::string mig_uuid;  // the MIG instance it started on
    // The membership its file holds (WriteMembership); generation -1: none yet.
    std::vector<ReplicaMember> members_written;
    int32_t generation_written = -1;
  };

  // SCALE-7: the job's replicas as the task's membership file
  // (<task dir>/membership.json, replaced atomically) when they changed
  // since it was last written; a task that was given no members has none.
  void WriteMembership(LocalTask& t);

  Status Register();
  Status Heartbeat();
  // A reply's settings and log acknowledgements; with a desired state, that too.
  void Apply(const AgentReply& reply);
  void ApplyDesired(const std::vector<TaskOrder>& tasks, const std::vector<ScrubOrder>& scrubs);
  // The task's log bytes not yet uploaded, at most `budget` (and kMaxLogChunk); none: nothing new.
  std::optional<LogChunk> NextLogChunk(const LocalTask& t, int64_t budget) const;
  // What a task's report says now (nothing while it waits to start).
  std::optional<TaskReport> ReportOf(const LocalTask& t, const std::map<std::string, TaskUsage>& usage) const;
  // Protocol 2 (agent_watch.cc).
  void WatchLoop();
  void StartWatch(const AgentReply& registered);
  void StopWatch();
  void TakeWatchAnswers();
  void ApplyWatch(const WatchReply& w);
  void Resync(const std::string& why);
  void ReportChanges();
  void Wake();
  void WaitForWork(std::chrono::milliseconds at_most);
  void Step();  // one convergence pass
  void StartTask(LocalTask& t);
  void BeginStop(LocalTask& t);
  bool GpusBusy(const std::vector<int>& gpus, const LocalTask* except) const;
  bool PreviousAttemptAlive(const LocalTask& t) const;
  void Fence();
  bool ScrubPending(const std::vector<int>& gpus) const;
  void RunScrubs();
  Status ChooseRuntime();
  void Adopt(LocalTask& t);
  void DiscardUnadopted();
  void SetPaths(LocalTask& t) const;
  Result<TaskLaunch> LaunchOf(const LocalTask& t, std::string* visible) const;
  MpsDaemonsOptions MpsOptions();
  Status PrepareMps(const TaskOrder& o, TaskLaunch& l);
  bool MpsInUse(int gpu);
  void ReleaseIdleMps();
  // Decides and writes each GPU's contention signal from this heartbeat's samples.
  void PublishContention(const std::vector<GpuSample>& gpus, const std::map<std::string, TaskUsage>& usage);
  void SaveState() const;
  // MIG lifecycle (agent_mig.cc).
  Result<MigInstance> EnsureMigInstance(const TaskOrder& o, int gpu);
  bool MigInstanceBusy(const MigInstance& m) const;
  bool MigInstanceWanted(int gpu, const MigInstance& m) const;
  Status DestroyMig(int gpu, const MigInstance& m, const std::string& reason);
  void ReleaseIdleMig();
  void RefreshMig(int gpu);
  void LoadMigCreated();
  void SaveMigCreated() const;
  Result<ScrubResult> ScrubGpu(int gpu);
  std::chrono::milliseconds Jittered(std::chrono::milliseconds d);
  void Log(const std::string& action, std::vector<std::pair<std::string, std::string>> fields) const;
  Result<nlohmann::json> Post(const std::string& path, const nlohmann::json& body, int* status);
  void PublishMetrics();  // reads the field set and hands it to the listener

  AgentOptions options_;
  std::unique_ptr<DeviceBackend> backend_;
  std::unique_ptr<TaskRuntime> runtime_;
  std::unique_ptr<MpsDaemons> mps_;  // made in Run
  std::unique_ptr<MetricsListener> metrics_;  // StartMetrics
  std::string metrics_url_;
  std::string pool_;  // from the last reply that named it
  std::string mps_missing_;          // why there is no MPS daemon (logged at the first MPS task)
  std::unique_ptr<GpuContention> contention_;  // WORK/contention
  std::string contention_error_;               // the last write failure logged (logged once per change)
  // Containers a predecessor left, until a reply says which are desired.
  std::map<Key, std::unique_ptr<RunningTask>> adoptable_;
  std::unique_ptr<httplib::Client> http_;
  std::atomic<bool> stop_{false};
  int server_protocol_ = 1;  // from the registration's reply
  bool state_dirty_ = false;  // a task started or exited: SaveState at the end of the pass
  // The desired state held (protocol 2): what a watch's changes apply to.
  struct Held {
    std::string incarnation;
    int64_t revision = 0;
    std::map<Key, TaskOrder> orders;
  } held_;
  std::set<int64_t> scrubs_reported_;  // done scrubs the server acknowledged
  std::chrono::steady_clock::time_point next_report_{};  // after a failed report
  // The watch thread and what it hands to the main loop.
  std::thread watch_thread_;
  std::unique_ptr<httplib::Client> watch_http_;
  std::mutex watch_mu_;
  std::condition_variable watch_cv_;
  bool watch_on_ = false;               // guarded by watch_mu_
  bool watch_quit_ = false;             // guarded by watch_mu_
  WatchRequest watch_next_;             // guarded by watch_mu_: what the next watch names
  std::deque<WatchReply> watch_inbox_;  // guarded by watch_mu_
  int watch_refused_ = 0;               // guarded by watch_mu_: 404 or 409 for the main loop
  int wake_[2] = {-1, -1};              // a pipe: the watch thread wakes the main loop
  mutable std::mutex log_mu_;           // Log is called from both threads: stderr
  mutable ActionLog action_log_;        // WORK/agent.log
  std::vector<GpuDevice> gpus_;
  bool registered_ = false;
  int register_status_ = 0;  // the HTTP status of the last registration (0: no answer)
  std::minstd_rand jitter_;
  std::string session_;  // from the registration's reply
  std::chrono::milliseconds interval_{5000};
  std::map<Key, LocalTask> tasks_;
  std::vector<ScrubOrder> scrub_orders_;    // from the last reply
  std::map<int64_t, ScrubReport> scrubs_done_;  // reported until the order leaves the desired state
  std::chrono::steady_clock::time_point last_ok_{};  // the last successful heartbeat or registration
  std::chrono::milliseconds fence_after_{0};
  bool fenced_ = false;
  bool superseded_ = false;
  bool skip_logs_ = false;  // the last heartbeat was refused: the next one goes without logs
  size_t log_turn_ = 0;     // which task's log goes first
  // MIG instances this agent created (UUIDs; kept in WORK/mig-created so a
  // restarted agent still destroys them once idle), those scrubbed since a
  // task last ran there, and when a failed destroy may be tried again.
  std::set<std::string> mig_created_, mig_clean_;
  std::map<std::string, std::chrono::steady_clock::time_point> mig_retry_;
};

inline constexpr int64_t kLogBudgetBytes = 128 << 10;

}  // namespace gpupool
