#include "src/agent/gpu_contention.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>

#include "src/agent/proc_stat.h"

namespace gpupool {

int BusyConsumers(const GpuLoad& load, const GpuContentionOptions& options) {
  int busy = 0;
  double tasks_sum = 0;
  for (double u : load.task_util_pct) {
    if (u < 0 || u >= options.busy_pct) ++busy;
    if (u > 0) tasks_sum += u;
  }
  if (load.foreign_process &&
      (load.device_util_pct < 0 || load.device_util_pct - tasks_sum >= options.foreign_busy_pct)) {
    ++busy;
  }
  return busy;
}

std::string ContentionLine(bool contended, int64_t until_unix_ms) {
  return std::string(contended ? "contended " : "uncontended ") + std::to_string(until_unix_ms) + "\n";
}

GpuContention::GpuContention(GpuContentionOptions options) : options_(std::move(options)) {}

std::string GpuContention::DirOf(int gpu) const { return options_.dir + "/gpu-" + std::to_string(gpu); }

std::string GpuContention::FileOf(int gpu) const { return DirOf(gpu) + "/" + kContentionFileName; }

bool GpuContention::contended(int gpu) const {
  auto it = gpus_.find(gpu);
  return it == gpus_.end() || it->second.contended;
}

Status GpuContention::Write(int gpu, bool contended, int64_t until_unix_ms) const {
  GP_TRY(MakeDir(DirOf(gpu), 0755));
  const std::string file = FileOf(gpu), tmp = file + ".tmp";
  const std::string line = ContentionLine(contended, until_unix_ms);
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0644);
  if (fd < 0) return IoError("contention file " + tmp + ": " + std::strerror(errno));
  const bool written = ::write(fd, line.data(), line.size()) == static_cast<ssize_t>(line.size());
  const int write_errno = errno;
  ::fchmod(fd, 0644);  // readable by the tasks' uids whatever the agent's umask
  ::close(fd);
  if (!written) {
    ::unlink(tmp.c_str());
    return IoError("contention file " + tmp + ": " + std::strerror(write_errno));
  }
  if (::rename(tmp.c_str(), file.c_str()) != 0) {
    const int rename_errno = errno;
    ::unlink(tmp.c_str());
    return IoError("contention file " + file + ": rename: " + std::strerror(rename_errno));
  }
  return {};
}

Status GpuContention::Update(const std::vector<GpuLoad>& loads, int64_t now_unix_ms, int64_t valid_ms) {
  if (valid_ms < 1 || valid_ms > kMaxContentionValidMs) {
    return InvalidArgument("contention valid_ms " + std::to_string(valid_ms) + " is outside [1, " +
                           std::to_string(kMaxContentionValidMs) + "]");
  }
  Status first = {};
  for (const GpuLoad& load : loads) {
    GpuState& s = gpus_[load.gpu];
    if (BusyConsumers(load, options_) >= 2) {
      s.contended = true;
      s.quiet_samples = 0;
    } else if (++s.quiet_samples >= options_.release_samples) {
      s.contended = false;
    }
    Status written = Write(load.gpu, s.contended, now_unix_ms + valid_ms);
    if (!written && first) first = written;
  }
  return first;
}

void GpuContention::Clear() {
  std::error_code ec;
  for (const auto& [gpu, state] : gpus_) std::filesystem::remove(FileOf(gpu), ec);
}

}  // namespace gpupool
