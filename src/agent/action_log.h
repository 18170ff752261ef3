// The agent's action log (WORK/agent.log): one JSON line per action, kept
// open between lines so that a busy node does not pay an open, a stat and
// a close for each of them (issue 18: a task start writes two or three).
//
// Rotation: past `max_bytes` the file becomes `<path>.1` (the previous .1 is
// replaced) and a new one is started. A file renamed or removed by someone
// else (logrotate) is noticed within `kRecheckLines` lines and reopened.
// A line is written with one write(2) on an O_APPEND descriptor, so readers
// (tests, the lifecycle benchmark) see whole lines.
//
// Thread-safety: Append may be called from any thread.
#pragma once

#include <cstdint>
#include <mutex>
#include <string>
#include <string_view>

namespace gpupool {

class ActionLog {
 public:
  static constexpr int kRecheckLines = 64;

  ActionLog(std::string path, uint64_t max_bytes);
  ~ActionLog();
  ActionLog(const ActionLog&) = delete;
  ActionLog& operator=(const ActionLog&) = delete;

  // Appends `line` and a newline. Failures are dropped: the log is for
  // people, and the agent must not stop over it (the next line retries).
  void Append(std::string_view line);

 private:
  void OpenLocked();
  bool StillOursLocked() const;

  const std::string path_;
  const uint64_t max_bytes_;
  std::mutex mu_;
  int fd_ = -1;             // guarded by mu_
  uint64_t bytes_ = 0;      // guarded by mu_: the file's size as this process has seen it
  uint64_t dev_ = 0, ino_ = 0;  // guarded by mu_: the open file's identity
  int lines_unchecked_ = 0;     // guarded by mu_
};

}  // namespace gpupool
