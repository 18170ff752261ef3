// `gpupool config check NEW.yaml --against DATA_DIR [--slo FILE]` (issue
// 20): replays the pool's own history under the configuration in force and
// under NEW.yaml, and judges the change by the operator's objectives
// (src/sim/slo.h; the defaults without --slo). Made for a CI pipeline.
// Exit codes: 0 every objective holds, 1 one is broken (the table names
// it), 2 bad input (the message names the file, and the position where
// there is one).
#pragma once

#include <CLI/CLI.hpp>

namespace gpupool {

void AddConfigCheckCommand(CLI::App& config);

}  // namespace gpupool
