// Durations and wall-clock times as text, for the REST API and the CLI.
//
// Durations: a sequence of number+unit parts, "500ms", "30s", "10m", "2h",
// "1d", "1h30m", "1.5h"; units ms, s, m, h, d. Times: RFC 3339 in UTC or
// with an offset ("2026-11-29T12:00:00Z", "...T12:00:00.250+01:00"),
// printed as "2026-11-29T12:00:00.250Z". The server's timeline is Unix
// milliseconds (src/base/time.h: the Instant's origin is the Unix epoch).
#pragma once

#include <string>
#include <string_view>

#include "src/base/status.h"
#include "src/base/time.h"

namespace gpupool {

// Fails with "expected a duration such as ..." (no field name: the caller
// prefixes it).
Result<Duration> ParseDurationText(std::string_view text);
// "1h30m", "45s", "250ms", "0s": the shortest exact form.
std::string FormatDuration(Duration d);

Result<Instant> ParseRfc3339(std::string_view text);
std::string FormatRfc3339(Instant t);

// Now on the server's timeline (Unix milliseconds).
Instant WallNow();

}  // namespace gpupool
