// See replay_source.h.
#include "src/cli/replay_source.h"

#include <filesystem>
#include <map>

#include "src/base/time_text.h"
#include "src/cli/journal_read.h"
#include "src/config/yaml_reader.h"
#include "src/server/config_record.h"

namespace gpupool {
namespace {

// --since: jobs that ended before the window are left out (the world's
// set-up is kept whole).
void KeepWindow(History& h, Duration since) {
  const Instant cutoff = h.end - since;
  std::erase_if(h.jobs, [&](const ObservedJob& j) { return j.ended && *j.ended < cutoff; });
}

std::string ShortHash(const std::string& sha) { return sha.substr(0, 12); }

struct InForce {
  ServerConfig config;
  std::string name;
  std::vector<std::string> caveats;
  std::string text;
};

// Caveats when the recorded configuration changed while the replayed jobs
// ran: all of them are replayed under the last one.
void NoteChanges(const JournalRead& j, const History& h, std::vector<std::string>& caveats) {
  if (j.configs.size() < 2 || h.jobs.empty()) return;
  const int64_t first_ms = ToMillis(h.jobs.front().submitted);
  for (size_t i = 1; i < j.configs.size(); ++i) {
    const ConfigRecord& r = j.configs[i];
    if (r.at_ms < first_ms) continue;
    caveats.push_back("the configuration changed at " + FormatRfc3339(InstantFromMillis(r.at_ms)) + " (from event " +
                      std::to_string(r.since_seq) + ", sha256 " + ShortHash(r.sha256) +
                      "): the jobs before it are replayed under the last configuration too; --since can "
                      "leave them out");
  }
}

Result<InForce> RecordedInForce(const JournalRead& j, const std::string& from) {
  if (j.configs.empty()) {
    return FailedPrecondition("the journal of " + from + " does not record the configuration it ran under "
                              "(written by a release before configurations were recorded): give it with "
                              "--current-config FILE");
  }
  const ConfigRecord& last = j.configs.back();
  auto text = j.texts.find(last.sha256);
  if (text == j.texts.end()) {
    return FailedPrecondition("the journal of " + from + " records the configuration in force (" + last.source +
                              ", sha256 " + ShortHash(last.sha256) + ") by its hash alone (" +
                              std::to_string(last.bytes) + " bytes, over the " +
                              std::to_string(kMaxRecordedConfigBytes) + "-byte limit): give it with "
                              "--current-config FILE");
  }
  InForce out;
  out.name = last.source + " as recorded in the journal (sha256 " + ShortHash(last.sha256) + ")";
  auto parsed = ParseServerConfig(text->second, out.name, ConfigFileDir(last.source));
  if (!parsed) return std::unexpected(parsed.error());
  out.config = std::move(*parsed);
  out.text = text->second;
  return out;
}

// The operator's --current-config, read before the journal (so that a
// file that does not parse is named first).
struct GivenConfig {
  std::string text;
  ServerConfig config;
};
Result<std::optional<GivenConfig>> ReadGiven(const ReplaySourceFlags& f) {
  if (f.current_config.empty()) return std::optional<GivenConfig>();
  GP_ASSIGN_OR_RETURN(std::string text, ReadConfigFile(f.current_config));
  GP_ASSIGN_OR_RETURN(ServerConfig c, ParseServerConfig(text, f.current_config, ConfigFileDir(f.current_config)));
  return std::optional<GivenConfig>(GivenConfig{std::move(text), std::move(c)});
}

Result<InForce> FindInForce(const ReplaySourceFlags& f, std::optional<GivenConfig> given, const JournalRead& j) {
  if (!given) return RecordedInForce(j, f.from);
  InForce out{std::move(given->config), f.current_config, {}, given->text};
  if (j.configs.empty()) {
    out.caveats.push_back("the journal does not record the configuration in force: it was taken from "
                          "--current-config");
  } else if (const ConfigRecord& last = j.configs.back(); last.sha256 != ConfigSha256(given->text)) {
    out.caveats.push_back("--current-config " + f.current_config + " is not the configuration the journal "
                          "records in force (" + last.source + ", sha256 " + ShortHash(last.sha256) +
                          "); the replay runs under the file given");
  }
  return out;
}

std::vector<std::string> HistoryCaveats(const History& h) {
  std::vector<std::string> out;
  for (const auto& [type, n] : h.not_replayed) out.push_back(std::to_string(n) + " " + type + " events not replayed");
  out.push_back("agent timing: each job ends its observed run time after it starts; start latency is in that run time");
  out.push_back("utilization is not journaled: replayed jobs are busy (no idle reclaim in the replay); observed idle "
                "reclaims: " + std::to_string(h.idle_reclaims));
  return out;
}

Result<History> HistoryOf(const ReplaySourceFlags& f, JournalRead& j) {
  auto history = HistoryFromEvents(j.events);
  if (!history) return std::unexpected(Error{history.error().code, f.from + ": " + history.error().message});
  j.events.clear();
  j.events.shrink_to_fit();
  if (!f.since.empty()) {
    auto since = ParseDurationText(f.since);
    if (!since) return InvalidArgument("--since: " + since.error().message);
    KeepWindow(*history, *since);
  }
  return history;
}

Result<ReplayRun> RunUnder(const History& h, const ServerConfig& in_force, const ServerConfig& c, bool is_new,
                           const std::string& name, const std::string& event_log = "") {
  ReplayOptions o;
  o.event_log_path = event_log;
  o.tick = in_force.server.tick;
  o.new_config = is_new;
  auto run = ReplayHistory(h, c, o);
  if (!run) return std::unexpected(Error{run.error().code, name + ": " + run.error().message});
  return run;
}

}  // namespace

Result<ReplayInput> LoadReplayInput(const ReplaySourceFlags& f) {
  GP_ASSIGN_OR_RETURN(std::optional<GivenConfig> given, ReadGiven(f));
  GP_ASSIGN_OR_RETURN(JournalRead j, IsServerUrl(f.from) ? ReadServerExport(f.from, f.client) : ReadDataDirJournal(f.from));
  GP_ASSIGN_OR_RETURN(InForce in_force, FindInForce(f, std::move(given), j));
  ReplayInput in;
  GP_ASSIGN_OR_RETURN(in.history, HistoryOf(f, j));
  in.in_force = std::move(in_force.config);
  in.in_force_text = std::move(in_force.text);
  in.in_force_name = std::move(in_force.name);
  in.caveats = std::move(in_force.caveats);
  NoteChanges(j, in.history, in.caveats);
  for (std::string& c : HistoryCaveats(in.history)) in.caveats.push_back(std::move(c));
  return in;
}

Result<ReplayOutcome> ReplayFromDataDir(const ReplaySourceFlags& f) {
  std::optional<ServerConfig> next;
  if (!f.config.empty()) {
    GP_ASSIGN_OR_RETURN(ServerConfig loaded, LoadServerConfig(f.config));
    next = std::move(loaded);
  }
  GP_ASSIGN_OR_RETURN(ReplayInput in, LoadReplayInput(f));
  ReplayOutcome o;
  o.history = std::move(in.history);
  o.in_force_name = in.in_force_name;
  GP_ASSIGN_OR_RETURN(o.in_force, RunUnder(o.history, in.in_force, in.in_force, false, in.in_force_name,
                                           f.event_log));
  if (next) {
    GP_ASSIGN_OR_RETURN(o.next, RunUnder(o.history, in.in_force, *next, true, f.config));
  }
  o.fidelity = CompareWithHistory(o.history, o.in_force);
  o.caveats = std::move(in.caveats);
  return o;
}

void AddReplaySourceOptions(CLI::App& cmd, ReplaySourceFlags& f) {
  cmd.add_option("--since", f.since, "only jobs that ended within this long of the journal's end (e.g. 7d)");
  cmd.add_option("--current-config", f.current_config,
                 "the server configuration the history ran under (default: the one the journal records)");
  cmd.add_option("--token", f.client.token, "with a server's URL: the admin token");
  cmd.add_option("--token-file", f.client.token_file, "with a server's URL: a file holding the admin token");
  cmd.add_option("--ca-cert", f.client.ca_cert, "with an https URL: the CA that signs the server's certificate");
}

ReplayReportInput ReportInputOf(const ReplaySourceFlags& f, const ReplayOutcome& o) {
  return ReplayReportInput{.source = f.from,
                           .in_force_name = o.in_force_name,
                           .new_name = f.config,
                           .history = &o.history,
                           .in_force = &o.in_force.report,
                           .next = o.next ? &o.next->report : nullptr,
                           .fidelity = o.fidelity,
                           .caveats = o.caveats};
}

}  // namespace gpupool
