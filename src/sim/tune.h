// Parameter search for `gpupool sim tune` (issue 20, OPS-5): the values of
// a configuration that SPACE names are drawn within their bounds, each
// candidate is run (a replay of the pool's history, or a scenario) by the
// caller's evaluator, and the best candidates and the trade-off front
// between the objective and a second measure are reported.
//
// SPACE (YAML, strict reader):
//   parameters:
//     - {path: engine.policy, values: [best, FGD, GpuPacking]}
//     - {path: engine.lending.share, min: 0.1, max: 0.9}
//     - {path: tenants[interns].quota.gpu.limit_gpus, min: 8, max: 64, integer: true}
//     - {path: engine.reclaim.idle_grace, values: [5m, 15m, 30m]}
// Paths as src/config/yaml_edit.h. A range draws uniformly (integers
// inclusive); `values` draws one of them. Limits: kMaxTuneParameters
// parameters, kMaxTuneValues values each, kMaxTuneBudget runs.
//
// The search: the configuration as it is first (the baseline), then half
// of the budget drawn at random, then the rest in rounds of 8 around the
// best so far (each parameter moved by a shrinking share of its range, or another
// of its values with a shrinking chance). Candidates are drawn from `seed`
// before each round runs and results are kept by candidate, so the result
// does not depend on how many runs go in parallel: deterministic for a
// seed. A candidate the configuration's reader refuses counts as a run
// that failed (its message is kept).
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "src/base/status.h"
#include "src/sim/metrics.h"
#include "src/sim/slo.h"

namespace gpupool {

inline constexpr int kMaxTuneParameters = 32;
inline constexpr int kMaxTuneValues = 64;
inline constexpr int kMaxTuneBudget = 10'000;

struct TuneParameter {
  std::string path;
  std::vector<std::string> values;  // a choice; empty: a range
  double min = 0, max = 0;
  bool integer = false;
};

struct TuneSpace {
  std::string source;
  std::vector<TuneParameter> parameters;
};

Result<TuneSpace> ParseTuneSpace(std::string_view text, std::string_view source);
Result<TuneSpace> LoadTuneSpace(const std::string& path);

// A measure to optimise: its name (SloMeasureNames) on a scope, and which
// way is better (waits, losses and counts of trouble: lower; allocation,
// shares and completions: higher).
struct TuneMeasure {
  std::string measure;
  SloScope scope = SloScope::kAll;
  std::string key;
  bool higher_is_better = true;
  std::string Text() const;
};
// "allocation_pct", "wait_p95_s:priority=high", "share_received_pct:tenant=a";
// kInvalidArgument naming `flag` and the problem.
Result<TuneMeasure> ParseTuneMeasure(std::string_view text, std::string_view flag);

struct TuneOptions {
  int budget = 64;  // runs, the baseline included
  uint64_t seed = 1;
  int parallel = 1;  // runs at once
  TuneMeasure objective;
  std::optional<TuneMeasure> front;  // the trade-off's second measure
};

struct TuneRun {
  std::vector<std::string> values;  // by parameter; the baseline's are "(as configured)"
  bool baseline = false;
  std::string error;                // the run failed: why
  std::optional<double> objective, front;
};

struct TuneResult {
  std::vector<TuneRun> runs;      // in the order drawn; runs[0] is the baseline
  std::vector<size_t> best;       // indices into runs, best first (at most 10)
  std::vector<size_t> pareto;     // the trade-off front, by objective
};

// Runs one candidate: the configuration text (with the candidate's values
// set) to its report. Called from `parallel` threads at once.
using TuneEvaluator = std::function<Result<SimReport>(const std::string& config_text)>;

// Fails only for a base configuration that is not YAML or a path that is
// not in it (before any run); runs that fail are in the result.
Result<TuneResult> Tune(const TuneSpace& space, const std::string& base_config, const TuneEvaluator& evaluate,
                        const TuneOptions& o);

// The configuration text of `run` (for printing the best one).
Result<std::string> TunedConfigText(const TuneSpace& space, const std::string& base_config, const TuneRun& run);

std::string FormatTuneResult(const TuneSpace& space, const TuneResult& r, const TuneOptions& o);

}  // namespace gpupool
