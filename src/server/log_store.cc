#include "src/server/log_store.h"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>

namespace gpupool {

namespace fs = std::filesystem;

std::string LogStore::FileOf(JobId job, int32_t replica, int32_t attempt) const {
  return dir_ + "/" + std::to_string(job) + "/" + std::to_string(replica) + "." + std::to_string(attempt) + ".log";
}

Result<int64_t> LogStore::Append(const LogChunk& c) {
  std::lock_guard lock(mu_);
  const auto key = std::make_tuple(c.job, c.replica, c.attempt);
  const std::string file = FileOf(c.job, c.replica, c.attempt);
  auto it = sizes_.find(key);
  if (it == sizes_.end()) {
    std::error_code ec;
    const auto size = fs::file_size(file, ec);
    it = sizes_.emplace(key, ec ? 0 : static_cast<int64_t>(size)).first;
  }
  int64_t& held = it->second;
  const int64_t end = c.offset + static_cast<int64_t>(c.data.size());
  if (c.offset > held || end <= held) return held;  // a gap, or nothing new
  if (held >= max_bytes_per_task_) {
    held = end;  // counted, not stored
    return held;
  }
  const size_t skip = static_cast<size_t>(held - c.offset);
  const size_t room = static_cast<size_t>(max_bytes_per_task_ - held);  // stored up to the limit
  if (auto ok = env_.AppendFile(file, std::string_view(c.data).substr(skip, room)); !ok) {
    return std::unexpected(Error{ok.error().code, "logs: " + ok.error().message});
  }
  held = end;
  return held;
}

Result<std::vector<LogStore::Part>> LogStore::Read(JobId job, int64_t max_bytes) const {
  // No lock: only files are read (appends go on meanwhile; a read sees a
  // prefix of each file).
  std::vector<Part> parts;
  const fs::path dir = fs::path(dir_) / std::to_string(job);
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) return parts;
  for (const auto& entry : fs::directory_iterator(dir, ec)) {
    const std::string name = entry.path().filename().string();
    int replica = 0, attempt = 0;
    char tail[8] = {};
    if (std::sscanf(name.c_str(), "%d.%d.%3s", &replica, &attempt, tail) != 3 || std::string(tail) != "log") continue;
    Part p;
    p.replica = replica;
    p.attempt = attempt;
    std::ifstream in(entry.path(), std::ios::binary);
    if (!in) return IoError("logs: cannot read " + entry.path().string());
    in.seekg(0, std::ios::end);
    p.bytes = static_cast<int64_t>(in.tellg());
    const int64_t from = std::max<int64_t>(0, p.bytes - max_bytes);
    in.seekg(from);
    p.text.resize(static_cast<size_t>(p.bytes - from));
    in.read(p.text.data(), static_cast<std::streamsize>(p.text.size()));
    parts.push_back(std::move(p));
  }
  std::sort(parts.begin(), parts.end(), [](const Part& a, const Part& b) {
    return std::tie(a.attempt, a.replica) < std::tie(b.attempt, b.replica);
  });
  return parts;
}

}  // namespace gpupool
