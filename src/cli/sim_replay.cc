#include "src/cli/sim_replay.h"

#include <iostream>
#include <memory>

#include "src/cli/replay_source.h"
#include "src/sim/html_report.h"

namespace gpupool {
namespace {

struct ReplayFlags {
  ReplaySourceFlags source;
  std::string report;
  bool json = false;
};

int Replay(const ReplayFlags& f) {
  auto o = ReplayFromDataDir(f.source);
  if (!o) {
    std::cerr << "gpupool sim replay: " << o.error().message << "\n";
    return 2;
  }
  const ReplayReportInput in = ReportInputOf(f.source, *o);
  if (!f.report.empty()) {
    if (auto ok = WriteHtmlReport(f.report, HtmlReplayReport(in)); !ok) {
      std::cerr << "gpupool sim replay: --report: " << ok.error().message << "\n";
      return 2;
    }
  }
  std::cout << (f.json ? ReplayReportJson(in).dump(2) + "\n" : FormatReplayReport(in));
  return 0;
}

}  // namespace

void AddSimReplayCommand(CLI::App& sim) {
  auto f = std::make_shared<ReplayFlags>();
  CLI::App* cmd = sim.add_subcommand("replay", "Replay a server's own history under its configuration and a new one");
  cmd->add_option("--from", f->source.from,
                  "the server's data directory (read through a copy; never written), or its URL (GET /v1/export)")
      ->required();
  cmd->add_option("--config", f->source.config, "a new server configuration to replay the history under");
  AddReplaySourceOptions(*cmd, f->source);
  cmd->add_option("--event-log", f->source.event_log,
                  "write the replay's events under the configuration in force to this file, one JSON line each");
  cmd->add_flag("--json", f->json, "print the report as JSON");
  cmd->add_option("--report", f->report, "also write a self-contained HTML report to this file");
  cmd->callback([f] {
    if (const int rc = Replay(*f); rc != 0) throw CLI::RuntimeError(rc);
  });
}

}  // namespace gpupool
