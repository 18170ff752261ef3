// The side-by-side report of `gpupool sim replay` (issue 20): the
// configuration in force and a new one replayed over the same history,
// with the replay's fidelity, as text, JSON and a self-contained HTML page
// (every name escaped; no script, no external resource).
#pragma once

#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "src/sim/metrics.h"
#include "src/sim/replay.h"

namespace gpupool {

struct ReplayReportInput {
  std::string source;        // the data directory
  std::string in_force_name; // where the configuration in force came from
  std::string new_name;      // the new configuration's file ("" when none)
  const History* history = nullptr;
  const SimReport* in_force = nullptr;
  const SimReport* next = nullptr;  // null without --config
  Fidelity fidelity;
  std::vector<std::string> caveats;  // where the replay cannot be faithful, in words
};

// One row: a measure, its value in force, under the new configuration ("" without one).
struct ReplayRow {
  std::string measure, in_force, next;
};
// Waits (p50/p95 s) by priority class and by tenant, allocation and each
// tenant's share of the GPUs, preemptions, idle reclaims, deadline
// evictions, jobs completed and unfinished, busy share, GPU-hours lost,
// scale-outs, node cost and the autoscaler's forecast error (SCALE-3).
std::vector<ReplayRow> ReplayRows(const SimReport& in_force, const SimReport* next);

std::string FormatReplayReport(const ReplayReportInput& in);
nlohmann::json ReplayReportJson(const ReplayReportInput& in);
std::string HtmlReplayReport(const ReplayReportInput& in);

}  // namespace gpupool
