// Jobs for the simulator: generated from a scenario's tenant workloads
// (Poisson or diurnal arrivals, job mixes, durations from the Philly run
// times or a parametric model) or replayed from an openb pod list with its
// real creation and deletion times.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "src/base/rng.h"
#include "src/base/status.h"
#include "src/base/time.h"
#include "src/model/job.h"
#include "src/sim/scenario.h"

namespace gpupool {

struct SimJob {
  JobSpec spec;                // tenant, demand, replicas, priority, ...
  Instant arrival{};
  Duration work{0};            // run time the job needs (after its start latency)
  std::string priority_class;  // for reports
  // How busy it keeps its GPUs (see UtilizationModel); for kTrace models,
  // which duty-cycle series, and where in it (or in a bursty cycle) it starts.
  UtilizationModel utilization;
  int32_t util_series = -1;
  Duration util_phase{0};
  // TOPO-1: gradients all-reduced after each step of `step_compute` (0: none).
  double model_bytes = 0;
  Duration step_compute{0};
};

// Names resolved to the engine's ids.
struct WorkloadIds {
  std::map<std::string, TenantId> tenants;
  std::map<std::string, PoolId> pools;
  std::map<std::string, uint16_t> requirements;
};

// Generates every tenant workload of `s`, sorted by arrival (ties keep
// generation order). `runtimes` are the Philly samples (seconds), needed
// only when a duration model asks for them; `duty_cycles` the GenAI
// duty-cycle series, needed only when a utilization model replays them
// (jobs take the series in turn, each from a random minute). Deterministic
// in `seed`.
// `lifetimes` are the DLRM serving instances' lifetimes (seconds), needed
// only by serving_lifetimes duration models.
Result<std::vector<SimJob>> GenerateJobs(const Scenario& s, const WorkloadIds& ids,
                                         const std::vector<double>* runtimes, uint64_t seed,
                                         const std::vector<std::vector<double>>* duty_cycles = nullptr,
                                         const std::vector<double>* lifetimes = nullptr);

// Whether any job template of `s` replays the GenAI duty cycles.
bool WantsDutyCycles(const Scenario& s);

// The openb pod list of `t`, one single-replica job per pod: arrival =
// creation time minus the earliest creation time; work = deletion time minus
// (scheduled time, or creation time for pods that never ran).
Result<std::vector<SimJob>> TraceJobs(const TraceWorkload& t, const WorkloadIds& ids,
                                      const std::map<std::string, int32_t>& priorities);

// A sample of a duration model (see DurationModel); exposed for tests.
Duration SampleDuration(const DurationModel& m, const std::vector<double>* runtimes, Rng& rng,
                        const std::vector<double>* lifetimes = nullptr);

// What a job whose real run time is `work` declares as its expected
// duration under `m` (see EstimateModel); draws from `rng` only for
// kLogNormalError.
std::optional<Duration> DeclaredDuration(const EstimateModel& m, Duration work, Rng& rng);

// Whether any job template of `s` samples the serving trace's lifetimes.
bool WantsServingLifetimes(const Scenario& s);

}  // namespace gpupool
