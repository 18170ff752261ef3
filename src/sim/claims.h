// The measured claims of the requirements, each reproduced by a scenario in
// scenarios/claims/<ID>.yaml and compared with a baseline run of the same
// scenario (`gpupool sim claims`). A claim whose scenario needs a trace that
// is not here is skipped with the reason.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "src/base/status.h"

namespace gpupool {

struct ClaimResult {
  std::string id;
  std::string seed_claim;      // what the seed documents say, verbatim in spirit
  std::string scenario_path;
  nlohmann::json baseline;     // named numbers of the baseline run
  nlohmann::json measured;     // named numbers of ours
  std::string note;            // how the figures were computed
  // The simulator's inputs that nothing here measured, each with its value
  // and where it comes from (the seeds' own figure, or our assumption), so
  // that a reader can tell measured from assumed.
  std::vector<std::string> assumptions;
  bool skipped = false;
  std::string skip_reason;
};

// Claim ids this build knows, in display order.
std::vector<std::string> ClaimIds();

// Runs the claims in `ids` (all when empty) from `scenarios_dir`
// (containing claims/<ID>.yaml). An unknown id is an error; a claim that
// cannot run for want of a trace is skipped, any other failure is an error.
// `on_claim`, when set, is called before each claim runs with its index,
// the number of claims and its id (for a progress line).
using ClaimProgressFn = std::function<void(size_t index, size_t total, const std::string& id)>;
Result<std::vector<ClaimResult>> RunClaims(const std::string& scenarios_dir, const std::vector<std::string>& ids,
                                           const ClaimProgressFn& on_claim = {});

}  // namespace gpupool
