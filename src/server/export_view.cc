// See export_view.h.
#include "src/server/export_view.h"

#include <nlohmann/json.hpp>

#include "src/engine/event.h"
#include "src/server/config_record.h"

namespace gpupool {
namespace {

void Redact(JobSpec& spec) {
  for (auto& [name, value] : spec.task.env) value = kRedacted;
}

// The index and the in-force text, for the first page.
Status AppendConfigs(Journal& journal, std::string& out) {
  GP_ASSIGN_OR_RETURN(const auto records, ReadConfigRecords(journal));
  nlohmann::json index = nlohmann::json::array();
  for (const ConfigRecord& r : records) index.push_back(ConfigRecordJson(r));
  out += ",\"configs\":" + index.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  if (records.empty() || !records.back().text_kept) return {};
  GP_ASSIGN_OR_RETURN(const auto text, ReadConfigText(journal, records.back().sha256));
  if (text) {
    out += ",\"config_text\":" + nlohmann::json(*text).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  }
  return {};
}

}  // namespace

Result<std::string> RedactedLine(const JournalEvent& e) {
  if (e.type != "JobSubmitted" && e.type != "JobRejected") return e.json;
  GP_ASSIGN_OR_RETURN(Event ev, EventFromJson(e.json));
  if (auto* s = std::get_if<JobSubmitted>(&ev.body)) Redact(s->spec);
  if (auto* r = std::get_if<JobRejected>(&ev.body)) Redact(r->spec);
  return ToJsonLine(ev);
}

Result<std::string> ExportPage(Journal& journal, int64_t since, int64_t limit) {
  GP_ASSIGN_OR_RETURN(const int64_t last, journal.LastSeq());
  std::string out = "{\"format\":" + std::to_string(kExportFormat) + ",\"last_seq\":" + std::to_string(last);
  if (since == 0) GP_TRY(AppendConfigs(journal, out));
  out += ",\"events\":[";
  int64_t next = since;
  Status failed;
  GP_TRY(journal.ReadEvents(since, limit, [&](const JournalEvent& e) {
    auto line = RedactedLine(e);
    if (!line) {
      failed = DataLoss("event " + std::to_string(e.seq) + ": " + line.error().message);
      return false;
    }
    out += (next == since ? "" : ",") + *line;
    next = e.seq;
    return true;
  }));
  GP_TRY(failed);
  out += "],\"next_since\":" + std::to_string(next) + "}";
  return out;
}

}  // namespace gpupool
