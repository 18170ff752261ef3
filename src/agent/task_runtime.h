// How the agent runs a task replica (EXEC-1..6): the interface between the
// agent's convergence loop (agent.h) and what isolates a task on the node.
//
// Two runtimes implement it:
//  - `oci` (oci_runtime.h): each replica is an OCI container run by runc,
//    supervised by a gpupool-shim process that outlives the agent; the
//    container gets its own pid/mount/ipc/uts/user namespaces, cgroup limits
//    and only the device nodes of its placed GPUs. Isolation "container".
//  - `process` (process_runtime.h): a plain child process in its own
//    session, for nodes without an OCI runtime. Isolation "none": the agent
//    warns at start-up and says so in its registration.
//
// A runtime is used by the agent's one thread. A RunningTask is owned by
// the agent's record of the replica; dropping it forgets the task without
// stopping it (Remove stops and cleans up).
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "src/agent/device_backend.h"
#include "src/base/status.h"
#include "src/model/job.h"

namespace gpupool {

struct ExitStatus {
  int exit_code = 0;  // when it exited normally
  int signal = 0;     // the signal that killed it, 0 if none
  bool oom = false;   // the kernel's OOM killer ended it (its memory limit)
  bool ok() const { return exit_code == 0 && signal == 0 && !oom; }
};

// A directory of the node bound into the task.
struct BindMount {
  std::string host_path;
  std::string path;
  bool read_only = false;
};

// Everything a runtime needs to start one replica. The process runtime
// uses only the `process` part (and the host paths of the directories).
struct TaskLaunch {
  JobId job = -1;
  int32_t replica = 0, attempt = 0;
  std::string tenant;
  // The process: argv (argv[0] looked up on the task's PATH), its
  // environment (on top of the runtime's base), working directory (a path
  // as the task sees it; empty: the scratch directory), log file (host).
  std::vector<std::string> argv;
  std::vector<std::pair<std::string, std::string>> env;
  std::string working_dir;
  std::string log_file;
  // Host directories: the replica's checkpoint directory, its scratch
  // directory (per attempt) and the agent's directory for the task (notice
  // file). The process runtime uses them as they are; the oci runtime binds
  // them at kContainerCheckpointDir, kContainerScratchDir, kContainerTaskDir.
  std::string checkpoint_dir, scratch_dir, task_dir;
  // Isolation (oci only).
  std::string image;       // "host", an unpacked rootfs, a bundle with rootfs/, or an OCI layout
  int64_t uid = 0, uid_count = 0;  // host uid/gid of the container's root and the range; 0: no user namespace
  int64_t memory_mib = 0;  // hard limit; 0: none
  int64_t cpu_milli = 0;   // CPU quota; 0: none
  int64_t pids_limit = 0;  // 0: none
  int64_t shm_mib = 1024;
  bool network_isolated = false;
  std::vector<DeviceNode> devices;         // allowed and present
  std::vector<DeviceNode> visible_denied;  // present but denied (test option: shows the devices cgroup fences)
  // MPS shares (mps_daemons.h): the GPU's daemon directories bound at their
  // node paths (the pipe directory read-write: clients must name the
  // daemon's), and the node's /dev/shm instead of a private tmpfs of
  // shm_mib (the MPS server's shared memory is there).
  std::vector<BindMount> binds;
  bool host_shm = false;
};

// Where the oci runtime binds the task's directories inside the container.
inline constexpr const char* kContainerCheckpointDir = "/gpupool/checkpoint";
inline constexpr const char* kContainerScratchDir = "/gpupool/scratch";
inline constexpr const char* kContainerTaskDir = "/gpupool/task";

// A task the runtime started or re-adopted.
class RunningTask {
 public:
  virtual ~RunningTask() = default;
  // The host pid of its first process (0 when unknown).
  virtual int pid() const = 0;
  // Its exit, once, when its first process has ended; nullopt while it runs
  // (and after the exit was returned).
  virtual std::optional<ExitStatus> Poll() = 0;
  // Signals every process of the task / its first process only.
  virtual void Signal(int sig) = 0;
  virtual void SignalLeader(int sig) = 0;
  // Does any process of the task still live (its first may be gone)? Its
  // GPUs are free only once this is false.
  virtual bool Alive() = 0;
  // Has its first process's exit been collected?
  virtual bool reaped() const = 0;
  // Once nothing is alive: frees what the runtime holds for it (container
  // state, bundle). Idempotent.
  virtual void Remove() = 0;
  // Identifies it in logs and leftover files.
  virtual std::string id() const = 0;
};

using TaskKey = std::tuple<JobId, int32_t, int32_t>;  // job, replica, attempt

class TaskRuntime {
 public:
  virtual ~TaskRuntime() = default;
  virtual std::string name() const = 0;       // "oci" or "process"
  virtual std::string isolation() const = 0;  // "container" or "none"
  // Starts a replica. Fails with a reason naming the request field at fault
  // (e.g. "image: ...") or the runtime's own error.
  virtual Result<std::unique_ptr<RunningTask>> Start(const TaskLaunch& launch) = 0;
  // At agent start: the tasks a previous agent left, by key. The oci
  // runtime re-adopts its containers (still running, or exited while the
  // agent was away); the process runtime kills what its predecessor left
  // and returns nothing. Called once, before any Start.
  virtual std::map<TaskKey, std::unique_ptr<RunningTask>> Recover() = 0;
  // Called after each convergence pass with the keys the agent tracks.
  virtual void SaveState(const std::vector<const RunningTask*>& live) = 0;
};

}  // namespace gpupool
