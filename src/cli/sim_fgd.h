// `gpupool sim fgd`: the FGD paper's evaluation protocol on an openb trace
// (or a generated cluster and workload), for one or more policies and seeds.
#pragma once

#include <CLI/CLI.hpp>

namespace gpupool {

// Registers the `fgd` subcommand under `sim`.
void AddSimFgdCommand(CLI::App& sim);

}  // namespace gpupool
