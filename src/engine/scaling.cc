// Elastic scaling settings and their checks (SCALE-1..6), and the commands
// the node provider answers a scale-out with. The loop is
// src/control/pool_autoscaling.h.
#include "src/engine/scaling.h"

#include <algorithm>

#include "src/base/check.h"
#include "src/engine/engine.h"

namespace gpupool {

Status CheckAutoscalerConfig(const AutoscalerConfig& c) {
  auto in01 = [](double x) { return x >= 0 && x <= 1; };
  if (!in01(c.out_util)) return InvalidArgument("out_util: must be between 0 and 1");
  if (!in01(c.in_util)) return InvalidArgument("in_util: must be between 0 and 1");
  if (c.in_util >= c.out_util) return InvalidArgument("in_util: must be below out_util");
  if (!(c.target_util > c.in_util && c.target_util < c.out_util)) {
    return InvalidArgument("target_util: must be between in_util and out_util");
  }
  if (c.out_for <= Duration(0)) return InvalidArgument("out_for: must be positive");
  if (c.in_for <= Duration(0)) return InvalidArgument("in_for: must be positive");
  if (c.cooldown < Duration(0)) return InvalidArgument("cooldown: must not be negative");
  if (c.safety_window < Duration(0)) return InvalidArgument("safety_window: must not be negative");
  if (c.queue_threshold < 0) return InvalidArgument("queue_threshold: must not be negative");
  if (c.max_step < 1) return InvalidArgument("max_step: must be at least 1");
  if (c.min_nodes < 0 || c.min_nodes > c.max_nodes) return InvalidArgument("min_nodes: must be between 0 and max_nodes");
  if (c.max_actions_per_hour < 1) return InvalidArgument("max_actions_per_hour: must be at least 1");
  return {};
}

Status CheckHoltWintersConfig(const HoltWintersConfig& c) {
  if (c.season_steps < 2) return InvalidArgument("season_steps: must be at least 2, got " + std::to_string(c.season_steps));
  if (!(c.alpha > 0 && c.alpha <= 1)) return InvalidArgument("alpha: must be in (0, 1], got " + std::to_string(c.alpha));
  if (!(c.beta >= 0 && c.beta <= 1)) return InvalidArgument("beta: must be in [0, 1], got " + std::to_string(c.beta));
  if (!(c.gamma >= 0 && c.gamma <= 1)) return InvalidArgument("gamma: must be in [0, 1], got " + std::to_string(c.gamma));
  return {};
}

Status CheckScalingConfig(const PoolScalingConfig& c) {
  const std::string where = "scaling[" + c.pool + "]";
  if (c.pool.empty()) return InvalidArgument("scaling: pool: must name a pool");
  if (auto ok = CheckAutoscalerConfig(c.rule); !ok) return InvalidArgument(where + ": " + ok.error().message);
  const NodeTemplate& t = c.node;
  if (t.name_prefix.empty()) return InvalidArgument(where + ".node.name_prefix: must not be empty");
  if (t.gpus <= 0 || t.gpu_model == kNoGpuModel) return InvalidArgument(where + ".node: needs GPUs and a GPU model");
  if (t.cpu_milli <= 0 || t.memory_mib <= 0) return InvalidArgument(where + ".node: needs CPU and memory");
  if (t.racks < 1) return InvalidArgument(where + ".node.racks: must be at least 1");
  if (c.drain_timeout <= Duration(0)) return InvalidArgument(where + ".drain_timeout: must be positive");
  if (c.forecast.enabled) {
    const ForecastConfig& f = c.forecast;
    if (f.step <= Duration(0) || f.ahead < f.step) {
      return InvalidArgument(where + ".forecast: step must be positive and not longer than ahead");
    }
    if (f.season % f.step != Duration(0) || f.season / f.step < 2) {
      return InvalidArgument(where + ".forecast: season must be a whole number (2 or more) of steps");
    }
    HoltWintersConfig hw{static_cast<int>(f.season / f.step), f.alpha, f.beta, f.gamma};
    if (auto ok = CheckHoltWintersConfig(hw); !ok) return InvalidArgument(where + ".forecast: " + ok.error().message);
  }
  if (c.warm_pool.enabled && (c.warm_pool.max_nodes < 0 || c.warm_pool.lookback <= Duration(0))) {
    return InvalidArgument(where + ".warm_pool: max_nodes must not be negative, lookback positive");
  }
  return {};
}

std::string ProvisionedNodeName(const NodeTemplate& t, int64_t serial) {
  return t.name_prefix + "-" + std::to_string(serial);
}

std::string ProvisionedNodeRack(const NodeTemplate& t, int64_t serial) {
  return t.name_prefix + "-rack-" + std::to_string(serial % t.racks);
}

Result<NodeIndex> Engine::AddProvisionedNode(PoolId pool, std::string name, std::string rack, Instant now,
                                             const Sink& sink) {
  const PoolScalingConfig* config = ScalingOf(pool);
  if (config == nullptr) return NotFound("pool " + std::to_string(pool) + " has no scaling settings");
  if (state_.pool_scaling[pool].requested_nodes <= 0) {
    return FailedPrecondition("pool '" + config->pool + "' asked for no nodes");
  }
  for (NodeIndex i = 0; i < state_.cluster.node_count(); ++i) {
    if (state_.cluster.node_name(i) == name) return InvalidArgument("node '" + name + "' already exists");
  }
  const NodeTemplate& t = config->node;
  NodeSpec spec{std::move(name), t.cpu_milli, t.memory_mib, t.gpus, t.gpu_model, pool, t.attr_class};
  Cluster probe;
  GP_TRY(probe.AddNode(spec));
  const NodeIndex index = state_.cluster.node_count();
  Emit(NodeAdded{std::move(spec), t.region, t.zone, std::move(rack), /*provisioned=*/true}, now, sink);
  // QUOTA-5: the new node serves the pool's reserved tenants first.
  SchedulePass(now, sink, TenantOrder{static_cast<int32_t>(pool)});
  return index;
}

Status Engine::FailScaleOut(PoolId pool, int32_t nodes, std::string reason, Instant now, const Sink& sink) {
  if (pool >= state_.pools.size()) return NotFound("pool " + std::to_string(pool) + " does not exist");
  if (nodes <= 0 || nodes > state_.pool_scaling[pool].requested_nodes) {
    return InvalidArgument("nodes: " + std::to_string(nodes) + " not in [1, " +
                           std::to_string(state_.pool_scaling[pool].requested_nodes) + "] (the nodes asked for)");
  }
  Emit(ScaleOutFailed{pool, nodes, std::move(reason)}, now, sink);
  return {};
}

std::vector<ForecastStats> Engine::forecast_stats() const { return loops_.scaling->forecast_stats(); }

const PoolScalingConfig* Engine::ScalingOf(PoolId pool) const {
  const PoolScalingConfig* config = nullptr;
  for (const PoolScalingConfig& c : config_.scaling) {
    if (pool < state_.pools.size() && c.pool == state_.pools[pool].name) config = &c;
  }
  return config;
}

}  // namespace gpupool
