// Builds the world a scenario describes (attribute table, engine, pools,
// tenants, nodes, quotas, jobs) and runs it through the simulator.
#pragma once

#include <optional>
#include <string>

#include "src/base/status.h"
#include "src/sim/metrics.h"
#include "src/sim/scenario.h"

namespace gpupool {

struct RunOptions {
  std::string event_log_path;        // write every event as a JSON line
  bool check_invariants = false;     // after every event (slower; for tests)
  std::optional<std::string> policy; // overrides the scenario's engine policy
  std::optional<bool> lending;       // overrides the scenario's lending switch
};

Result<SimReport> RunScenario(const Scenario& s, const RunOptions& options);

}  // namespace gpupool
