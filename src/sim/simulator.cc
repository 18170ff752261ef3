#include "src/sim/simulator.h"

#include <algorithm>

#include "src/base/check.h"

namespace gpupool {

Simulator::Simulator(Engine* engine, std::vector<SimJob> jobs, SimOptions options)
    : engine_(engine),
      jobs_(std::move(jobs)),
      options_(std::move(options)),
      metrics_(&jobs_, &engine_->state(), options_.sample_every) {
  if (!options_.event_log_path.empty()) {
    log_.open(options_.event_log_path, std::ios::trunc);
    if (!log_) failure_ = IoError(options_.event_log_path + ": cannot open for writing");
  }
}

void Simulator::Push(Instant at, Kind kind, JobId job, uint64_t token) {
  heap_.push(Item{at, kind, seq_++, job, token});
}

Duration Simulator::Elapsed(const Running& r, Instant now) const {
  return r.running && now > r.run_start ? now - r.run_start : Duration(0);
}

void Simulator::OnEvent(const Event& e) {
  ++events_;
  std::string line = ToJsonLine(e);
  line.push_back('\n');
  hash_.Update(line);
  if (log_.is_open()) log_ << line;
  if (options_.check_invariants && failure_) {
    if (auto ok = CheckInvariants(engine_->state()); !ok) {
      failure_ = std::unexpected(Error{ok.error().code, ok.error().message + " after " + line});
    }
  }
  const Instant now = e.at;
  if (const auto* s = std::get_if<JobSubmitted>(&e.body)) {
    live_[s->job] = Running{submitting_};
    metrics_.Submitted(submitting_, now);
  } else if (std::get_if<JobRejected>(&e.body)) {
    metrics_.Rejected(submitting_);
  } else if (const auto* p = std::get_if<JobPlaced>(&e.body)) {
    Running& r = live_.at(p->job);
    r.running = true;
    r.run_start = now + options_.start_latency;
    ++r.token;
    const SimJob& job = jobs_[r.index];
    Push(r.run_start + std::max(Duration(0), job.work - r.done), Kind::kCompletion, p->job, r.token);
    metrics_.Started(r.index, now);
  } else if (const auto* ps = std::get_if<PreemptionStarted>(&e.body)) {
    Running& r = live_.at(ps->victim);
    ++r.token;  // its completion no longer stands
    if (ps->checkpoint) {
      // The checkpoint captures everything computed so far.
      r.done += Elapsed(r, now);
      r.running = false;
      Push(now + jobs_[r.index].spec.checkpoint_duration, Kind::kCheckpointDone, ps->victim);
    }
  } else if (const auto* pr = std::get_if<JobPreempted>(&e.body)) {
    Running& r = live_.at(pr->victim);
    ++r.token;
    if (r.running) {  // stopped without a checkpoint now: keep what periodic checkpoints saved
      const Duration ran = Elapsed(r, now);
      const JobSpec& spec = jobs_[r.index].spec;
      const Duration saved = spec.checkpoint_interval > Duration(0) ? ran - ran % spec.checkpoint_interval : Duration(0);
      r.done += saved;
      metrics_.Preempted(r.index, ran - saved);
    } else {
      metrics_.Preempted(r.index, Duration(0));
    }
    r.running = false;
  } else if (const auto* f = std::get_if<JobFinished>(&e.body)) {
    metrics_.Completed(live_.at(f->job).index, now);
    live_.erase(f->job);
  } else if (const auto* c = std::get_if<JobCancelled>(&e.body)) {
    live_.erase(c->job);
  }
  metrics_.Observe(now);
}

Result<SimReport> Simulator::Run(const std::string& scenario_name) {
  const Instant horizon = kTimeOrigin + options_.horizon;
  const Engine::Sink sink = this->sink();
  if (options_.tick > Duration(0)) Push(kTimeOrigin + options_.tick, Kind::kTick);
  size_t next_arrival = 0;
  while (failure_) {
    const Instant arrival_at = next_arrival < jobs_.size() ? jobs_[next_arrival].arrival : Instant::max();
    const Instant heap_at = heap_.empty() ? Instant::max() : heap_.top().at;
    const Instant now = std::min(arrival_at, heap_at);
    if (now > horizon || now == Instant::max()) break;
    // Heap items due now that come before arrivals (completions, checkpoints).
    if (heap_at == now && heap_.top().kind < Kind::kTick) {
      const Item item = heap_.top();
      heap_.pop();
      if (item.kind == Kind::kCompletion) {
        auto it = live_.find(item.job);
        if (it == live_.end() || it->second.token != item.token || !it->second.running) continue;
        if (auto ok = engine_->Finish(item.job, true, now, sink); !ok) return std::unexpected(ok.error());
      } else if (live_.contains(item.job) && engine_->state().job(item.job).state == JobState::kCheckpointing) {
        if (auto ok = engine_->CheckpointDone(item.job, now, sink); !ok) return std::unexpected(ok.error());
      }
      continue;
    }
    if (arrival_at == now) {
      submitting_ = next_arrival;
      auto id = engine_->Submit(jobs_[next_arrival].spec, now, sink);
      if (!id) return std::unexpected(Error{id.error().code, "job " + std::to_string(next_arrival) + " ('" +
                                                                  jobs_[next_arrival].spec.name +
                                                                  "'): " + id.error().message});
      ++next_arrival;
      continue;
    }
    const Item item = heap_.top();  // the tick
    heap_.pop();
    engine_->Tick(now, sink);
    Push(now + options_.tick, Kind::kTick);
  }
  if (!failure_) return std::unexpected(failure_.error());
  if (log_.is_open()) {
    log_.flush();
    if (!log_) return IoError(options_.event_log_path + ": write failed");
  }
  return metrics_.Finish(horizon, scenario_name, events_, hash_.HexDigest());
}

}  // namespace gpupool
