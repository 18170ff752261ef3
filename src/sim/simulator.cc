#include "src/sim/simulator.h"

#include <algorithm>
#include <cmath>
#include <set>
#include <utility>

#include "src/base/check.h"
#include "src/sched/comm_model.h"

namespace gpupool {
namespace {

// The index of the node named `name` (names are unique), or -1.
NodeIndex NodeNamed(const Cluster& cluster, const std::string& name) {
  for (NodeIndex n = 0; n < cluster.node_count(); ++n) {
    if (cluster.node_name(n) == name) return n;
  }
  return -1;
}

double Ms(Duration d) { return static_cast<double>(ToMillis(d)); }

bool Overlaps(const std::vector<PlacedReplica>& a, const std::vector<PlacedReplica>& b) {
  for (const PlacedReplica& x : a) {
    for (const PlacedReplica& y : b) {
      if (x.node == y.node && (x.gpus & y.gpus) != 0) return true;
    }
  }
  return false;
}

}  // namespace

Simulator::Simulator(Engine* engine, std::vector<SimJob> jobs, SimOptions options)
    : engine_(engine),
      sink_([this](const Event& e) { OnEvent(e); }),
      jobs_(std::move(jobs)),
      options_(std::move(options)),
      think_rng_(options_.seed ^ 0x7468696e6b74696dULL),  // a stream of its own
      load_(&engine_->state().cluster, options_.costs),
      metrics_(&jobs_, &engine_->state(), options_.sample_every) {
  if (!options_.event_log_path.empty()) {
    log_.open(options_.event_log_path, std::ios::trunc);
    if (!log_) failure_ = IoError(options_.event_log_path + ": cannot open for writing");
  }
}

void Simulator::Push(Instant at, Kind kind, int64_t id, uint64_t token) {
  heap_.push(Item{at, kind, seq_++, id, token});
}

// --- progress -----------------------------------------------------------------

void Simulator::Settle(Running& r, Instant now) {
  if (now <= r.rate_since) return;  // still starting (or already settled)
  const double dt = Ms(now - r.rate_since);
  r.progress_ms += r.rate * dt;
  if (r.gpus > 0) metrics_.Computed(dt, dt * r.factor, dt * r.factor * r.limit_speed);
  if (r.comm_s > 0) {
    const double steps = r.rate * dt / Ms(jobs_[r.index].step_compute);
    metrics_.Communicated(steps, dt, r.cross_rack_bytes, r.cross_node_bytes, r.comm_s);
  }
  r.rate_since = now;
}

void Simulator::UpdateRate(JobId id, Running& r, Instant now) {
  Settle(r, now);
  const SimJob& job = jobs_[r.index];
  r.factor = load_.Factor(r.replicas);
  const double checkpointing = job.spec.checkpoint_interval > Duration(0) ? 1.0 - options_.costs.checkpoint_overhead : 1.0;
  // A communicating job computes a step, then all-reduces (no overlap).
  const double step_s = ToSeconds(job.step_compute);
  const double communicating = r.comm_s > 0 ? step_s / (step_s + r.comm_s) : 1.0;
  // SCALE-7: an elastic job's work is given at its minimum size.
  const double width =
      job.spec.elastic() ? static_cast<double>(r.replicas.size()) / std::max(1, job.spec.min_replicas) : 1.0;
  r.rate = r.factor * r.limit_speed * checkpointing * communicating * width;
  ++r.token;
  if (job.spec.kind == JobKind::kOnlineInference) {  // a lifetime on the wall clock from its first start
    Push(std::max(r.rate_since, r.util_origin + job.work), Kind::kCompletion, id, r.token);
    return;
  }
  const double remaining = std::max(0.0, Ms(job.work) - Ms(r.done) - r.progress_ms);
  Push(r.rate_since + Duration(static_cast<int64_t>(std::ceil(remaining / r.rate))), Kind::kCompletion, id, r.token);
}

void Simulator::SetCommunication(Running& r, const SimJob& job, const JobSpec& spec, const JobPlaced& p) {
  r.cross_rack_bytes = r.cross_node_bytes = r.comm_s = 0;
  if (job.model_bytes <= 0) return;
  const EngineState& state = engine_->state();
  const Catalog& catalog = Catalog::Builtin();
  std::vector<ReplicaSite> sites;
  std::set<NodeIndex> nodes;
  std::set<std::string> racks;
  for (size_t i = 0; i < p.replicas.size(); ++i) {
    const NodeIndex n = p.replicas[i].node;
    const Node& node = state.cluster.node(n);
    const int gpus = std::max(1, spec.replica_demand(static_cast<int>(i)).gpu_count);
    sites.push_back({n, state.node_places[n].rack, gpus,
                     node.gpu_model != kNoGpuModel && JoinedByNvlink(catalog.Get(node.gpu_model))});
    nodes.insert(n);
    racks.insert(state.node_places[n].rack);
  }
  const CommEstimate c = EstimateRingAllReduce(job.model_bytes, std::move(sites), options_.costs.links);
  if (c.workers < 2) return;
  r.cross_rack_bytes = c.cross_rack_bytes;
  r.cross_node_bytes = c.cross_node_bytes;
  r.comm_s = c.seconds_per_step;
  metrics_.CommPlaced(static_cast<int>(nodes.size()), static_cast<int>(racks.size()));
}

void Simulator::UpdateRates(const std::vector<JobId>& ids, Instant now) {
  for (JobId id : ids) {
    auto it = live_.find(id);
    if (it != live_.end() && it->second.computing) UpdateRate(id, it->second, now);
  }
}

void Simulator::StopComputing(JobId id, Running& r, Instant now) {
  Settle(r, now);
  r.computing = false;
  r.stopped_at = now;
  ++r.token;
  ++r.poll_token;
  UpdateRates(load_.Remove(id, r.replicas), now);
}

void Simulator::StartCheckpoint(JobId id, Running& r, Instant now) {
  StopComputing(id, r, now);
  r.done += Duration(std::llround(r.progress_ms));  // the checkpoint captures everything computed so far
  r.progress_ms = 0;
  r.checkpointed = true;
  Push(now + jobs_[r.index].spec.checkpoint_duration, Kind::kCheckpointDone, id);
}

Duration Simulator::SavePeriodic(Running& r) {
  const JobSpec& spec = jobs_[r.index].spec;
  const Duration interval = spec.checkpoint_interval;
  const double progress = r.progress_ms;
  r.progress_ms = 0;
  if (spec.kind == JobKind::kOnlineInference) {  // stateless: serving again is all it takes
    r.done += Duration(std::llround(progress));
    return Duration(0);
  }
  if (interval <= Duration(0) || r.stopped_at <= r.run_start) return Duration(std::llround(progress));
  const Duration ran = r.stopped_at - r.run_start;
  const double saved = progress * Ms(ran - ran % interval) / Ms(ran);
  r.done += Duration(std::llround(saved));
  return Duration(std::llround(progress - saved));
}

void Simulator::Release(JobId, Running& r, Instant now) {
  if (!r.placed) return;
  const Instant stop = r.computing ? now : r.stopped_at;
  Duration idle = std::max(Duration(0), std::min(r.run_start, stop) - r.placed_at);  // starting
  if (stop > r.run_start) idle += r.util.TimeBelow(r.run_start - r.util_origin, stop - r.util_origin, IdleThreshold());
  idle += now - stop;  // stopping
  metrics_.Held(r.gpus * Ms(idle), r.gpus * Ms(now - r.placed_at));
  r.placed = false;
}

Utilization Simulator::MakeUtilization(const SimJob& job, double gpu_share) const {
  UtilizationModel m = job.utilization;
  const std::vector<double>* series = nullptr;
  if (!m.given) {
    m = UtilizationModel{};
    m.busy = 0.9 * gpu_share;
  } else if (m.kind == UtilizationModel::Kind::kTrace) {
    GP_CHECK(options_.duty_cycles != nullptr && job.util_series >= 0 &&
             static_cast<size_t>(job.util_series) < options_.duty_cycles->size())
        << "job '" << job.spec.name << "' replays duty-cycle series " << job.util_series;
    series = &(*options_.duty_cycles)[job.util_series];
  }
  return Utilization(m, series, job.util_phase);
}

// --- engine events --------------------------------------------------------------

void Simulator::OnPlaced(const JobPlaced& p, Instant now) {
  Running& r = live_.at(p.job);
  const SimJob& job = jobs_[r.index];
  const JobSpec& spec = engine_->state().job(p.job).spec;  // with the engine's sharing choice
  const std::optional<Instant> failed_at = std::exchange(r.failed_at, std::nullopt);
  bool scrubbed = false, mig = false, isolated = false, on_failed_node = false;
  int32_t per_gpu_milli = 0;
  for (size_t i = 0; i < p.replicas.size(); ++i) {
    const PlacedReplica& at = p.replicas[i];
    if (scrub_at_ == now) {
      auto it = scrubbed_.find(at.node);
      scrubbed |= it != scrubbed_.end() && (it->second & at.gpus) != 0;
    }
    const Demand d = spec.replica_demand(static_cast<int>(i));
    mig |= d.kind() == DemandKind::kGpuShare && d.mode == ShareMode::kMig;
    isolated |= d.kind() == DemandKind::kGpuShare && (d.mode == ShareMode::kMig || d.mode == ShareMode::kMps);
    per_gpu_milli = std::max(per_gpu_milli, d.gpu_count > 0 ? d.gpu_milli : 0);
    on_failed_node |= failed_[at.node];
  }
  Duration latency = options_.start_latency;
  if (scrubbed) {
    latency += options_.costs.scrub;
    metrics_.Scrubbed();
  }
  if (mig) {
    latency += options_.costs.mig_setup;
    metrics_.MigSetUp();
  }
  // A job that saved work reads it back before it computes again (online
  // inference is stateless: nothing to read).
  if (r.done > Duration(0) && job.spec.kind != JobKind::kOnlineInference) {
    latency += Duration(std::llround(options_.costs.restore_factor * Ms(job.spec.checkpoint_duration)));
  }
  r.placed = true;
  r.replicas = p.replicas;
  r.gpus = static_cast<double>(spec.total_gpu_milli()) / kMilliPerGpu;
  r.placed_at = now;
  r.run_start = now + latency;
  r.rate_since = r.run_start;
  // Latencies end where the user feels them: when the process starts.
  if (failed_at) metrics_.Replaced(r.run_start - *failed_at, now - *failed_at, false);
  if (r.moved_at) {  // the engine moved it: down from its stop to this start
    metrics_.MovedBack(r.moved_for, r.run_start - *r.moved_at, job.spec.kind == JobKind::kOnlineInference);
    r.moved_at.reset();
  }
  if (r.wants_back) {  // its owner came back then; running again once started
    metrics_.Resumed(r.run_start - *r.wants_back);
    r.wants_back.reset();
    AwayUntil(r, r.run_start);
  }
  r.progress_ms = 0;
  r.checkpointed = false;
  ++r.poll_token;
  SetCommunication(r, job, spec, p);
  if (!r.util.valid()) {
    r.util = MakeUtilization(job, static_cast<double>(per_gpu_milli) / kMilliPerGpu);
    r.util_origin = r.run_start;
  }
  // A MIG instance or an MPS share (active-thread limit) cannot keep more
  // than its share of the GPU busy, and a task that wants more runs slower
  // in proportion; a time-sliced task is not limited (nothing caps it).
  const double share = isolated ? static_cast<double>(per_gpu_milli) / kMilliPerGpu : 1.0;
  r.limit_speed = ShareLimitSpeed(r.util.mean(), share);
  r.load = std::min(r.util.mean(), share);
  // The first task on GPUs an idle reclaim released.
  for (auto it = released_.begin(); it != released_.end();) {
    if (Overlaps(it->where, p.replicas)) {
      metrics_.Reallocated(r.run_start - it->at);
      it = released_.erase(it);
    } else {
      ++it;
    }
  }
  metrics_.Started(r.index, now);
  if (on_failed_node) {  // the engine does not know yet: it never starts
    r.computing = false;
    r.stopped_at = now;
    r.failed_at = now;
    return;
  }
  r.computing = true;
  const std::vector<JobId> others = load_.Add(p.job, r.replicas, r.load);
  UpdateRate(p.job, r, now);
  UpdateRates(others, now);
  const ReclaimConfig& rc = engine_->config().reclaim;
  if (rc.idle && r.gpus > 0 && r.util.CanDropBelow(IdleThreshold())) {
    Push(r.run_start + rc.poll, Kind::kPoll, p.job, r.poll_token);
  }
}

void Simulator::OnResized(const JobResized& e, Instant now) {
  Running& r = live_.at(e.job);
  const Job& engine_job = engine_->state().job(e.job);
  const SimJob& job = jobs_[r.index];
  std::vector<PlacedReplica> after;
  for (const ReplicaPlacement& p : engine_job.placements) after.push_back({p.node, p.gpus});
  ++metrics_.scaling().elastic_resizes;
  if (!r.placed) {
    r.replicas = std::move(after);
    return;
  }
  const bool computing = r.computing;
  if (computing) {
    StopComputing(e.job, r, now);
    metrics_.scaling().elastic_reshard_hours += ToSeconds(e.reshard) / 3600.0;
  }
  r.done += Duration(std::llround(r.progress_ms));  // the reshard saves everything computed
  r.progress_ms = 0;
  Release(e.job, r, now);  // GPU time held so far, at the old size
  r.placed = true;
  r.replicas = std::move(after);
  r.gpus = static_cast<double>(engine_job.spec.total_gpu_milli()) / kMilliPerGpu;
  r.placed_at = now;
  r.run_start = now + e.reshard;
  r.rate_since = r.run_start;
  SetCommunication(r, job, engine_job.spec, JobPlaced{e.job, engine_job.pool, engine_job.borrowed, r.replicas});
  bool on_failed_node = false;
  for (const PlacedReplica& at : r.replicas) on_failed_node |= failed_[at.node];
  if (!computing && !(r.failed_at && !on_failed_node)) return;
  if (on_failed_node) return;
  if (r.failed_at) {  // it lost the failed node's replicas and goes on without them
    metrics_.Replaced(r.run_start - *r.failed_at, now - *r.failed_at, false);
    r.failed_at.reset();
  }
  r.computing = true;
  const std::vector<JobId> others = load_.Add(e.job, r.replicas, r.load);
  UpdateRate(e.job, r, now);
  UpdateRates(others, now);
}

void Simulator::OnEvent(const Event& e) {
  LogEvent(e);
  const Instant now = e.at;
  if (const auto* s = std::get_if<JobSubmitted>(&e.body)) {
    OnSubmitted(*s, now);
  } else if (std::get_if<JobRejected>(&e.body)) {
    OnRejected();
  } else if (const auto* na = std::get_if<NodeAdded>(&e.body)) {
    OnNodeAdded(*na);
  } else if (const auto* so = std::get_if<ScaleOutRequested>(&e.body)) {
    OnScaleOut(*so, now);
  } else if (std::holds_alternative<NodeDrainStarted>(e.body)) {
    ++metrics_.scaling().drains;
  } else if (std::holds_alternative<NodeRemoved>(e.body)) {
    --in_service_;
    ++metrics_.scaling().nodes_removed;
    UpdateNodeCounts();
  } else if (const auto* w = std::get_if<WarmPoolSized>(&e.body)) {
    OnWarmPoolSized(*w, now);
  } else if (std::holds_alternative<HotspotDetected>(e.body)) {
    ++metrics_.hotspots().detected;
  } else if (std::holds_alternative<HotspotCleared>(e.body)) {
    ++metrics_.hotspots().cleared;
  } else if (std::holds_alternative<MigRecutStarted>(e.body)) {
    metrics_.MigRecut();
  } else if (const auto* g = std::get_if<GpusScrubbed>(&e.body)) {
    if (scrub_at_ != now) {
      scrubbed_.clear();
      scrub_at_ = now;
    }
    scrubbed_[g->node] |= g->gpus;
  } else if (const auto* p = std::get_if<JobPlaced>(&e.body)) {
    OnPlaced(*p, now);
  } else if (const auto* rs = std::get_if<JobResized>(&e.body)) {
    OnResized(*rs, now);
  } else if (const auto* ps = std::get_if<PreemptionStarted>(&e.body)) {
    OnPreemptionStarted(*ps, now);
  } else if (const auto* pr = std::get_if<JobPreempted>(&e.body)) {
    OnPreempted(*pr, now);
  } else if (const auto* rs = std::get_if<ReclaimStarted>(&e.body)) {
    OnReclaimStarted(*rs, now);
  } else if (const auto* rc = std::get_if<JobReclaimed>(&e.body)) {
    OnReclaimed(*rc, now);
  } else if (const auto* ji = std::get_if<JobInterrupted>(&e.body)) {
    OnInterrupted(*ji, now);
  } else if (const auto* f = std::get_if<JobFinished>(&e.body)) {
    OnFinished(*f, now);
  } else if (const auto* c = std::get_if<JobCancelled>(&e.body)) {
    OnCancelled(*c, now);
  }
  metrics_.SetGpuBusy(load_.busy_gpus());
  metrics_.Observe(now);
}

// The hook, the log's hash and file, and the invariants after the event.
void Simulator::LogEvent(const Event& e) {
  if (options_.on_event) options_.on_event(e);
  ++events_;
  std::string line = ToJsonLine(e);
  line.push_back('\n');
  hash_.Update(line);
  if (log_.is_open()) log_ << line;
  if (options_.check_invariants && failure_) {
    Status ok = CheckInvariants(engine_->state());
    if (const auto* placed = std::get_if<JobPlaced>(&e.body); ok && placed) {
      ok = CheckPlacedOnScrubbedGpus(engine_->state(), *placed);
    }
    if (!ok) failure_ = std::unexpected(Error{ok.error().code, ok.error().message + " after " + line});
  }
}

void Simulator::OnSubmitted(const JobSubmitted& s, Instant now) {
  if (options_.on_submitted) options_.on_submitted(s.job, submitting_);
  if (resubmitting_) {
    live_[s.job] = std::move(parked_.at(submitting_));
    parked_.erase(submitting_);
  } else {
    live_[s.job].index = submitting_;
    metrics_.Submitted(submitting_, now);
  }
}

void Simulator::OnRejected() {
  if (resubmitting_) {
    parked_.erase(submitting_);
    metrics_.Ended(submitting_);
  } else {
    metrics_.Rejected(submitting_);
  }
}

void Simulator::OnNodeAdded(const NodeAdded& na) {
  ++in_service_;
  if (failed_.size() < static_cast<size_t>(engine_->state().cluster.node_count())) {
    failed_.resize(engine_->state().cluster.node_count(), false);
  }
  if (na.provisioned) {
    --provisioning_;
    ++metrics_.scaling().nodes_added;
  }
  UpdateNodeCounts();
}

void Simulator::OnWarmPoolSized(const WarmPoolSized& w, Instant now) {
  provider_[w.pool].warm_target = w.nodes;
  PoolProvider& p = provider_[w.pool];
  p.warm_ready = std::min(p.warm_ready, w.nodes);  // extra warm nodes are released
  RefillWarmPool(w.pool, now);
  UpdateNodeCounts();
}

void Simulator::OnPreemptionStarted(const PreemptionStarted& ps, Instant now) {
  Running& r = live_.at(ps.victim);
  if (ps.reason == PreemptReason::kDrain) drained_.insert(ps.victim);
  if (ps.reason == PreemptReason::kHotspot) ++metrics_.hotspots().moves;
  if (ps.reason == PreemptReason::kDefrag) {
    migrating_.insert(ps.victim);
    ++metrics_.defrag().migrations;
  }
  if ((ps.reason == PreemptReason::kDefrag || ps.reason == PreemptReason::kDrain ||
       ps.reason == PreemptReason::kHotspot) && r.placed) {
    r.moved_at = r.computing ? now : r.stopped_at;
    r.moved_for = ps.reason;
  }
  if (ps.checkpoint && r.computing) StartCheckpoint(ps.victim, r, now);
}

void Simulator::OnPreempted(const JobPreempted& pr, Instant now) {
  Running& r = live_.at(pr.victim);
  Duration lost{0};
  if (!r.checkpointed) {  // stopped without a checkpoint now: keep what periodic checkpoints saved
    if (r.computing) StopComputing(pr.victim, r, now);
    if (r.placed) lost = SavePeriodic(r);
  }
  metrics_.Preempted(r.index, lost);
  if (migrating_.erase(pr.victim)) metrics_.defrag().migration_lost_work_s += ToSeconds(lost);
  if (drained_.erase(pr.victim)) {
    ++metrics_.scaling().drained_jobs;
    metrics_.scaling().drained_lost_work_s += ToSeconds(lost);
  }
  Release(pr.victim, r, now);
}

void Simulator::OnReclaimStarted(const ReclaimStarted& rs, Instant now) {
  Running& r = live_.at(rs.job);
  if (rs.reason == ReclaimReason::kIdle) {
    const Duration t = now - r.util_origin;
    r.idle_from = now;
    if (r.util.valid() && r.util.At(t) < IdleThreshold()) {
      r.idle_from = std::max(r.run_start, r.util_origin + r.util.BelowSince(t, IdleThreshold()));
    }
  }
  if (rs.checkpoint && r.computing) StartCheckpoint(rs.job, r, now);
}

void Simulator::OnInterrupted(const JobInterrupted& ji, Instant now) {
  Running& r = live_.at(ji.job);
  if (r.computing) StopComputing(ji.job, r, now);
  if (!r.failed_at) r.failed_at = now;
  const Duration lost = r.checkpointed ? Duration(0) : SavePeriodic(r);
  r.checkpointed = false;
  metrics_.Interrupted(lost);
  Release(ji.job, r, now);
}

void Simulator::OnFinished(const JobFinished& f, Instant now) {
  Running& r = live_.at(f.job);
  if (r.computing) StopComputing(f.job, r, now);
  Release(f.job, r, now);
  metrics_.Completed(r.index, now);
  live_.erase(f.job);
}

void Simulator::OnCancelled(const JobCancelled& c, Instant now) {
  auto it = live_.find(c.job);
  if (it != live_.end()) {
    if (it->second.computing) StopComputing(c.job, it->second, now);
    Release(c.job, it->second, now);
    live_.erase(it);
  }
}

void Simulator::OnReclaimed(const JobReclaimed& rc, Instant now) {
  auto node = live_.extract(rc.job);
  Running& r = node.mapped();
  if (!r.checkpointed) {
    if (r.computing) StopComputing(rc.job, r, now);
    if (r.placed) SavePeriodic(r);
  }
  const std::vector<PlacedReplica> where = r.replicas;
  Release(rc.job, r, now);
  if (!r.idle_from) {
    metrics_.DeadlineEvicted();
    metrics_.Ended(r.index);
    return;
  }
  metrics_.IdleReclaimed(now - *r.idle_from);
  if (engine_->state().queue.size() > 0) released_.push_back(Released{now, where});
  // Its owner comes back after a think time and submits it again; when is
  // not read from the job's utilization (the daemon cannot know it either).
  const Instant back = now + SampleDuration(options_.think_time, nullptr, think_rng_);
  const SimJob& job = jobs_[r.index];
  r.idle_from.reset();
  r.checkpointed = false;
  r.away_since = now;
  if (job.spec.kind == JobKind::kOnlineInference) {
    const Instant end = r.util_origin + job.work;
    if (back >= end) {  // its lifetime ends before its owner is back
      metrics_.NeverResumed();
      AwayUntil(r, std::min(end, kTimeOrigin + options_.horizon));
      if (end <= kTimeOrigin + options_.horizon) metrics_.Completed(r.index, end);
      return;
    }
  } else if (r.done >= job.work) {
    metrics_.Ended(r.index);
    return;
  }
  const size_t index = r.index;
  parked_[index] = std::move(r);
  Push(back, Kind::kResubmit, static_cast<int64_t>(index));
}

void Simulator::AwayUntil(Running& r, Instant until) {
  if (!r.away_since) return;
  const Instant from = *r.away_since;
  r.away_since.reset();
  if (until <= from) return;
  const Duration below = r.util.TimeBelow(from - r.util_origin, until - r.util_origin, IdleThreshold());
  metrics_.BusyWhileAway(until - from - below);
}

// --- the world's own events ---------------------------------------------------------

void Simulator::OnScaleOut(const ScaleOutRequested& s, Instant now) {
  PoolProvider& p = provider_[s.pool];
  ++metrics_.scaling().scale_outs;
  metrics_.scaling().nodes_requested += s.nodes;
  for (int32_t i = 0; i < s.nodes; ++i) {
    Duration latency = options_.provider.cold_start;
    if (p.warm_ready > 0) {
      --p.warm_ready;
      latency = options_.provider.warm_start;
      ++metrics_.scaling().warm_starts;
    }
    ++provisioning_;
    Push(now + latency, Kind::kProvision, s.pool);
  }
  RefillWarmPool(s.pool, now);
  UpdateNodeCounts();
}

void Simulator::RefillWarmPool(PoolId pool, Instant now) {
  PoolProvider& p = provider_[pool];
  while (p.warm_ready + p.warm_coming < p.warm_target) {
    ++p.warm_coming;
    Push(now + options_.provider.cold_start, Kind::kWarmReady, pool);
  }
}

void Simulator::UpdateNodeCounts() {
  if (!scaling_) return;
  int64_t warm = 0;
  for (const auto& [pool, p] : provider_) warm += p.warm_ready + p.warm_coming;
  metrics_.SetNodes(static_cast<double>(in_service_), static_cast<double>(in_service_ + provisioning_),
                    static_cast<double>(warm));
}

Status Simulator::OnPoll(JobId id, uint64_t token, Instant now) {
  auto it = live_.find(id);
  if (it == live_.end() || it->second.poll_token != token || !it->second.computing) return {};
  const double threshold = IdleThreshold();
  const double u = it->second.util.At(now - it->second.util_origin);
  if (auto ok = engine_->ReportUtilization(id, 100.0 * u, now, sink_); !ok) return ok;
  it = live_.find(id);  // the report may have reclaimed it
  if (it == live_.end() || it->second.poll_token != token || !it->second.computing) return {};
  const Running& r = it->second;
  const Duration poll = engine_->config().reclaim.poll;
  Instant next = now + poll;
  if (u >= threshold) {
    // Busy: nothing changes for the engine until it is idle again.
    const Duration idle = r.util.NextBelow(now - r.util_origin, threshold);
    if (idle == Duration::max()) return {};
    const Instant at = r.util_origin + idle;
    if (at > next) next = r.run_start + ((at - r.run_start + poll - Duration(1)) / poll) * poll;
  }
  Push(next, Kind::kPoll, id, token);
  return {};
}

void Simulator::OnFault(NodeIndex node, Instant now) {
  failed_[node] = true;
  metrics_.NodeFailed();
  std::vector<JobId> hit;
  for (const auto& [id, r] : live_) {
    if (!r.placed) continue;
    for (const PlacedReplica& at : r.replicas) {
      if (at.node == node) {
        hit.push_back(id);
        break;
      }
    }
  }
  std::sort(hit.begin(), hit.end());
  for (JobId id : hit) {
    Running& r = live_.at(id);
    if (r.computing) StopComputing(id, r, now);
    if (!r.failed_at) r.failed_at = now;
  }
  metrics_.SetGpuBusy(load_.busy_gpus());
  metrics_.Observe(now);
}

Status Simulator::ScheduleGpuFaults() {
  const Cluster& cluster = engine_->state().cluster;
  gpu_unhealthy_.assign(cluster.node_count(), 0);
  for (const GpuFaultSpec& f : options_.gpu_faults) {
    const NodeIndex node = NodeNamed(cluster, f.node);
    if (node < 0) return NotFound("gpu_faults: unknown node '" + f.node + "'");
    if (f.gpu < 0 || f.gpu >= cluster.node(node).gpu_count) {
      return InvalidArgument("gpu_faults: node '" + f.node + "' has no GPU " + std::to_string(f.gpu));
    }
    const int64_t id = int64_t{node} * kMaxGpusPerNode + f.gpu;
    Push(kTimeOrigin + f.at, Kind::kGpuFault, id, static_cast<uint64_t>(f.xid));
    Push(kTimeOrigin + f.at + f.unhealthy_for, Kind::kGpuRecover, id);
  }
  return {};
}

// The node's agent reports its whole set of unhealthy GPUs, as a real one
// does at each heartbeat.
Status Simulator::OnGpuFault(const Item& item, Instant now) {
  const NodeIndex node = static_cast<NodeIndex>(item.id / kMaxGpusPerNode);
  const int gpu = static_cast<int>(item.id % kMaxGpusPerNode);
  const GpuMask bit = static_cast<GpuMask>(1u << gpu);
  GpuMask& mask = gpu_unhealthy_[node];
  mask = item.kind == Kind::kGpuFault ? static_cast<GpuMask>(mask | bit) : static_cast<GpuMask>(mask & ~bit);
  const std::string reason =
      item.kind == Kind::kGpuFault ? "GPU " + std::to_string(gpu) + ": XID " + std::to_string(item.token) : "";
  return engine_->ReportGpuHealth(node, mask, reason, now, sink_);
}

Status Simulator::ScheduleNodeOps() {
  const Cluster& cluster = engine_->state().cluster;
  for (size_t i = 0; i < options_.node_ops.size(); ++i) {
    const NodeOpSpec& op = options_.node_ops[i];
    if (NodeNamed(cluster, op.node) < 0) return NotFound("node_ops: unknown node '" + op.node + "'");
    Push(kTimeOrigin + op.at, Kind::kNodeOp, static_cast<int64_t>(i));
  }
  return {};
}

Status Simulator::OnNodeOp(size_t index, Instant now) {
  const NodeOpSpec& op = options_.node_ops[index];
  const NodeIndex node = NodeNamed(engine_->state().cluster, op.node);
  Result<bool> done = false;
  switch (op.action) {
    case NodeOpSpec::Action::kCordon: done = engine_->CordonNode(node, "scenario", op.reason, now, sink_); break;
    case NodeOpSpec::Action::kUncordon: done = engine_->UncordonNode(node, "scenario", now, sink_); break;
    case NodeOpSpec::Action::kDrain:
      done = engine_->DrainNode(node, "scenario", op.reason, op.timeout, now, sink_);
      break;
    case NodeOpSpec::Action::kRemove:
      done = engine_->RemoveNode(node, "scenario", op.reason, op.force, now, sink_);
      break;
  }
  if (!done) {
    return std::unexpected(Error{done.error().code, "node_ops[" + std::to_string(index) + "]: " + done.error().message});
  }
  return {};
}

Status Simulator::Resubmit(size_t index, Instant now) {
  parked_.at(index).wants_back = now;
  resubmitting_ = true;
  submitting_ = index;
  auto id = engine_->Submit(jobs_[index].spec, now, sink_);
  resubmitting_ = false;
  if (!id) return std::unexpected(Error{id.error().code, "resubmitting job " + std::to_string(index) + ": " + id.error().message});
  return {};
}

Status Simulator::ScheduleFaultsAndSpells() {
  const Cluster& cluster = engine_->state().cluster;
  const Duration heartbeat_timeout = engine_->config().heartbeat_timeout;
  for (const FaultSpec& f : options_.faults) {
    const NodeIndex node = NodeNamed(cluster, f.node);
    if (node < 0) return NotFound("faults: unknown node '" + f.node + "'");
    if (heartbeat_timeout <= Duration(0)) {
      return InvalidArgument("faults: need a heartbeat timeout above 0 (failure detection is off)");
    }
    if (f.down_for <= heartbeat_timeout + options_.tick) {
      return InvalidArgument("faults: node '" + f.node + "' is down for " + std::to_string(ToSeconds(f.down_for)) +
                             " s, not longer than the heartbeat timeout plus a tick: the engine would not notice");
    }
    Push(kTimeOrigin + f.at, Kind::kFault, node);
    Push(kTimeOrigin + f.at + f.down_for, Kind::kRecover, node);
  }
  GP_TRY(ScheduleGpuFaults());
  GP_TRY(ScheduleNodeOps());
  for (size_t i = 0; i < options_.world_changes.size(); ++i) {
    Push(kTimeOrigin + options_.world_changes[i].at, Kind::kWorldChange, static_cast<int64_t>(i));
  }
  spells_.clear();
  for (const HotSpell& h : options_.hot_spells) {
    const NodeIndex node = NodeNamed(cluster, h.node);
    if (node < 0) return NotFound("hot_spells: unknown node '" + h.node + "'");
    spells_.push_back({node, kTimeOrigin + h.at, kTimeOrigin + h.at + h.hot_for, h.temperature_c});
  }
  return {};
}

Status Simulator::OnProvision(PoolId pool, Instant now) {
  PoolProvider& p = provider_[pool];
  const NodeTemplate* t = nullptr;
  for (const PoolScalingConfig& c : engine_->config().scaling) {
    if (c.pool == engine_->state().pools[pool].name) t = &c.node;
  }
  if (t == nullptr) return {};
  const int64_t serial = p.serial++;
  // FRAG-3: the provider puts the node beside the pool's scattered
  // free GPUs when there are any, else in its own racks in turn.
  std::string rack = engine_->FragmentedRack(pool);
  if (rack.empty()) rack = ProvisionedNodeRack(*t, serial);
  auto added = engine_->AddProvisionedNode(pool, ProvisionedNodeName(*t, serial), std::move(rack), now, sink_);
  if (!added) return std::unexpected(added.error());
  return {};
}

Status Simulator::OnItem(const Item& item, Instant now) {
  switch (item.kind) {
    case Kind::kCompletion: {
      auto it = live_.find(item.id);
      if (it == live_.end() || it->second.token != item.token || !it->second.computing) return {};
      return engine_->Finish(item.id, true, now, sink_);
    }
    case Kind::kCheckpointDone: {
      auto it = live_.find(item.id);
      if (it == live_.end() || it->second.failed_at) return {};  // a failed node saves nothing
      if (engine_->state().job(item.id).state != JobState::kCheckpointing) return {};
      return engine_->CheckpointDone(item.id, now, sink_);
    }
    case Kind::kFault: OnFault(static_cast<NodeIndex>(item.id), now); return {};
    case Kind::kRecover:
      failed_[item.id] = false;
      return engine_->Heartbeat(static_cast<NodeIndex>(item.id), now, sink_);
    case Kind::kGpuFault:
    case Kind::kGpuRecover: return OnGpuFault(item, now);
    case Kind::kNodeOp: return OnNodeOp(static_cast<size_t>(item.id), now);
    case Kind::kWorldChange: return options_.world_changes[static_cast<size_t>(item.id)].apply(*engine_, now, sink_);
    case Kind::kPoll: return OnPoll(item.id, item.token, now);
    case Kind::kResubmit: return Resubmit(static_cast<size_t>(item.id), now);
    case Kind::kProvision: return OnProvision(static_cast<PoolId>(item.id), now);
    case Kind::kWarmReady: {
      PoolProvider& p = provider_[static_cast<PoolId>(item.id)];
      --p.warm_coming;
      if (p.warm_ready < p.warm_target) ++p.warm_ready;
      UpdateNodeCounts();
      metrics_.Observe(now);
      return {};
    }
    case Kind::kTick: return {};
  }
  return {};
}

Status Simulator::OnTick(Instant now) {
  const Cluster& cluster = engine_->state().cluster;
  if (heartbeats_) {
    for (NodeIndex n = 0; n < cluster.node_count(); ++n) {
      if (failed_[n] || cluster.node(n).condition == NodeCondition::kRemoved) continue;
      GP_TRY(engine_->Heartbeat(n, now, sink_));
    }
  }
  if (telemetry_) GP_TRY(ReportTelemetry(now));
  engine_->Tick(now, sink_);
  Push(now + options_.tick, Kind::kTick);
  return {};
}

// OPS-2: each node's GPU telemetry. Utilization follows the GPUs'
// allocations, and so does the temperature (40 C idle, 80 C full) but on a
// node in a hot spell, where it is the spell's. Memory is not reported
// (what jobs hold is not what they use).
Status Simulator::ReportTelemetry(Instant now) {
  const Cluster& cluster = engine_->state().cluster;
  std::vector<GpuTelemetry> gpus;
  for (NodeIndex n = 0; n < cluster.node_count(); ++n) {
    const Node& node = cluster.node(n);
    if (failed_[n] || node.condition == NodeCondition::kRemoved || node.gpu_count == 0) continue;
    double spell = -1;
    for (const Spell& s : spells_) {
      if (s.node == n && now >= s.from && now < s.to) spell = s.temperature_c;
    }
    gpus.clear();
    for (int g = 0; g < node.gpu_count; ++g) {
      const double util = 100.0 * (kMilliPerGpu - node.gpu_free_milli[g]) / kMilliPerGpu;
      gpus.push_back({g, util, -1, spell >= 0 ? spell : 40 + 0.4 * util});
    }
    GP_TRY(engine_->ReportNodeTelemetry(n, gpus, now, sink_));
  }
  return {};
}

Result<SimReport> Simulator::Run(const std::string& scenario_name) {
  const Instant horizon = kTimeOrigin + options_.horizon;
  failed_.assign(engine_->state().cluster.node_count(), false);
  scaling_ = !engine_->config().scaling.empty();
  heartbeats_ = engine_->config().heartbeat_timeout > Duration(0);
  telemetry_ = engine_->config().hotspots.enabled;
  UpdateNodeCounts();
  metrics_.Observe(kTimeOrigin);
  GP_TRY(ScheduleFaultsAndSpells());
  if (options_.tick > Duration(0)) Push(kTimeOrigin + options_.tick, Kind::kTick);
  size_t next_arrival = 0;
  while (failure_) {
    const Instant arrival_at = next_arrival < jobs_.size() ? jobs_[next_arrival].arrival : Instant::max();
    const Instant heap_at = heap_.empty() ? Instant::max() : heap_.top().at;
    const Instant now = std::min(arrival_at, heap_at);
    if (now > horizon || now == Instant::max()) break;
    // Heap items due now that come before arrivals.
    if (heap_at == now && heap_.top().kind < Kind::kTick) {
      const Item item = heap_.top();
      heap_.pop();
      GP_TRY(OnItem(item, now));
      continue;
    }
    if (arrival_at == now) {
      submitting_ = next_arrival;
      auto id = engine_->Submit(jobs_[next_arrival].spec, now, sink_);
      if (!id) return std::unexpected(Error{id.error().code, "job " + std::to_string(next_arrival) + " ('" +
                                                                  jobs_[next_arrival].spec.name +
                                                                  "'): " + id.error().message});
      ++next_arrival;
      continue;
    }
    heap_.pop();  // the tick
    GP_TRY(OnTick(now));
  }
  if (!failure_) return std::unexpected(failure_.error());
  SettleAtHorizon(horizon);
  if (log_.is_open()) {
    log_.flush();
    if (!log_) return IoError(options_.event_log_path + ": write failed");
  }
  return Report(horizon, scenario_name);
}

void Simulator::SettleAtHorizon(Instant horizon) {
  std::vector<JobId> ids;
  for (const auto& [id, r] : live_) ids.push_back(id);
  std::sort(ids.begin(), ids.end());
  for (JobId id : ids) {
    Running& r = live_.at(id);
    if (r.computing) Settle(r, horizon);
    Release(id, r, horizon);
    if (r.failed_at) metrics_.Replaced(horizon - *r.failed_at, horizon - *r.failed_at, true);
    AwayUntil(r, horizon);  // resubmitted, not running again yet
    if (r.moved_at) {
      metrics_.MovedBack(r.moved_for, horizon - *r.moved_at, jobs_[r.index].spec.kind == JobKind::kOnlineInference);
    }
  }
  for (auto& [index, r] : parked_) AwayUntil(r, horizon);  // its owner not back yet
}

SimReport Simulator::Report(Instant horizon, const std::string& scenario_name) {
  SimReport report = metrics_.Finish(horizon, scenario_name, events_, hash_.HexDigest());
  ScalingReport& s = report.scaling;
  s.cost = options_.provider.price_per_node_hour *
           (s.node_hours + s.warm_node_hours * options_.provider.warm_price_fraction);
  for (const ForecastStats& f : engine_->forecast_stats()) {
    s.forecasts += f.predictions;
    s.forecast_mae_gpus += f.mean_abs_error_gpus * static_cast<double>(f.predictions);
    s.forecast_mean_actual_gpus += f.mean_actual_gpus * static_cast<double>(f.predictions);
  }
  if (s.forecasts > 0) {
    s.forecast_mae_gpus /= static_cast<double>(s.forecasts);
    s.forecast_mean_actual_gpus /= static_cast<double>(s.forecasts);
  }
  return report;
}

}  // namespace gpupool
