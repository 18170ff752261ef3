// A consistent, read-only copy of the SQLite journal (see journal_copy.h).
#include "src/server/journal_copy.h"

#include <sqlite3.h>

#include <cstdio>
#include <filesystem>

#include "src/server/data_dir.h"

namespace gpupool {
namespace {

// A file: URI for `path`, with the characters URIs give a meaning escaped.
std::string FileUri(const std::string& path, bool immutable) {
  std::string uri = "file:";
  for (const char c : path) {
    if (c == '?' || c == '#' || c == '%') {
      char b[4];
      std::snprintf(b, sizeof b, "%%%02X", static_cast<unsigned char>(c));
      uri += b;
    } else {
      uri += c;
    }
  }
  return uri + (immutable ? "?mode=ro&immutable=1" : "?mode=ro");
}

std::unexpected<Error> CopyError(int code, const std::string& path, const std::string& what) {
  if ((code & 0xff) == SQLITE_NOTADB || (code & 0xff) == SQLITE_CORRUPT) {
    return DataLoss(path + ": " + what);
  }
  return IoError(path + ": " + what);
}

// One backup of `source_path` into `dest_path` in a single step (one read
// transaction on the source).
Status BackupOnce(const std::string& source_path, const std::string& dest_path, bool immutable) {
  sqlite3* src = nullptr;
  int rc = sqlite3_open_v2(FileUri(source_path, immutable).c_str(), &src,
                           SQLITE_OPEN_READONLY | SQLITE_OPEN_URI | SQLITE_OPEN_NOMUTEX, nullptr);
  if (rc != SQLITE_OK) {
    const std::string m = src ? sqlite3_errmsg(src) : sqlite3_errstr(rc);
    sqlite3_close(src);
    return CopyError(rc, source_path, "cannot open read-only: " + m);
  }
  sqlite3_busy_timeout(src, 5000);
  std::error_code ec;
  std::filesystem::remove(dest_path, ec);
  sqlite3* dst = nullptr;
  rc = sqlite3_open_v2(dest_path.c_str(), &dst, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX,
                       nullptr);
  if (rc != SQLITE_OK) {
    const std::string m = dst ? sqlite3_errmsg(dst) : sqlite3_errstr(rc);
    sqlite3_close(dst);
    sqlite3_close(src);
    return IoError(dest_path + ": cannot create the copy: " + m);
  }
  Status result;
  sqlite3_backup* b = sqlite3_backup_init(dst, "main", src, "main");
  if (b == nullptr) {
    result = IoError(dest_path + ": cannot start the copy: " + sqlite3_errmsg(dst));
  } else {
    rc = sqlite3_backup_step(b, -1);
    sqlite3_backup_finish(b);
    if (rc != SQLITE_DONE) {
      result = CopyError(sqlite3_extended_errcode(src) != SQLITE_OK ? sqlite3_extended_errcode(src) : rc, source_path,
                         std::string("cannot copy: ") + sqlite3_errstr(rc));
    }
  }
  sqlite3_close(dst);
  sqlite3_close(src);
  return result;
}

}  // namespace

Status CopySqliteJournal(const std::string& dir, const std::string& dest_path) {
  const std::filesystem::path db = std::filesystem::path(dir) / kDatabaseFile;
  const std::string path = db.string();
  std::error_code ec;
  if (!std::filesystem::is_regular_file(db, ec)) {
    return NotFound(path + ": no journal here (is " + dir + " a gpupool server's data directory?)");
  }
  const auto exists = [&](const char* suffix) { return std::filesystem::exists(path + suffix, ec); };
  // No server has the database open: read it as an immutable file, so that
  // SQLite creates no -wal or -shm beside it.
  if (!exists("-wal") && !exists("-shm")) {
    GP_TRY(BackupOnce(path, dest_path, /*immutable=*/true));
    if (!exists("-wal")) return {};
  }
  return BackupOnce(path, dest_path, /*immutable=*/false);
}

}  // namespace gpupool
