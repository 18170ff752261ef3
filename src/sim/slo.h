// An operator's service-level objectives for a configuration change
// (`gpupool config check --slo FILE`, issue 20): rules over two replays of
// the same history, the configuration in force and a new one, each a
// measure of the new replay bounded absolutely or relative to the one in
// force.
//
// The file (YAML, read with the strict reader: unknown keys are errors at
// their position):
//   rules:
//     - measure: wait_p95_s     # see SloMeasure
//       priority: high          # or tenant: NAME; "*": each one; neither: all jobs
//       max_increase_pct: 10    # new <= in force x 1.10 + slack
//       slack: 1                # in the measure's unit (default 0)
//     - measure: guarantee_share_pct
//       tenant: "*"
//       min: 95                 # new >= 95
// Bounds: min, max (absolute, on the new replay), max_increase_pct,
// max_decrease_pct (relative to the replay in force, widened by slack); at
// least one. Limits: at most kMaxSloRules rules.
//
// guarantee_share_pct is a tenant's GPU share received under the new
// configuration as a percentage of what it was owed: its guaranteed share,
// or the share it received under the configuration in force when that was
// less (a tenant that did not ask for its guarantee is not owed it). A
// tenant with no guarantee has no value (its row says "n/a" and holds).
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "src/base/status.h"
#include "src/sim/metrics.h"

namespace gpupool {

inline constexpr int kMaxSloRules = 256;

enum class SloScope { kAll, kPriority, kTenant };

struct SloRule {
  std::string measure;
  SloScope scope = SloScope::kAll;
  std::string key;  // the priority class or tenant; "*" for each
  std::optional<double> min, max, max_increase_pct, max_decrease_pct;
  double slack = 0;
};

struct SloFile {
  std::string source;
  std::vector<SloRule> rules;
};

// The rules used without --slo: each priority class's wait p95 rises by at
// most 10% (+1 s), no tenant gets below 95% of what it is owed, and at most
// 5% fewer jobs complete.
SloFile DefaultSlo();

Result<SloFile> ParseSlo(std::string_view text, std::string_view source);
Result<SloFile> LoadSlo(const std::string& path);

// One rule on one scope: a row of the check's table.
struct SloVerdict {
  std::string rule;      // "wait_p95_s, priority high"
  std::string bound;     // "<= 110% of in force + 1"
  std::optional<double> in_force, next;  // empty: n/a
  std::optional<double> limit;           // the bound a broken rule crossed
  bool holds = true;
  std::string note;      // why n/a
};

std::vector<SloVerdict> CheckSlo(const SloFile& slo, const SimReport& in_force, const SimReport& next);
bool AllHold(const std::vector<SloVerdict>& v);
std::string FormatSloTable(const std::vector<SloVerdict>& v);

// The value of `measure` on a scope of `r` (`in_force`: the report a
// guarantee share is owed against); empty when it has none there or the
// measure is unknown.
std::optional<double> SloMeasureValue(const std::string& measure, SloScope scope, const std::string& key,
                                      const SimReport& r, const SimReport& in_force);
// Whether less of `measure` is better (waits, losses, refusals, trouble);
// more is better for the others (allocation, shares, completions).
bool SloMeasureLowerIsBetter(const std::string& measure);
// Whether `measure` is known and takes `scope`.
bool SloMeasureTakes(const std::string& measure, SloScope scope);

// The measures a rule may name, and whether each takes a priority or
// tenant scope (for messages and docs).
std::vector<std::string> SloMeasureNames();

}  // namespace gpupool
