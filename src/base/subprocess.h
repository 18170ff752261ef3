// Running a program to its end (one subprocess helper for the server's node
// provider scripts and the agent's OCI runtime calls).
//
// RunProgram starts argv[0] (a path: there is no PATH lookup) with
// posix_spawn in a session of its own (stdin /dev/null, stdout and stderr captured, no descriptor of
// the caller's beyond those), with `env` set on top of the caller's
// environment, and waits at most `timeout`: then SIGTERM to its process
// group, SIGKILL a second later. Of its output only the last lines are kept
// (bounded memory whatever it prints). Blocks the calling thread.
//
// Thread-safety: safe to call from several threads at once.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "src/base/time.h"

namespace gpupool {

inline constexpr int kOutputTailLines = 5;

// How one program ended.
struct CommandOutcome {
  bool ok = false;
  int exit_code = -1;      // when it exited
  int signal = 0;          // when a signal ended it
  bool timed_out = false;  // killed at the timeout
  Duration timeout{0};     // the timeout it ran under
  std::string start_error; // it could not be started at all
  std::string output_tail; // the last lines of stdout and stderr, trimmed
  // "exited 3: no capacity in zone-1", "timed out after 10m", "killed by
  // signal 9", each followed by ": " and the output's last lines if any.
  std::string Describe() const;
};

CommandOutcome RunProgram(const std::vector<std::string>& argv,
                          const std::vector<std::pair<std::string, std::string>>& env, Duration timeout);

}  // namespace gpupool
