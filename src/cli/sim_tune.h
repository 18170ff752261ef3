// `gpupool sim tune --from DATA_DIR|SCENARIO.yaml --space SPACE.yaml
// --objective MEASURE` (issue 20, OPS-5): searches the parameters SPACE
// names (src/sim/tune.h) by replaying the pool's own history (or running a
// scenario) under each candidate, on several cores, and reports the best
// candidates and the trade-off front. Exit codes as `sim run`: 0, or 2 with
// a message naming the file (and the position where there is one) or the
// flag.
#pragma once

#include <CLI/CLI.hpp>

namespace gpupool {

void AddSimTuneCommand(CLI::App& sim);

}  // namespace gpupool
