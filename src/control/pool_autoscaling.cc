#include "src/control/pool_autoscaling.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "src/engine/queries.h"

namespace gpupool {
namespace {

struct QueuedDemand {
  int64_t jobs = 0;
  int64_t gpu_milli = 0;
};

// Tenant t's queued jobs that may use `pool` and that its quota there would
// admit on new nodes (pool_autoscaling.h, "queued demand"): in queue order,
// each while its GPUs fit the headroom the jobs before it left. Jobs room
// is being made for (preemption or a MIG re-cut, PART-5: vertical scaling
// serves them without a new node) are left out.
QueuedDemand AdmissibleQueue(const EngineState& s, TenantId t, PoolId pool) {
  if (s.tenant_pool(t, pool).quota.elastic_limit_milli == 0) return {};  // no quota: never admitted there
  std::vector<std::pair<QueueKey, int64_t>> jobs;  // (queue key, GPU milli)
  int64_t total = 0;
  for (const auto& [key, group] : s.queue.find_tenant(t)->groups) {
    if (!(key.pools >> pool & 1)) continue;
    for (const QueueKey& k : group.jobs) {
      const Job& j = s.job(k.job);
      if (j.victims_pending > 0) continue;
      jobs.emplace_back(k, j.spec.total_gpu_milli());
      total += jobs.back().second;
    }
  }
  int64_t headroom = QuotaHeadroom(s, t, pool);
  if (total <= headroom) return {static_cast<int64_t>(jobs.size()), total};  // all fit: order does not matter
  std::sort(jobs.begin(), jobs.end());  // queue order across groups
  QueuedDemand d;
  for (const auto& [key, milli] : jobs) {
    if (milli > headroom) continue;  // placement passes it over too: a later, smaller job may fit
    headroom -= milli;
    ++d.jobs;
    d.gpu_milli += milli;
  }
  return d;
}

}  // namespace

PoolAutoscaling::PoolAutoscaling(std::vector<PoolScalingConfig> scaling, bool borrow_between_pools)
    : scaling_(std::move(scaling)), borrow_between_pools_(borrow_between_pools) {}

std::vector<ForecastStats> PoolAutoscaling::forecast_stats() const {
  std::vector<ForecastStats> out;
  for (size_t i = 0; i < runtime_.size(); ++i) {
    const Runtime& r = runtime_[i];
    if (!r.forecaster) continue;
    ForecastStats s;
    s.pool = scaling_[i].pool;
    s.predictions = r.predicted;
    if (r.predicted > 0) {
      s.mean_abs_error_gpus = r.abs_error_sum / static_cast<double>(r.predicted);
      s.mean_actual_gpus = r.actual_sum / static_cast<double>(r.predicted);
    }
    out.push_back(s);
  }
  return out;
}

void PoolAutoscaling::Tick(const EngineView& view, Actions& act) {
  if (scaling_.empty()) return;
  if (runtime_.size() != scaling_.size()) {
    runtime_.resize(scaling_.size());
    for (size_t i = 0; i < runtime_.size(); ++i) {
      const PoolScalingConfig& c = scaling_[i];
      runtime_[i].rule = *Autoscaler::Create(c.rule);  // checked by Engine::Create
      if (c.forecast.enabled) {
        const ForecastConfig& f = c.forecast;
        runtime_[i].forecaster =
            *HoltWinters::Create({static_cast<int>(f.season / f.step), f.alpha, f.beta, f.gamma});
      }
    }
  }
  ProgressDrains(view, act);
  for (size_t i = 0; i < runtime_.size(); ++i) ScalePool(i, view, act);
}

void PoolAutoscaling::ScalePool(size_t index, const EngineView& view, Actions& act) {
  Runtime& r = runtime_[index];
  if (!r.resolved) {
    for (const Pool& p : view.state().pools) {
      if (p.name == scaling_[index].pool) {
        r.pool = p.id;
        r.resolved = true;
      }
    }
    if (!r.resolved) return;
  }
  PoolLoad load = ObservePool(r.pool, view);
  if (r.forecaster) Forecast(index, load.demand_milli, load.observation);
  const ScaleDecision d = r.rule->Observe(load.observation);
  if (d.kind == ScaleDecision::Kind::kOut && d.nodes > 0) {
    ScaleOut(index, d.nodes, d.reason, view, act);
  } else if (d.kind == ScaleDecision::Kind::kIn && d.nodes > 0) {
    DrainNodes(r.pool, d.nodes, d.reason, view, act);
  }
  if (scaling_[index].warm_pool.enabled) SizeWarmPool(index, view, act);
}

PoolAutoscaling::PoolLoad PoolAutoscaling::ObservePool(PoolId pool, const EngineView& view) const {
  const EngineState& s = view.state();
  // The pool as it is: ready nodes and their allocation.
  int32_t ready = 0;
  int64_t capacity = 0, allocated = 0;
  for (const Node& n : s.cluster.nodes()) {
    if (n.pool != pool || n.condition != NodeCondition::kReady) continue;
    ++ready;
    capacity += n.gpu_milli_total();
    allocated += n.gpu_milli_total() - n.gpu_milli_free_total;
  }
  // SCALE-7: what elastic jobs grew onto is idle capacity lent to them, not
  // demand (else they would keep the pool scaling out for themselves).
  if (view.AnyElastic()) {
    for (const auto& [id, j] : s.running) {
      if (j->pool != pool || !j->spec.elastic() || j->spec.replicas <= j->spec.min_replicas) continue;
      allocated -= int64_t{j->spec.replicas - j->spec.min_replicas} * j->spec.demand.total_gpu_milli();
    }
    allocated = std::max<int64_t>(allocated, 0);
  }
  // Pending jobs that may use the pool and that quota would admit there.
  int64_t queued = 0, queued_milli = 0;
  for (TenantId t : s.queue.tenants()) {
    const QueuedDemand d = AdmissibleQueue(s, t, pool);
    queued += d.jobs;
    queued_milli += d.gpu_milli;
  }
  PoolLoad load;
  PoolObservation& o = load.observation;
  o.now = view.now();
  o.utilization = capacity > 0 ? static_cast<double>(allocated) / static_cast<double>(capacity) : (queued > 0 ? 1 : 0);
  o.queued_jobs = queued;
  o.nodes = ready + s.pool_scaling[pool].requested_nodes;
  // Issue 16: a scale-in keeps the capacity the guarantees need. Without
  // guarantees in the pool the rule stays unbounded (DrainNodes drains the
  // candidates there are).
  if (GuaranteedMilli(s, pool) > 0) {
    const Result<std::vector<NodeIndex>> removable = ScaleInNodes(s, pool, std::numeric_limits<int32_t>::max());
    o.removable_nodes = removable ? static_cast<int32_t>(removable->size()) : 0;
  }
  load.demand_milli = allocated + queued_milli;
  return load;
}

void PoolAutoscaling::Forecast(size_t index, int64_t demand_milli, PoolObservation& o) {
  const PoolScalingConfig& c = scaling_[index];
  const ForecastConfig& f = c.forecast;
  Runtime& r = runtime_[index];
  const Instant now = o.now;
  // The forecast `ahead` is compared with the demand when its time comes.
  const double demand_gpus = static_cast<double>(demand_milli) / kMilliPerGpu;
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

void PoolAutoscaling::ScaleOut(size_t index, int32_t nodes, const std::string& reason, const EngineView& view,
                               Actions& act) {
  Runtime& r = runtime_[index];
  // POOL-3: first ask back the nodes this pool lent, then borrow empty
  // nodes of other pools; the provider is asked only for the rest.
  int32_t rest = nodes - RecallLentNodes(r.pool, nodes, view, act);
  if (borrow_between_pools_ && rest > 0) rest -= BorrowNodes(r.pool, rest, reason, view, act);
  if (rest > 0) {
    act.Emit(ScaleOutRequested{r.pool, rest, reason});
    r.scale_outs.emplace_back(view.now(), rest);
  }
}

void PoolAutoscaling::SizeWarmPool(size_t index, const EngineView& view, Actions& act) {
  // SCALE-5: the warm pool follows the largest recent scale-out.
  const WarmPoolConfig& c = scaling_[index].warm_pool;
  Runtime& r = runtime_[index];
  const Instant now = view.now();
  while (!r.scale_outs.empty() && r.scale_outs.front().first + c.lookback < now) r.scale_outs.pop_front();
  int32_t warm = 0;
  for (const auto& [at, nodes] : r.scale_outs) warm = std::max(warm, nodes);
  warm = std::min(warm, c.max_nodes);
  if (warm != view.state().pool_scaling[r.pool].warm_nodes) act.Emit(WarmPoolSized{r.pool, warm});
}

}  // namespace gpupool
