#include "src/base/subprocess.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <map>
#include <thread>

#include "src/base/time_text.h"

extern char** environ;

namespace gpupool {
namespace {

using Clock = std::chrono::steady_clock;

constexpr size_t kKeepOutputBytes = 16 * 1024;  // of the newest output, to find the last lines in
constexpr size_t kMaxTailChars = 1000;

// The last kOutputTailLines non-empty lines of `out`, joined with " | ".
std::string TailLines(const std::string& out) {
  std::vector<std::string> lines;
  size_t end = out.size();
  while (end > 0 && static_cast<int>(lines.size()) < kOutputTailLines) {
    const size_t nl = out.rfind('\n', end - 1);
    const size_t begin = nl == std::string::npos ? 0 : nl + 1;
    std::string line = out.substr(begin, end - begin);
    while (!line.empty() && (line.back() == '\r' || line.back() == ' ' || line.back() == '\t')) line.pop_back();
    if (!line.empty()) lines.push_back(std::move(line));
    if (nl == std::string::npos) break;
    end = nl;
  }
  std::string joined;
  for (auto it = lines.rbegin(); it != lines.rend(); ++it) joined += (joined.empty() ? "" : " | ") + *it;
  if (joined.size() > kMaxTailChars) joined = "..." + joined.substr(joined.size() - kMaxTailChars);
  return joined;
}

// Reaps `pid` if it has ended; fills `o` then.
bool Reaped(pid_t pid, CommandOutcome& o) {
  int status = 0;
  const pid_t r = ::waitpid(pid, &status, WNOHANG);
  if (r == 0) return false;
  if (r < 0) {
    o.exit_code = -1;  // not our child any more (cannot happen: nobody else waits for it)
  } else if (WIFEXITED(status)) {
    o.exit_code = WEXITSTATUS(status);
  } else if (WIFSIGNALED(status)) {
    o.signal = WTERMSIG(status);
  }
  return true;
}


// The child's environment: the caller's (unless not inherited) with `env`
// set on top.
std::vector<std::string> EnvStrings(const std::vector<std::pair<std::string, std::string>>& env, bool inherit) {
  std::map<std::string, std::string> vars;
  for (char** e = environ; inherit && e && *e; ++e) {
    const std::string kv = *e;
    const size_t eq = kv.find('=');
    if (eq != std::string::npos) vars[kv.substr(0, eq)] = kv.substr(eq + 1);
  }
  for (const auto& [k, v] : env) vars[k] = v;
  std::vector<std::string> out;
  for (const auto& [k, v] : vars) out.push_back(k + "=" + v);
  return out;
}

std::vector<char*> Pointers(std::vector<std::string>& strings) {
  std::vector<char*> out;
  for (std::string& s : strings) out.push_back(s.data());
  out.push_back(nullptr);
  return out;
}

// Starts the child with posix_spawn; 0 or an errno.
int SpawnChild(char* const* argv, char* const* envp, int in_fd, int out_fd, int err_fd, pid_t* pid) {
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  if (in_fd >= 0) {
    posix_spawn_file_actions_adddup2(&actions, in_fd, 0);
  } else {
    posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0);
  }
  posix_spawn_file_actions_adddup2(&actions, out_fd, 1);
  posix_spawn_file_actions_adddup2(&actions, err_fd, 2);
  posix_spawn_file_actions_addclosefrom_np(&actions, 3);  // the caller's sockets and files
  posix_spawnattr_t attr;
  posix_spawnattr_init(&attr);
  sigset_t none, all;
  sigemptyset(&none);
  sigfillset(&all);
  posix_spawnattr_setsigmask(&attr, &none);
  posix_spawnattr_setsigdefault(&attr, &all);
  // A session of its own: a timeout kills everything the command started.
  posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSID | POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF);
  const int rc = ::posix_spawn(pid, argv[0], &actions, &attr, argv, envp);
  posix_spawn_file_actions_destroy(&actions);
  posix_spawnattr_destroy(&attr);
  return rc;
}

// What the forked child reports when it cannot exec: the step and errno.
struct ChildFailure {
  int step = 0;  // 1 ids, 2 exec
  int error = 0;
};

// In the forked child: only async-signal-safe calls (the caller may have
// other threads); raw id syscalls change this thread, the only one here.
[[noreturn]] void ExecChild(char* const* argv, char* const* envp, int in_fd, int out_fd, int err_fd, int report,
                            const ProgramOptions& o) {
  struct sigaction dfl {};
  dfl.sa_handler = SIG_DFL;
  for (int sig = 1; sig < NSIG; ++sig) ::sigaction(sig, &dfl, nullptr);
  sigset_t none;
  sigemptyset(&none);
  ::sigprocmask(SIG_SETMASK, &none, nullptr);
  ::setsid();
  const int in = in_fd >= 0 ? in_fd : ::open("/dev/null", O_RDONLY);
  ::dup2(in, 0);
  ::dup2(out_fd, 1);
  ::dup2(err_fd, 2);
  ::close_range(3, static_cast<unsigned>(report) - 1, 0);  // keep only `report` (close-on-exec)
  ::close_range(static_cast<unsigned>(report) + 1, ~0U, 0);
  ChildFailure f;
  if ((o.gid >= 0 && (::syscall(SYS_setgroups, 0, nullptr) != 0 ||
                      ::syscall(SYS_setresgid, o.gid, o.gid, o.gid) != 0)) ||
      (o.uid >= 0 && ::syscall(SYS_setresuid, o.uid, o.uid, o.uid) != 0)) {
    f = {1, errno};
  } else {
    ::execve(argv[0], argv, envp);
    f = {2, errno};
  }
  (void)!::write(report, &f, sizeof f);
  ::_exit(127);
}

// Starts the child with fork, as o.uid/o.gid; "" or why it did not run.
std::string ForkChild(char* const* argv, char* const* envp, int in_fd, int out_fd, int err_fd,
                      const ProgramOptions& o, pid_t* pid) {
  int report[2];
  if (::pipe2(report, O_CLOEXEC) != 0) return std::string("pipe: ") + std::strerror(errno);
  *pid = ::fork();
  if (*pid == 0) ExecChild(argv, envp, in_fd, out_fd, err_fd, report[1], o);
  ::close(report[1]);
  if (*pid < 0) {
    ::close(report[0]);
    return std::string("fork: ") + std::strerror(errno);
  }
  ChildFailure f;
  ssize_t n = 0;
  while ((n = ::read(report[0], &f, sizeof f)) < 0 && errno == EINTR) {
  }
  ::close(report[0]);
  if (n != static_cast<ssize_t>(sizeof f)) return "";  // exec closed the pipe: it runs
  int status = 0;
  ::waitpid(*pid, &status, 0);
  if (f.step == 1) {
    return "cannot run as uid " + std::to_string(o.uid) + " gid " + std::to_string(o.gid) + ": " +
           std::strerror(f.error);
  }
  return std::string(argv[0]) + ": " + std::strerror(f.error);
}

// A pipe that holds `input` and then ends, for the child's stdin; -1 on
// failure (errno set).
int InputPipe(const std::string& input) {
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC) != 0) return -1;
  // Written before the child starts: it fits (kMaxProgramInput <= PIPE_BUF).
  if (::write(fds[1], input.data(), input.size()) != static_cast<ssize_t>(input.size())) {
    const int e = errno;
    ::close(fds[0]);
    ::close(fds[1]);
    errno = e;
    return -1;
  }
  ::close(fds[1]);
  return fds[0];
}

// One of the child's output pipes and the newest `keep` bytes of it (at
// most twice that while reading).
struct Stream {
  int fd = -1;
  size_t keep = kKeepOutputBytes;
  bool open = false;
  std::string text;

  void Append(const char* p, size_t n) {
    text.append(p, n);
    if (text.size() > 2 * keep) text.erase(0, text.size() - keep);
  }
  // Reads what is there; closes the stream at end of file (or an error).
  void ReadSome() {
    char buf[4096];
    const ssize_t n = ::read(fd, buf, sizeof buf);
    if (n > 0) {
      Append(buf, static_cast<size_t>(n));
    } else if (!(n < 0 && errno == EINTR)) {
      open = false;
    }
  }
  // What it wrote before it ended (a grandchild that keeps the pipe open
  // does not hold us up).
  void Drain() {
    ::fcntl(fd, F_SETFL, O_NONBLOCK);
    char buf[4096];
    for (;;) {
      const ssize_t n = ::read(fd, buf, sizeof buf);
      if (n > 0) {
        Append(buf, static_cast<size_t>(n));
      } else if (!(n < 0 && errno == EINTR)) {
        break;
      }
    }
  }
};

// Waits up to 50 ms for output on the open streams and reads it (20 ms of
// sleep when every stream is closed and the process is not yet gone).
void PollOnce(Stream (&streams)[2]) {
  pollfd fds[2];
  Stream* polled[2];
  nfds_t n = 0;
  for (Stream& s : streams) {
    if (!s.open) continue;
    fds[n] = pollfd{s.fd, POLLIN, 0};
    polled[n++] = &s;
  }
  if (n == 0) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    return;
  }
  if (::poll(fds, n, 50) <= 0) return;
  for (nfds_t i = 0; i < n; ++i) {
    if (fds[i].revents != 0) polled[i]->ReadSome();
  }
}

// At the timeout: SIGTERM to the group, SIGKILL a second later.
void KillGroup(pid_t pid, CommandOutcome& o) {
  o.timed_out = true;
  ::kill(-pid, SIGTERM);
  const auto grace = Clock::now() + std::chrono::seconds(1);
  bool reaped = false;
  while (!(reaped = Reaped(pid, o)) && Clock::now() < grace) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  if (reaped) return;
  ::kill(-pid, SIGKILL);
  int status = 0;
  ::waitpid(pid, &status, 0);
  o.signal = SIGKILL;
}

// The child's output pipes: one for stdout and stderr together, or with
// `apart` one for stderr ([0]) and one for stdout ([1]).
struct Pipes {
  int read[2] = {-1, -1};
  int write[2] = {-1, -1};

  // "" or why not (nothing left open then).
  std::string Open(bool apart) {
    for (int i = 0; i < (apart ? 2 : 1); ++i) {
      int fds[2];
      if (::pipe2(fds, O_CLOEXEC) != 0) {
        const std::string why = std::string("pipe: ") + std::strerror(errno);
        CloseWriteEnds();
        CloseReadEnds();
        return why;
      }
      read[i] = fds[0];
      write[i] = fds[1];
    }
    return "";
  }
  int stdout_fd() const { return write[1] >= 0 ? write[1] : write[0]; }
  void CloseWriteEnds() { Close(write); }
  void CloseReadEnds() { Close(read); }

 private:
  static void Close(int (&fds)[2]) {
    for (int& fd : fds) {
      if (fd >= 0) ::close(fd);
      fd = -1;
    }
  }
};

// Waits for `pid` (reading its output) at most o.timeout, then kills its
// group; fills the rest of `o`.
void Collect(pid_t pid, Stream (&streams)[2], CommandOutcome& o) {
  const auto deadline = Clock::now() + o.timeout;
  bool ended = false;
  while (!ended) {
    PollOnce(streams);
    ended = Reaped(pid, o);
    if (!ended && Clock::now() >= deadline) {
      KillGroup(pid, o);
      ended = true;
    }
  }
  for (Stream& s : streams) {
    if (s.open) s.Drain();
  }
  o.output_tail = TailLines(streams[0].text);
  std::string& out = streams[1].text;
  if (out.size() > kMaxProgramStdout) out.erase(0, out.size() - kMaxProgramStdout);
  o.stdout_text = std::move(out);
  o.ok = !o.timed_out && o.signal == 0 && o.exit_code == 0;
}
}  // namespace

std::string CommandOutcome::Describe() const {
  std::string s;
  if (!start_error.empty()) return "could not start: " + start_error;
  if (timed_out) {
    s = "timed out after " + FormatDuration(timeout);
  } else if (signal != 0) {
    s = "killed by signal " + std::to_string(signal);
  } else {
    s = "exited " + std::to_string(exit_code);
  }
  if (!output_tail.empty()) s += ": " + output_tail;
  return s;
}

CommandOutcome RunProgram(const std::vector<std::string>& program,
                          const std::vector<std::pair<std::string, std::string>>& env, Duration timeout) {
  return RunProgram(program, env, timeout, ProgramOptions{});
}

CommandOutcome RunProgram(const std::vector<std::string>& program,
                          const std::vector<std::pair<std::string, std::string>>& env, Duration timeout,
                          const ProgramOptions& options) {
  CommandOutcome o;
  o.timeout = timeout;
  if (program.empty() || program[0].empty()) {
    o.start_error = "empty command";
    return o;
  }
  if (options.input.size() > kMaxProgramInput) {
    o.start_error = "stdin input over " + std::to_string(kMaxProgramInput) + " bytes";
    return o;
  }
  std::vector<std::string> env_strings = EnvStrings(env, options.inherit_env);
  std::vector<std::string> args = program;
  const std::vector<char*> envp = Pointers(env_strings), argv = Pointers(args);
  const int in = options.input.empty() ? -1 : InputPipe(options.input);
  if (!options.input.empty() && in < 0) {
    o.start_error = std::string("stdin pipe: ") + std::strerror(errno);
    return o;
  }
  Pipes pipes;
  o.start_error = pipes.Open(options.keep_stdout);
  if (!o.start_error.empty()) {
    if (in >= 0) ::close(in);
    return o;
  }
  pid_t pid = -1;
  if (options.uid >= 0 || options.gid >= 0) {
    o.start_error = ForkChild(argv.data(), envp.data(), in, pipes.stdout_fd(), pipes.write[0], options, &pid);
  } else if (const int rc = SpawnChild(argv.data(), envp.data(), in, pipes.stdout_fd(), pipes.write[0], &pid);
             rc != 0) {
    o.start_error = program[0] + ": " + std::string(std::strerror(rc));
  }
  pipes.CloseWriteEnds();
  if (in >= 0) ::close(in);
  if (o.start_error.empty()) {
    Stream streams[2] = {{pipes.read[0], kKeepOutputBytes, true, {}},
                         {pipes.read[1], kMaxProgramStdout, pipes.read[1] >= 0, {}}};
    Collect(pid, streams, o);
  }
  pipes.CloseReadEnds();
  return o;
}

}  // namespace gpupool
