// The command-line client of the REST API: `gpupool job ...`, `tenant ...`, `token ...`, `audit`,
// `node ...`, `pool ...`, `regions get|set` (docs/api/openapi.yaml; examples/README.md shows
// them in use).
//
// Every client command takes --addr, --token, --token-file, --config
// (client_config.h says which wins) and -o table|json|yaml. `-o json` prints
// the server's JSON object, `-o yaml` the same data as YAML, `-o table`
// aligned columns (resource_tables.h). Exit status: 0 on success; 1 when the
// server refuses (its message printed as "error: MESSAGE (field: FIELD)" on
// stderr), cannot be reached (the message names the address and how to set
// it), when a local file is wrong, or when a submitted job comes back
// rejected; CLI11's own codes for malformed command lines.
#pragma once

#include <CLI/CLI.hpp>

namespace gpupool {

// Adds the client's subcommands (job, tenant, node, pool, regions) to the binary.
void AddClientCommands(CLI::App& app);

}  // namespace gpupool
