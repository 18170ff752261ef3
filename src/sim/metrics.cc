#include "src/sim/metrics.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

namespace gpupool {
namespace {

constexpr double kMsPerHour = 3600.0 * 1000.0;

double Round3(double v) { return std::round(v * 1000.0) / 1000.0; }

nlohmann::json PercentilesJson(const Percentiles& p) {
  return {{"p50", Round3(p.p50)}, {"p95", Round3(p.p95)}, {"p99", Round3(p.p99)}, {"mean", Round3(p.mean)},
          {"count", p.count}};
}

nlohmann::json MoveJson(const MoveReport& m) {
  return {{"moves", m.moves},
          {"stateless_moves", m.stateless_moves},
          {"downtime_s", PercentilesJson(m.downtime_s)},
          {"downtime_hours", Round3(m.downtime_hours)},
          {"stateless_downtime_hours", Round3(m.stateless_downtime_hours)}};
}

nlohmann::json ClassJson(const ClassReport& c) {
  return {{"submitted", c.submitted},
          {"rejected", c.rejected},
          {"started", c.started},
          {"completed", c.completed},
          {"wait_s", PercentilesJson(c.wait_s)},
          {"jct_s", PercentilesJson(c.jct_s)},
          {"gpu_hours_completed", Round3(c.gpu_hours_completed)}};
}

}  // namespace

Percentiles ComputePercentiles(std::vector<double>& values) {
  Percentiles p;
  p.count = static_cast<int64_t>(values.size());
  if (values.empty()) return p;
  std::sort(values.begin(), values.end());
  auto at = [&](double q) {
    const auto rank = static_cast<size_t>(std::ceil(q * static_cast<double>(values.size())));
    return values[std::min(values.size() - 1, rank == 0 ? 0 : rank - 1)];
  };
  p.p50 = at(0.50);
  p.p95 = at(0.95);
  p.p99 = at(0.99);
  double sum = 0;
  for (double v : values) sum += v;
  p.mean = sum / static_cast<double>(values.size());
  return p;
}

std::vector<double> PercentileSteps(const std::vector<double>& sorted) {
  std::vector<double> out;
  if (sorted.empty()) return out;
  out.reserve(101);
  for (int q = 0; q <= 100; ++q) {
    const auto rank = static_cast<size_t>(std::ceil(q / 100.0 * static_cast<double>(sorted.size())));
    out.push_back(sorted[std::min(sorted.size() - 1, rank == 0 ? 0 : rank - 1)]);
  }
  return out;
}

MetricsCollector::MetricsCollector(const std::vector<SimJob>* jobs, const EngineState* state, Duration sample_every)
    : jobs_(jobs), state_(state), sample_every_(sample_every), records_(jobs->size()) {}

void MetricsCollector::Submitted(size_t job, Instant now) {
  records_[job].submitted = now;
  records_[job].seen = true;
}
void MetricsCollector::Rejected(size_t job) {
  records_[job].rejected = true;
  records_[job].seen = true;
}
void MetricsCollector::Started(size_t job, Instant now) {
  if (!records_[job].started) records_[job].started = now;
}
void MetricsCollector::Completed(size_t job, Instant now) { records_[job].completed = now; }
void MetricsCollector::Ended(size_t job) { records_[job].ended = true; }

void MetricsCollector::Preempted(size_t job, Duration lost) {
  const SimJob& j = (*jobs_)[job];
  const double lost_area = static_cast<double>(j.spec.total_gpu_milli()) * static_cast<double>(ToMillis(lost));
  ++preemptions_;
  lost_ += lost_area;
  const auto t = static_cast<size_t>(j.spec.tenant);
  if (tenant_preemptions_.size() <= t) {
    tenant_preemptions_.resize(t + 1, 0);
    tenant_lost_.resize(t + 1, 0);
  }
  ++tenant_preemptions_[t];
  tenant_lost_[t] += lost_area;
}

void MetricsCollector::Integrate(Instant now) {
  const double dt = static_cast<double>(ToMillis(now - last_));
  if (dt > 0) {
    allocated_area_ += static_cast<double>(last_allocated_) * dt;
    capacity_area_ += static_cast<double>(capacity_last_) * dt;
    billed_area_ += billed_last_ * dt;
    if (billed_last_ > 0 || warm_last_ > 0) Bill(static_cast<double>(ToMillis(last_)), dt);
    if (waiting_last_) {
      waiting_ms_ += dt;
      free_while_waiting_ += static_cast<double>(capacity_last_ - last_allocated_) * dt;
      capacity_while_waiting_ += static_cast<double>(capacity_last_) * dt;
    }
    warm_area_ += warm_last_ * dt;
    for (size_t p = 0; p < pool_capacity_last_.size(); ++p) {
      pool_capacity_area_[p] += static_cast<double>(pool_capacity_last_[p]) * dt;
    }
    busy_area_ += busy_last_ * dt;
    for (size_t t = 0; t < tenant_last_.size(); ++t) tenant_area_[t] += static_cast<double>(tenant_last_[t]) * dt;
    for (size_t p = 0; p < pool_last_.size(); ++p) pool_area_[p] += static_cast<double>(pool_last_[p]) * dt;
  }
  last_ = now;
}

void MetricsCollector::MovedBack(PreemptReason why, Duration downtime, bool stateless) {
  MoveReport& m = moves_[why];
  const double hours = static_cast<double>(ToMillis(downtime)) / kMsPerHour;
  ++m.moves;
  m.downtime_hours += hours;
  if (stateless) {
    ++m.stateless_moves;
    m.stateless_downtime_hours += hours;
  }
  move_downtime_s_[why].push_back(ToSeconds(downtime));
}

void MetricsCollector::Bill(double from_ms, double dt_ms) {
  ScalingReport& s = scaling_;
  const double to_ms = from_ms + dt_ms;
  for (double t = from_ms; t < to_ms;) {
    const auto hour = static_cast<size_t>(t / kMsPerHour);
    const double end = std::min(to_ms, static_cast<double>(hour + 1) * kMsPerHour);
    if (s.billed_node_hours_by_hour.size() <= hour) {
      s.billed_node_hours_by_hour.resize(hour + 1, 0);
      s.warm_node_hours_by_hour.resize(hour + 1, 0);
    }
    s.billed_node_hours_by_hour[hour] += billed_last_ * (end - t) / kMsPerHour;
    s.warm_node_hours_by_hour[hour] += warm_last_ * (end - t) / kMsPerHour;
    t = end;
  }
}

void MetricsCollector::Observe(Instant now) {
  const int64_t total = capacity_last_;
  while (next_sample_ <= now && sample_every_ > Duration(0)) {
    // The allocation in force at the sample time is the one before `now`.
    const double hours = static_cast<double>(ToMillis(next_sample_)) / kMsPerHour;
    series_.emplace_back(hours, total > 0 ? 100.0 * static_cast<double>(last_allocated_) / static_cast<double>(total) : 0);
    busy_series_.emplace_back(hours, total > 0 ? 100.0 * busy_last_ * 1000.0 / static_cast<double>(total) : 0);
    if (nodes_last_ > 0 || !scaling_.node_series.empty()) scaling_.node_series.emplace_back(hours, nodes_last_);
    next_sample_ += sample_every_;
  }
  Integrate(now);
  last_allocated_ = state_->cluster.gpu_milli_allocated();
  capacity_last_ = 0;
  for (const auto& t : state_->pool_totals) capacity_last_ += t.gpu_milli;
  if (pool_capacity_area_.size() < state_->pool_totals.size()) pool_capacity_area_.resize(state_->pool_totals.size(), 0);
  pool_capacity_last_.resize(state_->pool_totals.size());
  for (size_t p = 0; p < pool_capacity_last_.size(); ++p) pool_capacity_last_[p] = state_->pool_totals[p].gpu_milli;
  waiting_last_ = state_->queue.size() > 0;
  nodes_last_ = nodes_next_;
  billed_last_ = billed_next_;
  warm_last_ = warm_next_;
  busy_last_ = busy_next_;
  const size_t tenants = state_->tenants.size();
  if (tenant_last_.size() < tenants) {
    tenant_last_.resize(tenants, 0);
    tenant_area_.resize(tenants, 0);
  }
  const size_t pools = state_->pools.size();
  pool_last_.assign(pools, 0);
  if (pool_area_.size() < pools) pool_area_.resize(pools, 0);
  for (size_t t = 0; t < tenants; ++t) {
    int64_t used = 0;
    const auto& tp = state_->tenants[t].pools;
    for (size_t p = 0; p < tp.size(); ++p) {
      used += tp[p].usage.gpu_milli;
      pool_last_[p] += tp[p].usage.gpu_milli;
    }
    tenant_last_[t] = used;
  }
}

SimReport MetricsCollector::Finish(Instant horizon, std::string scenario, int64_t events, std::string sha256) {
  Observe(horizon);
  SimReport r;
  r.scenario = std::move(scenario);
  r.horizon_h = static_cast<double>(ToMillis(horizon)) / kMsPerHour;
  r.events = events;
  r.event_log_sha256 = std::move(sha256);
  r.allocation_series = series_;
  r.busy_series = busy_series_;
  r.allocation_pct_mean = capacity_area_ > 0 ? 100.0 * allocated_area_ / capacity_area_ : 0;
  r.gpu_hours_in_service = capacity_area_ / 1000.0 / kMsPerHour;
  r.preemptions = preemptions_;
  r.gpu_hours_lost = lost_ / 1000.0 / kMsPerHour;
  ReportPools(r);
  ReportJobs(horizon, r);
  ReportTenants(r);
  r.jobs_completed_per_hour = r.horizon_h > 0 ? static_cast<double>(r.all.completed) / r.horizon_h : 0;
  ReportSharingAndReclaim(r);
  ReportRecovery(r);
  ReportMovesAndScaling(r);
  return r;
}

void MetricsCollector::ReportPools(SimReport& r) const {
  for (size_t p = 0; p < state_->pools.size(); ++p) {
    PoolReport& pr = r.pools[state_->pools[p].name];
    if (p < pool_area_.size() && p < pool_capacity_area_.size() && pool_capacity_area_[p] > 0) {
      pr.allocation_pct_mean = 100.0 * pool_area_[p] / pool_capacity_area_[p];
    }
    if (p < pool_area_.size()) pr.gpu_hours_used = pool_area_[p] / 1000.0 / kMsPerHour;
    pr.at_end = state_->Capacity(static_cast<PoolId>(p));
  }
}

namespace {

struct Samples {
  std::vector<double> wait, jct;
};

void Fill(ClassReport& c, Samples& s) {
  c.wait_s = ComputePercentiles(s.wait);
  c.wait_quantiles_s = PercentileSteps(s.wait);
  c.jct_s = ComputePercentiles(s.jct);
}

}  // namespace

// Waits and completion times by class and tenant, from the job records.
void MetricsCollector::ReportJobs(Instant horizon, SimReport& r) const {
  Samples all;
  std::map<std::string, Samples> by_class;
  std::map<std::string, Samples> by_tenant;
  auto tenant_name = [this](TenantId t) { return state_->tenants[t].name; };
  for (const Tenant& t : state_->tenants) r.by_tenant[t.name];
  for (size_t i = 0; i < records_.size(); ++i) {
    const JobRecord& rec = records_[i];
    if (!rec.seen) continue;
    const SimJob& j = (*jobs_)[i];
    const std::string tname = tenant_name(j.spec.tenant);
    ClassReport* reports[] = {&r.all, &r.by_priority[j.priority_class], &r.by_tenant[tname].jobs};
    Samples* samples[] = {&all, &by_class[j.priority_class], &by_tenant[tname]};
    for (ClassReport* c : reports) {
      ++c->submitted;
      if (rec.rejected) ++c->rejected;
    }
    if (rec.rejected) continue;
    const Instant started_or_now = rec.started.value_or(horizon);
    const double wait = ToSeconds(started_or_now - rec.submitted);
    for (Samples* s : samples) s->wait.push_back(wait);
    if (rec.started) {
      for (ClassReport* c : reports) ++c->started;
    }
    if (rec.completed) {
      const double jct = ToSeconds(*rec.completed - rec.submitted);
      const double gpu_hours =
          static_cast<double>(j.spec.total_gpu_milli()) / 1000.0 * static_cast<double>(ToMillis(j.work)) / kMsPerHour;
      for (ClassReport* c : reports) {
        ++c->completed;
        c->gpu_hours_completed += gpu_hours;
      }
      for (Samples* s : samples) s->jct.push_back(jct);
    } else if (rec.ended) {
      ++r.ended;
    } else {
      ++r.unfinished;
    }
  }
  Fill(r.all, all);
  for (auto& [name, c] : r.by_priority) Fill(c, by_class[name]);
  for (const Tenant& t : state_->tenants) Fill(r.by_tenant[t.name].jobs, by_tenant[t.name]);
}

// Each tenant's share received, its entitlements, preemptions and losses.
void MetricsCollector::ReportTenants(SimReport& r) const {
  double weight_total = 0;
  for (const Tenant& t : state_->tenants) {
    for (const TenantPool& tp : t.pools) {
      if (tp.quota.elastic_limit_milli > 0) {
        weight_total += tp.quota.weight;
        break;
      }
    }
  }
  for (const Tenant& t : state_->tenants) {
    TenantReport& tr = r.by_tenant[t.name];
    const auto id = static_cast<size_t>(t.id);
    if (id < tenant_area_.size() && capacity_area_ > 0) tr.share_received_pct = 100.0 * tenant_area_[id] / capacity_area_;
    double guaranteed = 0, pool_gpus = 0, weight = 0;
    for (size_t p = 0; p < t.pools.size(); ++p) {
      if (t.pools[p].quota.elastic_limit_milli == 0) continue;
      guaranteed += static_cast<double>(t.pools[p].quota.guaranteed_milli);
      pool_gpus += static_cast<double>(state_->pool_totals[p].gpu_milli);
      weight = std::max(weight, t.pools[p].quota.weight);
    }
    tr.entitlement_guaranteed_pct = pool_gpus > 0 ? 100.0 * guaranteed / pool_gpus : 0;
    tr.entitlement_weight_pct = weight_total > 0 ? 100.0 * weight / weight_total : 0;
    if (id < tenant_preemptions_.size()) {
      tr.preemptions = tenant_preemptions_[id];
      tr.gpu_hours_lost = tenant_lost_[id] / 1000.0 / kMsPerHour;
    }
  }
}

void MetricsCollector::ReportSharingAndReclaim(SimReport& r) {
  // Busy GPUs over the GPUs in service (time-weighted).
  r.sharing.gpu_busy_pct_mean = capacity_area_ > 0 ? 100.0 * busy_area_ * 1000.0 / capacity_area_ : 0;
  r.sharing.interference_slowdown_pct = uncrowded_ms_ > 0 ? 100.0 * (wall_ms_ / uncrowded_ms_ - 1.0) : 0;
  r.sharing.share_limit_slowdown_pct = alone_ms_ > 0 ? 100.0 * (uncrowded_ms_ / alone_ms_ - 1.0) : 0;
  r.sharing.sharing_slowdown_pct = alone_ms_ > 0 ? 100.0 * (wall_ms_ / alone_ms_ - 1.0) : 0;
  r.sharing.scrubs = scrubs_;
  r.sharing.mig_setups = mig_setups_;
  r.sharing.mig_recuts = mig_recuts_;
  r.reclaim.idle_reclaims = static_cast<int64_t>(reclaim_latency_s_.size());
  r.reclaim.deadline_evictions = deadline_evictions_;
  r.reclaim.resumed = static_cast<int64_t>(resume_latency_s_.size());
  r.reclaim.never_resumed = never_resumed_;
  r.reclaim.reclaim_latency_s = ComputePercentiles(reclaim_latency_s_);
  r.reclaim.reallocation_latency_s = ComputePercentiles(reallocation_latency_s_);
  r.reclaim.resume_latency_s = ComputePercentiles(resume_latency_s_);
  r.reclaim.busy_while_away_hours = busy_while_away_ms_ / kMsPerHour;
  r.reclaim.idle_gpu_hours = idle_gpu_ms_ / kMsPerHour;
  r.reclaim.held_gpu_hours = held_gpu_ms_ / kMsPerHour;
}

void MetricsCollector::ReportRecovery(SimReport& r) {
  r.recovery.node_failures = node_failures_;
  r.recovery.interruptions = static_cast<int64_t>(lost_work_s_.size());
  r.recovery.not_replaced = not_replaced_;
  r.recovery.replace_latency_s = ComputePercentiles(replace_latency_s_);
  r.recovery.placement_latency_s = ComputePercentiles(placement_latency_s_);
  if (!replace_latency_s_.empty()) {
    const auto fast = std::count_if(replace_latency_s_.begin(), replace_latency_s_.end(), [](double s) { return s <= 30; });
    r.recovery.replaced_within_30s_pct = 100.0 * static_cast<double>(fast) / static_cast<double>(replace_latency_s_.size());
  }
  r.recovery.lost_work_s = ComputePercentiles(lost_work_s_);
}

void MetricsCollector::ReportMovesAndScaling(SimReport& r) {
  r.topology = topology_;
  r.scaling = scaling_;
  r.defrag = defrag_;
  r.hotspots = hotspots_;
  r.defrag.waiting_hours = waiting_ms_ / kMsPerHour;
  r.defrag.unallocated_gpu_hours_while_waiting = free_while_waiting_ / 1000.0 / kMsPerHour;
  r.defrag.migrations_per_hour = r.horizon_h > 0 ? static_cast<double>(defrag_.migrations) / r.horizon_h : 0;
  // Free GPU milli over GPU milli in service, integrated over the times jobs waited.
  if (capacity_while_waiting_ > 0) {
    r.defrag.unallocated_while_waiting_pct = 100.0 * free_while_waiting_ / capacity_while_waiting_;
  }
  auto moves = [this](PreemptReason why) {
    MoveReport m = moves_[why];
    m.downtime_s = ComputePercentiles(move_downtime_s_[why]);
    return m;
  };
  r.defrag.moved = moves(PreemptReason::kDefrag);
  r.scaling.drain_moves = moves(PreemptReason::kDrain);
  r.hotspots.moved = moves(PreemptReason::kHotspot);
  r.scaling.node_hours = billed_area_ / kMsPerHour;
  r.scaling.warm_node_hours = warm_area_ / kMsPerHour;
  if (!r.scaling.node_series.empty()) {
    r.scaling.nodes_min = r.scaling.nodes_max = r.scaling.node_series.front().second;
    for (const auto& [h, n] : r.scaling.node_series) {
      r.scaling.nodes_min = std::min(r.scaling.nodes_min, n);
      r.scaling.nodes_max = std::max(r.scaling.nodes_max, n);
    }
  }
}

namespace {

nlohmann::json SharingJson(const SharingReport& x) {
  return {{"gpu_busy_pct_mean", Round3(x.gpu_busy_pct_mean)},
          {"interference_slowdown_pct", Round3(x.interference_slowdown_pct)},
          {"share_limit_slowdown_pct", Round3(x.share_limit_slowdown_pct)},
          {"sharing_slowdown_pct", Round3(x.sharing_slowdown_pct)},
          {"scrubs", x.scrubs},
          {"mig_setups", x.mig_setups},
          {"mig_recuts", x.mig_recuts}};
}

nlohmann::json ReclaimJson(const ReclaimReport& x) {
  return {{"idle_reclaims", x.idle_reclaims},
          {"deadline_evictions", x.deadline_evictions},
          {"resumed", x.resumed},
          {"never_resumed", x.never_resumed},
          {"reclaim_latency_s", PercentilesJson(x.reclaim_latency_s)},
          {"reallocation_latency_s", PercentilesJson(x.reallocation_latency_s)},
          {"resume_latency_s", PercentilesJson(x.resume_latency_s)},
          {"busy_while_away_hours", Round3(x.busy_while_away_hours)},
          {"idle_gpu_hours", Round3(x.idle_gpu_hours)},
          {"held_gpu_hours", Round3(x.held_gpu_hours)}};
}

nlohmann::json RecoveryJson(const RecoveryReport& x) {
  return {{"node_failures", x.node_failures},
          {"interruptions", x.interruptions},
          {"not_replaced", x.not_replaced},
          {"replace_latency_s", PercentilesJson(x.replace_latency_s)},
          {"placement_latency_s", PercentilesJson(x.placement_latency_s)},
          {"replaced_within_30s_pct", Round3(x.replaced_within_30s_pct)},
          {"lost_work_s", PercentilesJson(x.lost_work_s)}};
}

nlohmann::json TopologyJson(const TopologyReport& x) {
  return {{"placements", x.placements},
          {"spanning_nodes", x.spanning_nodes},
          {"spanning_racks", x.spanning_racks},
          {"steps", Round3(x.steps)},
          {"cross_rack_gib", Round3(x.cross_rack_gib)},
          {"cross_node_gib", Round3(x.cross_node_gib)},
          {"cross_rack_gib_per_step", Round3(x.cross_rack_gib_per_step())},
          {"comm_hours", Round3(x.comm_hours)},
          {"comm_overhead_pct", Round3(x.comm_overhead_pct())}};
}

nlohmann::json ScalingJson(const ScalingReport& x) {
  return {{"scale_outs", x.scale_outs},
          {"nodes_requested", x.nodes_requested},
          {"nodes_added", x.nodes_added},
          {"warm_starts", x.warm_starts},
          {"drains", x.drains},
          {"nodes_removed", x.nodes_removed},
          {"drained_jobs", x.drained_jobs},
          {"elastic_resizes", x.elastic_resizes},
          {"elastic_reshard_hours", Round3(x.elastic_reshard_hours)},
          {"drain_moves", MoveJson(x.drain_moves)},
          {"drained_lost_work_s", Round3(x.drained_lost_work_s)},
          {"node_hours", Round3(x.node_hours)},
          {"warm_node_hours", Round3(x.warm_node_hours)},
          {"cost", Round3(x.cost)},
          {"nodes_min", Round3(x.nodes_min)},
          {"nodes_max", Round3(x.nodes_max)},
          {"forecasts", x.forecasts},
          {"forecast_mae_gpus", Round3(x.forecast_mae_gpus)},
          {"forecast_mean_actual_gpus", Round3(x.forecast_mean_actual_gpus)}};
}

nlohmann::json DefragJson(const DefragReport& x) {
  return {{"migrations", x.migrations},
          {"migrations_per_hour", Round3(x.migrations_per_hour)},
          {"migration_lost_work_s", Round3(x.migration_lost_work_s)},
          {"moved", MoveJson(x.moved)},
          {"unallocated_while_waiting_pct", Round3(x.unallocated_while_waiting_pct)},
          {"waiting_hours", Round3(x.waiting_hours)}};
}

nlohmann::json HotspotsJson(const HotspotReport& x) {
  return {{"detected", x.detected},
          {"cleared", x.cleared},
          {"moves", x.moves},
          {"moved", MoveJson(x.moved)}};
}

// The by_priority, by_tenant and pools objects.
nlohmann::json ByTenantJson(const SimReport& r) {
  nlohmann::json by_tenant = nlohmann::json::object();
  for (const auto& [name, t] : r.by_tenant) {
    by_tenant[name] = {{"jobs", ClassJson(t.jobs)},
                       {"share_received_pct", Round3(t.share_received_pct)},
                       {"entitlement_guaranteed_pct", Round3(t.entitlement_guaranteed_pct)},
                       {"entitlement_weight_pct", Round3(t.entitlement_weight_pct)},
                       {"preemptions", t.preemptions},
                       {"gpu_hours_lost", Round3(t.gpu_hours_lost)}};
  }
  return by_tenant;
}

nlohmann::json PoolsJson(const SimReport& r) {
  nlohmann::json pools = nlohmann::json::object();
  for (const auto& [name, p] : r.pools) {
    const auto gpus = [](int64_t milli) { return Round3(static_cast<double>(milli) / 1000.0); };
    pools[name] = {{"allocation_pct_mean", Round3(p.allocation_pct_mean)},
                   {"gpu_hours_used", Round3(p.gpu_hours_used)},
                   {"capacity_at_end_gpus",
                    {{"total", gpus(p.at_end.total_milli)},
                     {"allocated", gpus(p.at_end.allocated_milli)},
                     {"reserved", gpus(p.at_end.reserved_milli)},
                     {"fragmented", gpus(p.at_end.fragmented_milli)},
                     {"available", gpus(p.at_end.available_milli)}}}};
  }
  return pools;
}

}  // namespace

nlohmann::json ToJson(const SimReport& r) {
  nlohmann::json by_priority = nlohmann::json::object();
  for (const auto& [name, c] : r.by_priority) by_priority[name] = ClassJson(c);
  nlohmann::json series = nlohmann::json::array();
  for (const auto& [h, pct] : r.allocation_series) series.push_back({Round3(h), Round3(pct)});
  return {{"scenario", r.scenario},
          {"horizon_h", Round3(r.horizon_h)},
          {"jobs", ClassJson(r.all)},
          {"by_priority", by_priority},
          {"by_tenant", ByTenantJson(r)},
          {"pools", PoolsJson(r)},
          {"gpu_allocation_pct_mean", Round3(r.allocation_pct_mean)},
          {"gpu_allocation_series", series},
          {"jobs_completed_per_hour", Round3(r.jobs_completed_per_hour)},
          {"preemptions", r.preemptions},
          {"gpu_hours_lost_to_preemption", Round3(r.gpu_hours_lost)},
          {"unfinished", r.unfinished},
          {"ended", r.ended},
          {"sharing", SharingJson(r.sharing)},
          {"reclaim", ReclaimJson(r.reclaim)},
          {"recovery", RecoveryJson(r.recovery)},
          {"topology", TopologyJson(r.topology)},
          {"scaling", ScalingJson(r.scaling)},
          {"defrag", DefragJson(r.defrag)},
          {"hotspots", HotspotsJson(r.hotspots)},
          {"events", r.events},
          {"event_log_sha256", r.event_log_sha256}};
}

std::string FormatReport(const SimReport& r) {
  std::string out;
  char line[512];
  auto add = [&](const char* fmt, auto... args) {
    std::snprintf(line, sizeof line, fmt, args...);
    out += line;
  };
  add("Scenario %s: %.1f h simulated, %lld events, event log sha256 %s\n\n", r.scenario.c_str(), r.horizon_h,
      static_cast<long long>(r.events), r.event_log_sha256.c_str());
  add("Cluster: GPU allocation %.1f%% (time-weighted); %lld jobs submitted, %lld rejected, %lld completed "
      "(%.1f/h, %.1f GPU-hours), %lld unfinished\n",
      r.allocation_pct_mean, static_cast<long long>(r.all.submitted), static_cast<long long>(r.all.rejected),
      static_cast<long long>(r.all.completed), r.jobs_completed_per_hour, r.all.gpu_hours_completed,
      static_cast<long long>(r.unfinished));
  add("         %lld preemptions, %.1f GPU-hours of work lost to them; JCT p50 %.0f s, p95 %.0f s, p99 %.0f s\n",
      static_cast<long long>(r.preemptions), r.gpu_hours_lost, r.all.jct_s.p50, r.all.jct_s.p95, r.all.jct_s.p99);
  add("         GPUs busy %.1f%% (time-weighted); sharing slowed GPU jobs by %.1f%% (co-location %.1f%%, share "
      "limits %.1f%%); %lld scrubs, %lld MIG set-ups, %lld re-cuts\n",
      r.sharing.gpu_busy_pct_mean, r.sharing.sharing_slowdown_pct, r.sharing.interference_slowdown_pct,
      r.sharing.share_limit_slowdown_pct, static_cast<long long>(r.sharing.scrubs),
      static_cast<long long>(r.sharing.mig_setups), static_cast<long long>(r.sharing.mig_recuts));
  if (r.reclaim.idle_reclaims + r.reclaim.deadline_evictions > 0 || r.ended > 0) {
    add("Reclaim: %lld idle reclaims (idle to release p50 %.1f s, release to reuse p50 %.1f s), %lld resumed "
        "(p50 %.1f s), %lld ended before their owner was back, %.1f h busy while away; %lld evicted at their "
        "deadline\n",
        static_cast<long long>(r.reclaim.idle_reclaims), r.reclaim.reclaim_latency_s.p50,
        r.reclaim.reallocation_latency_s.p50, static_cast<long long>(r.reclaim.resumed),
        r.reclaim.resume_latency_s.p50, static_cast<long long>(r.reclaim.never_resumed),
        r.reclaim.busy_while_away_hours, static_cast<long long>(r.reclaim.deadline_evictions));
  }
  add("         GPUs held idle: %.1f of %.1f GPU-hours held\n", r.reclaim.idle_gpu_hours, r.reclaim.held_gpu_hours);
  if (r.recovery.node_failures > 0) {
    add("Failures: %lld nodes failed, %lld jobs interrupted; running again p50 %.1f s, p99 %.1f s after the "
        "failure (%lld not re-placed by the horizon); lost work mean %.0f s\n",
        static_cast<long long>(r.recovery.node_failures), static_cast<long long>(r.recovery.interruptions),
        r.recovery.replace_latency_s.p50, r.recovery.replace_latency_s.p99,
        static_cast<long long>(r.recovery.not_replaced), r.recovery.lost_work_s.mean);
  }
  if (r.scaling.scale_outs + r.scaling.drains > 0) {
    add("Scaling: %lld scale-outs (%lld nodes, %lld from the warm pool), %lld drains (%lld nodes removed, %lld jobs "
        "moved, %.0f s of work lost); nodes %.0f-%.0f; %.1f node-hours (+%.1f warm), cost %.1f\n",
        static_cast<long long>(r.scaling.scale_outs), static_cast<long long>(r.scaling.nodes_added),
        static_cast<long long>(r.scaling.warm_starts), static_cast<long long>(r.scaling.drains),
        static_cast<long long>(r.scaling.nodes_removed), static_cast<long long>(r.scaling.drained_jobs),
        r.scaling.drained_lost_work_s, r.scaling.nodes_min, r.scaling.nodes_max, r.scaling.node_hours,
        r.scaling.warm_node_hours, r.scaling.cost);
  }
  if (r.topology.placements > 0) {
    add("Topology: %lld placements of communicating jobs, %lld over several nodes, %lld over several racks; "
        "%.2f GiB cross-rack per step, communication %.1f%% of step time\n",
        static_cast<long long>(r.topology.placements), static_cast<long long>(r.topology.spanning_nodes),
        static_cast<long long>(r.topology.spanning_racks), r.topology.cross_rack_gib_per_step(),
        r.topology.comm_overhead_pct());
  }
  out += "\n";
  add("%-14s %9s %9s %9s %10s %10s %10s %12s\n", "priority", "submitted", "started", "completed", "wait p50 s",
      "wait p95 s", "wait p99 s", "GPU-h done");
  for (const auto& [name, c] : r.by_priority) {
    add("%-14s %9lld %9lld %9lld %10.0f %10.0f %10.0f %12.1f\n", name.c_str(), static_cast<long long>(c.submitted),
        static_cast<long long>(c.started), static_cast<long long>(c.completed), c.wait_s.p50, c.wait_s.p95,
        c.wait_s.p99, c.gpu_hours_completed);
  }
  add("\n%-14s %9s %9s %10s %10s %9s %10s %10s %11s\n", "tenant", "submitted", "completed", "wait p50 s", "wait p95 s",
      "share %", "guarant. %", "weight %", "preempted");
  for (const auto& [name, t] : r.by_tenant) {
    add("%-14s %9lld %9lld %10.0f %10.0f %9.1f %10.1f %10.1f %11lld\n", name.c_str(),
        static_cast<long long>(t.jobs.submitted), static_cast<long long>(t.jobs.completed), t.jobs.wait_s.p50,
        t.jobs.wait_s.p95, t.share_received_pct, t.entitlement_guaranteed_pct, t.entitlement_weight_pct,
        static_cast<long long>(t.preemptions));
  }
  add("\n%-14s %9s | %40s\n", "pool", "alloc %", "at the horizon, GPUs: total alloc reserv frag avail");
  for (const auto& [name, p] : r.pools) {
    add("%-14s %9.1f | %20.1f %5.1f %6.1f %4.1f %5.1f\n", name.c_str(), p.allocation_pct_mean,
        p.at_end.total_milli / 1000.0, p.at_end.allocated_milli / 1000.0, p.at_end.reserved_milli / 1000.0,
        p.at_end.fragmented_milli / 1000.0, p.at_end.available_milli / 1000.0);
  }
  if (!r.allocation_series.empty()) {
    out += "\nGPU allocation over time (% of GPUs):";
    const size_t step = std::max<size_t>(1, r.allocation_series.size() / 24);
    for (size_t i = 0; i < r.allocation_series.size(); i += step) {
      add(" %.0fh:%.0f", r.allocation_series[i].first, r.allocation_series[i].second);
    }
    out += "\n";
  }
  return out;
}

}  // namespace gpupool
