// Builds the world a scenario describes (src/config/world.h: attribute
// table, engine, pools, tenants, nodes, quotas), submits its jobs and runs
// it through the simulator.
#pragma once

#include <map>
#include <functional>
#include <optional>
#include <vector>
#include <string>

#include "src/base/status.h"
#include "src/config/world.h"
#include "src/engine/engine.h"
#include "src/sim/metrics.h"
#include "src/sim/scenario.h"

namespace gpupool {

struct RunOptions {
  std::string event_log_path;        // write every event as a JSON line
  bool check_invariants = false;     // after every event (slower; for tests)
  std::optional<std::string> policy; // overrides the scenario's engine policy
  std::optional<bool> lending;       // overrides the scenario's lending switch
  // Baseline for priority claims: every job is submitted with priority 0
  // and no deadline, so the queue is first come, first served (reports
  // still group jobs by their priority class).
  bool fifo = false;
  // Baselines for sharing claims (PART-1..3): every GPU job as written, on
  // whole GPUs only (shares round up to one GPU), or time-sliced wherever
  // it shares (MIG and MPS become time-slicing; the sharing policy still
  // decides which auto jobs take whole GPUs).
  enum class Sharing { kAsWritten, kWholeGpusOnly, kTimeSliceOnly } sharing = Sharing::kAsWritten;
  // Overrides the scenario's idle reclamation switch.
  std::optional<bool> reclaim_idle;
  // Handed every event as it is decided (tests; the CLI's report and
  // progress line), and the engine once the run has reached its horizon
  // (not called when the run fails).
  std::function<void(const Event&)> on_event;
  std::function<void(const Engine&)> on_finish;
};

Result<SimReport> RunScenario(const Scenario& s, const RunOptions& options);

}  // namespace gpupool
