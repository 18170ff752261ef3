#include "src/cli/sim_replay.h"

#include <stdlib.h>

#include <filesystem>
#include <iostream>
#include <memory>

#include "src/base/time_text.h"
#include "src/server/data_dir.h"
#include "src/server/journal.h"
#include "src/server/journal_copy.h"
#include "src/server/server_config.h"
#include "src/sim/html_report.h"
#include "src/sim/replay.h"
#include "src/sim/replay_report.h"

namespace gpupool {
namespace {

struct ReplayFlags {
  std::string from, since, config, current_config, report;
  bool json = false;
};

int Fail(const std::string& message) {
  std::cerr << "gpupool sim replay: " << message << "\n";
  return 2;
}

// A temporary folder removed when it goes out of scope.
class TempDir {
 public:
  TempDir() {
    std::string t = (std::filesystem::temp_directory_path() / "gpupool-replay-XXXXXX").string();
    if (::mkdtemp(t.data()) != nullptr) path_ = t;
  }
  ~TempDir() {
    std::error_code ec;
    if (!path_.empty()) std::filesystem::remove_all(path_, ec);
  }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

// Every event of the data directory's journal, decoded by the server's own
// decoder, read from a consistent copy (the source is never written).
Result<std::vector<Event>> ReadJournal(const std::string& dir) {
  std::error_code ec;
  if (!std::filesystem::is_directory(dir, ec)) return NotFound(dir + ": not a directory");
  const std::string source = (std::filesystem::path(dir) / kDatabaseFile).string();
  TempDir tmp;
  if (tmp.path().empty()) return IoError("cannot create a temporary folder for the journal's copy");
  GP_TRY(CopySqliteJournal(dir, tmp.path() + "/" + kDatabaseFile));
  auto journal = OpenSqliteJournal(tmp.path());
  if (!journal) {
    std::string m = journal.error().message;
    const std::string copy = tmp.path() + "/" + kDatabaseFile;
    if (auto at = m.find(copy); at != std::string::npos) m.replace(at, copy.size(), source);
    return std::unexpected(Error{journal.error().code, m});
  }
  std::vector<Event> events;
  Status decoded;
  GP_TRY((*journal)->ReadEvents(0, -1, [&](const JournalEvent& je) {
    auto e = EventFromJson(je.json);
    if (!e) {
      decoded = DataLoss(source + ": event " + std::to_string(je.seq) + ": " + e.error().message +
                         " (written by a newer gpupool?)");
      return false;
    }
    events.push_back(std::move(*e));
    return static_cast<int64_t>(events.size()) <= kMaxReplayEvents;
  }));
  GP_TRY(decoded);
  return events;
}

// --since: jobs that ended before the window are left out (the world's
// set-up is kept whole).
void KeepWindow(History& h, Duration since) {
  const Instant cutoff = h.end - since;
  std::erase_if(h.jobs, [&](const ObservedJob& j) { return j.ended && *j.ended < cutoff; });
}

std::vector<std::string> Caveats(const History& h, bool no_recorded_config) {
  std::vector<std::string> out;
  if (no_recorded_config) {
    out.push_back("the journal does not record the configuration in force: it was taken from --current-config");
  }
  for (const auto& [type, n] : h.not_replayed) out.push_back(std::to_string(n) + " " + type + " events not replayed");
  out.push_back("agent timing: each job ends its observed run time after it starts; start latency is in that run time");
  out.push_back("utilization is not journaled: replayed jobs are busy (no idle reclaim in the replay); observed idle "
                "reclaims: " + std::to_string(h.idle_reclaims));
  return out;
}

int Replay(const ReplayFlags& f) {
  if (f.current_config.empty()) {
    return Fail("the journal of " + f.from + " does not record the configuration it ran under: give it with "
                "--current-config FILE");
  }
  auto in_force = LoadServerConfig(f.current_config);
  if (!in_force) return Fail(in_force.error().message);
  std::optional<ServerConfig> next;
  if (!f.config.empty()) {
    auto loaded = LoadServerConfig(f.config);
    if (!loaded) return Fail(loaded.error().message);
    next = std::move(*loaded);
  }
  auto events = ReadJournal(f.from);
  if (!events) return Fail(events.error().message);
  auto history = HistoryFromEvents(*events);
  if (!history) return Fail(f.from + ": " + history.error().message);
  events->clear();
  if (!f.since.empty()) {
    auto since = ParseDurationText(f.since);
    if (!since) return Fail("--since: " + since.error().message);
    KeepWindow(*history, *since);
  }
  ReplayOptions o;
  o.tick = in_force->server.tick;
  auto base = ReplayHistory(*history, *in_force, o);
  if (!base) return Fail(f.current_config + ": " + base.error().message);
  std::optional<ReplayRun> changed;
  if (next) {
    ReplayOptions n = o;
    n.new_config = true;
    auto run = ReplayHistory(*history, *next, n);
    if (!run) return Fail(f.config + ": " + run.error().message);
    changed = std::move(*run);
  }
  ReplayReportInput in{.source = f.from,
                       .in_force_name = f.current_config,
                       .new_name = f.config,
                       .history = &*history,
                       .in_force = &base->report,
                       .next = changed ? &changed->report : nullptr,
                       .fidelity = CompareWithHistory(*history, *base),
                       .caveats = Caveats(*history, true)};
  if (!f.report.empty()) {
    if (auto ok = WriteHtmlReport(f.report, HtmlReplayReport(in)); !ok) return Fail("--report: " + ok.error().message);
  }
  std::cout << (f.json ? ReplayReportJson(in).dump(2) + "\n" : FormatReplayReport(in));
  return 0;
}

}  // namespace

void AddSimReplayCommand(CLI::App& sim) {
  auto f = std::make_shared<ReplayFlags>();
  CLI::App* cmd = sim.add_subcommand("replay", "Replay a server's own history under its configuration and a new one");
  cmd->add_option("--from", f->from, "the server's data directory (read through a copy; never written)")->required();
  cmd->add_option("--since", f->since, "only jobs that ended within this long of the journal's end (e.g. 7d)");
  cmd->add_option("--config", f->config, "a new server configuration to replay the history under");
  cmd->add_option("--current-config", f->current_config,
                  "the server configuration the history ran under (the journal does not record it)");
  cmd->add_flag("--json", f->json, "print the report as JSON");
  cmd->add_option("--report", f->report, "also write a self-contained HTML report to this file");
  cmd->callback([f] {
    if (const int rc = Replay(*f); rc != 0) throw CLI::RuntimeError(rc);
  });
}

}  // namespace gpupool
