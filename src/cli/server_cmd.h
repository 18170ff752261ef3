// `gpupool server --data DIR --listen HOST:PORT [--config FILE]
//  [--admin-token-file F]`: the daemon (docs/server.md).
#pragma once

#include <CLI/CLI.hpp>

namespace gpupool {

void AddServerCommand(CLI::App& app);

}  // namespace gpupool
