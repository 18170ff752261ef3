#include "src/server/metrics.h"

#include <prometheus/text_serializer.h>

#include <shared_mutex>
#include <sstream>

#include "src/model/gpu_catalog.h"
#include "src/server/read_model.h"

namespace gpupool {
namespace {

using prometheus::BuildCounter;
using prometheus::BuildHistogram;
using prometheus::ClientMetric;
using prometheus::MetricFamily;
using prometheus::MetricType;

MetricFamily Gauge(std::string name, std::string help) {
  MetricFamily f;
  f.name = std::move(name);
  f.help = std::move(help);
  f.type = MetricType::Gauge;
  return f;
}

void Sample(MetricFamily& f, std::vector<ClientMetric::Label> labels, double value) {
  ClientMetric m;
  m.label = std::move(labels);
  m.gauge.value = value;
  f.metric.push_back(std::move(m));
}

// A counter computed at scrape time (from counts kept beside the registry).
MetricFamily CounterFamily(std::string name, std::string help) {
  MetricFamily f = Gauge(std::move(name), std::move(help));
  f.type = MetricType::Counter;
  return f;
}

void CounterSample(MetricFamily& f, std::vector<ClientMetric::Label> labels, double value) {
  ClientMetric m;
  m.label = std::move(labels);
  m.counter.value = value;
  f.metric.push_back(std::move(m));
}

prometheus::Histogram::BucketBoundaries LatencyBuckets() {
  return {0.00005, 0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5};
}

// The families Render fills from the read model, in the order they are
// exported (after the registry's own).
struct ModelFamilies {
  MetricFamily queue = Gauge("gpupool_queue_length", "Pending jobs by tenant and priority");
  MetricFamily guaranteed = Gauge("gpupool_quota_guaranteed_gpus", "Guaranteed GPUs per tenant and pool");
  MetricFamily limit = Gauge("gpupool_quota_limit_gpus", "Elastic limit in GPUs per tenant and pool");
  MetricFamily used = Gauge("gpupool_quota_used_gpus", "GPUs in use per tenant and pool");
  MetricFamily borrowed = Gauge("gpupool_quota_borrowed_gpus", "GPUs used beyond the effective guarantee");
  MetricFamily lent = Gauge("gpupool_quota_lent_gpus", "Part of the guarantee lent to the elastic pool");
  MetricFamily capacity = Gauge("gpupool_pool_capacity_gpus", "Capacity model of each pool (POOL-3)");
  MetricFamily node_up = Gauge("gpupool_node_up", "1 when the node is ready, 0 when cordoned or down");
  MetricFamily condition = Gauge("gpupool_node_condition",
                                 "1 for the node's condition (ready, cordoned, down, removed), 0 for the others");
  MetricFamily hotspot = Gauge("gpupool_node_hotspot", "1 while the node is a hotspot (cordoned until it cools down)");
  MetricFamily exhausted = Gauge("gpupool_quota_exhausted",
                                 "1 while a job of the tenant waits because the tenant is at its elastic limit");
  MetricFamily scale_requested = CounterFamily("gpupool_scale_out_requested_nodes_total",
                                               "Nodes the autoscaler asked of the node provider since the server started");
  MetricFamily scale_failed = CounterFamily("gpupool_scale_out_failed_nodes_total",
                                            "Nodes the node provider failed to create since the server started");
  MetricFamily unhealthy = Gauge("gpupool_gpu_unhealthy",
                                 "1 while the node agent reports the GPU unhealthy (a critical XID, a failed query)");
  // Bookings, not device readings: the device's own memory and utilization
  // are the agents' to export under the DCGM exporter's names.
  MetricFamily booked = Gauge("gpupool_gpu_memory_booked_mib",
                              "GPU memory held by allocations (MiB): a whole GPU is all booked, a share what it asked");
  MetricFamily unbooked = Gauge("gpupool_gpu_memory_unbooked_mib", "GPU memory no allocation holds (MiB)");
  MetricFamily util = Gauge("gpupool_gpu_reported_utilization_percent",
                            "GPU utilization in the node agent's last heartbeat (percent)");
  MetricFamily alloc = Gauge("gpupool_gpu_allocated_milli", "Compute share of the GPU allocated (thousandths)");
  MetricFamily forecasts = Gauge("gpupool_forecast_predictions",
                                 "Demand forecasts whose time has come, per scaling pool, since the server started");
  MetricFamily forecast_error = Gauge("gpupool_forecast_mean_abs_error_gpus",
                                      "Mean |forecast - actual demand| of the autoscaler's forecasts (GPUs)");
  MetricFamily forecast_actual = Gauge("gpupool_forecast_mean_actual_gpus",
                                       "Mean actual demand at the forecasts' times (GPUs), to scale the error by");
  std::vector<MetricFamily*> All() {
    return {&queue,     &guaranteed, &limit,   &used,     &borrowed,  &lent,          &exhausted,
            &capacity,  &scale_requested, &scale_failed, &forecasts, &forecast_error, &forecast_actual,
            &node_up,   &condition,  &hotspot, &booked,   &unbooked,  &unhealthy,     &util,
            &alloc};
  }
};

// Queue lengths and each tenant's quota and use per pool. Requires the
// read model's lock held (shared).
void SampleQuotas(const ReadModel& model, const EngineSummary& s, ModelFamilies& f) {
  const auto& tenants = model.tenants();
  const auto& pools = model.pools();
  for (const auto& [key, n] : s.queued) {
    const std::string tenant = key.first < static_cast<int>(tenants.size()) ? tenants[key.first] : "?";
    Sample(f.queue, {{"tenant", tenant}, {"priority", std::to_string(key.second)}}, static_cast<double>(n));
  }
  for (size_t t = 0; t < tenants.size(); ++t) {
    for (size_t p = 0; p < pools.size() && p < model.quotas()[t].size(); ++p) {
      const Quota& q = model.quotas()[t][p];
      std::vector<ClientMetric::Label> l{{"pool", pools[p].name}, {"tenant", tenants[t]}};
      Sample(f.guaranteed, l, q.guaranteed_milli / 1000.0);
      Sample(f.limit, l, q.elastic_limit_milli / 1000.0);
      if (t < s.usage.size() && p < s.usage[t].size()) {
        Sample(f.used, l, s.usage[t][p].used_milli / 1000.0);
        Sample(f.borrowed, l, s.usage[t][p].borrowed_milli / 1000.0);
        Sample(f.lent, l, s.usage[t][p].lent_milli / 1000.0);
        Sample(f.exhausted, l, s.usage[t][p].exhausted ? 1 : 0);
      }
    }
  }
}

// Each pool's capacity model (POOL-3). Requires the read model's lock.
void SampleCapacity(const ReadModel& model, const EngineSummary& s, ModelFamilies& f) {
  const auto& pools = model.pools();
  for (size_t p = 0; p < pools.size() && p < s.capacity.size(); ++p) {
    const PoolCapacity& c = s.capacity[p];
    for (auto [kind, v] : {std::pair{"total", c.total_milli}, {"allocated", c.allocated_milli},
                           {"reserved", c.reserved_milli}, {"fragmented", c.fragmented_milli},
                           {"available", c.available_milli}}) {
      Sample(f.capacity, {{"kind", kind}, {"pool", pools[p].name}}, v / 1000.0);
    }
  }
}

// Each node's condition and each GPU's bookings, health and reported
// utilization (`utils`: node index and GPU to percent). Requires the read
// model's lock.
void SampleNodes(const ReadModel& model, const EngineSummary& s, const std::map<std::pair<int32_t, int>, double>& utils,
                 ModelFamilies& f) {
  const auto& pools = model.pools();
  const auto& nodes = model.nodes();
  for (size_t i = 0; i < nodes.size() && i < s.nodes.size(); ++i) {
    const Node& n = s.nodes[i];
    const NodeRecord& rec = nodes[i];
    const std::string pool = n.pool < pools.size() ? pools[n.pool].name : "?";
    Sample(f.node_up, {{"node", rec.spec.name}, {"pool", pool}}, n.condition == NodeCondition::kReady ? 1 : 0);
    for (auto [c, name] : {std::pair{NodeCondition::kReady, "ready"}, {NodeCondition::kCordoned, "cordoned"},
                           {NodeCondition::kDown, "down"}, {NodeCondition::kRemoved, "removed"}}) {
      Sample(f.condition, {{"condition", name}, {"node", rec.spec.name}, {"pool", pool}}, n.condition == c ? 1 : 0);
    }
    Sample(f.hotspot, {{"node", rec.spec.name}, {"pool", pool}}, rec.hot ? 1 : 0);
    if (n.gpu_count == 0) continue;
    const std::string model_name = Catalog::Builtin().Get(n.gpu_model).name;
    for (int g = 0; g < n.gpu_count; ++g) {
      std::vector<ClientMetric::Label> l{
          {"Hostname", rec.spec.name}, {"gpu", std::to_string(g)}, {"modelName", model_name}, {"pool", pool}};
      // A whole GPU's memory belongs to its job; shares hold what they asked for.
      const int32_t free_mib = n.gpu_mode[g] == GpuMode::kWhole ? 0 : n.gpu_memory_free_mib[g];
      Sample(f.booked, l, n.gpu_memory_mib - free_mib);
      Sample(f.unbooked, l, free_mib);
      Sample(f.unhealthy, l, (n.gpu_unhealthy >> g & 1) != 0 ? 1 : 0);
      if (auto it = utils.find({static_cast<int32_t>(i), g}); it != utils.end()) Sample(f.util, l, it->second);
      auto la = l;
      la.push_back({"mode", GpuModeName(n.gpu_mode[g])});
      Sample(f.alloc, la, kMilliPerGpu - n.gpu_free_milli[g]);
    }
  }
}

}  // namespace

Metrics::Metrics() : registry_(std::make_shared<prometheus::Registry>()) {
  events_ = &BuildCounter().Name("gpupool_events_total").Help("Committed engine events by type").Register(*registry_);
  auto& jobs = BuildCounter().Name("gpupool_scheduler_jobs_total").Help("Job lifecycle counts").Register(*registry_);
  submissions_ = &jobs.Add({{"what", "submitted"}});
  rejections_ = &jobs.Add({{"what", "rejected"}});
  placements_ = &BuildCounter()
                     .Name("gpupool_scheduler_placements_total")
                     .Help("Jobs placed (JobPlaced events)")
                     .Register(*registry_)
                     .Add({});
  preemptions_ = &BuildCounter()
                      .Name("gpupool_scheduler_preemptions_total")
                      .Help("Jobs preempted (JobPreempted events)")
                      .Register(*registry_)
                      .Add({});
  reclaims_ = &BuildCounter()
                   .Name("gpupool_reclaims_total")
                   .Help("Jobs reclaimed while idle or past their deadline")
                   .Register(*registry_)
                   .Add({});
  decision_seconds_ = &BuildHistogram()
                           .Name("gpupool_scheduler_decision_seconds")
                           .Help("Engine time per command (validation, decisions, scheduling pass)")
                           .Register(*registry_)
                           .Add({}, LatencyBuckets());
  commit_seconds_ = &BuildHistogram()
                         .Name("gpupool_journal_commit_seconds")
                         .Help("Time to commit one group of commands to the journal (fsync included)")
                         .Register(*registry_)
                         .Add({}, LatencyBuckets());
  commit_events_ = &BuildHistogram()
                        .Name("gpupool_journal_commit_events")
                        .Help("Events per journal commit (group commit size)")
                        .Register(*registry_)
                        .Add({}, prometheus::Histogram::BucketBoundaries{1, 2, 4, 8, 16, 32, 64, 128, 256, 1024});
  integrity_check_seconds_ = &prometheus::BuildGauge()
                                  .Name("gpupool_journal_integrity_check_seconds")
                                  .Help("Time start-up's integrity check of the journal took (SQLite quick_check)")
                                  .Register(*registry_)
                                  .Add({});
  disk_full_ = &BuildCounter()
                    .Name("gpupool_journal_disk_full_total")
                    .Help("Groups of commands refused (503) because the disk was full")
                    .Register(*registry_)
                    .Add({});
  requests_ = &BuildCounter().Name("gpupool_http_requests_total").Help("HTTP requests by route and status").Register(*registry_);
  request_seconds_ = &BuildHistogram()
                          .Name("gpupool_http_request_seconds")
                          .Help("HTTP request latency by route")
                          .Register(*registry_);
  denied_ = &BuildCounter()
                 .Name("gpupool_auth_denied_total")
                 .Help("Requests refused by authentication or a rate limit, by principal, token name and reason")
                 .Register(*registry_);
}

void Metrics::CountEvent(const Event& e) {
  const char* type = EventName(e.body);
  {
    std::lock_guard lock(mu_);
    auto [it, inserted] = event_counters_.try_emplace(type, nullptr);
    if (inserted) it->second = &events_->Add({{"type", type}});
    it->second->Increment();
  }
  if (std::holds_alternative<JobPlaced>(e.body)) placements_->Increment();
  if (std::holds_alternative<JobPreempted>(e.body)) preemptions_->Increment();
  if (std::holds_alternative<JobSubmitted>(e.body)) submissions_->Increment();
  if (std::holds_alternative<JobRejected>(e.body)) rejections_->Increment();
  if (std::holds_alternative<JobReclaimed>(e.body)) reclaims_->Increment();
  if (const auto* r = std::get_if<ScaleOutRequested>(&e.body)) {
    std::lock_guard lock(mu_);
    scale_out_[r->pool].requested_nodes += r->nodes;
  }
  if (const auto* f = std::get_if<ScaleOutFailed>(&e.body)) {
    std::lock_guard lock(mu_);
    scale_out_[f->pool].failed_nodes += f->nodes;
  }
}

void Metrics::ObserveDecision(double seconds) { decision_seconds_->Observe(seconds); }

void Metrics::ObserveCommit(double seconds, size_t events) {
  commit_seconds_->Observe(seconds);
  commit_events_->Observe(static_cast<double>(events));
}

void Metrics::CountDenied(const std::string& principal, const std::string& token, const std::string& reason) {
  prometheus::Counter* c;
  {
    std::lock_guard lock(mu_);
    c = &denied_->Add({{"principal", principal}, {"token", token}, {"reason", reason}});
  }
  c->Increment();
}

void Metrics::SetIntegrityCheck(double seconds) { integrity_check_seconds_->Set(seconds); }

void Metrics::CountDiskFull() { disk_full_->Increment(); }

void Metrics::CountRequest(const std::string& method, const std::string& route, int status, double seconds) {
  prometheus::Counter* c;
  prometheus::Histogram* h;
  {
    std::lock_guard lock(mu_);
    c = &requests_->Add({{"method", method}, {"route", route}, {"code", std::to_string(status)}});
    h = &request_seconds_->Add({{"method", method}, {"route", route}}, LatencyBuckets());
  }
  c->Increment();
  h->Observe(seconds);
}

void Metrics::SetGpuUtilization(int32_t node, int gpu, double pct) {
  std::lock_guard lock(mu_);
  gpu_util_[{node, gpu}] = pct;
}

std::string Metrics::Render(const ReadModel& model) const {
  std::vector<MetricFamily> families = registry_->Collect();
  ModelFamilies f;
  std::map<std::pair<int32_t, int>, double> utils;
  std::map<PoolId, ScaleOutCounts> scale_out;
  {
    std::lock_guard lock(mu_);
    utils = gpu_util_;
    scale_out = scale_out_;
  }
  {
    std::shared_lock lock(model.mu());
    const EngineSummary& s = *model.summary();
    SampleQuotas(model, s, f);
    SampleCapacity(model, s, f);
    const auto& pools = model.pools();
    for (size_t p = 0; p < pools.size(); ++p) {
      const auto it = scale_out.find(static_cast<PoolId>(p));
      const ScaleOutCounts c = it == scale_out.end() ? ScaleOutCounts{} : it->second;
      CounterSample(f.scale_requested, {{"pool", pools[p].name}}, static_cast<double>(c.requested_nodes));
      CounterSample(f.scale_failed, {{"pool", pools[p].name}}, static_cast<double>(c.failed_nodes));
    }
    for (const ForecastStats& fs : s.forecasts) {
      Sample(f.forecasts, {{"pool", fs.pool}}, static_cast<double>(fs.predictions));
      Sample(f.forecast_error, {{"pool", fs.pool}}, fs.mean_abs_error_gpus);
      Sample(f.forecast_actual, {{"pool", fs.pool}}, fs.mean_actual_gpus);
    }
    SampleNodes(model, s, utils, f);
  }
  for (MetricFamily* family : f.All()) families.push_back(std::move(*family));
  std::ostringstream out;
  prometheus::TextSerializer().Serialize(out, families);
  return out.str();
}

}  // namespace gpupool
