#include "src/agent/executor.h"

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <map>

extern char** environ;

namespace gpupool {

Result<ChildProcess> ChildProcess::Spawn(const LaunchSpec& spec) {
  if (spec.argv.empty() || spec.argv[0].empty()) return InvalidArgument("task: empty command");
  const int log = ::open(spec.log_file.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0640);
  if (log < 0) return IoError("task log " + spec.log_file + ": " + std::strerror(errno));

  // The child's environment: the inherited names of the agent's, minus
  // `unset`, plus `env`.
  std::map<std::string, std::string> env;
  for (char** e = environ; e && *e; ++e) {
    const std::string kv = *e;
    const size_t eq = kv.find('=');
    if (eq == std::string::npos) continue;
    const std::string name = kv.substr(0, eq);
    bool keep = name.rfind("LC_", 0) == 0;
    for (const char* n : kInheritedEnv) keep = keep || name == n;
    if (keep) env[name] = kv.substr(eq + 1);
  }
  for (const std::string& name : spec.unset) env.erase(name);
  for (const auto& [k, v] : spec.env) env[k] = v;
  std::vector<std::string> env_strings;
  env_strings.reserve(env.size());
  for (const auto& [k, v] : env) env_strings.push_back(k + "=" + v);
  std::vector<char*> envp, argv;
  for (std::string& s : env_strings) envp.push_back(s.data());
  envp.push_back(nullptr);
  std::vector<std::string> args = spec.argv;
  for (std::string& s : args) argv.push_back(s.data());
  argv.push_back(nullptr);

  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_adddup2(&actions, log, 1);
  posix_spawn_file_actions_adddup2(&actions, log, 2);
  posix_spawn_file_actions_addclosefrom_np(&actions, 3);  // e.g. the dev server's sockets
  if (!spec.working_dir.empty()) posix_spawn_file_actions_addchdir_np(&actions, spec.working_dir.c_str());
  posix_spawnattr_t attr;
  posix_spawnattr_init(&attr);
  sigset_t none, all;
  sigemptyset(&none);
  sigfillset(&all);
  posix_spawnattr_setsigmask(&attr, &none);     // the agent's blocked signals are not the task's
  posix_spawnattr_setsigdefault(&attr, &all);  // nor its handlers
  posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSID | POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF);

  pid_t pid = -1;
  const int rc = ::posix_spawnp(&pid, argv[0], &actions, &attr, argv.data(), envp.data());
  posix_spawn_file_actions_destroy(&actions);
  posix_spawnattr_destroy(&attr);
  ::close(log);
  if (rc != 0) {
    return InvalidArgument("cannot start '" + spec.argv[0] + "'" +
                           (spec.working_dir.empty() ? "" : " in " + spec.working_dir) + ": " + std::strerror(rc));
  }
  ChildProcess p;
  p.pid_ = pid;
  return p;
}

std::optional<ExitStatus> ChildProcess::Poll() {
  if (reaped_) return std::nullopt;
  int status = 0;
  const pid_t r = ::waitpid(pid_, &status, WNOHANG);
  if (r == 0) return std::nullopt;
  reaped_ = true;
  ExitStatus s;
  if (r < 0) {
    s.exit_code = -1;  // not our child any more (should not happen)
  } else if (WIFEXITED(status)) {
    s.exit_code = WEXITSTATUS(status);
  } else if (WIFSIGNALED(status)) {
    s.signal = WTERMSIG(status);
  }
  return s;
}

void ChildProcess::Signal(int sig) const {
  if (pid_ > 0) ::kill(-pid_, sig);  // its whole process group (it leads its session)
}

}  // namespace gpupool

namespace gpupool {

void ChildProcess::SignalLeader(int sig) const {
  if (pid_ > 0 && !reaped_) ::kill(pid_, sig);
}

bool ChildProcess::GroupAlive() const {
  if (pid_ <= 0) return false;
  return ::kill(-pid_, 0) == 0 || errno == EPERM;
}

}  // namespace gpupool
