#include "src/cli/sim_run.h"

#include <chrono>
#include <cstdio>
#include <iostream>
#include <memory>

#include <nlohmann/json.hpp>

#include "src/cli/parse.h"
#include "src/cli/progress.h"
#include "src/sim/claims.h"
#include "src/sim/html_report.h"
#include "src/sim/scenario.h"
#include "src/sim/scenario_runner.h"
#include "src/base/install_paths.h"

namespace gpupool {
namespace {

int Fail(const char* command, const std::string& message) {
  std::cerr << "gpupool sim " << command << ": " << message << "\n";
  return 2;
}

struct RunFlags {
  std::string scenario;
  bool json = false;
  std::string event_log;
  std::string policy;
  bool no_lending = false;
  bool fifo = false;
  bool check = false;
  std::string report;
};

// The progress line's text for a run: simulated hours and events per second.
std::string RunProgressText(double at_h, double horizon_h, int64_t events, double wall_s) {
  char b[128];
  std::snprintf(b, sizeof b, "%.1f of %.1f simulated hours, %lld events, %.0f events/s", at_h, horizon_h,
                static_cast<long long>(events), wall_s > 0 ? static_cast<double>(events) / wall_s : 0.0);
  return b;
}

int Run(const RunFlags& f) {
  auto scenario = LoadScenario(f.scenario);
  if (!scenario) return Fail("run", scenario.error().message);
  RunOptions o;
  o.event_log_path = f.event_log;
  o.check_invariants = f.check;
  if (!f.policy.empty()) o.policy = f.policy;
  if (f.no_lending) o.lending = false;
  o.fifo = f.fifo;
  ReportTimeline timeline;
  ProgressLine progress;
  int64_t events = 0;
  const auto started = std::chrono::steady_clock::now();
  const double horizon_h = static_cast<double>(ToMillis(scenario->horizon)) / 3.6e6;
  o.on_event = [&](const Event& e) {
    timeline.Observe(e);
    if (++events % 1024 != 0 || !progress.Due()) return;
    const double at_h = static_cast<double>(ToMillis(e.at)) / 3.6e6;
    const double wall_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
    progress.Update(horizon_h > 0 ? at_h / horizon_h : 0, RunProgressText(at_h, horizon_h, events, wall_s));
  };
  auto report = RunScenario(*scenario, o);
  progress.Clear();
  if (!report) return Fail("run", report.error().message);
  if (!f.report.empty()) {
    if (auto written = WriteHtmlReport(f.report, HtmlSimReport(*report, timeline)); !written) {
      return Fail("run", "--report: " + written.error().message);
    }
  }
  if (f.json) {
    std::cout << ToJson(*report).dump(2) << "\n";
  } else {
    std::cout << FormatReport(*report);
  }
  return 0;
}

struct ClaimsFlags {
  bool json = false;
  std::string scenarios;  // default: FindDataDir("scenarios")
  std::string only;
  std::string report;
};

int Claims(const ClaimsFlags& f) {
  std::vector<std::string> ids;
  if (!f.only.empty()) {
    auto parsed = ParseNameList("--only", f.only);
    if (!parsed) return Fail("claims", parsed.error().message);
    ids = *parsed;
  }
  ProgressLine progress;
  auto results = RunClaims(f.scenarios.empty() ? FindDataDir("scenarios") : f.scenarios, ids,
                           [&](size_t index, size_t total, const std::string& id) {
                             progress.Update(static_cast<double>(index) / static_cast<double>(total),
                                             "claim " + std::to_string(index + 1) + " of " + std::to_string(total) +
                                                 ": " + id);
                           });
  progress.Clear();
  if (!results) return Fail("claims", results.error().message);
  if (!f.report.empty()) {
    if (auto written = WriteHtmlReport(f.report, HtmlClaimsReport(*results)); !written) {
      return Fail("claims", "--report: " + written.error().message);
    }
  }
  if (f.json) {
    nlohmann::json out = nlohmann::json::array();
    for (const ClaimResult& c : *results) {
      nlohmann::json j = {{"id", c.id}, {"seed_claim", c.seed_claim}, {"scenario", c.scenario_path}};
      if (c.skipped) {
        j["skipped"] = c.skip_reason;
      } else {
        j["baseline"] = c.baseline;
        j["measured"] = c.measured;
        j["note"] = c.note;
        j["assumptions"] = c.assumptions;
      }
      out.push_back(std::move(j));
    }
    std::cout << out.dump(2) << "\n";
    return 0;
  }
  for (const ClaimResult& c : *results) {
    std::printf("%s  (%s)\n  seed: %s\n", c.id.c_str(), c.scenario_path.c_str(), c.seed_claim.c_str());
    if (c.skipped) {
      std::printf("  skipped: %s\n\n", c.skip_reason.c_str());
      continue;
    }
    std::printf("  ours:     %s\n  baseline: %s\n  how:      %s\n", c.measured.dump().c_str(),
                c.baseline.dump().c_str(), c.note.c_str());
    for (size_t i = 0; i < c.assumptions.size(); ++i) {
      std::printf("  %s %s\n", i == 0 ? "assumed: " : "         ", c.assumptions[i].c_str());
    }
    std::printf("\n");
  }
  return 0;
}

}  // namespace

void AddSimRunCommand(CLI::App& sim) {
  auto f = std::make_shared<RunFlags>();
  CLI::App* cmd = sim.add_subcommand("run", "Simulate a scenario file (cluster, tenants, quotas, workload, policy)");
  cmd->add_option("scenario", f->scenario, "the scenario YAML file")->required();
  cmd->add_flag("--json", f->json, "print the report as JSON");
  cmd->add_option("--event-log", f->event_log, "write every event as one JSON line to this file");
  cmd->add_option("--policy", f->policy, "placement policy instead of the scenario's");
  cmd->add_flag("--no-lending", f->no_lending, "turn quota lending off");
  cmd->add_flag("--fifo", f->fifo, "ignore priorities and deadlines (first come, first served)");
  cmd->add_flag("--check-invariants", f->check, "check the engine's invariants after every event (slower)");
  cmd->add_option("--report", f->report,
                  "also write a self-contained HTML report (charts inline) to this file");
  cmd->callback([f] {
    if (const int rc = Run(*f); rc != 0) throw CLI::RuntimeError(rc);
  });
}

void AddSimClaimsCommand(CLI::App& sim) {
  auto f = std::make_shared<ClaimsFlags>();
  CLI::App* cmd = sim.add_subcommand("claims", "Measure the requirements' claims, each against its baseline");
  cmd->add_flag("--json", f->json, "print one JSON array, one object per claim");
  cmd->add_option("--scenarios", f->scenarios,
                  "folder holding claims/<ID>.yaml (default: ./scenarios, else the installed one, "
                  "PREFIX/share/gpupool/scenarios)");
  cmd->add_option("--only", f->only, "comma-separated claim ids");
  cmd->add_option("--report", f->report, "also write the claims as one self-contained HTML file");
  cmd->callback([f] {
    if (const int rc = Claims(*f); rc != 0) throw CLI::RuntimeError(rc);
  });
}

}  // namespace gpupool
