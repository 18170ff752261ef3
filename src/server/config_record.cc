// See config_record.h.
#include "src/server/config_record.h"

#include <nlohmann/json.hpp>

#include "src/base/sha256.h"

namespace gpupool {

nlohmann::json ConfigRecordJson(const ConfigRecord& r) {
  return {{"sha256", r.sha256}, {"source", r.source},   {"since_seq", r.since_seq},
          {"at_ms", r.at_ms},   {"bytes", r.bytes},     {"text_kept", r.text_kept}};
}

Result<ConfigRecord> ConfigRecordFromJson(const nlohmann::json& j, const std::string& where) {
  if (!j.is_object()) return DataLoss(where + " is not an object");
  ConfigRecord r;
  const auto str = [&](const char* k, std::string& out) -> Status {
    auto it = j.find(k);
    if (it == j.end() || !it->is_string()) return DataLoss(where + "." + k + " is not a string");
    out = it->get<std::string>();
    return {};
  };
  const auto num = [&](const char* k, int64_t& out) -> Status {
    auto it = j.find(k);
    if (it == j.end() || !it->is_number_integer()) {
      return DataLoss(where + "." + k + " is not an integer");
    }
    out = it->get<int64_t>();
    return {};
  };
  GP_TRY(str("sha256", r.sha256));
  GP_TRY(str("source", r.source));
  GP_TRY(num("since_seq", r.since_seq));
  GP_TRY(num("at_ms", r.at_ms));
  GP_TRY(num("bytes", r.bytes));
  auto kept = j.find("text_kept");
  r.text_kept = kept != j.end() && kept->is_boolean() && kept->get<bool>();
  return r;
}

std::string ConfigSha256(std::string_view text) {
  Sha256 h;
  h.Update(text);
  return h.HexDigest();
}

std::string ConfigTextMeta(const std::string& sha256) { return "config/" + sha256; }

Result<std::vector<ConfigRecord>> ReadConfigRecords(Journal& journal) {
  GP_ASSIGN_OR_RETURN(auto stored, journal.Meta(kConfigIndexMeta));
  std::vector<ConfigRecord> out;
  if (!stored) return out;
  const auto j = nlohmann::json::parse(*stored, nullptr, /*allow_exceptions=*/false);
  if (!j.is_array()) return DataLoss(std::string("journal meta ") + kConfigIndexMeta + " is not a list");
  for (size_t i = 0; i < j.size(); ++i) {
    GP_ASSIGN_OR_RETURN(ConfigRecord r, ConfigRecordFromJson(j[i], std::string("journal meta ") + kConfigIndexMeta +
                                                                       "[" + std::to_string(i) + "]"));
    out.push_back(std::move(r));
  }
  return out;
}

Result<std::optional<std::string>> ReadConfigText(Journal& journal, const std::string& sha256) {
  return journal.Meta(ConfigTextMeta(sha256));
}

Result<ConfigRecord> RecordConfigInForce(Journal& journal, std::string_view text, const std::string& source,
                                         int64_t since_seq, int64_t at_ms) {
  GP_ASSIGN_OR_RETURN(auto records, ReadConfigRecords(journal));
  const std::string sha = ConfigSha256(text);
  if (!records.empty() && records.back().sha256 == sha) return records.back();
  ConfigRecord r{.sha256 = sha,
                 .source = source,
                 .since_seq = since_seq,
                 .at_ms = at_ms,
                 .bytes = static_cast<int64_t>(text.size()),
                 .text_kept = static_cast<int64_t>(text.size()) <= kMaxRecordedConfigBytes};
  JournalBatch batch;
  if (r.text_kept) {
    GP_ASSIGN_OR_RETURN(auto have, ReadConfigText(journal, sha));
    if (!have) batch.meta.emplace_back(ConfigTextMeta(sha), std::string(text));
  }
  records.push_back(r);
  const int64_t drop = static_cast<int64_t>(records.size()) - kMaxConfigRecords;
  if (drop > 0) records.erase(records.begin(), records.begin() + drop);
  nlohmann::json index = nlohmann::json::array();
  for (const ConfigRecord& each : records) index.push_back(ConfigRecordJson(each));
  batch.meta.emplace_back(kConfigIndexMeta, index.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace));
  GP_TRY(journal.Commit(batch));
  return r;
}

const ConfigRecord* ConfigInForceAt(const std::vector<ConfigRecord>& records, int64_t seq) {
  const ConfigRecord* found = records.empty() ? nullptr : &records.front();
  for (const ConfigRecord& r : records) {
    if (r.since_seq <= seq) found = &r;
  }
  return found;
}

}  // namespace gpupool
