#include "src/cli/progress.h"

#include <unistd.h>

#include <algorithm>
#include <cmath>

namespace gpupool {

std::string FormatProgress(double fraction, const std::string& text, int width) {
  const double f = std::isfinite(fraction) ? std::clamp(fraction, 0.0, 1.0) : 0.0;
  const int filled = static_cast<int>(f * width);
  char pct[16];
  std::snprintf(pct, sizeof pct, "%3d%%", static_cast<int>(f * 100));
  return "[" + std::string(filled, '#') + std::string(width - filled, '.') + "] " + pct + "  " + text;
}

ProgressLine::ProgressLine(std::FILE* out) : out_(out), enabled_(::isatty(::fileno(out)) == 1) {}

bool ProgressLine::Due() const {
  return enabled_ && std::chrono::steady_clock::now() - last_ >= std::chrono::milliseconds(200);
}

void ProgressLine::Update(double fraction, const std::string& text) {
  if (!Due()) return;
  last_ = std::chrono::steady_clock::now();
  // \r to the line's start, the text, then erase what a longer line left.
  std::fprintf(out_, "\r%s\033[K", FormatProgress(fraction, text).c_str());
  std::fflush(out_);
  drawn_ = true;
}

void ProgressLine::Clear() {
  if (!drawn_) return;
  std::fprintf(out_, "\r\033[K");
  std::fflush(out_);
  drawn_ = false;
}

}  // namespace gpupool
