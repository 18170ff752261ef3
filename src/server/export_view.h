// GET /v1/export (issue 20): the journal as `gpupool sim replay --from URL`
// reads it, page by page, with each job's environment values redacted
// (names kept: the replay needs neither, and values are where secrets
// live), and the configuration in force (config_record.h) on the first
// page.
//
// A page: {"format": 1, "last_seq": L, "next_since": N, "events": [...]}
// and, when since is 0, "configs" (the index) and "config_text" (the text
// of the last record, when kept). Events are the journal's canonical lines
// (src/engine/event.h), JobSubmitted and JobRejected re-encoded with every
// env value replaced by kRedacted.
#pragma once

#include <cstdint>
#include <string>

#include "src/base/status.h"
#include "src/server/journal.h"

namespace gpupool {

inline constexpr int kExportFormat = 1;
inline constexpr const char* kRedacted = "(redacted)";

// The page after `since` with at most `limit` events, as JSON text.
// kDataLoss when a stored event does not decode.
Result<std::string> ExportPage(Journal& journal, int64_t since, int64_t limit);

// The canonical line with env values redacted (other events as they are).
Result<std::string> RedactedLine(const JournalEvent& e);

}  // namespace gpupool
