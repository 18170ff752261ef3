// Runs the built gpupool binary in a child process and captures its output:
// for end-to-end tests of the command line.
#pragma once

#include <sys/types.h>

#include <string>
#include <vector>

namespace gpupool::testing {

struct BinaryRun {
  int exit_code = -1;
  std::string out;  // stdout
  std::string err;  // stderr
};

// Runs GPUPOOL_BINARY with `args` (no shell involved).
BinaryRun RunGpupool(const std::vector<std::string>& args);

// A file's whole text ("" when it cannot be read).
std::string ReadTextFile(const std::string& path);

// A fresh temporary directory, removed by the caller when done.
std::string MakeTempDir();

// For tests that run the binary as a long-lived child: SIGKILL and reap
// (nothing when pid <= 0), or SIGTERM and wait for its exit code (-1 when
// there is no child; 128 + the signal when one ended it). Both set pid to -1.
void KillChild(pid_t& pid);
int StopChild(pid_t& pid);

}  // namespace gpupool::testing
