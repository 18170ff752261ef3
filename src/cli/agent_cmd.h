// `gpupool agent` (a node agent, src/agent/agent.h) and `gpupool dev` (a
// server and one local agent with fake GPUs in one process).
#pragma once

#include <CLI/CLI.hpp>

namespace gpupool {

void AddAgentCommand(CLI::App& app);
void AddDevCommand(CLI::App& app);

}  // namespace gpupool
