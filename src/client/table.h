// Plain-text formatting for the client's `-o table` output: aligned columns,
// numbers, times and ages.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace gpupool {

// Columns left-aligned and separated by three spaces, the header first, one
// line per row, no trailing spaces. Widths count UTF-8 code points. A row
// shorter than the header is padded with empty cells; a longer one is cut.
std::string FormatTable(const std::vector<std::string>& header, const std::vector<std::vector<std::string>>& rows);

// "key:  value" lines, the values aligned after the longest key. An empty
// key continues the item above: its value is aligned under the others, with
// no colon.
std::string FormatKeyValues(const std::vector<std::pair<std::string, std::string>>& items);

// A number as an operator reads it: integers without a decimal point, others
// with at most three decimals and no trailing zeros ("8", "0.25", "1.333").
std::string FormatNumber(double value);

// An age or a duration in its largest whole unit, two units when the larger
// is small: "0s", "45s", "3m20s", "12m", "5h10m", "18h", "3d4h", "12d".
// Negative durations (clock skew) print as "0s".
std::string FormatAge(int64_t millis);

// Milliseconds since the Unix epoch of an RFC 3339 time
// ("2026-11-29T12:00:00Z", "2026-11-29T12:00:00.123Z",
// "2026-11-29T13:00:00+01:00"); nullopt when malformed or impossible
// (2026-02-31). The server's parser (ParseRfc3339, src/base/time_text.h).
std::optional<int64_t> ParseTimeMillis(std::string_view rfc3339);

}  // namespace gpupool
