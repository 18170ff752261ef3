// The Alibaba GPU-disaggregated DLRM serving trace (cluster-trace-gpu-v2025,
// ../shared/traces/alibaba-dlrm-2025): one row per serving instance with its
// role (CN: CPU node, HN: GPU node), GPU request and creation and deletion
// times (seconds from the trace start, written as decimals and kept in
// whole seconds; empty = before the start or after the end). Used to build real diurnal demand (SCALE-3, C-SCALE).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "src/base/status.h"

namespace gpupool {

inline constexpr const char* kDlrmTraceFile = "alibaba-dlrm-2025/disaggregated_DLRM_trace.csv";

struct DlrmInstance {
  bool gpu = false;  // role HN
  int32_t gpus = 0;  // gpu_request
  std::optional<int64_t> created_s, deleted_s;
};

// Reads the CSV; a malformed file is an error naming file, line and column.
Result<std::vector<DlrmInstance>> LoadDlrmTrace(const std::string& path);

// GPUs held by live GPU instances in each `bin_s`-second bin (sampled at
// the bin's start), from the first bin to the last creation or deletion.
// An instance without a creation time lives from the start; without a
// deletion time, to the end.
std::vector<double> LiveGpuSeries(const std::vector<DlrmInstance>& instances, int64_t bin_s);

// Lifetimes (seconds) of the GPU instances with both a creation and a
// deletion time, in file order.
std::vector<double> ServingLifetimes(const std::vector<DlrmInstance>& instances);

}  // namespace gpupool
