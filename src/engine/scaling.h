// Elastic scaling settings (SCALE-1..6) for the Engine: per pool, the
// autoscaler's decision rule (src/engine/autoscaler.h), the node template
// the provider creates, seasonal forecasting (SCALE-3), the warm pool
// (SCALE-5) and the drain (SCALE-4/6).
//
// What the Engine does with them each Tick, per pool (deterministic; see
// Engine::Scale in src/engine/scaling.cc):
//  - observes the pool: utilization of its ready nodes (allocated GPU milli,
//    less what elastic jobs grew onto beyond their minimum, over their GPU
//    milli), pending jobs that may use it (but not those that preemption or
//    a MIG re-cut is making room for: vertical scaling serves them), nodes
//    (ready plus those requested and not yet joined) and, with forecasting
//    on, the demand (allocated plus queued GPU milli) forecast `ahead` from
//    now over the capacity at today's size;
//  - scale-out: first the nodes the pool lent are asked back, then empty
//    nodes of other pools are borrowed (POOL-3, EngineConfig::
//    borrow_between_pools, NodeLent); ScaleOutRequested for the rest of the
//    rule's step; the world's node provider creates the nodes (beside the
//    pool's scattered free GPUs when it can: Engine::FragmentedRack,
//    FRAG-3), which join with Engine::AddProvisionedNode (or fail:
//    Engine::FailScaleOut); the scheduling pass a new node starts serves
//    tenants with a reserved quota in its pool first (QUOTA-5);
//  - scale-in: drains the rule's step of nodes, chosen so that capacity
//    held for reserved tenants goes last, borrowed nodes first, and empty,
//    then least used (fragmented) nodes first (QUOTA-5, FRAG-3):
//    NodeDrainStarted, then elastic jobs shrink off the node (JobResized,
//    SCALE-7) and each other running job there that can move does
//    (checkpoint first when it can; stateless online inference at once:
//    PreemptionStarted with reason kDrain) and queues again; the others
//    finish, or are stopped at `drain_timeout`; an empty drained node is
//    removed (NodeRemoved), or goes back to its pool when it was borrowed
//    (NodeReturned);
//  - warm pool: the largest scale-out of the last `lookback`, at most
//    `max_nodes` (WarmPoolSized when it changes).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "src/base/status.h"
#include "src/base/time.h"
#include "src/engine/autoscaler.h"
#include "src/engine/forecast.h"
#include "src/model/cluster.h"

namespace gpupool {

// What the provider creates for a pool: nodes named PREFIX-N (N counting up
// from 0 per pool), spread round-robin over `racks` racks PREFIX-rack-K.
struct NodeTemplate {
  std::string name_prefix;
  int64_t cpu_milli = 0;
  int64_t memory_mib = 0;
  int32_t gpus = 0;
  GpuModelId gpu_model = kNoGpuModel;
  uint16_t attr_class = 0;
  std::string region = "region-1", zone = "zone-1";
  int32_t racks = 1;
};

struct ForecastConfig {
  bool enabled = false;
  Duration ahead = std::chrono::minutes(15);  // how far ahead it pre-scales
  Duration step = std::chrono::minutes(5);    // one sample per step
  Duration season = std::chrono::hours(24);   // the daily pattern
  double alpha = 0.3, beta = 0.01, gamma = 0.2;
};

struct WarmPoolConfig {
  bool enabled = false;
  Duration lookback = std::chrono::hours(24);
  int32_t max_nodes = 8;
};

struct PoolScalingConfig {
  std::string pool;  // a pool name
  AutoscalerConfig rule;
  NodeTemplate node;
  ForecastConfig forecast;
  WarmPoolConfig warm_pool;
  Duration drain_timeout = std::chrono::hours(1);
};

// Checks one pool's settings, naming the field: the rule (Autoscaler::
// Create), a template with GPUs, CPU and memory, at least one rack, a
// forecast step that divides its season and is not longer than `ahead`.
Status CheckScalingConfig(const PoolScalingConfig& c);

// The name and rack of the provider's `serial`-th node for the pool.
std::string ProvisionedNodeName(const NodeTemplate& t, int64_t serial);
std::string ProvisionedNodeRack(const NodeTemplate& t, int64_t serial);

// What the Engine measured of its forecaster, per scaling pool.
struct ForecastStats {
  std::string pool;
  int64_t predictions = 0;        // forecasts whose time has come
  double mean_abs_error_gpus = 0; // |forecast - actual demand|, GPUs
  double mean_actual_gpus = 0;    // the actual demand at those times
};

}  // namespace gpupool
