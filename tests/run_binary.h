// Runs the built gpupool binary in a child process and captures its output:
// for end-to-end tests of the command line.
#pragma once

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

// A fresh temporary directory, removed by the caller when done.
std::string MakeTempDir();

}  // namespace gpupool::testing
