// Elastic scaling in the Engine (SCALE-1..6): the per-pool control loop
// behind Engine::Tick, and the commands the node provider answers with.
// See src/engine/scaling.h for the rules.
#include "src/engine/scaling.h"

#include <algorithm>
#include <cmath>

#include "src/base/check.h"
#include "src/engine/engine.h"

namespace gpupool {

Status CheckScalingConfig(const PoolScalingConfig& c) {
  const std::string where = "scaling[" + c.pool + "]";
  if (c.pool.empty()) return InvalidArgument("scaling: pool: must name a pool");
  if (auto rule = Autoscaler::Create(c.rule); !rule) return InvalidArgument(where + ": " + rule.error().message);
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
    if (auto ok = HoltWinters::Create(hw); !ok) return InvalidArgument(where + ".forecast: " + ok.error().message);
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
  const PoolScalingConfig* config = nullptr;
  for (const PoolScalingConfig& c : config_.scaling) {
    if (pool < state_.pools.size() && c.pool == state_.pools[pool].name) config = &c;
  }
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

std::vector<ForecastStats> Engine::forecast_stats() const {
  std::vector<ForecastStats> out;
  for (size_t i = 0; i < scaling_.size(); ++i) {
    const ScalingRuntime& r = scaling_[i];
    if (!r.forecaster) continue;
    ForecastStats s;
    s.pool = config_.scaling[i].pool;
    s.predictions = r.predicted;
    if (r.predicted > 0) {
      s.mean_abs_error_gpus = r.abs_error_sum / static_cast<double>(r.predicted);
      s.mean_actual_gpus = r.actual_sum / static_cast<double>(r.predicted);
    }
    out.push_back(s);
  }
  return out;
}

void Engine::Scale(Instant now, const Sink& sink) {
  if (config_.scaling.empty()) return;
  if (scaling_.size() != config_.scaling.size()) {
    scaling_.resize(config_.scaling.size());
    for (size_t i = 0; i < scaling_.size(); ++i) {
      const PoolScalingConfig& c = config_.scaling[i];
      scaling_[i].rule = *Autoscaler::Create(c.rule);  // checked by Init
      if (c.forecast.enabled) {
        const ForecastConfig& f = c.forecast;
        scaling_[i].forecaster =
            *HoltWinters::Create({static_cast<int>(f.season / f.step), f.alpha, f.beta, f.gamma});
      }
    }
  }
  ProgressDrains(now, sink);
  for (size_t i = 0; i < scaling_.size(); ++i) ScalePool(i, now, sink);
}

void Engine::ScalePool(size_t index, Instant now, const Sink& sink) {
  const PoolScalingConfig& c = config_.scaling[index];
  ScalingRuntime& r = scaling_[index];
  if (!r.resolved) {
    for (const Pool& p : state_.pools) {
      if (p.name == c.pool) {
        r.pool = p.id;
        r.resolved = true;
      }
    }
    if (!r.resolved) return;
  }
  const PoolId pool = r.pool;
  // The pool as it is: ready nodes and their allocation.
  int32_t ready = 0;
  int64_t capacity = 0, allocated = 0;
  for (const Node& n : state_.cluster.nodes()) {
    if (n.pool != pool || n.condition != NodeCondition::kReady) continue;
    ++ready;
    capacity += n.gpu_milli_total();
    allocated += n.gpu_milli_total() - n.gpu_milli_free_total;
  }
  // SCALE-7: what elastic jobs grew onto is idle capacity lent to them, not
  // demand (else they would keep the pool scaling out for themselves).
  if (any_elastic_) {
    for (const auto& [id, j] : state_.running) {
      if (j->pool != pool || !j->spec.elastic() || j->spec.replicas <= j->spec.min_replicas) continue;
      allocated -= int64_t{j->spec.replicas - j->spec.min_replicas} * j->spec.demand.total_gpu_milli();
    }
    allocated = std::max<int64_t>(allocated, 0);
  }
  // Pending jobs that may use the pool, and their GPUs.
  int64_t queued = 0, queued_milli = 0;
  for (TenantId t : state_.queue.tenants()) {
    for (const auto& [key, group] : state_.queue.find_tenant(t)->groups) {
      if (!(key.pools >> pool & 1)) continue;
      for (const QueueKey& k : group.jobs) {
        const Job& j = state_.job(k.job);
        // Room is being made for it (preemption or a MIG re-cut, PART-5:
        // vertical scaling serves it without a new node).
        if (j.victims_pending > 0) continue;
        ++queued;
        queued_milli += j.spec.total_gpu_milli();
      }
    }
  }
  const int32_t requested = state_.pool_scaling[pool].requested_nodes;
  PoolObservation o;
  o.now = now;
  o.utilization = capacity > 0 ? static_cast<double>(allocated) / static_cast<double>(capacity) : (queued > 0 ? 1 : 0);
  o.queued_jobs = queued;
  o.nodes = ready + requested;
  // SCALE-3: demand (allocated + queued) sampled every step; the forecast
  // `ahead` is compared with the demand when its time comes.
  if (r.forecaster) {
    const ForecastConfig& f = c.forecast;
    const double demand_gpus = static_cast<double>(allocated + queued_milli) / kMilliPerGpu;
    while (!r.predictions.empty() && r.predictions.front().first <= now) {
      r.abs_error_sum += std::abs(r.predictions.front().second - demand_gpus);
      r.actual_sum += demand_gpus;
      ++r.predicted;
      r.predictions.pop_front();
    }
    if (!r.sampled || now >= r.next_sample) {
      r.forecaster->Observe(demand_gpus);
      r.next_sample = (r.sampled ? r.next_sample : now) + f.step;
      r.sampled = true;
      if (r.forecaster->seasonal()) {
        const int steps = static_cast<int>(f.ahead / f.step);
        r.predictions.emplace_back(now + f.ahead, std::max(0.0, r.forecaster->Forecast(steps)));
      }
    }
    if (r.forecaster->seasonal() && !r.predictions.empty()) {
      const double at_size = static_cast<double>(o.nodes) * c.node.gpus;
      if (at_size > 0) o.forecast_utilization = r.predictions.back().second / at_size;
    }
  }
  const ScaleDecision d = r.rule->Observe(o);
  if (d.kind == ScaleDecision::Kind::kOut && d.nodes > 0) {
    // POOL-3: first ask back the nodes this pool lent, then borrow empty
    // nodes of other pools; the provider is asked only for the rest.
    int32_t rest = d.nodes - RecallLentNodes(pool, d.nodes, now, sink);
    if (config_.borrow_between_pools && rest > 0) rest -= BorrowNodes(pool, rest, d.reason, now, sink);
    if (rest > 0) {
      Emit(ScaleOutRequested{pool, rest, d.reason}, now, sink);
      r.scale_outs.emplace_back(now, rest);
    }
  } else if (d.kind == ScaleDecision::Kind::kIn && d.nodes > 0) {
    DrainNodes(pool, d.nodes, d.reason, now, sink);
  }
  // SCALE-5: the warm pool follows the largest recent scale-out.
  if (c.warm_pool.enabled) {
    while (!r.scale_outs.empty() && r.scale_outs.front().first + c.warm_pool.lookback < now) r.scale_outs.pop_front();
    int32_t warm = 0;
    for (const auto& [at, nodes] : r.scale_outs) warm = std::max(warm, nodes);
    warm = std::min(warm, c.warm_pool.max_nodes);
    if (warm != state_.pool_scaling[pool].warm_nodes) Emit(WarmPoolSized{pool, warm}, now, sink);
  }
}

void Engine::DrainNodes(PoolId pool, int32_t count, const std::string& reason, Instant now, const Sink& sink) {
  // Candidates: ready nodes of the pool held for nobody. Capacity that runs
  // reserved tenants' work goes last; then empty, then least used
  // (fragmented) nodes first; then the highest index (the newest).
  struct Candidate {
    bool reserved_work;
    bool own;  // not borrowed from another pool (borrowed nodes go back first)
    int64_t used_milli;
    NodeIndex node;
  };
  std::vector<Candidate> candidates;
  std::vector<bool> reserved_work(state_.cluster.node_count(), false);
  for (const auto& [id, j] : state_.running) {
    const Quota& q = state_.tenant_pool(j->spec.tenant, j->pool).quota;
    if (!q.reserved) continue;
    for (const ReplicaPlacement& p : j->placements) reserved_work[p.node] = true;
  }
  for (NodeIndex n = 0; n < state_.cluster.node_count(); ++n) {
    const Node& node = state_.cluster.node(n);
    if (node.pool != pool || node.condition != NodeCondition::kReady || node.reserved_for >= 0) continue;
    const int64_t used = (node.gpu_milli_total() - node.gpu_milli_free_total) * 1000 +
                         (node.cpu_milli_total - node.cpu_milli_free) / 1000;
    candidates.push_back({reserved_work[n], !state_.lent_nodes.contains(n), used, n});
  }
  std::sort(candidates.begin(), candidates.end(), [](const Candidate& a, const Candidate& b) {
    if (a.reserved_work != b.reserved_work) return !a.reserved_work;
    if (a.own != b.own) return !a.own;
    if (a.used_milli != b.used_milli) return a.used_milli < b.used_milli;
    return a.node > b.node;
  });
  if (static_cast<int32_t>(candidates.size()) > count) candidates.resize(count);
  for (const Candidate& c : candidates) StartDrain(c.node, reason, now, sink);
}

void Engine::StartDrain(NodeIndex n, const std::string& reason, Instant now, const Sink& sink) {
  Emit(NodeDrainStarted{n, reason}, now, sink);
  drain_started_[n] = now;
  // Running work that can move, moves: elastic jobs shrink off the node
  // (SCALE-7); the rest is checkpointed first when it can be; stateless
  // online inference moves at once.
  for (JobId id : JobsOnNode(n)) {
    const Job& j = state_.job(id);
    if (j.state != JobState::kRunning || j.stopping != Job::Stop::kNone) continue;
    if (ShrinkElastic(j, n, "node " + state_.cluster.node_name(n) + " drains: " + reason, now, sink)) continue;
    if (!j.spec.checkpointable && j.spec.kind != JobKind::kOnlineInference) continue;
    const bool checkpoint = j.spec.checkpointable;
    low_polls_.erase(id);
    Emit(PreemptionStarted{id, -1, PreemptReason::kDrain, checkpoint}, now, sink);
    if (!checkpoint) Emit(JobPreempted{id, Duration(0)}, now, sink);  // stateless: nothing to lose
  }
}

void Engine::ProgressDrains(Instant now, const Sink& sink) {
  const std::vector<NodeIndex> draining(state_.draining.begin(), state_.draining.end());
  for (NodeIndex n : draining) {
    const Node& node = state_.cluster.node(n);
    auto started = drain_started_.find(n);
    if (started == drain_started_.end()) started = drain_started_.emplace(n, now).first;  // after a restart
    if (node.gpu_kinds_present == 0 && node.cpu_only_residents == 0) {
      // A borrowed node goes back to its pool (POOL-3); others leave.
      if (state_.lent_nodes.contains(n)) {
        Emit(NodeReturned{n}, now, sink);
      } else {
        Emit(NodeRemoved{n}, now, sink);
      }
      drain_started_.erase(n);
      continue;
    }
    // Past the drain timeout, what still runs there is stopped (its work
    // since its last checkpoint is lost) and queues again.
    Duration timeout = std::chrono::hours(1);
    for (const PoolScalingConfig& c : config_.scaling) {
      if (node.pool < state_.pools.size() && c.pool == state_.pools[node.pool].name) timeout = c.drain_timeout;
    }
    if (now - started->second < timeout) continue;
    for (JobId id : JobsOnNode(n)) {
      const Job& j = state_.job(id);
      if (j.state != JobState::kRunning || j.stopping != Job::Stop::kNone) continue;
      low_polls_.erase(id);
      Emit(PreemptionStarted{id, -1, PreemptReason::kDrain, false}, now, sink);
      Emit(JobPreempted{id, LostWork(j, now)}, now, sink);
    }
  }
}

}  // namespace gpupool
