// What `gpupool sim replay`, `gpupool config check` and `gpupool sim tune`
// share (issue 20): a journal read (src/cli/journal_read.h: a data
// directory through a consistent copy, or a running server's export), the
// configuration in force found (the one the journal records,
// or the operator's file), and the history replayed under it and under a
// new configuration.
#pragma once

#include <CLI/CLI.hpp>

#include <optional>
#include <string>
#include <vector>

#include "src/base/status.h"
#include "src/client/client_config.h"
#include "src/server/server_config.h"
#include "src/sim/replay.h"
#include "src/sim/replay_report.h"

namespace gpupool {

struct ReplaySourceFlags {
  std::string from;            // the data directory, or a server's URL (its GET /v1/export)
  std::string since;           // "" or a duration ("7d")
  std::string config;          // the new configuration's file ("" when none)
  std::string current_config;  // "" : the one the journal records
  std::string event_log;       // "": none; else the in-force replay's events, as JSON lines
  ClientFlags client;          // with a URL: the admin token and the CA (src/client/client_config.h)
};

// The options every what-if command takes besides its source: --since,
// --current-config, and for a server's URL --token, --token-file and
// --ca-cert (else GPUPOOL_TOKEN, GPUPOOL_CA_CERT or the client's config file).
void AddReplaySourceOptions(CLI::App& cmd, ReplaySourceFlags& f);

// The history and the configuration in force, read (the journal through a
// copy) but not replayed.
struct ReplayInput {
  History history;
  ServerConfig in_force;
  std::string in_force_text;  // its YAML
  std::string in_force_name;  // the file, or the recorded configuration's source and hash
  std::vector<std::string> caveats;
};
Result<ReplayInput> LoadReplayInput(const ReplaySourceFlags& f);

struct ReplayOutcome {
  History history;
  std::string in_force_name;  // the file, or the recorded configuration's source and hash
  ReplayRun in_force;
  std::optional<ReplayRun> next;  // with ReplaySourceFlags::config
  Fidelity fidelity;
  std::vector<std::string> caveats;
};

// Reads, finds and replays. Errors are the command's message: each names
// the file (the data directory's database, the configuration, and the
// line and column where one does not parse) or the flag.
Result<ReplayOutcome> ReplayFromDataDir(const ReplaySourceFlags& f);

// The report's input over `o` (which must outlive it).
ReplayReportInput ReportInputOf(const ReplaySourceFlags& f, const ReplayOutcome& o);

}  // namespace gpupool
