#include "src/base/subprocess.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

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
  CommandOutcome o;
  o.timeout = timeout;
  // The child's environment: the caller's, with `env` set on top.
  std::map<std::string, std::string> vars;
  for (char** e = environ; e && *e; ++e) {
    const std::string kv = *e;
    const size_t eq = kv.find('=');
    if (eq != std::string::npos) vars[kv.substr(0, eq)] = kv.substr(eq + 1);
  }
  for (const auto& [k, v] : env) vars[k] = v;
  std::vector<std::string> env_strings;
  for (const auto& [k, v] : vars) env_strings.push_back(k + "=" + v);
  std::vector<char*> envp;
  for (std::string& s : env_strings) envp.push_back(s.data());
  envp.push_back(nullptr);
  if (program.empty() || program[0].empty()) {
    o.start_error = "empty command";
    return o;
  }
  std::vector<std::string> args = program;
  std::vector<char*> argv;
  for (std::string& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);

  int fds[2];
  if (::pipe2(fds, O_CLOEXEC) != 0) {
    o.start_error = std::string("pipe: ") + std::strerror(errno);
    return o;
  }
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_adddup2(&actions, fds[1], 1);
  posix_spawn_file_actions_adddup2(&actions, fds[1], 2);
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
  pid_t pid = -1;
  const int rc = ::posix_spawn(&pid, argv[0], &actions, &attr, argv.data(), envp.data());
  posix_spawn_file_actions_destroy(&actions);
  posix_spawnattr_destroy(&attr);
  ::close(fds[1]);
  if (rc != 0) {
    ::close(fds[0]);
    o.start_error = program[0] + ": " + std::string(std::strerror(rc));
    return o;
  }

  std::string out;
  auto read_some = [&]() -> bool {  // false at end of file (or error)
    char buf[4096];
    const ssize_t n = ::read(fds[0], buf, sizeof buf);
    if (n > 0) {
      out.append(buf, static_cast<size_t>(n));
      if (out.size() > 2 * kKeepOutputBytes) out.erase(0, out.size() - kKeepOutputBytes);
      return true;
    }
    return n < 0 && errno == EINTR;
  };
  const auto deadline = Clock::now() + timeout;
  bool open = true, ended = false;
  while (!ended) {
    if (open) {
      pollfd p{fds[0], POLLIN, 0};
      if (::poll(&p, 1, 50) > 0) open = read_some();
    } else {
      std::this_thread::sleep_for(std::chrono::milliseconds(20));  // output closed, process not yet gone
    }
    ended = Reaped(pid, o);
    if (!ended && Clock::now() >= deadline) {
      o.timed_out = true;
      ::kill(-pid, SIGTERM);
      const auto grace = Clock::now() + std::chrono::seconds(1);
      while (!(ended = Reaped(pid, o)) && Clock::now() < grace) {
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
      }
      if (!ended) {
        ::kill(-pid, SIGKILL);
        int status = 0;
        ::waitpid(pid, &status, 0);
        o.signal = SIGKILL;
        ended = true;
      }
    }
  }
  // What it wrote before it ended (a grandchild that keeps the pipe open
  // does not hold us up).
  if (open) {
    ::fcntl(fds[0], F_SETFL, O_NONBLOCK);
    char buf[4096];
    for (;;) {
      const ssize_t n = ::read(fds[0], buf, sizeof buf);
      if (n > 0) {
        out.append(buf, static_cast<size_t>(n));
      } else if (!(n < 0 && errno == EINTR)) {
        break;
      }
    }
  }
  ::close(fds[0]);
  o.output_tail = TailLines(out);
  o.ok = !o.timed_out && o.signal == 0 && o.exit_code == 0;
  return o;
}

}  // namespace gpupool
