// The configurations a server ran under, recorded in its journal (issue 20),
// so that `gpupool sim replay` and `gpupool config check` know which was
// in force when, without being told.
//
// Each start records the configuration it starts with, when it differs
// from the last one recorded: its SHA-256 (of the file's bytes, or of the
// embedded default), where it came from, when, and the seq of the first
// event written under it. The text itself is kept once per hash, so a
// configuration put back costs no space again.
//
// Stored as journal meta (Journal::Meta), so it travels with the journal:
//   "configs"          the index: a JSON list of ConfigRecord, oldest first
//   "config/<sha256>"  the file's text
// Limits: at most kMaxConfigRecords index entries (the oldest go first; its
// text then stays, unreferenced), and a text over kMaxRecordedConfigBytes is
// recorded by its hash alone (the replay then asks for the file). Journals
// written before this have no index: readers say so and ask for the file.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "src/base/status.h"
#include "src/server/journal.h"

namespace gpupool {

inline constexpr int64_t kMaxConfigRecords = 256;
inline constexpr int64_t kMaxRecordedConfigBytes = 512 * 1024;
inline constexpr const char* kConfigIndexMeta = "configs";

struct ConfigRecord {
  std::string sha256;     // lower-case hex of the text's bytes
  std::string source;     // the file's path, or "embedded configuration"
  int64_t since_seq = 0;  // the first event written under it
  int64_t at_ms = 0;      // when the server started with it
  int64_t bytes = 0;      // the text's size
  bool text_kept = false; // false: over kMaxRecordedConfigBytes, hash only
};

std::string ConfigSha256(std::string_view text);
// A record as the index (and the export, src/server/export_view.h) writes
// it, and back; kDataLoss naming `where` and the field.
nlohmann::json ConfigRecordJson(const ConfigRecord& r);
Result<ConfigRecord> ConfigRecordFromJson(const nlohmann::json& j, const std::string& where);
std::string ConfigTextMeta(const std::string& sha256);

// The index (empty when the journal has none); kDataLoss when it is not a
// list of records.
Result<std::vector<ConfigRecord>> ReadConfigRecords(Journal& journal);
// The text recorded under `sha256`, if any.
Result<std::optional<std::string>> ReadConfigText(Journal& journal, const std::string& sha256);

// Records `text` as the configuration in force from `since_seq` on, unless
// it is already the last one recorded. Returns the record in force (new or
// the last one).
Result<ConfigRecord> RecordConfigInForce(Journal& journal, std::string_view text, const std::string& source,
                                         int64_t since_seq, int64_t at_ms);

// The record in force at `seq`: the last whose since_seq <= seq (the first
// when all are later); null when `records` is empty.
const ConfigRecord* ConfigInForceAt(const std::vector<ConfigRecord>& records, int64_t seq);

}  // namespace gpupool
