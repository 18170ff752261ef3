// A progress line for long commands (`gpupool sim ...`): drawn on stderr
// only when stderr is a terminal, redrawn at most every 200 ms, and erased
// when done, so that pipes, logs and CI see nothing of it.
#pragma once

#include <chrono>
#include <cstdio>
#include <string>

namespace gpupool {

// "[#######.............]  35%  TEXT", the bar `width` cells wide;
// `fraction` is clamped to [0, 1].
std::string FormatProgress(double fraction, const std::string& text, int width = 24);

class ProgressLine {
 public:
  // Enabled when `out` is a terminal (isatty), unless forced off.
  explicit ProgressLine(std::FILE* out = stderr);
  ProgressLine(std::FILE* out, bool enabled) : out_(out), enabled_(enabled) {}
  ~ProgressLine() { Clear(); }
  ProgressLine(const ProgressLine&) = delete;
  ProgressLine& operator=(const ProgressLine&) = delete;

  bool enabled() const { return enabled_; }
  // Whether a redraw is due (200 ms since the last one); cheap, for callers
  // that would otherwise build `text` on every call.
  bool Due() const;
  // Redraws the line when due.
  void Update(double fraction, const std::string& text);
  // Erases the line, if one was drawn.
  void Clear();

 private:
  std::FILE* out_;
  bool enabled_;
  bool drawn_ = false;
  std::chrono::steady_clock::time_point last_{};
};

}  // namespace gpupool
