// The node's CUDA MPS control daemons (issue 15, PART-2 on the node): one
// `nvidia-cuda-mps-control -d` per GPU in MPS use, started before the first
// MPS task on that GPU, stopped (`quit`) after the last, restarted when it
// dies.
//
// Per GPU N the daemon has WORK/mps/gpuN/pipe (CUDA_MPS_PIPE_DIRECTORY: its
// control pipe, its pid file nvidia-cuda-mps-control.pid, the server's
// sockets; clients must name the same directory) and WORK/mps/gpuN/log
// (CUDA_MPS_LOG_DIRECTORY: control.log, server.log), and runs with
// CUDA_VISIBLE_DEVICES = the GPU's UUID, so that its server uses that GPU
// alone (as device 0). Its environment is only those three and PATH (with
// `env` on top, e.g. a test's FAKE_MPS_RECORD): nothing of the agent's.
//
// One tenant at a time: an MPS server serves the clients of one uid, and a
// daemon run by an unprivileged user serves only that user. Task
// containers run under per-tenant uid ranges (root inside = the range's
// base), so the daemon runs as the owner its clients have (setresuid and
// setresgid in the child; the pipe and log directories are that owner's,
// mode 0700, remade empty when the owner changes). Ensure for another owner
// while the daemon serves one fails: the Engine gives an MPS GPU to one
// tenant at a time, and the agent releases the daemon once the previous
// tenant's tasks are gone. Plain-process tasks run as the agent's user, and
// so does their daemon (owner -1).
//
// Limits: the daemon's defaults (`set_default_active_thread_percentage P`,
// `set_default_device_pinned_mem_limit 0 NM`) are set once, right after it
// starts and before any client connects, from the share of the task that
// starts it. They are per GPU, for the clients that carry no limit of their
// own (a process that cleared its environment); the real daemon applies a
// default to the servers it spawns next, so setting it again for a later
// task would change nothing for the running server. Each task's own share
// reaches its clients through CUDA_MPS_ACTIVE_THREAD_PERCENTAGE and
// CUDA_MPS_PINNED_DEVICE_MEM_LIMIT in its environment (the agent sets them).
// A daemon restarted after a crash gets the defaults it had.
//
// Health (Check, from the agent's loop, at most every check_every): a daemon
// whose process is gone is restarted after a backoff (first_backoff, then
// doubling up to max_backoff); after max_restarts restarts in a row (a
// daemon that stays up stable_after resets the count) the GPU's daemon is
// given up, logged as an error naming the GPU, and Failure(gpu) says why
// until it is released or a new task on the GPU tries afresh.
//
// Every wait is bounded: the daemon's start (start_timeout for its pid file),
// each command (command_timeout), a quit (quit_timeout, then SIGKILL).
//
// A restarted agent re-adopts the daemons its predecessor left running
// (Recover: the pid file and WORK/mps/gpuN/daemon.json), so that running
// MPS tasks keep their daemon; the agent releases those nobody uses.
//
// Thread-safety: one thread (the agent's loop).
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "src/base/status.h"

namespace gpupool {

inline constexpr const char* kMpsControlBinary = "nvidia-cuda-mps-control";
inline constexpr const char* kMpsPidFile = "nvidia-cuda-mps-control.pid";

// Who the daemon runs as; -1: the agent's own user.
struct MpsOwner {
  int64_t uid = -1, gid = -1;
  friend bool operator==(const MpsOwner&, const MpsOwner&) = default;
};

struct MpsLimits {
  int active_thread_percentage = 100;  // 1..100
  int64_t pinned_mem_mib = 0;          // 0: no limit
};

struct MpsDirs {
  std::string pipe, log;
};

struct MpsDaemonsOptions {
  std::string control;   // nvidia-cuda-mps-control (a path); empty: no MPS on this node
  std::string work_dir;  // the agent's work directory (absolute)
  std::vector<std::pair<std::string, std::string>> env;  // on top of the daemon's own environment
  std::chrono::milliseconds start_timeout{5000}, command_timeout{10000}, quit_timeout{5000};
  int max_restarts = 5;
  std::chrono::milliseconds first_backoff{1000}, max_backoff{30000}, stable_after{60000};
  std::chrono::milliseconds check_every{1000};
  // Where actions go: "mps_start", "mps_quit", "mps_died", "mps_restart", "error", ...
  std::function<void(const std::string&, std::vector<std::pair<std::string, std::string>>)> log;
};

class MpsDaemons {
 public:
  explicit MpsDaemons(MpsDaemonsOptions options);
  ~MpsDaemons() = default;  // daemons outlive the object (a restarted agent re-adopts them)

  bool available() const { return !options_.control.empty(); }
  MpsDirs Dirs(int gpu) const;

  // Makes GPU `gpu`'s daemon run for `owner` (started with `limits` as its
  // defaults when it is not running). Fails when there is no binary, when
  // the daemon serves another owner, or when it does not come up.
  Status Ensure(int gpu, const std::string& uuid, MpsOwner owner, MpsLimits limits);
  // Stops GPU `gpu`'s daemon (`quit`), after its last client is gone.
  void Release(int gpu);
  void ReleaseAll();
  // Restarts dead daemons (bounded, with backoff).
  void Check();
  // Re-adopts the daemons a predecessor left running.
  void Recover();

  std::vector<int> Gpus() const;        // those with a daemon (up, restarting or given up)
  bool Up(int gpu) const;               // its process runs
  std::string Failure(int gpu) const;   // non-empty: it kept dying and was given up
  MpsOwner OwnerOf(int gpu) const;

 private:
  struct Daemon {
    std::string uuid;
    MpsOwner owner;
    MpsLimits limits;
    int pid = 0;
    unsigned long long start_time = 0;  // of pid, against pid reuse
    bool dead = false;
    int restarts = 0;
    std::chrono::steady_clock::time_point up_since{}, next_restart{};
    std::string failure;
  };

  Status Start(int gpu, Daemon& d);
  Status PrepareDirs(int gpu, const MpsOwner& owner) const;
  Result<std::string> Command(int gpu, const MpsOwner& owner, const std::string& command) const;
  Status WaitUp(int gpu, Daemon& d) const;
  void Stop(int gpu, Daemon& d);
  void CheckOne(int gpu, Daemon& d, std::chrono::steady_clock::time_point now);
  void SaveState(int gpu, const Daemon& d) const;
  std::chrono::milliseconds Backoff(int restarts) const;
  void Log(const std::string& action, std::vector<std::pair<std::string, std::string>> fields) const;

  MpsDaemonsOptions options_;
  std::map<int, Daemon> daemons_;
  std::chrono::steady_clock::time_point next_check_{};
};

}  // namespace gpupool
