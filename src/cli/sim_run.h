// `gpupool sim run SCENARIO.yaml` and `gpupool sim claims`.
#pragma once

#include <CLI/CLI.hpp>

namespace gpupool {

void AddSimRunCommand(CLI::App& sim);
void AddSimClaimsCommand(CLI::App& sim);

}  // namespace gpupool
