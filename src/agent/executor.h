// Task processes (OPS-1): each replica is a real child process in its own
// session (so its process group holds everything it starts), with its
// output appended to a log file. Signals go to the whole process group.
//
// Spawned with posix_spawn (safe in the multi-threaded dev mode, unlike a
// bare fork), with POSIX_SPAWN_SETSID and a chdir file action. The child
// gets no descriptor of the agent's beyond stdin (/dev/null), stdout and
// stderr (its log), and of the agent's environment only the names in
// kInheritedEnv (and LC_*): a node's credentials do not leak into tasks.
//
// Thread-safety: a ChildProcess is used by one thread.
#pragma once

#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "src/agent/task_runtime.h"
#include "src/base/status.h"

namespace gpupool {

inline constexpr const char* kInheritedEnv[] = {"PATH", "HOME", "USER", "LOGNAME", "SHELL", "LANG",
                                                "LANGUAGE", "TZ", "TMPDIR", "TERM"};

struct LaunchSpec {
  std::vector<std::string> argv;  // argv[0] is looked up on the agent's PATH
  // Set in the child on top of the inherited names (replacing them);
  // names in `unset` are removed first.
  std::vector<std::pair<std::string, std::string>> env;
  std::vector<std::string> unset;
  std::string working_dir;  // must exist
  std::string log_file;     // stdout and stderr, opened for append (created 0640)
};

class ChildProcess {
 public:
  // Starts the process. Fails (naming the program and the reason) when the
  // log file cannot be opened or the program cannot be executed.
  static Result<ChildProcess> Spawn(const LaunchSpec& spec);

  int pid() const { return pid_; }
  // Reaps the process if it has exited; nullopt while it runs.
  std::optional<ExitStatus> Poll();
  // Sends `sig` to its process group, which may outlive the process itself.
  void Signal(int sig) const;
  // Sends `sig` to the process only (nothing once it has been reaped).
  void SignalLeader(int sig) const;
  // Does any process of its group still live (the leader may be gone)?
  bool GroupAlive() const;
  bool reaped() const { return reaped_; }

 private:
  int pid_ = -1;
  bool reaped_ = false;
};

}  // namespace gpupool
