// Loader for the Alibaba GPU cluster trace v2023 ("openb") CSV files.
//
// Node lists: sn, cpu_milli, memory_mib, gpu, model.
// Pod lists, two layouts (chosen by the header):
//   11 columns: name, cpu_milli, memory_mib, num_gpu, gpu_milli, gpu_spec, qos,
//               pod_phase, creation_time, deletion_time, scheduled_time
//    5 columns: name, cpu_milli, memory_mib, num_gpu, gpu_milli
// gpu_spec is a '|'-separated list of model names; empty = any model.
//
// The whole file is validated before anything is returned: a malformed file
// yields one Error naming the file, line and column (and the column's name),
// and no partial result.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "src/base/status.h"
#include "src/model/cluster.h"
#include "src/model/demand.h"
#include "src/model/gpu_catalog.h"

namespace gpupool {

struct TracePod {
  std::string name;
  Demand demand;
  std::string qos;        // empty in the 5-column layout
  std::string pod_phase;  // empty in the 5-column layout
  // Seconds since the trace start; absent in the 5-column layout (and
  // scheduled_time_s is absent for pods that never ran).
  std::optional<int64_t> creation_time_s;
  std::optional<int64_t> deletion_time_s;
  std::optional<int64_t> scheduled_time_s;
};

Result<std::vector<NodeSpec>> LoadOpenbNodesFile(const std::string& path, const Catalog& catalog);
Result<std::vector<NodeSpec>> ParseOpenbNodes(std::string_view text, std::string_view source,
                                              const Catalog& catalog);

Result<std::vector<TracePod>> LoadOpenbPodsFile(const std::string& path, const Catalog& catalog);
Result<std::vector<TracePod>> ParseOpenbPods(std::string_view text, std::string_view source,
                                             const Catalog& catalog);

}  // namespace gpupool
