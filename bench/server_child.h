// A real `gpupool server` in a child process, and small helpers, for the
// load benchmarks (bench/server_load, bench/agent_load).
#pragma once

#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <string>
#include <thread>
#include <sstream>
#include <vector>

#include <httplib.h>

namespace gpupool::bench {

using Clock = std::chrono::steady_clock;

struct Server {
  std::string binary, dir, config;
  int port = 0;
  pid_t pid = -1;

  // The server's stderr, beside the data directory, not in it (the server
  // refuses a data directory that holds files but no database).
  std::string log() const { return dir + ".server.log"; }

  bool Start() {
    std::fflush(nullptr);  // the child's freopen would write what is buffered a second time
    pid = fork();
    if (pid == 0) {
      freopen(log().c_str(), "a", stderr);
      freopen("/dev/null", "w", stdout);
      setenv("GPUPOOL_LOG_REQUESTS", "0", 1);
      execl(binary.c_str(), binary.c_str(), "server", "--data", dir.c_str(), "--listen",
            ("127.0.0.1:" + std::to_string(port)).c_str(), "--config", config.c_str(), nullptr);
      _exit(127);
    }
    const auto deadline = Clock::now() + std::chrono::minutes(5);
    while (Clock::now() < deadline) {
      httplib::Client c("127.0.0.1", port);
      c.set_connection_timeout(0, 200000);
      if (auto r = c.Get("/healthz"); r && r->status == 200) return true;
      int status;
      if (waitpid(pid, &status, WNOHANG) == pid) return false;
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
    }
    return false;
  }
  void Kill() {
    kill(pid, SIGKILL);
    int status;
    waitpid(pid, &status, 0);
  }
  void Stop() {
    kill(pid, SIGTERM);
    int status;
    waitpid(pid, &status, 0);
  }
  long PeakRssKib() const {
    std::ifstream in("/proc/" + std::to_string(pid) + "/status");
    std::string line;
    while (std::getline(in, line)) {
      if (line.rfind("VmHWM:", 0) == 0) return std::stol(line.substr(6));
    }
    return -1;
  }
};

inline int FreePort() {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr);
  socklen_t len = sizeof addr;
  getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
  close(fd);
  return ntohs(addr.sin_port);
}

inline double Percentile(std::vector<double> v, double q) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[std::min(v.size() - 1, static_cast<size_t>(q * v.size()))];
}

inline std::string ReadLine(const std::string& path) {
  std::ifstream in(path);
  std::string s;
  std::getline(in, s);
  return s;
}

// Two adjacent clock-tick fields of /proc/PID/stat, `skip` fields after
// the command name's closing parenthesis, in seconds added together.
inline double StatSeconds(pid_t pid, int skip) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
  std::string line;
  std::getline(in, line);
  const size_t close = line.rfind(')');
  if (close == std::string::npos) return 0;
  std::istringstream fields(line.substr(close + 2));
  std::string word;
  for (int i = 0; i < skip; ++i) fields >> word;
  unsigned long long a = 0, b = 0;
  fields >> a >> b;
  return static_cast<double>(a + b) / static_cast<double>(sysconf(_SC_CLK_TCK));
}

// CPU seconds (user + system) the process has used so far.
inline double ProcessCpuSeconds(pid_t pid) { return StatSeconds(pid, 11); }  // after state .. cmajflt
// CPU seconds of its reaped children (cutime + cstime).
inline double ChildrenCpuSeconds(pid_t pid) { return StatSeconds(pid, 13); }  // after state .. stime

}  // namespace gpupool::bench
