// A server's journal read for a what-if replay (issue 20): from its data
// directory, through a consistent copy that never writes the source
// (src/server/journal_copy.h), or from a running server's GET /v1/export
// (src/server/export_view.h), page by page. Either way the events are
// decoded by the server's own decoder and the configurations it recorded
// (src/server/config_record.h) come with them.
#pragma once

#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "src/base/status.h"
#include "src/client/client_config.h"
#include "src/engine/event.h"
#include "src/server/config_record.h"

namespace gpupool {

struct JournalRead {
  std::vector<Event> events;
  std::vector<ConfigRecord> configs;         // oldest first
  std::map<std::string, std::string> texts;  // by sha256, those kept (the export: the last one's)
};

// "http://..." or "https://...".
bool IsServerUrl(std::string_view from);

// DIR/gpupool.db. Errors name the database file (an event that does not
// decode: its seq too).
Result<JournalRead> ReadDataDirJournal(const std::string& dir);

// The export of the server at `url` up to the last event it had when the
// first page was read, with `client`'s token and CA (its addr is ignored).
// Errors name the URL and the page: an export of another format, a page
// whose events do not follow the previous one's (a truncated or damaged
// export), an event that does not decode.
Result<JournalRead> ReadServerExport(const std::string& url, const ClientFlags& client);

}  // namespace gpupool
