#include "src/agent/action_log.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>

namespace gpupool {

ActionLog::ActionLog(std::string path, uint64_t max_bytes) : path_(std::move(path)), max_bytes_(max_bytes) {}

ActionLog::~ActionLog() {
  if (fd_ >= 0) ::close(fd_);
}

void ActionLog::OpenLocked() {
  if (fd_ >= 0) ::close(fd_);
  fd_ = ::open(path_.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  bytes_ = 0;
  dev_ = ino_ = 0;
  lines_unchecked_ = 0;
  struct stat st {};
  if (fd_ >= 0 && ::fstat(fd_, &st) == 0) {
    bytes_ = static_cast<uint64_t>(st.st_size);
    dev_ = st.st_dev;
    ino_ = st.st_ino;
  }
}

bool ActionLog::StillOursLocked() const {
  struct stat st {};
  return ::stat(path_.c_str(), &st) == 0 && st.st_dev == dev_ && st.st_ino == ino_;
}

void ActionLog::Append(std::string_view line) {
  std::string text(line);
  text += '\n';
  std::lock_guard lock(mu_);
  if (fd_ < 0 || ++lines_unchecked_ >= kRecheckLines) {
    if (fd_ < 0 || !StillOursLocked()) OpenLocked();
    lines_unchecked_ = 0;
  }
  if (fd_ >= 0 && bytes_ > max_bytes_) {
    std::rename(path_.c_str(), (path_ + ".1").c_str());  // keep two
    OpenLocked();
  }
  if (fd_ < 0) return;
  const ssize_t n = ::write(fd_, text.data(), text.size());
  if (n > 0) bytes_ += static_cast<uint64_t>(n);
}

}  // namespace gpupool
