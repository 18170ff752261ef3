// Hotspot detection (OPS-2): its settings and the telemetry it reads. The
// loop itself is src/control/hotspot_detection.h.
//
// Each node's agent reports its GPUs' telemetry (Engine::ReportNodeTelemetry;
// soft state, never journaled). A GPU is "over" when any enabled threshold
// is passed: utilization above `util_above_pct`, memory use above
// `memory_above_pct` of its memory, temperature above `temperature_above_c`
// (a threshold of 0 is off). A node whose reports have had an over GPU
// without a break for `window` is a hotspot (HotspotDetected, naming the
// GPUs, the metric, the value and the threshold): it is cordoned, and
//  - up to `max_moves` movable jobs on its over GPUs (checkpointable ones,
//    and stateless online inference) move off: PreemptionStarted with
//    reason kHotspot, checkpointed first when they can be, then placed
//    elsewhere by the scheduling pass;
//  - when none can move and the node's pool has scaling settings, the pool
//    scales out by its rule's step (ScaleOutRequested naming the hotspot).
// A hot node whose report has no over GPU cools down (HotspotCleared) and
// takes work again. A node is not found hot again within `cooldown` of its
// last detection.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "src/base/status.h"
#include "src/base/time.h"

namespace gpupool {

struct HotspotConfig {
  bool enabled = false;
  double util_above_pct = 0;      // 0: utilization is not checked (busy training GPUs run at 100%)
  double memory_above_pct = 95;   // of the GPU's memory
  double temperature_above_c = 85;
  Duration window = std::chrono::minutes(5);
  int32_t max_moves = 1;          // jobs moved per detection
  Duration cooldown = std::chrono::minutes(10);
};

// One GPU's report (DCGM vocabulary: DCGM_FI_DEV_GPU_UTIL, FB_USED/FB_FREE,
// DCGM_FI_DEV_GPU_TEMP). A negative value is unknown and never "over".
struct GpuTelemetry {
  int32_t gpu = 0;               // index on the node
  double util_pct = -1;
  double memory_used_pct = -1;
  double temperature_c = -1;
};

// Checks the settings, naming the field: thresholds in range (utilization
// and memory in [0, 100], temperature in [0, 150]), a positive window, at
// least one threshold on, max_moves >= 0, cooldown >= 0.
Status CheckHotspotConfig(const HotspotConfig& c);

}  // namespace gpupool
