// The SQLite journal (see journal.h).
//
// Schema (version 2):
//   events(seq INTEGER PRIMARY KEY, at_ms, type, body,  the canonical lines,
//          actor, request_id)                            and who asked (journal.h)
//   snapshots(kind, seq, created_ms, bytes)              newest two per kind
//   tokens(hash PRIMARY KEY, tenant, created_ms,
//          id, name, salt, role, expires_ms, revoked_ms)  (journal.h's TokenRecord)
//   meta(key PRIMARY KEY, value)                         schema_version
// Version 1 (before named tokens and the audit) lacked tokens' last six
// columns and events' last two: opening it adds them (empty, 0) and writes
// version 2, in one transaction.
// One connection writes (the writer thread), another reads under a mutex.
#include <fcntl.h>
#include <sqlite3.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <memory>
#include <mutex>

#include "src/server/journal.h"

namespace gpupool {
namespace {

class Statement {
 public:
  Statement(sqlite3* db, const char* sql) { rc_ = sqlite3_prepare_v2(db, sql, -1, &stmt_, nullptr); }
  ~Statement() { sqlite3_finalize(stmt_); }
  Statement(const Statement&) = delete;
  Statement& operator=(const Statement&) = delete;
  bool ok() const { return rc_ == SQLITE_OK; }
  sqlite3_stmt* get() { return stmt_; }

 private:
  sqlite3_stmt* stmt_ = nullptr;
  int rc_ = SQLITE_OK;
};

// An SQLite failure as an Error: a full disk (SQLITE_FULL) may pass, a
// damaged file (SQLITE_CORRUPT, SQLITE_NOTADB) needs an operator, anything
// else is an I/O error.
std::unexpected<Error> ErrorOf(int code, const std::string& message) {
  switch (code & 0xff) {
    case SQLITE_FULL:
      return ResourceExhausted("disk full: journal: " + message);
    case SQLITE_CORRUPT:
    case SQLITE_NOTADB:
      return DataLoss("journal: " + message);
    default:
      return IoError("journal: " + message);
  }
}

std::unexpected<Error> DbError(sqlite3* db, const std::string& what) {
  return ErrorOf(sqlite3_extended_errcode(db), what + ": " + sqlite3_errmsg(db) + " (" + sqlite3_db_filename(db, "main") + ")");
}

Status Exec(sqlite3* db, const char* sql) {
  char* msg = nullptr;
  if (sqlite3_exec(db, sql, nullptr, nullptr, &msg) != SQLITE_OK) {
    std::string m = msg ? msg : "unknown error";
    sqlite3_free(msg);
    return ErrorOf(sqlite3_extended_errcode(db), std::string(sql) + ": " + m + " (" + sqlite3_db_filename(db, "main") + ")");
  }
  return {};
}

// Schema version 1 -> 2: the columns of named tokens and of the audit, in one
// transaction with the new version number.
Status MigrateFromVersion1(sqlite3* db) {
  static constexpr const char* kSteps[] = {
      "BEGIN IMMEDIATE",
      "ALTER TABLE tokens ADD COLUMN id TEXT NOT NULL DEFAULT ''",
      "ALTER TABLE tokens ADD COLUMN name TEXT NOT NULL DEFAULT ''",
      "ALTER TABLE tokens ADD COLUMN salt TEXT NOT NULL DEFAULT ''",
      "ALTER TABLE tokens ADD COLUMN role TEXT NOT NULL DEFAULT ''",
      "ALTER TABLE tokens ADD COLUMN expires_ms INTEGER NOT NULL DEFAULT 0",
      "ALTER TABLE tokens ADD COLUMN revoked_ms INTEGER NOT NULL DEFAULT 0",
      "ALTER TABLE events ADD COLUMN actor TEXT NOT NULL DEFAULT ''",
      "ALTER TABLE events ADD COLUMN request_id TEXT NOT NULL DEFAULT ''",
      "UPDATE meta SET value = '2' WHERE key = 'schema_version'",
      "COMMIT",
  };
  for (const char* sql : kSteps) {
    if (auto ok = Exec(db, sql); !ok) {
      (void)Exec(db, "ROLLBACK");
      return std::unexpected(Error{ok.error().code, "migrating the schema from version 1 to 2: " + ok.error().message});
    }
  }
  return {};
}

Result<sqlite3*> Open(const std::string& path) {
  sqlite3* db = nullptr;
  const int rc = sqlite3_open_v2(path.c_str(), &db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX,
                                 nullptr);
  if (rc != SQLITE_OK) {
    std::string m = db ? sqlite3_errmsg(db) : sqlite3_errstr(rc);
    sqlite3_close(db);
    return ErrorOf(rc, "cannot open " + path + ": " + m);
  }
  sqlite3_busy_timeout(db, 5000);
  return db;
}

class SqliteJournal final : public Journal {
 public:
  SqliteJournal(sqlite3* writer, sqlite3* reader) : w_(writer), r_(reader) {}
  ~SqliteJournal() override {
    insert_event_.reset();
    sqlite3_close(w_);
    sqlite3_close(r_);
  }

  Status Commit(const JournalBatch& batch) override {
    if (batch.empty()) return {};
    if (auto ok = Exec(w_, "BEGIN IMMEDIATE"); !ok) return ok;
    auto body = WriteBatch(batch);
    if (!body) {
      Exec(w_, "ROLLBACK");
      return body;
    }
    auto committed = Exec(w_, "COMMIT");
    // A COMMIT that failed (e.g. SQLITE_FULL while the WAL grew) may leave
    // the transaction open: roll it back, so that the next batch starts
    // clean once space returns.
    if (!committed && !sqlite3_get_autocommit(w_)) Exec(w_, "ROLLBACK");
    return committed;
  }

  Status CheckIntegrity() override {
    std::lock_guard lock(read_mu_);
    Statement st(r_, "PRAGMA quick_check(8)");
    if (!st.ok()) return DbError(r_, "quick_check");
    std::string problems;
    int rc;
    while ((rc = sqlite3_step(st.get())) == SQLITE_ROW) {
      const std::string row = reinterpret_cast<const char*>(sqlite3_column_text(st.get(), 0));
      if (row == "ok") continue;
      problems += (problems.empty() ? "" : "; ") + row;
    }
    if (rc != SQLITE_DONE) return DbError(r_, "quick_check");
    if (!problems.empty()) {
      return DataLoss("journal: " + std::string(sqlite3_db_filename(r_, "main")) +
                      " fails SQLite's quick_check: " + problems);
    }
    return {};
  }

  Result<int64_t> LastSeq() override {
    std::lock_guard lock(read_mu_);
    Statement st(r_, "SELECT COALESCE(MAX(seq), 0) FROM events");
    if (!st.ok() || sqlite3_step(st.get()) != SQLITE_ROW) return DbError(r_, "reading the last seq");
    return sqlite3_column_int64(st.get(), 0);
  }

  Result<std::optional<SnapshotRecord>> LatestSnapshot(const std::string& kind) override {
    std::lock_guard lock(read_mu_);
    Statement st(r_, "SELECT seq, bytes FROM snapshots WHERE kind = ? ORDER BY seq DESC LIMIT 1");
    if (!st.ok()) return DbError(r_, "reading snapshots");
    sqlite3_bind_text(st.get(), 1, kind.data(), static_cast<int>(kind.size()), SQLITE_TRANSIENT);
    const int rc = sqlite3_step(st.get());
    if (rc == SQLITE_DONE) return std::optional<SnapshotRecord>();
    if (rc != SQLITE_ROW) return DbError(r_, "reading snapshots");
    SnapshotRecord s;
    s.kind = kind;
    s.seq = sqlite3_column_int64(st.get(), 0);
    const void* blob = sqlite3_column_blob(st.get(), 1);
    s.bytes.assign(static_cast<const char*>(blob), static_cast<size_t>(sqlite3_column_bytes(st.get(), 1)));
    return std::optional<SnapshotRecord>(std::move(s));
  }

  Status ReadEvents(int64_t after_seq, int64_t limit, const std::function<bool(const JournalEvent&)>& each) override {
    std::lock_guard lock(read_mu_);
    Statement st(r_, "SELECT seq, at_ms, type, body, actor, request_id FROM events WHERE seq > ? ORDER BY seq LIMIT ?");
    if (!st.ok()) return DbError(r_, "reading events");
    sqlite3_bind_int64(st.get(), 1, after_seq);
    sqlite3_bind_int64(st.get(), 2, limit < 0 ? INT64_MAX : limit);
    int rc;
    JournalEvent e;
    while ((rc = sqlite3_step(st.get())) == SQLITE_ROW) {
      e.seq = sqlite3_column_int64(st.get(), 0);
      e.at_ms = sqlite3_column_int64(st.get(), 1);
      e.type.assign(reinterpret_cast<const char*>(sqlite3_column_text(st.get(), 2)),
                    static_cast<size_t>(sqlite3_column_bytes(st.get(), 2)));
      e.json.assign(reinterpret_cast<const char*>(sqlite3_column_text(st.get(), 3)),
                    static_cast<size_t>(sqlite3_column_bytes(st.get(), 3)));
      e.actor.assign(reinterpret_cast<const char*>(sqlite3_column_text(st.get(), 4)),
                     static_cast<size_t>(sqlite3_column_bytes(st.get(), 4)));
      e.request_id.assign(reinterpret_cast<const char*>(sqlite3_column_text(st.get(), 5)),
                          static_cast<size_t>(sqlite3_column_bytes(st.get(), 5)));
      if (!each(e)) return {};
    }
    if (rc != SQLITE_DONE) return DbError(r_, "reading events");
    return {};
  }

  Result<std::optional<std::string>> Meta(const std::string& key) override {
    std::lock_guard lock(read_mu_);
    Statement st(r_, "SELECT value FROM meta WHERE key = ?");
    if (!st.ok()) return DbError(r_, "reading meta");
    sqlite3_bind_text(st.get(), 1, key.data(), static_cast<int>(key.size()), SQLITE_TRANSIENT);
    const int rc = sqlite3_step(st.get());
    if (rc == SQLITE_DONE) return std::optional<std::string>();
    if (rc != SQLITE_ROW) return DbError(r_, "reading meta");
    return std::optional<std::string>(reinterpret_cast<const char*>(sqlite3_column_text(st.get(), 0)));
  }

  Result<std::vector<TokenRecord>> Tokens() override {
    std::lock_guard lock(read_mu_);
    Statement st(r_, "SELECT hash, tenant, created_ms, id, name, salt, role, expires_ms, revoked_ms FROM tokens "
                     "ORDER BY created_ms, hash");
    if (!st.ok()) return DbError(r_, "reading tokens");
    std::vector<TokenRecord> out;
    int rc;
    const auto text = [&](int column) { return std::string(reinterpret_cast<const char*>(sqlite3_column_text(st.get(), column))); };
    while ((rc = sqlite3_step(st.get())) == SQLITE_ROW) {
      out.push_back(TokenRecord{.hash_hex = text(0),
                                .tenant = text(1),
                                .created_ms = sqlite3_column_int64(st.get(), 2),
                                .id = text(3),
                                .name = text(4),
                                .salt_hex = text(5),
                                .role = text(6),
                                .expires_ms = sqlite3_column_int64(st.get(), 7),
                                .revoked_ms = sqlite3_column_int64(st.get(), 8)});
    }
    if (rc != SQLITE_DONE) return DbError(r_, "reading tokens");
    return out;
  }

 private:
  // One batch inside the caller's transaction: each kind of record in turn.
  Status WriteBatch(const JournalBatch& batch) {
    GP_TRY(WriteEvents(batch.events));
    GP_TRY(WriteTokens(batch.tokens));
    GP_TRY(WriteRevocations(batch.revocations));
    for (const auto& [key, value] : batch.meta) GP_TRY(WriteMeta(key, value));
    for (const SnapshotRecord& s : batch.snapshots) GP_TRY(WriteSnapshot(s));
    return {};
  }

  Status WriteEvents(const std::vector<JournalEvent>& events) {
    if (events.empty()) return {};
    if (!insert_event_) {
      insert_event_ = std::make_unique<Statement>(
          w_, "INSERT INTO events(seq, at_ms, type, body, actor, request_id) VALUES (?, ?, ?, ?, ?, ?)");
    }
    Statement& st = *insert_event_;
    if (!st.ok()) return DbError(w_, "preparing the event insert");
    for (const JournalEvent& e : events) {
      sqlite3_bind_int64(st.get(), 1, e.seq);
      sqlite3_bind_int64(st.get(), 2, e.at_ms);
      BindText(st, 3, e.type);
      BindText(st, 4, e.json);
      BindText(st, 5, e.actor);
      BindText(st, 6, e.request_id);
      const int rc = sqlite3_step(st.get());
      sqlite3_reset(st.get());
      if (rc != SQLITE_DONE) return DbError(w_, "writing event " + std::to_string(e.seq));
    }
    return {};
  }

  Status WriteTokens(const std::vector<TokenRecord>& tokens) {
    if (tokens.empty()) return {};
    Statement st(w_, "INSERT INTO tokens(hash, tenant, created_ms, id, name, salt, role, expires_ms, revoked_ms) "
                     "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)");
    if (!st.ok()) return DbError(w_, "preparing the token insert");
    for (const TokenRecord& t : tokens) {
      BindText(st, 1, t.hash_hex);
      BindText(st, 2, t.tenant);
      sqlite3_bind_int64(st.get(), 3, t.created_ms);
      BindText(st, 4, t.id);
      BindText(st, 5, t.name);
      BindText(st, 6, t.salt_hex);
      BindText(st, 7, t.role);
      sqlite3_bind_int64(st.get(), 8, t.expires_ms);
      sqlite3_bind_int64(st.get(), 9, t.revoked_ms);
      if (sqlite3_step(st.get()) != SQLITE_DONE) return DbError(w_, "writing a token of tenant " + t.tenant);
      sqlite3_reset(st.get());
    }
    return {};
  }

  Status WriteRevocations(const std::vector<TokenRevocation>& revocations) {
    if (revocations.empty()) return {};
    Statement st(w_, "UPDATE tokens SET revoked_ms = ? WHERE hash = ? AND revoked_ms = 0");
    if (!st.ok()) return DbError(w_, "preparing the token revocation");
    for (const TokenRevocation& r : revocations) {
      sqlite3_bind_int64(st.get(), 1, r.revoked_ms);
      BindText(st, 2, r.hash_hex);
      if (sqlite3_step(st.get()) != SQLITE_DONE) return DbError(w_, "revoking a token");
      sqlite3_reset(st.get());
    }
    return {};
  }

  Status WriteMeta(const std::string& key, const std::string& value) {
    Statement st(w_, "INSERT OR REPLACE INTO meta(key, value) VALUES (?, ?)");
    if (!st.ok()) return DbError(w_, "preparing the meta insert");
    BindText(st, 1, key);
    BindText(st, 2, value);
    if (sqlite3_step(st.get()) != SQLITE_DONE) return DbError(w_, "writing meta " + key);
    return {};
  }

  // The snapshot, then all but the newest two of its kind are pruned.
  Status WriteSnapshot(const SnapshotRecord& s) {
    {
      Statement st(w_, "INSERT OR REPLACE INTO snapshots(kind, seq, created_ms, bytes) VALUES (?, ?, ?, ?)");
      if (!st.ok()) return DbError(w_, "preparing the snapshot insert");
      BindText(st, 1, s.kind);
      sqlite3_bind_int64(st.get(), 2, s.seq);
      sqlite3_bind_int64(st.get(), 3, s.created_ms);
      sqlite3_bind_blob64(st.get(), 4, s.bytes.data(), s.bytes.size(), SQLITE_STATIC);
      if (sqlite3_step(st.get()) != SQLITE_DONE) return DbError(w_, "writing a snapshot");
    }
    Statement prune(w_,
                    "DELETE FROM snapshots WHERE kind = ?1 AND seq NOT IN "
                    "(SELECT seq FROM snapshots WHERE kind = ?1 ORDER BY seq DESC LIMIT 2)");
    if (!prune.ok()) return DbError(w_, "preparing the snapshot prune");
    BindText(prune, 1, s.kind);
    if (sqlite3_step(prune.get()) != SQLITE_DONE) return DbError(w_, "pruning snapshots");
    return {};
  }

  // Binds `v` to `column`; SQLITE_STATIC: `v` outlives the statement's step.
  static void BindText(Statement& st, int column, const std::string& v) {
    sqlite3_bind_text(st.get(), column, v.data(), static_cast<int>(v.size()), SQLITE_STATIC);
  }

  sqlite3* w_;  // the writer thread's (Commit) only
  std::unique_ptr<Statement> insert_event_;  // prepared once; the writer thread's only
  std::mutex read_mu_;
  sqlite3* r_;  // GUARDED_BY(read_mu_): the reading functions share one connection
};

}  // namespace

Result<std::unique_ptr<Journal>> OpenSqliteJournal(const std::string& dir) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) return IoError("journal: cannot create " + dir + ": " + ec.message());
  const std::string path = (std::filesystem::path(dir) / "gpupool.db").string();
  // Created here with 0600 (SQLite would create it 0644 less the umask);
  // its -wal and -shm take the database's mode.
  if (const int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600); fd >= 0) {
    ::close(fd);
  } else {
    const int err = errno;
    if (err == ENOSPC || err == EDQUOT) return ResourceExhausted("disk full: journal: cannot create " + path);
    return IoError("journal: cannot create " + path + ": " + std::strerror(err));
  }
  GP_ASSIGN_OR_RETURN(auto w, Open(path));
  sqlite3* writer = w;
  for (const char* sql : {"PRAGMA journal_mode=WAL", "PRAGMA synchronous=FULL",
                          "CREATE TABLE IF NOT EXISTS meta(key TEXT PRIMARY KEY, value TEXT NOT NULL)",
                          "CREATE TABLE IF NOT EXISTS events(seq INTEGER PRIMARY KEY, at_ms INTEGER NOT NULL, "
                          "type TEXT NOT NULL, body TEXT NOT NULL, actor TEXT NOT NULL DEFAULT '', "
                          "request_id TEXT NOT NULL DEFAULT '')",
                          "CREATE TABLE IF NOT EXISTS snapshots(kind TEXT NOT NULL, seq INTEGER NOT NULL, "
                          "created_ms INTEGER NOT NULL, bytes BLOB NOT NULL, PRIMARY KEY(kind, seq))",
                          "CREATE TABLE IF NOT EXISTS tokens(hash TEXT PRIMARY KEY, tenant TEXT NOT NULL, "
                          "created_ms INTEGER NOT NULL, id TEXT NOT NULL DEFAULT '', name TEXT NOT NULL DEFAULT '', "
                          "salt TEXT NOT NULL DEFAULT '', role TEXT NOT NULL DEFAULT '', "
                          "expires_ms INTEGER NOT NULL DEFAULT 0, revoked_ms INTEGER NOT NULL DEFAULT 0)",
                          "INSERT OR IGNORE INTO meta(key, value) VALUES ('schema_version', '2')"}) {
    if (auto ok = Exec(writer, sql); !ok) {
      sqlite3_close(writer);
      return std::unexpected(ok.error());
    }
  }
  {
    Statement st(writer, "SELECT value FROM meta WHERE key = 'schema_version'");
    if (!st.ok() || sqlite3_step(st.get()) != SQLITE_ROW) {
      sqlite3_close(writer);
      return IoError("journal: " + path + ": cannot read the schema version");
    }
    const std::string v = reinterpret_cast<const char*>(sqlite3_column_text(st.get(), 0));
    if (v != "1" && v != "2") {
      sqlite3_close(writer);
      return FailedPrecondition("journal: " + path + " has schema version " + v + "; this gpupool reads versions 1 and 2");
    }
    if (v == "1") {
      if (auto ok = MigrateFromVersion1(writer); !ok) {
        sqlite3_close(writer);
        return std::unexpected(Error{ok.error().code, "journal: " + path + ": " + ok.error().message});
      }
    }
  }
  auto r = Open(path);
  if (!r) {
    sqlite3_close(writer);
    return std::unexpected(r.error());
  }
  return std::unique_ptr<Journal>(new SqliteJournal(writer, *r));
}

}  // namespace gpupool
