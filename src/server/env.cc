#include "src/server/env.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <thread>

#include "src/base/time_text.h"

namespace gpupool {
namespace {

std::string Why() { return std::strerror(errno); }

Status SyncDirectory(const std::string& dir) {
  const int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return IoError(dir + ": cannot open (" + Why() + ")");
  const bool ok = ::fsync(fd) == 0;
  const std::string why = ok ? "" : Why();
  ::close(fd);
  if (!ok) return IoError(dir + ": cannot sync (" + why + ")");
  return {};
}

// Writes all of `data` to `fd`; false (errno set) when it cannot.
bool WriteAll(int fd, std::string_view data) {
  while (!data.empty()) {
    const ssize_t n = ::write(fd, data.data(), data.size());
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    data.remove_prefix(static_cast<size_t>(n));
  }
  return true;
}

class RealEnv final : public Env {
 public:
  Instant Now() override { return WallNow(); }
  SteadyTime SteadyNow() override { return std::chrono::steady_clock::now(); }

  void WaitUntil(std::condition_variable& cv, std::unique_lock<std::mutex>& lock, Instant deadline,
                 const std::function<bool()>& ready) override {
    const auto until = std::chrono::system_clock::time_point(std::chrono::milliseconds(ToMillis(deadline)));
    cv.wait_until(lock, until, ready);
  }

  Result<std::unique_ptr<Journal>> OpenJournal(const std::string& dir) override { return OpenSqliteJournal(dir); }

  CommandOutcome RunProgram(const std::vector<std::string>& argv, const Vars& vars, Duration timeout) override {
    return gpupool::RunProgram(argv, vars, timeout);
  }

  Status CreateDirectories(const std::string& dir) override {
    std::error_code ec;
    std::filesystem::create_directories(dir, ec);
    if (ec) return IoError(dir + ": cannot create (" + ec.message() + ")");
    return {};
  }

  Status WriteFileAtomic(const std::string& path, std::string_view contents, mode_t mode) override {
    const std::string tmp = path + ".tmp";
    const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, mode);
    if (fd < 0) return IoError(tmp + ": cannot create (" + Why() + ")");
    const bool ok = WriteAll(fd, contents) && ::fsync(fd) == 0;
    const std::string why = ok ? "" : Why();
    ::close(fd);
    if (!ok) return IoError(path + ": cannot write (" + why + ")");
    if (::rename(tmp.c_str(), path.c_str()) != 0) return IoError(path + ": cannot write (" + Why() + ")");
    return SyncDirectory(std::filesystem::path(path).parent_path().string());
  }

  Status AppendFile(const std::string& path, std::string_view data) override {
    GP_TRY(CreateDirectories(std::filesystem::path(path).parent_path().string()));
    const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0666);
    if (fd < 0) return IoError(path + ": cannot open (" + Why() + ")");
    const bool ok = WriteAll(fd, data);
    const std::string why = ok ? "" : Why();
    ::close(fd);
    if (!ok) return IoError(path + ": cannot write (" + why + ")");
    return {};
  }

  void Halt(int exit_code) override {
    // The callers were answered on this thread; their HTTP threads need a
    // moment to send the replies before the process ends.
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    std::fflush(nullptr);
    std::_Exit(exit_code);
  }
};

}  // namespace

Env* Env::Default() {
  static Env* const env = new RealEnv();  // never destroyed: threads may use it during exit
  return env;
}

}  // namespace gpupool
