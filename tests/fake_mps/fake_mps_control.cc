// A stand-in for nvidia-cuda-mps-control, the CUDA MPS control daemon and
// its command client, for the agent's MPS tests (src/agent/mps_daemons.h).
// Built as build/fake_mps/nvidia-cuda-mps-control (target fake_mps_control).
//
// Like the real one it reads CUDA_MPS_PIPE_DIRECTORY (default
// /tmp/nvidia-mps) and CUDA_MPS_LOG_DIRECTORY (default /var/log/nvidia-mps):
//
//  - `-d` starts the daemon in the background: the foreground process exits
//    0 at once; the daemon makes the control pipe PIPE/control (a FIFO it
//    reads commands from), then writes PIPE/nvidia-cuda-mps-control.pid (the
//    file the real daemon writes: once it is there, commands reach the
//    daemon), appends a startup line to LOG/control.log with its pid, uid,
//    gid and CUDA_VISIBLE_DEVICES, and lives until it receives `quit`. A
//    second `-d` for a pipe directory whose daemon runs fails.
//  - without arguments it is the client: each line of stdin is one command;
//    it is validated (the spellings of NVIDIA's documentation, arguments
//    checked), sent to the daemon through the control pipe, and appended as a
//    line to $FAKE_MPS_RECORD, or PIPE/commands.log when that is unset.
//    `get_server_list` prints the servers' pids one a line: the fake runs no
//    servers, so it prints nothing. `quit` waits (at most 5 s) for the daemon
//    to exit.
//
// Exit codes: 0 done; 1 a command it does not know or bad arguments (with a
// message; nothing after it is sent), or no daemon running; 2 a documented
// command or option the fake does not model.
#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <regex>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

namespace {

constexpr const char* kPidFile = "nvidia-cuda-mps-control.pid";

std::string Env(const char* name, const char* fallback) {
  const char* v = std::getenv(name);
  return v && *v ? v : fallback;
}
std::string PipeDir() { return Env("CUDA_MPS_PIPE_DIRECTORY", "/tmp/nvidia-mps"); }
std::string LogDir() { return Env("CUDA_MPS_LOG_DIRECTORY", "/var/log/nvidia-mps"); }

// Alive and not a zombie (whoever adopted the daemon may never reap it).
bool Alive(int pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
  std::string stat;
  std::getline(in, stat);
  const size_t close = stat.rfind(')');
  return close != std::string::npos && close + 2 < stat.size() && stat[close + 2] != 'Z';
}

int DaemonPid() {
  std::ifstream in(PipeDir() + "/" + kPidFile);
  int pid = 0;
  return in >> pid && pid > 0 && Alive(pid) ? pid : 0;
}

void AppendLine(const std::string& file, const std::string& line) {
  std::ofstream(file, std::ios::app) << line << "\n";
}

std::vector<std::string> Words(const std::string& line) {
  std::istringstream in(line);
  std::vector<std::string> w;
  for (std::string s; in >> s;) w.push_back(s);
  return w;
}

// "" when `line` is a command the fake accepts; else the message, and
// `code` 1 (unknown or bad arguments) or 2 (documented, not modeled).
std::string Validate(const std::vector<std::string>& w, int* code) {
  static const std::regex pct(R"(([0-9]{1,3})(\.[0-9]+)?)"), dev("[0-9]{1,2}"), mem("[0-9]{1,12}[KMGT]"),
      secs("[0-9]{1,6}");
  *code = 1;
  const std::string& c = w[0];
  const size_t n = w.size();
  if (c == "get_server_list") return n == 1 ? "" : "usage: get_server_list";
  if (c == "quit") {
    return n == 1 || (n == 3 && w[1] == "-t" && std::regex_match(w[2], secs)) ? "" : "usage: quit [-t TIMEOUT]";
  }
  if (c == "set_default_active_thread_percentage") {
    const bool ok = n == 2 && std::regex_match(w[1], pct) && std::atof(w[1].c_str()) > 0 &&
                    std::atof(w[1].c_str()) <= 100;
    return ok ? "" : "usage: set_default_active_thread_percentage PERCENTAGE (0 < PERCENTAGE <= 100)";
  }
  if (c == "set_default_device_pinned_mem_limit") {
    const bool ok = n == 3 && std::regex_match(w[1], dev) && std::regex_match(w[2], mem);
    return ok ? "" : "usage: set_default_device_pinned_mem_limit DEVICE VALUE (VALUE with a unit: K, M, G or T)";
  }
  for (const char* documented :
       {"get_server_status", "start_server", "get_client_list", "get_device_client_list", "shutdown_server",
        "get_default_active_thread_percentage", "set_active_thread_percentage", "get_active_thread_percentage",
        "get_default_device_pinned_mem_limit", "set_device_pinned_mem_limit", "get_device_pinned_mem_limit",
        "terminate_client", "ps", "set_default_client_priority", "get_default_client_priority"}) {
    if (c == documented) {
      *code = 2;
      return "fake nvidia-cuda-mps-control: " + c + " is not modeled";
    }
  }
  return "Unknown command: " + c;
}

// Sends one line through the control pipe; false when no daemon reads it.
bool Send(const std::string& line) {
  if (DaemonPid() == 0) return false;
  const int fd = ::open((PipeDir() + "/control").c_str(), O_WRONLY | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) return false;  // ENXIO: nobody reads the pipe
  const std::string text = line + "\n";
  const bool ok = ::write(fd, text.data(), text.size()) == static_cast<ssize_t>(text.size());
  ::close(fd);
  return ok;
}

int Client() {
  const std::string record = Env("FAKE_MPS_RECORD", (PipeDir() + "/commands.log").c_str());
  for (std::string line; std::getline(std::cin, line);) {
    const std::vector<std::string> w = Words(line);
    if (w.empty()) continue;
    int code = 0;
    if (const std::string bad = Validate(w, &code); !bad.empty()) {
      std::cout << bad << std::endl;
      return code;
    }
    const int pid = DaemonPid();
    std::string sent;
    for (const std::string& s : w) sent += (sent.empty() ? "" : " ") + s;
    if (!Send(sent)) {
      std::cout << "Cannot find MPS control daemon process" << std::endl;
      return 1;
    }
    AppendLine(record, sent);
    if (w[0] == "quit") {
      for (int i = 0; i < 500 && Alive(pid); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
  }
  return 0;
}

// The daemon's life: commands from the control pipe until `quit`.
// `in` is the control pipe opened read-write: no end of file between clients.
[[noreturn]] void Serve(std::FILE* in, const std::string& control, const std::string& log) {
  char buf[512];
  while (std::fgets(buf, sizeof buf, in)) {
    std::string line = buf;
    while (!line.empty() && (line.back() == '\n' || line.back() == '\r')) line.pop_back();
    AppendLine(log, "[fake] command: " + line);
    const std::vector<std::string> w = Words(line);
    if (!w.empty() && w[0] == "quit") break;
  }
  ::unlink((PipeDir() + "/" + kPidFile).c_str());
  ::unlink(control.c_str());
  AppendLine(log, "[fake] exit pid=" + std::to_string(::getpid()));
  std::_Exit(0);
}

int Daemon() {
  const std::string pipe = PipeDir(), logs = LogDir();
  if (DaemonPid() != 0) {
    std::cout << "An instance of this daemon is already running" << std::endl;
    return 1;
  }
  ::mkdir(pipe.c_str(), 0700);
  ::mkdir(logs.c_str(), 0700);
  const std::string control = pipe + "/control", log = logs + "/control.log";
  ::unlink(control.c_str());
  if (::mkfifo(control.c_str(), 0600) != 0) {
    std::perror(control.c_str());
    return 1;
  }
  const pid_t child = ::fork();
  if (child < 0) return 1;
  if (child > 0) return 0;  // the foreground part: done
  ::setsid();
  const int null = ::open("/dev/null", O_RDWR);
  for (int fd = 0; fd < 3; ++fd) ::dup2(null, fd);
  // Open the pipe before the pid file says the daemon is there.
  std::FILE* in = std::fopen(control.c_str(), "r+");
  if (!in) std::_Exit(1);
  AppendLine(log, "[fake] startup pid=" + std::to_string(::getpid()) + " uid=" + std::to_string(::getuid()) +
                      " gid=" + std::to_string(::getgid()) +
                      " CUDA_VISIBLE_DEVICES=" + Env("CUDA_VISIBLE_DEVICES", ""));
  const std::string pid_file = pipe + "/" + kPidFile;
  std::ofstream(pid_file + ".tmp") << ::getpid() << "\n";
  ::rename((pid_file + ".tmp").c_str(), pid_file.c_str());
  Serve(in, control, log);
}

}  // namespace

int main(int argc, char** argv) {
  const std::vector<std::string> args(argv + 1, argv + argc);
  if (args.empty()) return Client();
  if (args.size() == 1 && args[0] == "-d") return Daemon();
  if (args.size() == 1 && (args[0] == "-f" || args[0] == "-v" || args[0] == "-S")) {
    std::cout << "fake nvidia-cuda-mps-control: " << args[0] << " is not modeled" << std::endl;
    return 2;
  }
  std::cout << "usage: nvidia-cuda-mps-control [-d | -f]" << std::endl;
  return 1;
}
