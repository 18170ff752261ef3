#include "src/sim/workload.h"

#include <algorithm>
#include <cmath>
#include <numbers>

#include "src/config/alibaba_gpu_trace.h"

namespace gpupool {
namespace {

// A standard normal draw (Box-Muller) from the portable Rng.
double Normal(Rng& rng) {
  double u1 = rng.Uniform();
  while (u1 <= 0) u1 = rng.Uniform();
  const double u2 = rng.Uniform();
  return std::sqrt(-2.0 * std::log(u1)) * std::cos(2.0 * std::numbers::pi * u2);
}

double Exponential(Rng& rng, double rate) {
  double u = rng.Uniform();
  while (u <= 0) u = rng.Uniform();
  return -std::log(u) / rate;
}

Duration Seconds(double s) { return Duration(static_cast<int64_t>(std::llround(s * 1000.0))); }

// Arrival times of one tenant (thinning for the diurnal process).
std::vector<Instant> Arrivals(const ArrivalProcess& a, Rng& rng) {
  std::vector<Instant> out;
  const double start_s = ToSeconds(a.start), stop_s = ToSeconds(a.stop);
  const double mean = a.rate_per_hour / 3600.0;
  if (mean <= 0) return out;
  const double peak = a.kind == ArrivalProcess::Kind::kDiurnal ? mean * (1 + a.amplitude) : mean;
  double t = start_s;
  while (true) {
    t += Exponential(rng, peak);
    if (t >= stop_s) break;
    if (a.kind == ArrivalProcess::Kind::kDiurnal) {
      const double hours = t / 3600.0;
      const double rate = mean * (1 + a.amplitude * std::cos(2 * std::numbers::pi * (hours - a.peak_hour) / 24.0));
      if (rng.Uniform() * peak > rate) continue;
    }
    out.push_back(kTimeOrigin + Seconds(t));
  }
  return out;
}

}  // namespace

Duration SampleDuration(const DurationModel& m, const std::vector<double>* runtimes, Rng& rng,
                        const std::vector<double>* lifetimes) {
  Duration d{0};
  switch (m.kind) {
    case DurationModel::Kind::kFixed: d = m.fixed; break;
    case DurationModel::Kind::kLogNormal: d = Seconds(m.median_s * std::exp(m.sigma * Normal(rng))); break;
    case DurationModel::Kind::kPhilly:
      d = Seconds((*runtimes)[rng.Below(runtimes->size())] * m.scale);
      break;
    case DurationModel::Kind::kServingLifetimes: {
      // Draws until a lifetime is below the bound (when one is set and some
      // lifetime meets it).
      const double below_s = ToSeconds(m.below);
      const bool bounded = below_s > 0 && std::any_of(lifetimes->begin(), lifetimes->end(),
                                                      [&](double s) { return s < below_s; });
      double s = (*lifetimes)[rng.Below(lifetimes->size())];
      while (bounded && !(s < below_s)) s = (*lifetimes)[rng.Below(lifetimes->size())];
      d = Seconds(s * m.scale);
      break;
    }
  }
  return std::clamp(d, m.min, m.max);
}

bool WantsServingLifetimes(const Scenario& s) {
  for (const TenantWorkload& w : s.workloads) {
    for (const JobTemplate& t : w.jobs) {
      if (t.duration.kind == DurationModel::Kind::kServingLifetimes) return true;
    }
  }
  return false;
}

bool WantsDutyCycles(const Scenario& s) {
  for (const TenantWorkload& w : s.workloads) {
    for (const JobTemplate& t : w.jobs) {
      if (t.utilization.kind == UtilizationModel::Kind::kTrace) return true;
    }
  }
  return false;
}

namespace {

ShareMode ModeNamed(const std::string& name) {
  if (name == "time-slice") return ShareMode::kTimeSlice;
  if (name == "mps") return ShareMode::kMps;
  if (name == "mig") return ShareMode::kMig;
  return ShareMode::kAny;
}

// Sharing, GPU memory and pipeline stages of a template (PART-1..4).
void ApplySharingTemplate(const JobTemplate& t, SimJob& job) {
  JobSpec& spec = job.spec;
  spec.demand.gpu_memory_mib = t.gpu_memory_mib;
  if (t.sharing == "auto") {
    spec.auto_sharing = true;
  } else {
    spec.demand.mode = ModeNamed(t.sharing);
  }
  if (t.stages.empty()) return;
  // A pipeline: the stages carry the resources, the job's demand only its
  // constraints.
  for (const StageTemplate& st : t.stages) {
    Demand d;
    d.cpu_milli = st.cpu_milli;
    d.memory_mib = st.memory_mib;
    d.gpu_count = 1;
    d.gpu_milli = st.gpu_milli;
    d.gpu_memory_mib = st.gpu_memory_mib;
    d.mode = ModeNamed(st.mode);
    spec.stages.push_back(d);
  }
  spec.demand.cpu_milli = 0;
  spec.demand.memory_mib = 0;
  spec.demand.gpu_count = 0;
  spec.demand.gpu_milli = 0;
  spec.demand.gpu_memory_mib = 0;
  spec.replicas = static_cast<int32_t>(spec.stages.size());
}

}  // namespace

std::optional<Duration> DeclaredDuration(const EstimateModel& m, Duration work, Rng& rng) {
  switch (m.kind) {
    case EstimateModel::Kind::kNone: return std::nullopt;
    case EstimateModel::Kind::kFixed: return m.fixed;
    case EstimateModel::Kind::kLogNormalError: {
      const double s = ToSeconds(work) * m.bias * std::exp(m.sigma * Normal(rng));
      return std::chrono::seconds(std::max<int64_t>(1, std::llround(s)));
    }
  }
  return std::nullopt;
}

Result<std::vector<SimJob>> GenerateJobs(const Scenario& s, const WorkloadIds& ids,
                                         const std::vector<double>* runtimes, uint64_t seed,
                                         const std::vector<std::vector<double>>* duty_cycles,
                                         const std::vector<double>* lifetimes) {
  std::vector<SimJob> jobs;
  Rng rng(seed);
  size_t next_series = 0;
  for (const TenantWorkload& w : s.workloads) {
    auto tenant = ids.tenants.find(w.tenant);
    if (tenant == ids.tenants.end()) return NotFound("workload: unknown tenant '" + w.tenant + "'");
    double total_weight = 0;
    for (const JobTemplate& t : w.jobs) {
      total_weight += t.weight;
      if (t.duration.kind == DurationModel::Kind::kPhilly && (runtimes == nullptr || runtimes->empty())) {
        return FailedPrecondition("workload of tenant '" + w.tenant + "': job '" + t.name +
                                  "' samples durations from the Philly run times, which are not available");
      }
      if (t.duration.kind == DurationModel::Kind::kServingLifetimes && (lifetimes == nullptr || lifetimes->empty())) {
        return FailedPrecondition("workload of tenant '" + w.tenant + "': job '" + t.name +
                                  "' samples lifetimes from the DLRM serving trace, which are not available");
      }
      if (t.utilization.kind == UtilizationModel::Kind::kTrace && (duty_cycles == nullptr || duty_cycles->empty())) {
        return FailedPrecondition("workload of tenant '" + w.tenant + "': job '" + t.name +
                                  "' replays the GenAI GPU duty cycles, which are not available");
      }
    }
    if (w.jobs.empty() || !(total_weight > 0)) continue;
    // Each tenant draws from its own stream, so adding a tenant does not
    // change the others' jobs.
    Rng tenant_rng(rng.Next());
    for (Instant at : Arrivals(w.arrivals, tenant_rng)) {
      double x = tenant_rng.Uniform() * total_weight;
      const JobTemplate* t = &w.jobs.back();
      for (const JobTemplate& candidate : w.jobs) {
        if ((x -= candidate.weight) < 0) {
          t = &candidate;
          break;
        }
      }
      SimJob job;
      job.arrival = at;
      job.priority_class = t->priority;
      JobSpec& spec = job.spec;
      spec.name = t->name;
      spec.tenant = tenant->second;
      spec.kind = t->kind;
      spec.priority = s.priorities.at(t->priority);
      if (t->deadline_after) spec.deadline = at + *t->deadline_after;
      spec.replicas = t->replicas[tenant_rng.Below(t->replicas.size())];
      if (t->max_replicas > 0) {
        spec.min_replicas = spec.replicas;
        spec.max_replicas = std::max(t->max_replicas, spec.replicas);
      }
      spec.demand.cpu_milli = t->cpu_milli;
      spec.demand.memory_mib = t->memory_mib;
      spec.demand.gpu_count = t->gpus;
      spec.demand.gpu_milli = t->gpus == 0 ? 0 : t->gpu_milli;
      for (const std::string& p : t->pools) spec.pools.push_back(ids.pools.at(p));
      if (!t->requirement.empty()) spec.demand.requirement = ids.requirements.at(t->requirement);
      spec.labels = t->labels;
      spec.affinity = t->affinity;
      spec.anti_affinity = t->anti_affinity;
      spec.checkpointable = t->checkpointable;
      spec.checkpoint_interval = t->checkpoint_interval;
      spec.checkpoint_duration = t->checkpoint_duration;
      job.work = SampleDuration(t->duration, runtimes, tenant_rng, lifetimes);
      if (t->model_gib > 0) {
        job.model_bytes = t->model_gib * (1 << 30);
        job.step_compute = t->step_compute;
      }
      spec.expected_duration = DeclaredDuration(t->expected_duration, job.work, tenant_rng);
      ApplySharingTemplate(*t, job);
      job.utilization = t->utilization;
      // Draws only for the models that need them, so that other workloads
      // keep their streams.
      if (t->utilization.kind == UtilizationModel::Kind::kBursty && t->utilization.phase_jitter > Duration(0)) {
        job.util_phase = Duration(static_cast<int64_t>(tenant_rng.Uniform() *
                                                       static_cast<double>(ToMillis(t->utilization.phase_jitter))));
      } else if (t->utilization.kind == UtilizationModel::Kind::kTrace) {
        job.util_series = static_cast<int32_t>(next_series++ % duty_cycles->size());
        const auto minutes = (*duty_cycles)[job.util_series].size();
        job.util_phase = std::chrono::minutes(tenant_rng.Below(minutes));
      }
      jobs.push_back(std::move(job));
    }
  }
  std::stable_sort(jobs.begin(), jobs.end(), [](const SimJob& a, const SimJob& b) { return a.arrival < b.arrival; });
  return jobs;
}

Result<std::vector<SimJob>> TraceJobs(const TraceWorkload& t, const WorkloadIds& ids,
                                      const std::map<std::string, int32_t>& priorities) {
  auto tenant = ids.tenants.find(t.tenant);
  if (tenant == ids.tenants.end()) return NotFound("trace: unknown tenant '" + t.tenant + "'");
  auto priority = priorities.find(t.priority);
  if (priority == priorities.end()) return NotFound("trace: unknown priority '" + t.priority + "'");
  GP_ASSIGN_OR_RETURN(auto pods, LoadOpenbPodsFile(t.pods_path, Catalog::Builtin()));
  int64_t origin = INT64_MAX;
  for (const TracePod& p : pods) {
    if (!p.creation_time_s || !p.deletion_time_s) {
      return InvalidArgument(t.pods_path + ": pod '" + p.name + "' has no creation or deletion time to replay");
    }
    origin = std::min(origin, *p.creation_time_s);
  }
  std::vector<SimJob> jobs;
  origin += ToMillis(t.skip) / 1000;
  for (const TracePod& p : pods) {
    if (t.limit && static_cast<int>(jobs.size()) >= *t.limit) break;
    if (*p.creation_time_s < origin) continue;
    SimJob job;
    job.arrival = InstantFromMillis(
        static_cast<int64_t>(std::llround(static_cast<double>(*p.creation_time_s - origin) * 1000 / t.arrival_speedup)));
    const int64_t began = p.scheduled_time_s.value_or(*p.creation_time_s);
    job.work = Duration(std::max<int64_t>(1, *p.deletion_time_s - began) * 1000);
    job.priority_class = t.priority;
    job.spec.name = p.name;
    job.spec.tenant = tenant->second;
    job.spec.kind = p.demand.gpu_count == 0 ? JobKind::kCpu : JobKind::kOnlineInference;
    job.spec.priority = priority->second;
    job.spec.demand = p.demand;
    job.spec.checkpointable = t.checkpointable;
    if (t.checkpointable) job.spec.checkpoint_duration = t.checkpoint_duration;
    jobs.push_back(std::move(job));
  }
  std::stable_sort(jobs.begin(), jobs.end(), [](const SimJob& a, const SimJob& b) { return a.arrival < b.arrival; });
  return jobs;
}

}  // namespace gpupool
