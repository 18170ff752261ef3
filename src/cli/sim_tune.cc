#include "src/cli/sim_tune.h"

#include <filesystem>
#include <fstream>
#include <iostream>
#include <memory>
#include <thread>

#include "src/cli/journal_read.h"
#include "src/cli/replay_source.h"
#include "src/config/yaml_reader.h"
#include "src/sim/html_report.h"
#include "src/sim/scenario.h"
#include "src/sim/scenario_runner.h"
#include "src/sim/svg_chart.h"
#include "src/sim/tune.h"

namespace gpupool {
namespace {

struct TuneFlags {
  ReplaySourceFlags source;  // from: a data directory or a scenario file
  std::string space, objective, front, report, best_config;
  int budget = 64, parallel = 0;
  uint64_t seed = 1;
  bool json = false;
};

int Fail(const std::string& message) {
  std::cerr << "gpupool sim tune: " << message << "\n";
  return 2;
}

// What the candidates are run against: the base configuration's text and
// an evaluator of a candidate's text.
struct Target {
  std::string base_text;
  std::string described;
  std::shared_ptr<ReplayInput> history;  // from a data directory
  TuneEvaluator evaluate;
};

Result<Target> ScenarioTarget(const std::string& path) {
  GP_ASSIGN_OR_RETURN(std::string text, ReadConfigFile(path));
  GP_TRY(ParseScenario(text, path, ConfigFileDir(path)));
  Target t{text, "scenario " + path, nullptr, nullptr};
  t.evaluate = [path](const std::string& candidate) -> Result<SimReport> {
    GP_ASSIGN_OR_RETURN(const Scenario s, ParseScenario(candidate, path + " (tuned)", ConfigFileDir(path)));
    return RunScenario(s, RunOptions{});
  };
  return t;
}

// Every candidate replays the history as a new configuration (its quotas
// replace the history's changes to them), the baseline included, so that
// all runs are alike.
Result<Target> HistoryTarget(const ReplaySourceFlags& f) {
  GP_ASSIGN_OR_RETURN(ReplayInput in, LoadReplayInput(f));
  auto shared = std::make_shared<ReplayInput>(std::move(in));
  Target t{shared->in_force_text, "the history of " + f.from + " (" + shared->in_force_name + ")", shared, nullptr};
  t.evaluate = [shared](const std::string& candidate) -> Result<SimReport> {
    GP_ASSIGN_OR_RETURN(const ServerConfig c, ParseServerConfig(candidate, "the tuned configuration", "."));
    ReplayOptions o;
    o.tick = c.server.tick;
    o.new_config = true;
    GP_ASSIGN_OR_RETURN(ReplayRun run, ReplayHistory(shared->history, c, o));
    return std::move(run.report);
  };
  return t;
}

nlohmann::json RunsJson(const TuneSpace& space, const TuneResult& r) {
  nlohmann::json runs = nlohmann::json::array();
  for (const TuneRun& run : r.runs) {
    nlohmann::json values = nlohmann::json::object();
    for (size_t p = 0; p < space.parameters.size(); ++p) values[space.parameters[p].path] = run.values[p];
    nlohmann::json j{{"values", values}, {"baseline", run.baseline}};
    j["objective"] = run.objective ? nlohmann::json(*run.objective) : nlohmann::json(nullptr);
    j["front"] = run.front ? nlohmann::json(*run.front) : nlohmann::json(nullptr);
    if (!run.error.empty()) j["error"] = run.error;
    runs.push_back(std::move(j));
  }
  return runs;
}

std::string HtmlTable(const TuneSpace& space, const TuneResult& r, const std::vector<size_t>& rows,
                      const TuneOptions& o) {
  std::string h = "<table><tr><th>run</th><th>" + EscapeXml(o.objective.Text()) + "</th>";
  if (o.front) h += "<th>" + EscapeXml(o.front->Text()) + "</th>";
  for (const TuneParameter& p : space.parameters) h += "<th>" + EscapeXml(p.path) + "</th>";
  h += "</tr>";
  const auto cell = [](const std::optional<double>& v) { return v ? std::to_string(*v) : std::string("-"); };
  for (const size_t i : rows) {
    const TuneRun& run = r.runs[i];
    h += "<tr><td>#" + std::to_string(i) + (run.baseline ? " (baseline)" : "") + "</td><td>" + cell(run.objective) +
         "</td>";
    if (o.front) h += "<td>" + cell(run.front) + "</td>";
    for (const std::string& v : run.values) h += "<td>" + EscapeXml(v) + "</td>";
    h += "</tr>";
  }
  return h + "</table>";
}

std::string HtmlTuneReport(const std::string& described, const TuneSpace& space, const TuneResult& r,
                           const TuneOptions& o) {
  std::string h = "<!doctype html><html><head><meta charset=\"utf-8\"><title>gpupool sim tune</title>"
                  "<style>body{font-family:sans-serif;margin:2em}table{border-collapse:collapse}"
                  "td,th{border:1px solid #ccc;padding:2px 8px;text-align:right}</style></head><body>"
                  "<h1>Parameter search</h1><p>" + EscapeXml(described) + "; " + std::to_string(r.runs.size()) +
                  " runs, seed " + std::to_string(o.seed) + ".</p><h2>Best</h2>" + HtmlTable(space, r, r.best, o);
  if (o.front) {
    ChartSeries front{"front", {}};
    for (const size_t i : r.pareto) front.points.emplace_back(*r.runs[i].front, *r.runs[i].objective);
    std::sort(front.points.begin(), front.points.end());
    h += "<h2>Trade-off front</h2>" +
         LineChartSvg({front}, ChartAxes{.x_label = o.front->Text(), .y_label = o.objective.Text(), .steps = true}) +
         HtmlTable(space, r, r.pareto, o);
  }
  std::vector<size_t> every(r.runs.size());
  for (size_t i = 0; i < every.size(); ++i) every[i] = i;
  return h + "<h2>Every run</h2>" + HtmlTable(space, r, every, o) + "</body></html>\n";
}

Result<TuneOptions> OptionsOf(const TuneFlags& f) {
  TuneOptions o;
  o.budget = f.budget;
  o.seed = f.seed;
  o.parallel = f.parallel > 0 ? f.parallel : std::max(1u, std::thread::hardware_concurrency());
  if (o.parallel > 256) return InvalidArgument("--parallel: at most 256");
  GP_ASSIGN_OR_RETURN(o.objective, ParseTuneMeasure(f.objective, "--objective"));
  if (!f.front.empty()) {
    GP_ASSIGN_OR_RETURN(TuneMeasure m, ParseTuneMeasure(f.front, "--front"));
    o.front = std::move(m);
  }
  return o;
}

int Tune(const TuneFlags& f) {
  auto o = OptionsOf(f);
  if (!o) return Fail(o.error().message);
  auto space = LoadTuneSpace(f.space);
  if (!space) return Fail(space.error().message);
  std::error_code ec;
  const bool history = IsServerUrl(f.source.from) || std::filesystem::is_directory(f.source.from, ec);
  auto target = history ? HistoryTarget(f.source) : ScenarioTarget(f.source.from);
  if (!target) return Fail(target.error().message);
  auto r = gpupool::Tune(*space, target->base_text, target->evaluate, *o);
  if (!r) return Fail(f.space + ": " + r.error().message);
  if (!f.best_config.empty() && !r->best.empty()) {
    auto text = TunedConfigText(*space, target->base_text, r->runs[r->best[0]]);
    if (!text) return Fail(text.error().message);
    std::ofstream out(f.best_config);
    out << *text;
    if (!out) return Fail("--best-config: cannot write " + f.best_config);
  }
  if (!f.report.empty()) {
    if (auto ok = WriteHtmlReport(f.report, HtmlTuneReport(target->described, *space, *r, *o)); !ok) {
      return Fail("--report: " + ok.error().message);
    }
  }
  if (f.json) {
    nlohmann::json j{{"source", target->described}, {"objective", o->objective.Text()}, {"seed", o->seed},
                     {"best", r->best}, {"pareto", r->pareto}, {"runs", RunsJson(*space, *r)}};
    if (o->front) j["front"] = o->front->Text();
    std::cout << j.dump(2) << "\n";
  } else {
    std::cout << "gpupool sim tune: " << target->described << "\n" << FormatTuneResult(*space, *r, *o);
  }
  return 0;
}

}  // namespace

void AddSimTuneCommand(CLI::App& sim) {
  auto f = std::make_shared<TuneFlags>();
  CLI::App* cmd = sim.add_subcommand("tune", "Search configuration parameters on the pool's history or a scenario");
  cmd->add_option("--from", f->source.from,
                  "a server's data directory or URL (its history replayed), or a scenario file")->required();
  cmd->add_option("--space", f->space, "the parameters to search (YAML; see docs/whatif.md)")->required();
  cmd->add_option("--objective", f->objective, "the measure to optimise (e.g. allocation_pct, wait_p95_s:priority=high)")
      ->required();
  cmd->add_option("--front", f->front, "a second measure: report the trade-off front between the two");
  cmd->add_option("--budget", f->budget, "runs, the configuration as it is included (default 64)");
  cmd->add_option("--seed", f->seed, "the search's seed (the same seed, the same result)");
  cmd->add_option("--parallel", f->parallel, "runs at once (default: the machine's cores)");
  AddReplaySourceOptions(*cmd, f->source);
  cmd->add_option("--best-config", f->best_config, "write the best configuration found to this file");
  cmd->add_flag("--json", f->json, "print every run as JSON");
  cmd->add_option("--report", f->report, "also write a self-contained HTML report to this file");
  cmd->callback([f] {
    if (const int rc = Tune(*f); rc != 0) throw CLI::RuntimeError(rc);
  });
}

}  // namespace gpupool
