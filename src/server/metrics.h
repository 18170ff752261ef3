// Prometheus metrics of the server (GET /metrics, text exposition 0.0.4).
//
// Counters and histograms live in a prometheus-cpp registry and are updated
// as events commit and requests finish. Gauges are computed at scrape time
// from the read model and the latest engine summary:
//   gpupool_queue_length{tenant,priority}
//   gpupool_quota_{guaranteed,limit,used,borrowed,lent}_gpus{tenant,pool}
//   gpupool_pool_capacity_gpus{pool,kind=total|allocated|reserved|fragmented|available}
//   gpupool_node_up{node,pool}
//   gpupool_node_condition{node,pool,condition=ready|cordoned|down|removed}
//     (1 for the node's condition, 0 for the others; a hotspot is cordoned)
//   gpupool_node_hotspot{node,pool} (1 while OPS-2 holds the node hot)
//   gpupool_quota_exhausted{tenant,pool} (1 while a QuotaExhausted alert is
//     outstanding: a job waits because the tenant is at its elastic limit)
//   gpupool_forecast_predictions{pool}, gpupool_forecast_mean_abs_error_gpus
//     {pool}, gpupool_forecast_mean_actual_gpus{pool}: the autoscaler's
//     demand forecasts whose time has come and how far off they were
//     (SCALE-3; pools with forecasting on; since the server started)
//   gpupool_scale_out_{requested,failed}_nodes_total{pool} (counters, from
//     ScaleOutRequested / ScaleOutFailed since the process started; every
//     pool has a sample from the start, so that increase() sees the first)
//   per GPU, with the DCGM exporter's labels gpu, Hostname, modelName (so
//   that they join with the agents' device metrics) plus pool:
//   gpupool_gpu_memory_booked_mib / gpupool_gpu_memory_unbooked_mib (MiB
//   held by allocations / not held), gpupool_gpu_reported_utilization_percent
//   (last heartbeat; GPUs without a report have no sample), and
//   gpupool_gpu_allocated_milli{mode}, gpupool_gpu_unhealthy (1 while the
//   agent reports the GPU unhealthy, EXEC-11). Only gpupool_* names: DCGM_FI_* names
//   mean device readings, which this server does not have.
//
// Thread-safety: every member may be called concurrently.
#pragma once

#include <map>
#include <memory>
#include <mutex>
#include <string>

#include <prometheus/counter.h>
#include <prometheus/family.h>
#include <prometheus/gauge.h>
#include <prometheus/histogram.h>
#include <prometheus/registry.h>

#include "src/engine/event.h"

namespace gpupool {

class ReadModel;

class Metrics {
 public:
  Metrics();

  // A committed event (counts placements, preemptions, submissions, ...).
  void CountEvent(const Event& e);
  // Time the engine took for one command (the scheduling decision).
  void ObserveDecision(double seconds);
  void ObserveCommit(double seconds, size_t events);
  // How long start-up's integrity check of the journal took (SQLite's
  // quick_check): gpupool_journal_integrity_check_seconds.
  void SetIntegrityCheck(double seconds);
  // A group of commands refused because the disk was full
  // (gpupool_journal_disk_full_total).
  void CountDiskFull();
  void CountRequest(const std::string& method, const std::string& route, int status, double seconds);
  // A request refused by authentication or a rate limit:
  // gpupool_auth_denied_total{principal,token,reason}. `principal` is
  // "admin", "reader" (a pool-wide reader), "tenant/NAME", "node/NAME" or
  // "unknown" (no or a wrong token), `token` the token's name ("" for the
  // admin and unknown ones), so the labels stay bounded by the tenants,
  // nodes and their tokens; `reason` is unauthorized, forbidden or
  // rate_limited.
  void CountDenied(const std::string& principal, const std::string& token, const std::string& reason);
  // The last reported utilization of a GPU (percent), by node index.
  void SetGpuUtilization(int32_t node, int gpu, double pct);

  // The whole exposition. Takes the read model's shared lock itself.
  std::string Render(const ReadModel& model) const;

 private:
  std::shared_ptr<prometheus::Registry> registry_;
  prometheus::Family<prometheus::Counter>* events_;
  prometheus::Counter* placements_;
  prometheus::Counter* preemptions_;
  prometheus::Counter* submissions_;
  prometheus::Counter* rejections_;
  prometheus::Counter* reclaims_;
  prometheus::Histogram* decision_seconds_;
  prometheus::Histogram* commit_seconds_;
  prometheus::Histogram* commit_events_;
  prometheus::Gauge* integrity_check_seconds_;
  prometheus::Counter* disk_full_;
  prometheus::Family<prometheus::Counter>* requests_;
  prometheus::Family<prometheus::Histogram>* request_seconds_;
  prometheus::Family<prometheus::Counter>* denied_;
  // The families' Add calls (events_, requests_, request_seconds_, denied_) are made
  // under it too; the pointers above are set in the constructor, then read-only.
  mutable std::mutex mu_;
  std::map<std::string, prometheus::Counter*> event_counters_;  // GUARDED_BY(mu_)
  std::map<std::pair<int32_t, int>, double> gpu_util_;          // GUARDED_BY(mu_)
  // Nodes asked of the node provider and nodes it failed to create, by
  // pool (named at render time from the read model).
  struct ScaleOutCounts {
    int64_t requested_nodes = 0, failed_nodes = 0;
  };
  std::map<PoolId, ScaleOutCounts> scale_out_;  // GUARDED_BY(mu_)
};

}  // namespace gpupool
