// Self-contained HTML reports of simulations (`gpupool sim run|claims|fgd
// --report FILE.html`): one file with its charts inline (src/sim/svg_chart.h),
// its style in the page, no script and no external resource, so it opens
// offline and can be mailed. Every name from a scenario is escaped.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "src/base/status.h"
#include "src/engine/event.h"
#include "src/sim/claims.h"
#include "src/sim/fgd_protocol.h"
#include "src/sim/metrics.h"

namespace gpupool {

// What the report plots beyond SimReport, counted from the run's events
// hour by hour: preemptions by reason and reclaims (idle or deadline).
// Hand it every event (RunOptions::on_event); it keeps O(hours) memory,
// hours past kMaxHours counting in the last one.
class ReportTimeline {
 public:
  static constexpr size_t kMaxHours = 24 * 366;
  void Observe(const Event& e);
  // Counts per hour of the run, by reason name ("priority", "idle", ...).
  const std::map<std::string, std::vector<int64_t>>& preemptions() const { return preemptions_; }
  const std::map<std::string, std::vector<int64_t>>& reclaims() const { return reclaims_; }

 private:
  static void Count(std::vector<int64_t>& per_hour, Instant at);
  std::map<std::string, std::vector<int64_t>> preemptions_, reclaims_;
};

// `gpupool sim run`: allocation and busy GPUs over time, wait-time CDFs by
// priority class, each tenant's share against its entitlements, preemptions
// and reclaims over time, nodes in service, and the tables behind them.
std::string HtmlSimReport(const SimReport& r, const ReportTimeline& timeline);

// `gpupool sim claims`: every claim against the seeds' figure and its
// baseline, its assumptions labelled as such, skipped claims with why.
std::string HtmlClaimsReport(const std::vector<ClaimResult>& claims);

// `gpupool sim fgd`: the allocation curves of each policy against the
// arrived workload, and the table at 100 % (`published`: the paper's
// unallocated % at 100 per policy, where given).
struct FgdReportInput {
  std::string workload;
  std::string setup;  // how the run was set up, in one sentence or two
  std::vector<FgdPolicySummary> policies;
  std::map<std::string, double> published_unallocated_pct_at_100;
};
std::string HtmlFgdReport(const FgdReportInput& in);

// Writes `html` to `path` (replacing it; through PATH.tmp and a rename, so
// a reader never sees half a report). Fails naming the path and the cause.
Status WriteHtmlReport(const std::string& path, const std::string& html);

}  // namespace gpupool
