// `gpupool sim replay --from DATA_DIR`: the pool's own history replayed
// under the configuration in force and a new one (issue 20, src/sim/replay.h).
// Exit codes as `sim run`: 0 done, 2 bad input or a failed replay (the
// message names the file, and the position where there is one).
#pragma once

#include <CLI/CLI.hpp>

namespace gpupool {

void AddSimReplayCommand(CLI::App& sim);

}  // namespace gpupool
