// Elastic scaling settings (SCALE-1..6), per pool: the autoscaler's
// decision rule, the node template the provider creates, seasonal
// forecasting (SCALE-3), the warm pool (SCALE-5) and the drain (SCALE-4/6);
// their checks (Engine::Create refuses a bad configuration before anything
// is decided), the provisioned nodes' names, and the forecasters' figures.
//
// The loop that uses them each Tick is src/control/pool_autoscaling.h (the
// rules, step by step, are there); the rule is src/control/autoscaler.h,
// the forecaster src/control/forecast.h. The provider answers a scale-out
// with Engine::AddProvisionedNode or Engine::FailScaleOut.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "src/base/status.h"
#include "src/base/time.h"
#include "src/model/cluster.h"

namespace gpupool {

// The autoscaler's rule (src/control/autoscaler.h), every number
// configurable (the seeds' as defaults).
struct AutoscalerConfig {
  double out_util = 0.80;
  Duration out_for = std::chrono::minutes(5);
  int64_t queue_threshold = 10;  // pending jobs
  double in_util = 0.30;
  Duration in_for = std::chrono::minutes(10);
  Duration cooldown = std::chrono::minutes(3);
  Duration safety_window = std::chrono::minutes(15);  // no scale-in this long after a scale-out
  double target_util = 0.65;                          // what a step aims for
  int32_t max_step = 4;
  int32_t min_nodes = 0;
  int32_t max_nodes = 1 << 20;
  int32_t max_actions_per_hour = 6;
};

// Fails, naming the field, on thresholds out of [0, 1] or out of order,
// non-positive durations or steps, or min_nodes > max_nodes.
Status CheckAutoscalerConfig(const AutoscalerConfig& c);

// The Holt-Winters forecaster's settings (src/control/forecast.h).
struct HoltWintersConfig {
  int season_steps = 288;  // samples per season (a day of 5-minute samples)
  double alpha = 0.3;      // level smoothing, in (0, 1]
  double beta = 0.01;      // trend smoothing, in [0, 1]
  double gamma = 0.2;      // season smoothing, in [0, 1]
};

// Fails, naming the field, unless season_steps >= 2 and the factors are in
// range.
Status CheckHoltWintersConfig(const HoltWintersConfig& c);

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

struct ForecastConfig {  // a HoltWintersConfig with its season in time
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

// Checks one pool's settings, naming the field: the rule
// (CheckAutoscalerConfig), a template with GPUs, CPU and memory, at least one rack, a
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
