// The durable record of the server: the Engine's events in order, periodic
// snapshots, and the tenant token hashes (DESIGN section 6).
//
// A batch is written atomically: its events, tokens and snapshots are all
// durable when Commit returns, or none is. The server acknowledges a
// command only after the batch holding its events is committed. Behind this
// interface so that a replicated store can replace the local one.
//
// Thread-safety: Commit is called by one writer thread; the read functions
// may be called from any thread concurrently with it.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "src/base/status.h"

namespace gpupool {

struct JournalEvent {
  int64_t seq = 0;
  int64_t at_ms = 0;
  std::string type;
  std::string json;  // the canonical event line (ToJsonLine)
  // The audit, beside the line (never in it: the line is the Engine's, the
  // same in a simulation): who asked for the command that caused the event
  // and the request's X-Request-Id; both empty for the server's own
  // decisions (ticks, timeouts) and in journals of earlier releases.
  std::string actor;
  std::string request_id;
};

struct TokenRecord {
  // SHA-256 of SALT ":" TOKEN (of the token alone when salt_hex is empty: a
  // token of an earlier release); the token itself is never stored.
  std::string hash_hex;
  std::string tenant;  // the principal: a tenant's name, "node/NAME", or "" (a pool-wide reader)
  int64_t created_ms = 0;
  // Since named tokens (all empty or 0 in earlier records):
  std::string id;        // public, part of the token's text (src/server/auth.h)
  std::string name;      // the operator's name for it
  std::string salt_hex;  // random, per token
  std::string role;      // "tenant", "reader" or "node"; "": by `tenant`
  int64_t expires_ms = 0;  // 0: never
  int64_t revoked_ms = 0;  // 0: valid; set from a TokenRevocation when read back
};

// Revokes the token stored under `hash_hex` from `revoked_ms` on.
struct TokenRevocation {
  std::string hash_hex;
  int64_t revoked_ms = 0;
};

struct SnapshotRecord {
  std::string kind;  // "engine" or "read-model"
  int64_t seq = 0;   // the state after every event up to this one
  std::string bytes;
  int64_t created_ms = 0;  // when it was taken (the Env's clock); informative
};

struct JournalBatch {
  std::vector<JournalEvent> events;  // consecutive seqs, continuing the journal
  std::vector<TokenRecord> tokens;
  std::vector<TokenRevocation> revocations;  // of tokens already committed
  std::vector<SnapshotRecord> snapshots;
  std::vector<std::pair<std::string, std::string>> meta;  // key, value (replaces)
  bool empty() const { return events.empty() && tokens.empty() && revocations.empty() && snapshots.empty() && meta.empty(); }
};

// A replicated journal's Commit fails with kFailedPrecondition and a
// message starting with this when this server may no longer append (it
// is not, or no longer, the leader); the message goes on to name the
// leader when known. The server answers the waiting callers 503 with it.
inline constexpr const char* kNotLeaderPrefix = "not the leader";

class Journal {
 public:
  virtual ~Journal() = default;

  // Writes the batch durably (fsync) in one transaction. Fails with
  // kResourceExhausted ("disk full: ...") when the store is out of space:
  // nothing of the batch is written, and a later Commit may succeed once
  // space returns. Any other failure leaves the journal unusable.
  virtual Status Commit(const JournalBatch& batch) = 0;
  // Checks the store's own structure (the SQLite journal: PRAGMA
  // quick_check); kDataLoss naming the file and what is wrong when it is
  // damaged. Called once at start-up, before anything is read; stores
  // without such a check succeed at once.
  virtual Status CheckIntegrity() { return {}; }
  // The last committed event's seq (0 when empty).
  virtual Result<int64_t> LastSeq() = 0;
  // The newest snapshot of `kind`, if any.
  virtual Result<std::optional<SnapshotRecord>> LatestSnapshot(const std::string& kind) = 0;
  // Calls `each` for the events with seq > after_seq, ascending, at most
  // `limit` of them (limit < 0: all); stops early when `each` returns false.
  virtual Status ReadEvents(int64_t after_seq, int64_t limit, const std::function<bool(const JournalEvent&)>& each) = 0;
  // Every token record, oldest first, with revoked_ms from the revocations.
  virtual Result<std::vector<TokenRecord>> Tokens() = 0;
  // A value written with a batch's meta, if any.
  virtual Result<std::optional<std::string>> Meta(const std::string& key) = 0;
};

// A journal in the SQLite database DIR/gpupool.db (WAL mode, synchronous
// FULL: a commit is on disk when it returns). Keeps the newest two
// snapshots of each kind. The database (and so its -wal and -shm, which
// SQLite creates with the database's mode) is created 0600. A file that is
// not a database, or whose pages do not read back, fails with kDataLoss
// naming it.
Result<std::unique_ptr<Journal>> OpenSqliteJournal(const std::string& dir);

}  // namespace gpupool
