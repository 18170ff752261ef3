#include "src/server/env.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
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

bool OutOfSpace(int err) { return err == ENOSPC || err == EDQUOT; }

// A failed write of `path`: disk full (retry later) or another I/O error.
std::unexpected<Error> WriteError(const std::string& path, int err) {
  if (OutOfSpace(err)) return ResourceExhausted("disk full: " + path + ": " + std::strerror(err));
  return IoError(path + ": cannot write (" + std::strerror(err) + ")");
}

class FlockedFile final : public Env::DirectoryLock {
 public:
  explicit FlockedFile(int fd) : fd_(fd) {}
  ~FlockedFile() override { ::close(fd_); }  // releases the flock

 private:
  int fd_;
};

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

  Result<std::unique_ptr<DirectoryLock>> LockDataDirectory(const std::string& dir) override {
    const std::string path = (std::filesystem::path(dir) / "LOCK").string();
    const int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600);
    if (fd < 0) return IoError(path + ": cannot open (" + Why() + ")");
    if (::flock(fd, LOCK_EX | LOCK_NB) != 0) {
      const int err = errno;
      char held[32] = {};
      const ssize_t n = ::pread(fd, held, sizeof held - 1, 0);
      ::close(fd);
      std::string pid(held, n > 0 ? static_cast<size_t>(n) : 0);
      while (!pid.empty() && (pid.back() == '\n' || pid.back() == ' ')) pid.pop_back();
      if (err == EWOULDBLOCK) {
        return FailedPrecondition(path + " is held by another gpupool server" +
                                  (pid.empty() ? std::string() : " (pid " + pid + ")") +
                                  ": two servers cannot share a data directory");
      }
      return IoError(path + ": cannot lock (" + std::strerror(err) + ")");
    }
    // Best effort: the pid only helps the message of the next one refused.
    const std::string pid = std::to_string(::getpid()) + "\n";
    if (::ftruncate(fd, 0) != 0 || ::pwrite(fd, pid.data(), pid.size(), 0) < 0) {
      // The lock is what counts; a directory that takes no write shows soon enough.
    }
    return std::unique_ptr<DirectoryLock>(new FlockedFile(fd));
  }

  Status CreateDirectories(const std::string& dir) override {
    // mkdir -p with 0700 for each new level (std::filesystem's would be 0777 less umask).
    std::filesystem::path so_far;
    for (const auto& part : std::filesystem::path(dir)) {
      so_far /= part;
      if (part.empty() || part == "/" || part == "." || part == "..") continue;
      if (::mkdir(so_far.c_str(), 0700) == 0 || errno == EEXIST) continue;
      if (OutOfSpace(errno)) return WriteError(so_far.string(), errno);
      return IoError(so_far.string() + ": cannot create (" + Why() + ")");
    }
    std::error_code ec;
    if (!std::filesystem::is_directory(dir, ec)) return IoError(dir + ": cannot create (not a directory)");
    return {};
  }

  Status WriteFileAtomic(const std::string& path, std::string_view contents, mode_t mode) override {
    const std::string tmp = path + ".tmp";
    const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, mode);
    if (fd < 0) {
      if (OutOfSpace(errno)) return WriteError(tmp, errno);
      return IoError(tmp + ": cannot create (" + Why() + ")");
    }
    const bool ok = WriteAll(fd, contents) && ::fsync(fd) == 0;
    const int err = ok ? 0 : errno;
    ::close(fd);
    if (!ok) {
      ::unlink(tmp.c_str());  // a part written on a full disk only takes space
      return WriteError(path, err);
    }
    if (::rename(tmp.c_str(), path.c_str()) != 0) return WriteError(path, errno);
    return SyncDirectory(std::filesystem::path(path).parent_path().string());
  }

  Status AppendFile(const std::string& path, std::string_view data) override {
    GP_TRY(CreateDirectories(std::filesystem::path(path).parent_path().string()));
    const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
    if (fd < 0) {
      if (OutOfSpace(errno)) return WriteError(path, errno);
      return IoError(path + ": cannot open (" + Why() + ")");
    }
    struct stat before {};
    const bool sized = ::fstat(fd, &before) == 0;
    const bool ok = WriteAll(fd, data);
    const int err = ok ? 0 : errno;
    // A part appended before the disk filled is cut off again: the file
    // holds whole chunks only, as its reader (LogStore) counts them.
    if (!ok && sized && ::ftruncate(fd, before.st_size) != 0) {
    }
    ::close(fd);
    if (!ok) return WriteError(path, err);
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
