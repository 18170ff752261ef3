// gpupool: one binary, many subcommands (see README.md).
#include <CLI/CLI.hpp>

#include "src/cli/agent_cmd.h"
#include "src/cli/completion.h"
#include "src/cli/config_check.h"
#include "src/cli/sim_fgd.h"
#include "src/cli/server_cmd.h"
#include "src/cli/sim_replay.h"
#include "src/cli/sim_run.h"
#include "src/cli/sim_tune.h"
#include "src/client/commands.h"

int main(int argc, char** argv) {
  CLI::App app{"gpupool: a control plane for multi-tenant GPU pools"};
  app.set_version_flag("--version", std::string("gpupool ") + GPUPOOL_VERSION);
  app.require_subcommand(1);
  CLI::App* sim = app.add_subcommand("sim", "Simulate placement and scheduling on traces or generated workloads");
  sim->require_subcommand(1);
  gpupool::AddSimFgdCommand(*sim);
  gpupool::AddSimRunCommand(*sim);
  gpupool::AddSimClaimsCommand(*sim);
  gpupool::AddSimReplayCommand(*sim);
  gpupool::AddSimTuneCommand(*sim);
  CLI::App* config = app.add_subcommand("config", "Check a configuration change against the pool's own history");
  config->require_subcommand(1);
  gpupool::AddConfigCheckCommand(*config);
  gpupool::AddServerCommand(app);
  gpupool::AddAgentCommand(app);
  gpupool::AddDevCommand(app);
  gpupool::AddClientCommands(app);
  gpupool::AddCompletionCommand(app);  // last: it describes the commands above
  CLI11_PARSE(app, argc, argv);
  return 0;
}
