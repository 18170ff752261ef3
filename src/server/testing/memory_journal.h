// A Journal (src/server/journal.h) held in memory, with the SQLite
// journal's semantics: a batch is all or nothing; an event's seq and a
// token's hash are unique (a batch repeating one is refused whole, as
// SQLite's primary keys refuse it); meta values are replaced; a snapshot
// replaces one of the same kind and seq, and only the newest two of each
// kind are kept; tokens are listed by creation time, then hash.
//
// It is the durable store of the test Env (test_env.h): what it holds
// survives the in-process "crashes" of the cores that use it.
//
// Thread-safety: safe for concurrent use. ReadEvents calls `each` without
// holding the journal's lock (on a copy of the events asked for).
#pragma once

#include <map>
#include <mutex>
#include <string>
#include <utility>

#include "src/server/journal.h"

namespace gpupool {

class MemoryJournal final : public Journal {
 public:
  Status Commit(const JournalBatch& batch) override;
  Result<int64_t> LastSeq() override;
  Result<std::optional<SnapshotRecord>> LatestSnapshot(const std::string& kind) override;
  Status ReadEvents(int64_t after_seq, int64_t limit, const std::function<bool(const JournalEvent&)>& each) override;
  Result<std::vector<TokenRecord>> Tokens() override;
  Result<std::optional<std::string>> Meta(const std::string& key) override;

 private:
  // Why `batch` cannot be committed (a repeated key), or "".
  std::string Conflict(const JournalBatch& batch) const;  // mu_ held

  std::mutex mu_;
  std::map<int64_t, JournalEvent> events_;                           // GUARDED_BY(mu_)
  std::map<std::pair<std::string, int64_t>, SnapshotRecord> snapshots_;  // GUARDED_BY(mu_); (kind, seq)
  std::map<std::string, TokenRecord> tokens_;                        // GUARDED_BY(mu_); by hash
  std::map<std::string, std::string> meta_;                          // GUARDED_BY(mu_)
};

}  // namespace gpupool
