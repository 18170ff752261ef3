#include "src/client/table.h"

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

// Days since 1970-01-01 of a proleptic Gregorian date (Howard Hinnant's
// days_from_civil).
int64_t DaysFromCivil(int64_t y, int64_t m, int64_t d) {
  y -= m <= 2;
  const int64_t era = (y >= 0 ? y : y - 399) / 400;
  const int64_t yoe = y - era * 400;
  const int64_t doy = (153 * (m + (m > 2 ? -3 : 9)) + 2) / 5 + d - 1;
  const int64_t doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
  return era * 146097 + doe - 719468;
}

bool Digits(std::string_view s, size_t at, size_t count, int64_t& out) {
  if (at + count > s.size()) return false;
  out = 0;
  for (size_t i = at; i < at + count; ++i) {
    if (s[i] < '0' || s[i] > '9') return false;
    out = out * 10 + (s[i] - '0');
  }
  return true;
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
  // YYYY-MM-DDTHH:MM:SS[.fraction](Z|+HH:MM|-HH:MM)
  int64_t year, month, day, hour, minute, second;
  if (!Digits(t, 0, 4, year) || t.size() < 20 || t[4] != '-' || !Digits(t, 5, 2, month) || t[7] != '-' ||
      !Digits(t, 8, 2, day) || (t[10] != 'T' && t[10] != 't' && t[10] != ' ') || !Digits(t, 11, 2, hour) ||
      t[13] != ':' || !Digits(t, 14, 2, minute) || t[16] != ':' || !Digits(t, 17, 2, second)) {
    return std::nullopt;
  }
  if (month < 1 || month > 12 || day < 1 || day > 31 || hour > 23 || minute > 59 || second > 60) return std::nullopt;
  size_t i = 19;
  int64_t millis = 0;
  if (i < t.size() && t[i] == '.') {
    ++i;
    int digits = 0;
    while (i < t.size() && t[i] >= '0' && t[i] <= '9') {
      if (digits < 3) millis = millis * 10 + (t[i] - '0');
      ++digits;
      ++i;
    }
    if (digits == 0) return std::nullopt;
    for (int d = digits; d < 3; ++d) millis *= 10;
  }
  int64_t offset_minutes = 0;
  if (i < t.size() && (t[i] == 'Z' || t[i] == 'z')) {
    ++i;
  } else if (i < t.size() && (t[i] == '+' || t[i] == '-')) {
    int64_t oh, om;
    if (!Digits(t, i + 1, 2, oh) || i + 3 >= t.size() || t[i + 3] != ':' || !Digits(t, i + 4, 2, om)) {
      return std::nullopt;
    }
    offset_minutes = (t[i] == '+' ? 1 : -1) * (oh * 60 + om);
    i += 6;
  } else {
    return std::nullopt;
  }
  if (i != t.size()) return std::nullopt;
  const int64_t days = DaysFromCivil(year, month, day);
  const int64_t secs = ((days * 24 + hour) * 60 + minute) * 60 + second - offset_minutes * 60;
  return secs * 1000 + millis;
}

}  // namespace gpupool
