#include "src/cli/serve_common.h"

#include <pthread.h>
#include <sys/resource.h>

#include <filesystem>
#include <fstream>

namespace gpupool {

Result<std::pair<std::string, int>> ParseListen(const std::string& listen) {
  const size_t colon = listen.rfind(':');
  int port = -1;
  if (colon != std::string::npos) {
    try {
      size_t used = 0;
      port = std::stoi(listen.substr(colon + 1), &used);
      if (used != listen.size() - colon - 1) port = -1;
    } catch (const std::exception&) {
    }
  }
  if (colon == std::string::npos || colon == 0 || port < 0 || port > 65535) {
    return InvalidArgument("--listen: expected HOST:PORT such as 127.0.0.1:7070 (port 0 picks a free port), got '" +
                           listen + "'");
  }
  return std::make_pair(listen.substr(0, colon), port);
}

sigset_t BlockStopSignals() {
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGINT);
  sigaddset(&signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);
  return signals;
}

int64_t RaiseOpenFileLimit() {
  rlimit r{};
  if (::getrlimit(RLIMIT_NOFILE, &r) != 0) return -1;
  if (r.rlim_cur < r.rlim_max) {
    rlimit raised = r;
    raised.rlim_cur = r.rlim_max;
    if (::setrlimit(RLIMIT_NOFILE, &raised) == 0) r = raised;
  }
  return r.rlim_cur == RLIM_INFINITY ? INT64_MAX : static_cast<int64_t>(r.rlim_cur);
}

Status WriteServerUrl(const std::string& data_dir, const std::string& url) {
  const std::string path = (std::filesystem::path(data_dir) / "server.url").string();
  {
    std::ofstream out(path + ".tmp");
    out << url << "\n";
    if (!out) return IoError(path + ".tmp: cannot write");
  }
  std::error_code ec;
  std::filesystem::rename(path + ".tmp", path, ec);
  if (ec) return IoError(path + ": cannot write (" + ec.message() + ")");
  return {};
}

}  // namespace gpupool
