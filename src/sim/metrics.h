// What a simulation measured: per cluster, per priority class and per tenant.
//
// Waiting time is submit to first start; a job still waiting at the horizon
// counts with the wait it had so far (censored there), so a policy cannot
// look good by never starting jobs. JCT is submit to completion, over
// completed jobs. GPU allocation is time-weighted over the run. A tenant's
// share received is its time-averaged GPU usage over the cluster's GPUs; its
// entitlements are its guarantee over the GPUs of its pools and its weight
// over the weights of all tenants.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "src/base/time.h"
#include "src/engine/state.h"
#include "src/sim/workload.h"

namespace gpupool {

struct Percentiles {
  double p50 = 0, p95 = 0, p99 = 0, mean = 0;
  int64_t count = 0;
};
// Nearest-rank percentiles of `values` (sorted in place).
Percentiles ComputePercentiles(std::vector<double>& values);

struct ClassReport {
  int64_t submitted = 0, rejected = 0, started = 0, completed = 0;
  Percentiles wait_s, jct_s;
  double gpu_hours_completed = 0;
};

struct TenantReport {
  ClassReport jobs;
  double share_received_pct = 0;
  double entitlement_guaranteed_pct = 0;
  double entitlement_weight_pct = 0;
  int64_t preemptions = 0;
  double gpu_hours_lost = 0;
};

struct PoolReport {
  double allocation_pct_mean = 0;  // time-weighted
  PoolCapacity at_end;              // the capacity model (POOL-3) at the horizon
};

struct SimReport {
  std::string scenario;
  std::map<std::string, PoolReport> pools;
  double horizon_h = 0;
  ClassReport all;
  std::map<std::string, ClassReport> by_priority;
  std::map<std::string, TenantReport> by_tenant;
  double allocation_pct_mean = 0;
  std::vector<std::pair<double, double>> allocation_series;  // (hours, allocated % of GPUs)
  double jobs_completed_per_hour = 0;
  int64_t preemptions = 0;
  double gpu_hours_lost = 0;  // run time lost to preemption x GPUs
  int64_t unfinished = 0;     // pending or running at the horizon
  int64_t events = 0;
  std::string event_log_sha256;
};

nlohmann::json ToJson(const SimReport& r);
std::string FormatReport(const SimReport& r);

// Collects a report from the simulator's hooks.
class MetricsCollector {
 public:
  MetricsCollector(const std::vector<SimJob>* jobs, const EngineState* state, Duration sample_every);

  void Submitted(size_t job, Instant now);
  void Rejected(size_t job);
  void Started(size_t job, Instant now);
  void Completed(size_t job, Instant now);
  void Preempted(size_t job, Duration lost);
  // After every engine event: integrates allocation and usage up to `now`.
  void Observe(Instant now);
  SimReport Finish(Instant horizon, std::string scenario, int64_t events, std::string sha256);

 private:
  struct JobRecord {
    Instant submitted{};
    std::optional<Instant> started, completed;
    bool rejected = false, seen = false;
  };
  void Integrate(Instant now);

  const std::vector<SimJob>* jobs_;
  const EngineState* state_;
  Duration sample_every_;
  std::vector<JobRecord> records_;
  std::vector<std::pair<double, double>> series_;
  Instant next_sample_{};
  Instant last_{};
  int64_t last_allocated_ = 0;
  double allocated_area_ = 0;             // milli x ms
  std::vector<int64_t> pool_last_;        // allocated at last_, per pool
  std::vector<double> pool_area_;         // milli x ms, per pool
  std::vector<int64_t> tenant_last_;      // usage at last_, per tenant
  std::vector<double> tenant_area_;       // milli x ms, per tenant
  std::vector<int64_t> tenant_preemptions_;
  std::vector<double> tenant_lost_;       // milli x ms
  int64_t preemptions_ = 0;
  double lost_ = 0;                       // milli x ms
};

}  // namespace gpupool
