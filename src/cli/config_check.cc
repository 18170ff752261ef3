#include "src/cli/config_check.h"

#include <iostream>
#include <memory>

#include "src/cli/replay_source.h"
#include "src/sim/html_report.h"
#include "src/sim/slo.h"

namespace gpupool {
namespace {

struct CheckFlags {
  ReplaySourceFlags source;
  std::string slo, report;
  bool json = false;
};

int Fail(const std::string& message) {
  std::cerr << "gpupool config check: " << message << "\n";
  return 2;
}

nlohmann::json VerdictsJson(const std::vector<SloVerdict>& verdicts) {
  nlohmann::json rules = nlohmann::json::array();
  for (const SloVerdict& v : verdicts) {
    nlohmann::json j{{"rule", v.rule}, {"bound", v.bound}, {"holds", v.holds}};
    j["in_force"] = v.in_force ? nlohmann::json(*v.in_force) : nlohmann::json(nullptr);
    j["new"] = v.next ? nlohmann::json(*v.next) : nlohmann::json(nullptr);
    if (v.limit) j["limit"] = *v.limit;
    if (!v.note.empty()) j["note"] = v.note;
    rules.push_back(std::move(j));
  }
  return rules;
}

int Check(const CheckFlags& f) {
  SloFile slo = DefaultSlo();
  if (!f.slo.empty()) {
    auto loaded = LoadSlo(f.slo);
    if (!loaded) return Fail(loaded.error().message);
    slo = std::move(*loaded);
  }
  auto o = ReplayFromDataDir(f.source);
  if (!o) return Fail(o.error().message);
  const std::vector<SloVerdict> verdicts = CheckSlo(slo, o->in_force.report, o->next->report);
  const bool holds = AllHold(verdicts);
  const ReplayReportInput in = ReportInputOf(f.source, *o);
  if (!f.report.empty()) {
    if (auto ok = WriteHtmlReport(f.report, HtmlReplayReport(in)); !ok) return Fail("--report: " + ok.error().message);
  }
  if (f.json) {
    nlohmann::json j{{"holds", holds}, {"objectives", slo.source}, {"rules", VerdictsJson(verdicts)},
                     {"replay", ReplayReportJson(in)}};
    std::cout << j.dump(2) << "\n";
  } else {
    std::cout << FormatReplayReport(in) << "\nObjectives (" << slo.source << "):\n" << FormatSloTable(verdicts)
              << "\n" << (holds ? "every objective holds" : "an objective is broken") << "\n";
  }
  return holds ? 0 : 1;
}

}  // namespace

void AddConfigCheckCommand(CLI::App& config) {
  auto f = std::make_shared<CheckFlags>();
  CLI::App* cmd = config.add_subcommand(
      "check", "Replay the pool's history under a new configuration and check it against objectives (for CI)");
  cmd->add_option("config", f->source.config, "the new server configuration")->required();
  cmd->add_option("--against", f->source.from,
                  "the server's data directory (read through a copy; never written), or its URL (GET /v1/export)")
      ->required();
  cmd->add_option("--slo", f->slo, "the objectives (YAML; default: see docs/whatif.md)");
  AddReplaySourceOptions(*cmd, f->source);
  cmd->add_flag("--json", f->json, "print the verdicts and the replay as JSON");
  cmd->add_option("--report", f->report, "also write the replay's self-contained HTML report to this file");
  cmd->callback([f] {
    if (const int rc = Check(*f); rc != 0) throw CLI::RuntimeError(rc);
  });
}

}  // namespace gpupool
