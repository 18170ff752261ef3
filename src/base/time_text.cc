#include "src/base/time_text.h"

#include <cctype>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <ctime>

namespace gpupool {
namespace {

constexpr double kMaxMs = 1e15;  // ~31,000 years: keeps int64 arithmetic safe

std::unexpected<Error> BadDuration(std::string_view text) {
  return InvalidArgument("expected a duration such as \"30s\", \"10m\", \"1h30m\" or \"2d\" (got \"" +
                         std::string(text.substr(0, 64)) + "\")");
}

int64_t DaysFromCivil(int64_t y, unsigned m, unsigned d) {  // days since 1970-01-01
  y -= m <= 2;
  const int64_t era = (y >= 0 ? y : y - 399) / 400;
  const unsigned yoe = static_cast<unsigned>(y - era * 400);
  const unsigned doy = (153 * (m + (m > 2 ? -3 : 9)) + 2) / 5 + d - 1;
  const unsigned doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
  return era * 146097 + static_cast<int64_t>(doe) - 719468;
}

}  // namespace

Result<Duration> ParseDurationText(std::string_view text) {
  if (text.empty()) return BadDuration(text);
  double total_ms = 0;
  size_t i = 0;
  while (i < text.size()) {
    const size_t start = i;
    while (i < text.size() && (std::isdigit(static_cast<unsigned char>(text[i])) || text[i] == '.')) ++i;
    if (i == start) return BadDuration(text);
    double value = 0;
    const auto [end, ec] = std::from_chars(text.data() + start, text.data() + i, value);
    if (ec != std::errc() || end != text.data() + i) return BadDuration(text);
    const size_t unit_start = i;
    while (i < text.size() && std::isalpha(static_cast<unsigned char>(text[i]))) ++i;
    const std::string_view unit = text.substr(unit_start, i - unit_start);
    double scale = 0;
    if (unit == "ms") scale = 1;
    else if (unit == "s") scale = 1e3;
    else if (unit == "m") scale = 60e3;
    else if (unit == "h") scale = 3600e3;
    else if (unit == "d") scale = 86400e3;
    else return BadDuration(text);
    total_ms += value * scale;
    if (!(total_ms <= kMaxMs)) return InvalidArgument("duration too long (at most ~31,000 years)");
  }
  return Duration(std::llround(total_ms));
}

std::string FormatDuration(Duration d) {
  int64_t ms = d.count();
  if (ms == 0) return "0s";
  std::string out;
  if (ms < 0) {
    out = "-";
    ms = -ms;
  }
  const int64_t days = ms / 86400000, hours = ms / 3600000 % 24, minutes = ms / 60000 % 60, seconds = ms / 1000 % 60,
                millis = ms % 1000;
  if (days) out += std::to_string(days) + "d";
  if (hours) out += std::to_string(hours) + "h";
  if (minutes) out += std::to_string(minutes) + "m";
  if (seconds) out += std::to_string(seconds) + "s";
  if (millis) out += std::to_string(millis) + "ms";
  return out;
}

Result<Instant> ParseRfc3339(std::string_view t) {
  auto bad = [&] {
    return InvalidArgument("expected an RFC 3339 time such as \"2026-11-29T12:00:00Z\" (got \"" +
                           std::string(t.substr(0, 64)) + "\")");
  };
  auto num = [&](size_t pos, size_t len, int& out) {
    if (pos + len > t.size()) return false;
    out = 0;
    for (size_t k = pos; k < pos + len; ++k) {
      if (!std::isdigit(static_cast<unsigned char>(t[k]))) return false;
      out = out * 10 + (t[k] - '0');
    }
    return true;
  };
  int y, mo, d, h, mi, s;
  if (t.size() < 20 || !num(0, 4, y) || t[4] != '-' || !num(5, 2, mo) || t[7] != '-' || !num(8, 2, d) ||
      (t[10] != 'T' && t[10] != 't' && t[10] != ' ') || !num(11, 2, h) || t[13] != ':' || !num(14, 2, mi) ||
      t[16] != ':' || !num(17, 2, s)) {
    return bad();
  }
  static constexpr int kDays[] = {31, 29, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
  if (mo < 1 || mo > 12 || d < 1 || d > kDays[mo - 1] || h > 23 || mi > 59 || s > 60) return bad();
  if (mo == 2 && d == 29 && !(y % 4 == 0 && (y % 100 != 0 || y % 400 == 0))) return bad();
  size_t i = 19;
  int64_t frac_ms = 0;
  if (i < t.size() && t[i] == '.') {
    ++i;
    int digits = 0;
    int64_t scale = 100;
    while (i < t.size() && std::isdigit(static_cast<unsigned char>(t[i]))) {
      if (digits < 3) frac_ms += (t[i] - '0') * scale;
      scale /= 10;
      ++digits;
      ++i;
    }
    if (digits == 0) return bad();
  }
  int64_t offset_min = 0;
  if (i < t.size() && (t[i] == 'Z' || t[i] == 'z')) {
    ++i;
  } else if (i < t.size() && (t[i] == '+' || t[i] == '-')) {
    int oh, om;
    if (!num(i + 1, 2, oh) || i + 3 >= t.size() || t[i + 3] != ':' || !num(i + 4, 2, om) || oh > 23 || om > 59) {
      return bad();
    }
    offset_min = (t[i] == '+' ? 1 : -1) * (oh * 60 + om);
    i += 6;
  } else {
    return bad();
  }
  if (i != t.size()) return bad();
  const int64_t days = DaysFromCivil(y, static_cast<unsigned>(mo), static_cast<unsigned>(d));
  const int64_t ms = ((days * 24 + h) * 60 + mi - offset_min) * 60000 + int64_t{std::min(s, 59)} * 1000 + frac_ms;
  return InstantFromMillis(ms);
}

std::string FormatRfc3339(Instant t) {
  const int64_t ms = ToMillis(t);
  int64_t secs = ms >= 0 ? ms / 1000 : (ms - 999) / 1000;
  const int64_t millis = ms - secs * 1000;
  const std::time_t tt = static_cast<std::time_t>(secs);
  std::tm tm{};
  gmtime_r(&tt, &tm);
  char buf[96];  // room for any int field values, so the text is never cut
  std::snprintf(buf, sizeof buf, "%04d-%02d-%02dT%02d:%02d:%02d.%03dZ", tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday,
                tm.tm_hour, tm.tm_min, tm.tm_sec, static_cast<int>(millis));
  return buf;
}

Instant WallNow() {
  return InstantFromMillis(std::chrono::duration_cast<std::chrono::milliseconds>(
                               std::chrono::system_clock::now().time_since_epoch())
                               .count());
}

}  // namespace gpupool
