// Defragmentation (FRAG-2): every EngineConfig::defrag_every (at a Tick),
// when EngineConfig::defrag is on, the planner (src/control/defrag_planner.h)
// is given the running checkpointable single-replica jobs (no pipelines, no
// affinity rules, none already moving) and the hourly budget left; each
// planned move emits MigrationStarted and a checkpointing
// PreemptionStarted (reason kDefrag). When the checkpoint is done
// (Engine::CheckpointDone) the job takes its planned GPUs if they still
// pass the policy's filters, else it queues like any preempted job.
//
// Soft state: the planned destination of each migrating job (forgotten
// when the job is placed, ends or loses its node), the recent migrations'
// start times (the hourly budget) and the next time to plan.
#pragma once

#include <map>
#include <vector>

#include "src/engine/control_loop.h"
#include "src/engine/defrag.h"

namespace gpupool {

class Defragmentation final : public Defragmenter {
 public:
  // `every`: how often it plans; `enabled` false: never.
  Defragmentation(bool enabled, Duration every, DefragConfig config)
      : enabled_(enabled), every_(every), config_(config) {}
  void Tick(const EngineView& view, Actions& act) override;
  bool Checkpointed(JobId job, const EngineView& view, Actions& act) override;
  void Observe(const Event& e) override;

  // Is `job` migrating (a planned destination is held for it)?
  bool migrating(JobId job) const { return planned_moves_.contains(job); }

 private:
  // Where a migrating job goes, and whether it ran borrowed.
  struct PlannedMove {
    NodeIndex node = -1;
    GpuMask gpus = 0;
    bool borrowed = false;
  };

  bool enabled_;
  Duration every_;
  DefragConfig config_;
  std::map<JobId, PlannedMove> planned_moves_;
  std::vector<Instant> migrations_started_;
  Instant next_defrag_{};
};

}  // namespace gpupool
