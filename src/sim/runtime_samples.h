// Job run times as an empirical distribution to sample from: the Microsoft
// Philly job runtimes (a one-column CSV `runtime`, seconds) in
// ../shared/traces/philly-runtime.
#pragma once

#include <string>
#include <vector>

#include "src/base/status.h"

namespace gpupool {

inline constexpr const char* kRuntimeTraceFile = "philly-runtime/philly_runtime.csv";

// Run times in seconds, in file order. Errors name file, line and column.
Result<std::vector<double>> LoadRuntimeSamples(const std::string& path);

}  // namespace gpupool
