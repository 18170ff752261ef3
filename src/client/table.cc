#include "src/client/table.h"

#include "src/base/time_text.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

namespace gpupool {
namespace {

size_t DisplayWidth(std::string_view s) {
  size_t n = 0;
  for (unsigned char c : s) {
    if ((c & 0xC0) != 0x80) ++n;
  }
  return n;
}

}  // namespace

std::string FormatTable(const std::vector<std::string>& header, const std::vector<std::vector<std::string>>& rows) {
  const size_t columns = header.size();
  std::vector<size_t> width(columns, 0);
  auto cell = [&](const std::vector<std::string>& row, size_t c) -> std::string_view {
    return c < row.size() ? std::string_view(row[c]) : std::string_view();
  };
  for (size_t c = 0; c < columns; ++c) {
    width[c] = DisplayWidth(header[c]);
    for (const auto& row : rows) width[c] = std::max(width[c], DisplayWidth(cell(row, c)));
  }
  std::string out;
  auto line = [&](const std::vector<std::string>& row) {
    std::string text;
    for (size_t c = 0; c < columns; ++c) {
      const std::string_view v = cell(row, c);
      text += v;
      if (c + 1 < columns) text.append(width[c] - DisplayWidth(v) + 3, ' ');
    }
    while (!text.empty() && text.back() == ' ') text.pop_back();
    out += text;
    out += '\n';
  };
  line(header);
  for (const auto& row : rows) line(row);
  return out;
}

std::string FormatKeyValues(const std::vector<std::pair<std::string, std::string>>& items) {
  size_t width = 0;
  for (const auto& [k, v] : items) width = std::max(width, DisplayWidth(k) + 1);
  std::string out;
  for (const auto& [k, v] : items) {
    std::string text = k.empty() ? " " : k + ":";
    if (!v.empty()) {
      text.append(width - DisplayWidth(k) - 1 + 2, ' ');
      text += v;
    }
    while (!text.empty() && text.back() == ' ') text.pop_back();
    out += text + "\n";
  }
  return out;
}

std::string FormatNumber(double value) {
  if (!std::isfinite(value)) return "-";
  const double rounded = std::round(value * 1000.0) / 1000.0;
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.3f", rounded);
  std::string s = buf;
  while (!s.empty() && s.back() == '0') s.pop_back();
  if (!s.empty() && s.back() == '.') s.pop_back();
  if (s == "-0") s = "0";
  return s;
}

std::string FormatAge(int64_t millis) {
  const int64_t s = std::max<int64_t>(millis, 0) / 1000;
  auto two = [](int64_t big, const char* big_unit, int64_t small, const char* small_unit) {
    std::string out = std::to_string(big) + big_unit;
    if (small > 0) out += std::to_string(small) + small_unit;
    return out;
  };
  if (s < 60) return std::to_string(s) + "s";
  if (s < 10 * 60) return two(s / 60, "m", s % 60, "s");
  if (s < 3600) return std::to_string(s / 60) + "m";
  if (s < 10 * 3600) return two(s / 3600, "h", (s % 3600) / 60, "m");
  if (s < 86400) return std::to_string(s / 3600) + "h";
  if (s < 10 * 86400) return two(s / 86400, "d", (s % 86400) / 3600, "h");
  return std::to_string(s / 86400) + "d";
}

std::optional<int64_t> ParseTimeMillis(std::string_view t) {
  auto at = ParseRfc3339(t);
  if (!at) return std::nullopt;
  return ToMillis(*at);
}

}  // namespace gpupool
