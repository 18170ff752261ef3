// `gpupool completion bash`: a bash completion script made from the command
// tree itself, so it can never name a command or flag the binary lacks
// (issue 19, daily operations).
//
// Completes subcommand names at each level and the long and short flags of
// the deepest subcommand named so far (with the top-level ones); after a
// flag that takes a value, file names. Install with
//   gpupool completion bash > /etc/bash_completion.d/gpupool
// or `source <(gpupool completion bash)` in ~/.bashrc.
#pragma once

#include <string>

#include <CLI/CLI.hpp>

namespace gpupool {

// The script for `root`'s tree, as the command named `program` (the binary's name).
std::string BashCompletionScript(const CLI::App& root, const std::string& program);

// Adds `completion bash` to `app`; call it after every other command is added.
void AddCompletionCommand(CLI::App& app);

}  // namespace gpupool
