#include "src/control/reclaim.h"

#include <vector>

namespace gpupool {

void StartReclaim(const Job& j, ReclaimReason reason, Actions& act) {
  const JobId id = j.id;
  const bool checkpoint = j.spec.checkpointable;
  act.Emit(ReclaimStarted{id, reason, checkpoint});
  if (!checkpoint) act.Emit(JobReclaimed{id});
}

void IdleReclaim::Tick(const EngineView& view, Actions& act) {
  if (!config_.idle) return;
  const EngineState& s = view.state();
  std::vector<JobId> expired;
  for (const auto& [id, j] : s.running) {
    if (j->idle_suspected && j->state == JobState::kRunning && j->stopping == Job::Stop::kNone &&
        view.now() >= j->idle_since + config_.grace) {
      expired.push_back(id);
    }
  }
  for (JobId id : expired) StartReclaim(s.job(id), ReclaimReason::kIdle, act);
}

void IdleReclaim::Utilization(const Job& j, double util_pct, const EngineView& view, Actions& act) {
  if (!config_.idle || j.state != JobState::kRunning || j.stopping != Job::Stop::kNone) return;
  const JobId id = j.id;
  if (util_pct < config_.idle_below_pct) {
    const int low = ++low_polls_[id];
    if (!j.idle_suspected) {
      if (low >= config_.idle_polls) act.Emit(JobIdleSuspected{id});
    } else if (view.now() >= j.idle_since + config_.grace) {
      StartReclaim(j, ReclaimReason::kIdle, act);
      act.SchedulePass();  // what it freed is offered at once
    }
  } else {
    low_polls_[id] = 0;
    if (j.idle_suspected) act.Emit(JobIdleRecovered{id});
  }
}

void IdleReclaim::Observe(const Event& e) {
  if (const auto* r = std::get_if<JobReclaimed>(&e.body)) {
    low_polls_.erase(r->job);
  } else if (const auto* i = std::get_if<JobInterrupted>(&e.body)) {
    low_polls_.erase(i->job);
  } else if (const auto* p = std::get_if<PreemptionStarted>(&e.body)) {
    switch (p->reason) {
      case PreemptReason::kDrain:
      case PreemptReason::kDefrag:
      case PreemptReason::kHotspot:
      case PreemptReason::kGpuUnhealthy:
        low_polls_.erase(p->victim);
        break;
      case PreemptReason::kGuaranteeReclaim:
      case PreemptReason::kPriority:
      case PreemptReason::kMigRecut:
        break;
    }
  }
}

int IdleReclaim::low_polls(JobId job) const {
  auto it = low_polls_.find(job);
  return it == low_polls_.end() ? 0 : it->second;
}

void DeadlineEviction::Tick(const EngineView& view, Actions& act) {
  if (!config_.deadlines) return;
  const EngineState& s = view.state();
  std::vector<JobId> due;
  for (const auto& [deadline_ms, id] : s.running_deadlines) {
    if (deadline_ms > ToMillis(view.now())) break;
    due.push_back(id);
  }
  for (JobId id : due) {
    const Job& j = s.job(id);
    if (j.state == JobState::kRunning && j.stopping == Job::Stop::kNone) StartReclaim(j, ReclaimReason::kDeadline, act);
  }
}

}  // namespace gpupool
