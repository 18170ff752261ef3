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
// ProgramOptions adds what a daemon's control tool needs (the agent's MPS
// control daemons, src/agent/mps_daemons.h): text on stdin, an environment
// of `env` alone, and another uid/gid. With a uid or gid the child is made
// with fork (posix_spawn cannot change ids), the ids set before exec. And
// what a tool that answers on stdout needs (the agent's GPU scrubber,
// src/agent/nvml_backend.cc): stdout kept whole, apart from stderr.
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
  std::string output_tail; // the last lines of stdout and stderr (of stderr alone with keep_stdout), trimmed
  std::string stdout_text; // with ProgramOptions::keep_stdout: its last kMaxProgramStdout bytes
  // "exited 3: no capacity in zone-1", "timed out after 10m", "killed by
  // signal 9", each followed by ": " and the output's last lines if any.
  std::string Describe() const;
};

CommandOutcome RunProgram(const std::vector<std::string>& argv,
                          const std::vector<std::pair<std::string, std::string>>& env, Duration timeout);

// At most this much stdin text: it is written into the pipe before the
// program starts, and a pipe always holds this much.
inline constexpr size_t kMaxProgramInput = 4096;
// At most this much of stdout is kept with keep_stdout, the newest (a
// tool's answer comes last; the rest is read and dropped, so that the
// program never blocks on a full pipe).
inline constexpr size_t kMaxProgramStdout = 64 * 1024;

struct ProgramOptions {
  std::string input;         // its stdin, then end of file; empty: /dev/null; at most kMaxProgramInput
  bool inherit_env = true;   // false: its environment is `env` alone
  int64_t uid = -1, gid = -1;  // >= 0: run as these (the caller must be root), no supplementary groups
  bool keep_stdout = false;  // stdout in stdout_text; output_tail from stderr alone
};

CommandOutcome RunProgram(const std::vector<std::string>& argv,
                          const std::vector<std::pair<std::string, std::string>>& env, Duration timeout,
                          const ProgramOptions& options);

}  // namespace gpupool
