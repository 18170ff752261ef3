// gpupool-shim: the per-container supervisor and the container init
// (EXEC-1..6; docs/agent.md, "Tenant isolation"). A small static program so
// that it runs in any image and costs little per container.
//
//   gpupool-shim supervise --runtime RUNC --root DIR --bundle DIR --id ID
//     Started by the agent in its own session, with stdout and stderr on the
//     task's log (the container inherits them). Becomes a child subreaper,
//     runs `RUNC create` then `RUNC start`, and then waits for the
//     container's init, which is re-parented to it. Files in the bundle:
//       started    "<init host pid>\n", once the container runs;
//       exit       "<exit code> <signal>\n", once the init has ended (also
//                  written, as "-1 0" with the reason in `error`, when the
//                  container could not be started);
//       error      runc's error message when create or start failed.
//     Each is written to a temporary name and renamed, so a reader sees a
//     whole file or none. The shim outlives the agent: an exit that happens
//     while the agent is down is kept in `exit`. It does not delete the
//     container; the agent does, after reading the exit.
//
//   gpupool-shim init -- ARGV...
//     The container's first process (bound at /gpupool/init): runs ARGV as
//     its child in a process group of its own, reaps every orphan, and
//     exits as the child did (a child killed by signal N gives 128 + N, as
//     in a shell). The task is therefore never pid 1 of its namespace and
//     keeps ordinary signal handling; when the init exits, the kernel kills
//     whatever the task left in the namespace.
#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

namespace {

constexpr size_t kMaxErrorBytes = 4096;

bool WriteFileAtomic(const std::string& path, const std::string& text) {
  const std::string tmp = path + ".tmp";
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return false;
  const bool ok = ::write(fd, text.data(), text.size()) == static_cast<ssize_t>(text.size());
  ::fsync(fd);
  ::close(fd);
  return ok && ::rename(tmp.c_str(), path.c_str()) == 0;
}

std::string ReadSmallFile(const std::string& path) {
  std::string out;
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return out;
  char buf[1024];
  for (ssize_t n; out.size() < kMaxErrorBytes && (n = ::read(fd, buf, sizeof buf)) > 0;) out.append(buf, n);
  ::close(fd);
  return out.substr(0, kMaxErrorBytes);
}

// Runs argv and waits for it; its stdout and stderr are ours. Returns its
// wait status, or -1 when it could not be started.
int RunAndWait(const std::vector<std::string>& argv) {
  std::vector<char*> args;
  for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  const pid_t pid = ::fork();
  if (pid < 0) return -1;
  if (pid == 0) {
    ::execv(args[0], args.data());
    ::_exit(127);
  }
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0) {
    if (errno != EINTR) return -1;
  }
  return status;
}

// runc logs JSON lines {"level":"error","msg":"..."}; the messages of the
// error lines, or the whole text when it is not that.
std::string RuncError(const std::string& log_file) {
  const std::string text = ReadSmallFile(log_file);
  std::string out;
  size_t at = 0;
  while ((at = text.find("\"msg\":\"", at)) != std::string::npos) {
    at += 7;
    std::string msg;
    for (; at < text.size() && text[at] != '"'; ++at) {
      if (text[at] == '\\' && at + 1 < text.size()) ++at;
      msg += text[at];
    }
    out += (out.empty() ? "" : "; ") + msg;
  }
  return out.empty() ? text : out;
}

struct SuperviseArgs {
  std::string runtime, root, bundle, id;
};

int Fail(const SuperviseArgs& a, const std::string& what) {
  std::string reason = RuncError(a.bundle + "/runc.log");
  if (reason.empty()) reason = what;
  WriteFileAtomic(a.bundle + "/error", reason + "\n");
  WriteFileAtomic(a.bundle + "/exit", "-1 0\n");
  return 1;
}

int Supervise(const SuperviseArgs& a) {
  ::prctl(PR_SET_CHILD_SUBREAPER, 1);
  ::signal(SIGPIPE, SIG_IGN);
  ::signal(SIGHUP, SIG_IGN);
  const std::string log = a.bundle + "/runc.log";
  const std::vector<std::string> base = {a.runtime, "--root", a.root, "--log", log, "--log-format", "json"};
  std::vector<std::string> create = base;
  for (const char* s : {"create", "--bundle"}) create.emplace_back(s);
  create.push_back(a.bundle);
  create.emplace_back("--pid-file");
  create.push_back(a.bundle + "/init.pid");
  create.push_back(a.id);
  int st = RunAndWait(create);
  if (st < 0 || !WIFEXITED(st) || WEXITSTATUS(st) != 0) return Fail(a, "runc create failed (status " + std::to_string(st) + ")");
  const pid_t init = static_cast<pid_t>(std::atol(ReadSmallFile(a.bundle + "/init.pid").c_str()));
  if (init <= 0) return Fail(a, "runc create wrote no init pid");
  std::vector<std::string> start = base;
  start.emplace_back("start");
  start.push_back(a.id);
  st = RunAndWait(start);
  if (st < 0 || !WIFEXITED(st) || WEXITSTATUS(st) != 0) {
    ::kill(init, SIGKILL);
    return Fail(a, "runc start failed (status " + std::to_string(st) + ")");
  }
  WriteFileAtomic(a.bundle + "/started", std::to_string(init) + "\n");
  // The init was re-parented to this subreaper when runc create exited.
  for (;;) {
    int status = 0;
    const pid_t r = ::waitpid(-1, &status, 0);
    if (r < 0 && errno == EINTR) continue;
    if (r < 0) {
      // Not our child after all (no subreaper support): watch it instead.
      while (::kill(init, 0) == 0) ::usleep(100 * 1000);
      WriteFileAtomic(a.bundle + "/exit", "-1 0\n");
      return 0;
    }
    if (r != init) continue;  // an orphan runc left
    const int code = WIFEXITED(status) ? WEXITSTATUS(status) : 0;
    const int sig = WIFSIGNALED(status) ? WTERMSIG(status) : 0;
    WriteFileAtomic(a.bundle + "/exit", std::to_string(code) + " " + std::to_string(sig) + "\n");
    return 0;
  }
}

volatile sig_atomic_t g_child = 0;

void Forward(int sig) {
  if (g_child > 0) ::kill(-g_child, sig);
}

int Init(char** argv) {
  // The task's signals from inside the container (e.g. `kill 1`) reach the
  // task's group; the agent signals the task directly from the host.
  for (int s : {SIGTERM, SIGINT, SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2}) ::signal(s, Forward);
  const pid_t child = ::fork();
  if (child < 0) {
    std::fprintf(stderr, "gpupool init: fork: %s\n", std::strerror(errno));
    return 126;
  }
  if (child == 0) {
    ::setpgid(0, 0);
    for (int s : {SIGTERM, SIGINT, SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2}) ::signal(s, SIG_DFL);
    ::execvp(argv[0], argv);
    std::fprintf(stderr, "gpupool init: cannot run '%s': %s\n", argv[0], std::strerror(errno));
    ::_exit(errno == ENOENT ? 127 : 126);
  }
  ::setpgid(child, child);
  g_child = child;
  for (;;) {
    int status = 0;
    const pid_t r = ::waitpid(-1, &status, 0);
    if (r < 0 && errno == EINTR) continue;
    if (r < 0) return 126;
    if (r != child) continue;  // an orphan of the task
    if (WIFEXITED(status)) return WEXITSTATUS(status);
    return 128 + WTERMSIG(status);
  }
}

int Usage() {
  std::fprintf(stderr,
               "usage: gpupool-shim supervise --runtime RUNC --root DIR --bundle DIR --id ID\n"
               "       gpupool-shim init -- ARGV...\n");
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc >= 4 && std::strcmp(argv[1], "init") == 0 && std::strcmp(argv[2], "--") == 0) return Init(argv + 3);
  if (argc < 2 || std::strcmp(argv[1], "supervise") != 0) return Usage();
  SuperviseArgs a;
  for (int i = 2; i + 1 < argc; i += 2) {
    const std::string flag = argv[i], value = argv[i + 1];
    if (flag == "--runtime") {
      a.runtime = value;
    } else if (flag == "--root") {
      a.root = value;
    } else if (flag == "--bundle") {
      a.bundle = value;
    } else if (flag == "--id") {
      a.id = value;
    } else {
      return Usage();
    }
  }
  if (a.runtime.empty() || a.root.empty() || a.bundle.empty() || a.id.empty()) return Usage();
  return Supervise(a);
}
