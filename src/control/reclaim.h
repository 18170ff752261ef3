// Reclamation loops: idle jobs (RECLAIM-1) and jobs past their deadline
// (RECLAIM-2). Settings: ReclaimConfig (src/engine/engine.h).
//
// Idle (when ReclaimConfig::idle): a running job whose utilization reports
// stay below `idle_below_pct` for `idle_polls` reports in a row is
// suspected idle (JobIdleSuspected, its owner is notified); a report at or
// above the threshold clears it (JobIdleRecovered). A suspect still idle
// `grace` after the suspicion is reclaimed, at its next low report or at
// the first Tick after the grace: ReclaimStarted, then JobReclaimed, at once
// for a job that cannot checkpoint, after its checkpoint otherwise
// (Engine::CheckpointDone). What a reclaim frees is offered at once.
//
// Deadlines (when ReclaimConfig::deadlines): at each Tick, every running
// job whose deadline has passed is reclaimed the same way (reason
// kDeadline).
#pragma once

#include <unordered_map>

#include "src/engine/control_loop.h"
#include "src/engine/engine.h"

namespace gpupool {

// ReclaimStarted for running job `j`, and JobReclaimed at once when it
// cannot checkpoint.
void StartReclaim(const Job& j, ReclaimReason reason, Actions& act);

class IdleReclaim final : public IdleReclaimer {
 public:
  explicit IdleReclaim(ReclaimConfig config) : config_(config) {}
  // Reclaims the suspects whose grace ran out without a report since.
  void Tick(const EngineView& view, Actions& act) override;
  void Utilization(const Job& j, double util_pct, const EngineView& view, Actions& act) override;
  // A job reclaimed, interrupted, or moved off its node by another loop
  // (a drain, a defragmentation, a hotspot, an unhealthy GPU) starts its
  // count of low reports again; one preempted for another job keeps it.
  void Observe(const Event& e) override;

  // Low reports in a row so far (soft state), for tests.
  int low_polls(JobId job) const;

 private:
  ReclaimConfig config_;
  // Per job: low reports in a row. Looked up by id, never iterated.
  std::unordered_map<JobId, int> low_polls_;
};

class DeadlineEviction final : public ControlLoop {
 public:
  explicit DeadlineEviction(ReclaimConfig config) : config_(config) {}
  void Tick(const EngineView& view, Actions& act) override;

 private:
  ReclaimConfig config_;
};

}  // namespace gpupool
