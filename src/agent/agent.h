// The node agent (OPS-1, RECLAIM-1..4, OPS-4 on the node side): registers
// its node with the server, heartbeats every interval the server gives
// (device health and utilization, per-task utilization, task outcomes,
// scrub results, new log bytes), and converges the node to the desired
// state each reply carries:
//  - a desired task that is not running starts (once per attempt) as a
//    child process, with its GPUs in CUDA_VISIBLE_DEVICES, the MPS limits
//    for MPS shares, and GPUPOOL_* variables, once no pending scrub covers
//    its GPUs and no stopping task holds them;
//  - a task asked to checkpoint gets its checkpoint signal (once per
//    attempt); it acknowledges by creating $GPUPOOL_CHECKPOINT_DIR/ack, and
//    the agent reports the checkpoint once it does, or when it exits, or
//    after the task's checkpoint timeout;
//  - a task that is no longer desired gets SIGTERM, then SIGKILL after its
//    grace period (the whole process group); it holds its GPUs until every
//    process of its group is gone, even after the first one exits;
//  - a scrub order runs (DeviceBackend::Scrub on each GPU) once no stopping
//    task holds its GPUs, before any task starts on them;
//  - a new attempt of a replica starts only once the previous attempt's
//    processes are gone (they share the replica's checkpoint directory);
//  - an idle notice is appended to $GPUPOOL_NOTICE_FILE when the job looks
//    idle (and a "busy" line when it recovers).
// Reports repeat until the task or order leaves the desired state, so a
// lost reply or a restarted server heals at the next heartbeat. A
// restarted agent first kills the task process groups its predecessor
// left (WORK/tasks.pids: pid and start time, so a reused pid is left
// alone), then starts what is desired afresh; tasks resume from their
// checkpoints. Fencing: without a successful heartbeat for the time the
// server gives (its failure-detection timeout), the agent stops its tasks,
// since the server has marked the node down and placed them elsewhere.
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
// Thread-safety: Run on one thread; Stop from any.
#pragma once

#include <atomic>
#include <chrono>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <tuple>
#include <vector>

#include "src/agent/device_backend.h"
#include "src/agent/executor.h"
#include "src/api/agent_protocol.h"

namespace httplib {
class Client;
}

namespace gpupool {

struct AgentOptions {
  std::string server_url;  // http://host:port
  std::string token;       // the node token
  std::string node;
  std::string node_class, region = "region-1", zone = "zone-1", rack = "rack-1";
  std::string work_dir;         // task directories, logs, agent.log
  std::string checkpoint_root;  // GPUPOOL_CHECKPOINT_DIR = ROOT/job-J/replica-R (shared storage); empty: WORK/checkpoints
  int64_t cpu_milli = 0;        // 0: the machine's
  int64_t memory_mib = 0;       // 0: the machine's
  bool quiet = false;           // no action lines on stderr
};

class Agent {
 public:
  Agent(AgentOptions options, std::unique_ptr<DeviceBackend> backend);
  ~Agent();

  // Runs until Stop. Returns 0 after Stop, or an exit code with the reason
  // logged when the server refuses the agent for good (bad token: 3; a
  // registration the server rejects, or another agent registered for the
  // node since: 4); its tasks are stopped either way.
  int Run();
  void Stop() { stop_ = true; }

 private:
  using Key = std::tuple<JobId, int32_t, int32_t>;  // job, replica, attempt
  struct LocalTask {
    TaskOrder order;
    std::optional<ChildProcess> proc;
    enum class State { kWaiting, kRunning, kExited, kStartFailed, kStopping, kDone } state = State::kWaiting;
    bool desired = true;
    ExitStatus exit;
    std::string error;
    std::string dir, checkpoint_dir, log_file, notice_file;
    int64_t log_uploaded = 0;
    // checkpoint
    bool checkpoint_requested = false, checkpoint_done = false, checkpoint_acked = false;
    std::chrono::steady_clock::time_point checkpoint_deadline{};
    // stop
    std::chrono::steady_clock::time_point kill_at{};
    bool killed = false;
    bool notice_written = false;
  };

  Status Register();
  Status Heartbeat();
  void Apply(const AgentReply& reply);
  void Step();  // one convergence pass
  void StartTask(LocalTask& t);
  void BeginStop(LocalTask& t);
  bool GpusBusy(const std::vector<int>& gpus, const LocalTask* except) const;
  bool PreviousAttemptAlive(const LocalTask& t) const;
  void Fence();
  bool ScrubPending(const std::vector<int>& gpus) const;
  void RunScrubs();
  void KillLeftovers();
  void SavePids() const;
  void Log(const std::string& action, std::vector<std::pair<std::string, std::string>> fields) const;
  Result<nlohmann::json> Post(const std::string& path, const nlohmann::json& body, int* status);

  AgentOptions options_;
  std::unique_ptr<DeviceBackend> backend_;
  std::unique_ptr<httplib::Client> http_;
  std::atomic<bool> stop_{false};
  std::vector<GpuDevice> gpus_;
  bool registered_ = false;
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
};

inline constexpr int64_t kLogBudgetBytes = 128 << 10;

}  // namespace gpupool
