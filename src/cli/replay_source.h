// What `gpupool sim replay` and `gpupool config check` share (issue 20):
// a data directory's journal read through a consistent copy (never
// written), the configuration in force found (the one the journal records,
// or the operator's file), and the history replayed under it and under a
// new configuration.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "src/base/status.h"
#include "src/server/server_config.h"
#include "src/sim/replay.h"
#include "src/sim/replay_report.h"

namespace gpupool {

struct ReplaySourceFlags {
  std::string from;            // the data directory
  std::string since;           // "" or a duration ("7d")
  std::string config;          // the new configuration's file ("" when none)
  std::string current_config;  // "" : the one the journal records
  std::string event_log;       // "": none; else the in-force replay's events, as JSON lines
};

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
