#include "src/server/data_dir.h"

#include <openssl/rand.h>
#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "src/base/check.h"

namespace gpupool {

namespace fs = std::filesystem;

namespace {

bool IsDatabaseFile(const std::string& name) {
  const std::string db = kDatabaseFile;
  return name == db || name == db + "-wal" || name == db + "-shm" || name == db + "-journal" || name == "LOCK";
}

bool IsId(const std::string& s) {
  return s.size() == 32 && std::all_of(s.begin(), s.end(), [](char c) {
           return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f');
         });
}

// Takes group and other bits off one entry; true when it changed.
Result<bool> Tighten(const fs::path& p) {
  struct stat st {};
  if (::lstat(p.c_str(), &st) != 0) return IoError(p.string() + ": cannot stat (" + std::strerror(errno) + ")");
  if (S_ISLNK(st.st_mode) || (st.st_mode & 077) == 0) return false;
  if (!S_ISDIR(st.st_mode) && !S_ISREG(st.st_mode)) return false;
  if (::chmod(p.c_str(), st.st_mode & 0700) != 0) {
    return IoError(p.string() + ": cannot change its mode (" + std::strerror(errno) + ")");
  }
  return true;
}

}  // namespace

Result<std::vector<std::string>> FilesBesidesDatabase(const std::string& dir) {
  std::vector<std::string> names;
  std::error_code ec;
  if (!fs::exists(dir, ec)) return names;
  for (const auto& entry : fs::directory_iterator(dir, ec)) {
    const std::string name = entry.path().filename().string();
    if (!IsDatabaseFile(name)) names.push_back(name);
  }
  if (ec) return IoError(dir + ": cannot list (" + ec.message() + ")");
  std::sort(names.begin(), names.end());
  return names;
}

std::string NewDataDirId() {
  unsigned char bytes[16];
  GP_CHECK(RAND_bytes(bytes, sizeof bytes) == 1) << "RAND_bytes failed";
  static constexpr char kHex[] = "0123456789abcdef";
  std::string id;
  for (unsigned char b : bytes) {
    id.push_back(kHex[b >> 4]);
    id.push_back(kHex[b & 15]);
  }
  return id;
}

Result<std::optional<std::string>> ReadIdentityFile(const std::string& dir) {
  const fs::path path = fs::path(dir) / kIdentityFile;
  std::error_code ec;
  if (!fs::exists(path, ec)) return std::optional<std::string>();
  std::ifstream in(path);
  if (!in) return IoError(path.string() + ": cannot read");
  std::string id;
  std::getline(in, id);
  if (!IsId(id)) return DataLoss(path.string() + ": not a data directory identity (32 hex digits expected)");
  return std::optional<std::string>(id);
}

Status WriteIdentityFile(Env& env, const std::string& dir, const std::string& id) {
  return env.WriteFileAtomic((fs::path(dir) / kIdentityFile).string(), id + "\n", 0600);
}

Result<int64_t> TightenPermissions(const std::string& dir) {
  int64_t changed = 0;
  std::error_code ec;
  if (!fs::exists(dir, ec)) return changed;
  GP_ASSIGN_OR_RETURN(bool top, Tighten(dir));
  changed += top;
  for (const auto& entry : fs::directory_iterator(dir, ec)) {
    const std::string name = entry.path().filename().string();
    if (entry.is_symlink(ec)) continue;
    if (entry.is_regular_file(ec)) {
      GP_ASSIGN_OR_RETURN(bool c, Tighten(entry.path()));
      changed += c;
    } else if (entry.is_directory(ec) && (name == "logs" || name == "tokens")) {
      GP_ASSIGN_OR_RETURN(bool c, Tighten(entry.path()));
      changed += c;
      for (auto it = fs::recursive_directory_iterator(entry.path(), ec); it != fs::recursive_directory_iterator();
           it.increment(ec)) {
        if (ec) break;
        GP_ASSIGN_OR_RETURN(bool inner, Tighten(it->path()));
        changed += inner;
      }
    }
  }
  if (ec) return IoError(dir + ": cannot list (" + ec.message() + ")");
  return changed;
}

Result<int64_t> MoveLegacyLogs(const std::string& logs_dir, const std::string& id) {
  int64_t moved = 0;
  std::error_code ec;
  if (!fs::is_directory(logs_dir, ec)) return moved;
  std::vector<fs::path> jobs;
  for (const auto& entry : fs::directory_iterator(logs_dir, ec)) {
    const std::string name = entry.path().filename().string();
    if (entry.is_directory(ec) && !name.empty() && std::all_of(name.begin(), name.end(), ::isdigit)) {
      jobs.push_back(entry.path());
    }
  }
  if (jobs.empty()) return moved;
  const fs::path to = fs::path(logs_dir) / id;
  if (::mkdir(to.c_str(), 0700) != 0 && errno != EEXIST) {
    return IoError(to.string() + ": cannot create (" + std::strerror(errno) + ")");
  }
  for (const fs::path& job : jobs) {
    fs::rename(job, to / job.filename(), ec);
    if (ec) return IoError(job.string() + ": cannot move under " + to.string() + " (" + ec.message() + ")");
    ++moved;
  }
  return moved;
}

}  // namespace gpupool
