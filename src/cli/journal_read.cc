// See journal_read.h.
#include "src/cli/journal_read.h"

#include <stdlib.h>

#include <filesystem>

#include "src/client/api_client.h"
#include "src/server/data_dir.h"
#include "src/server/export_view.h"
#include "src/server/journal.h"
#include "src/server/journal_copy.h"
#include "src/sim/replay.h"

namespace gpupool {
namespace {

constexpr int64_t kExportPageEvents = 10'000;

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


Status ReadEventsInto(Journal& journal, const std::string& source, std::vector<Event>& events) {
  Status decoded;
  GP_TRY(journal.ReadEvents(0, -1, [&](const JournalEvent& je) {
    auto e = EventFromJson(je.json);
    if (!e) {
      decoded = DataLoss(source + ": event " + std::to_string(je.seq) + ": " + e.error().message +
                         " (written by a newer gpupool?)");
      return false;
    }
    events.push_back(std::move(*e));
    return static_cast<int64_t>(events.size()) <= kMaxReplayEvents;
  }));
  return decoded;
}

Status ReadConfigsInto(Journal& journal, const std::string& source, JournalRead& out) {
  auto records = ReadConfigRecords(journal);
  if (!records) return std::unexpected(Error{records.error().code, source + ": " + records.error().message});
  out.configs = std::move(*records);
  for (const ConfigRecord& r : out.configs) {
    if (!r.text_kept || out.texts.contains(r.sha256)) continue;
    GP_ASSIGN_OR_RETURN(auto text, ReadConfigText(journal, r.sha256));
    if (text) out.texts[r.sha256] = std::move(*text);
  }
  return {};
}

// One page of an export into `out`; returns its next_since. `where` names
// the page in messages.
Result<int64_t> ReadExportPage(const nlohmann::json& page, const std::string& where, int64_t since,
                               JournalRead& out) {
  const auto format = page.find("format");
  if (format == page.end() || !format->is_number_integer() || *format != kExportFormat) {
    return DataLoss(where + ": export format " + (format == page.end() ? std::string("missing") : format->dump()) +
                    "; this release reads " + std::to_string(kExportFormat) + " (a newer gpupool?)");
  }
  const auto events = page.find("events");
  const auto next = page.find("next_since");
  if (events == page.end() || !events->is_array() || next == page.end() || !next->is_number_integer()) {
    return DataLoss(where + ": not an export page (no events or next_since)");
  }
  int64_t expect = since + 1;
  for (const nlohmann::json& line : *events) {
    auto e = EventFromJson(line.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace));
    if (!e) return DataLoss(where + ": event " + std::to_string(expect) + ": " + e.error().message);
    if (e->seq != expect) {
      return DataLoss(where + ": event " + std::to_string(e->seq) + " where " + std::to_string(expect) +
                      " was expected (a truncated or damaged export)");
    }
    out.events.push_back(std::move(*e));
    ++expect;
  }
  if (static_cast<int64_t>(out.events.size()) > kMaxReplayEvents) {
    return ResourceExhausted(where + ": more than " + std::to_string(kMaxReplayEvents) + " events");
  }
  return next->get<int64_t>();
}

Status ReadExportConfigs(const nlohmann::json& page, const std::string& where, JournalRead& out) {
  const auto configs = page.find("configs");
  if (configs == page.end()) return {};
  if (!configs->is_array()) return DataLoss(where + ": configs is not a list");
  for (size_t i = 0; i < configs->size(); ++i) {
    GP_ASSIGN_OR_RETURN(ConfigRecord r, ConfigRecordFromJson((*configs)[i], where + ": configs[" + std::to_string(i) + "]"));
    out.configs.push_back(std::move(r));
  }
  const auto text = page.find("config_text");
  if (text != page.end() && text->is_string() && !out.configs.empty()) {
    out.texts[out.configs.back().sha256] = text->get<std::string>();
  }
  return {};
}

}  // namespace

bool IsServerUrl(std::string_view from) { return from.starts_with("http://") || from.starts_with("https://"); }

// Every event of the data directory's journal, decoded by the server's own
// decoder, and the configurations it records, read from a consistent copy
// (the source is never written).
Result<JournalRead> ReadDataDirJournal(const std::string& dir) {
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
  JournalRead out;
  GP_TRY(ReadEventsInto(**journal, source, out.events));
  GP_TRY(ReadConfigsInto(**journal, source, out));
  return out;
}


Result<JournalRead> ReadServerExport(const std::string& url, const ClientFlags& client) {
  ClientFlags flags = client;
  flags.addr = url;
  GP_ASSIGN_OR_RETURN(ClientConfig config, ResolveClientConfig(flags, ProcessEnvironment()));
  ApiClient api(std::move(config));
  JournalRead out;
  int64_t since = 0, last = -1;
  for (;;) {
    const std::string where = url + "/v1/export (the page after event " + std::to_string(since) + ")";
    auto page = api.Get("/v1/export", {{"since", std::to_string(since)}, {"limit", std::to_string(kExportPageEvents)}});
    if (!page) return std::unexpected(Error{page.error().code, where + ": " + page.error().message});
    if (since == 0) {
      GP_TRY(ReadExportConfigs(*page, where, out));
      last = page->value("last_seq", int64_t{0});
    }
    GP_ASSIGN_OR_RETURN(const int64_t next, ReadExportPage(*page, where, since, out));
    if (next >= last) break;
    if (next <= since) {  // no progress: a loop on a broken or truncated export would never end
      return DataLoss(where + ": no events past " + std::to_string(since) + ", but the server had " +
                      std::to_string(last) + " (a truncated export)");
    }
    since = next;
  }
  return out;
}

}  // namespace gpupool
