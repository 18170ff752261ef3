#include "src/agent/proc_stat.h"

#include <sys/stat.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

namespace gpupool {

std::optional<ProcStat> ReadProcStat(int pid) {
  if (pid <= 0) return std::nullopt;
  std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
  std::string line;
  if (!in || !std::getline(in, line)) return std::nullopt;
  const size_t close = line.rfind(')');
  if (close == std::string::npos || close + 2 >= line.size()) return std::nullopt;
  std::istringstream fields(line.substr(close + 2));
  ProcStat s;
  long ppid = 0;
  if (!(fields >> s.state >> ppid >> s.pgrp)) return std::nullopt;
  std::string skip;
  for (int field = 6; field < 22; ++field) fields >> skip;
  if (!(fields >> s.start_time)) return std::nullopt;
  return s;
}

Status MakeDir(const std::string& dir, mode_t mode) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) return IoError(dir + ": " + ec.message());
  if (::chmod(dir.c_str(), mode) != 0) return IoError(dir + ": chmod: " + std::strerror(errno));
  return {};
}

}  // namespace gpupool
