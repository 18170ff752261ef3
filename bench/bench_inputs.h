// Shared inputs for the benchmarks: the Alibaba 2023 trace when ../shared is
// beside the checkout (or GPUPOOL_TRACES points at the traces folder), a
// generated stand-in otherwise. Each benchmark labels which one it used.
#pragma once

#include <string>
#include <vector>

#include "src/config/alibaba_gpu_trace.h"

namespace gpupool::bench {

// The folder holding alibaba-gpu-2023/, or "" when absent.
std::string TraceDir();

// The default trace's pod list, or nullopt-like empty vector when absent.
std::vector<TracePod> DefaultTracePods();

}  // namespace gpupool::bench
