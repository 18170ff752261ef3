#include "src/server/testing/memory_journal.h"

#include <algorithm>
#include <set>
#include <tuple>
#include <vector>

namespace gpupool {

// The newest two snapshots of each kind are kept, as the SQLite journal does.
constexpr size_t kSnapshotsKept = 2;

std::string MemoryJournal::Conflict(const JournalBatch& batch) const {
  std::set<int64_t> seqs;
  for (const JournalEvent& e : batch.events) {
    if (events_.contains(e.seq) || !seqs.insert(e.seq).second) {
      return "journal: writing event " + std::to_string(e.seq) + ": UNIQUE constraint failed: events.seq";
    }
  }
  std::set<std::string> hashes;
  for (const TokenRecord& t : batch.tokens) {
    if (tokens_.contains(t.hash_hex) || !hashes.insert(t.hash_hex).second) {
      return "journal: writing a token of tenant " + t.tenant + ": UNIQUE constraint failed: tokens.hash";
    }
  }
  for (const TokenRevocation& r : batch.revocations) {
    if (!tokens_.contains(r.hash_hex) && !hashes.contains(r.hash_hex)) {
      return "journal: revoking a token: FOREIGN KEY constraint failed: no token " + r.hash_hex;
    }
  }
  return "";
}

Status MemoryJournal::Commit(const JournalBatch& batch) {
  if (batch.empty()) return {};
  std::lock_guard lock(mu_);
  if (std::string why = Conflict(batch); !why.empty()) return IoError(std::move(why));
  for (const JournalEvent& e : batch.events) events_[e.seq] = e;
  for (const TokenRecord& t : batch.tokens) tokens_[t.hash_hex] = t;
  for (const TokenRevocation& r : batch.revocations) {
    int64_t& at = tokens_[r.hash_hex].revoked_ms;
    if (at == 0) at = r.revoked_ms;
  }
  for (const auto& [key, value] : batch.meta) meta_[key] = value;
  for (const SnapshotRecord& s : batch.snapshots) {
    snapshots_[{s.kind, s.seq}] = s;
    std::vector<int64_t> seqs;  // of this kind, ascending
    for (const auto& [key, record] : snapshots_) {
      if (key.first == s.kind) seqs.push_back(key.second);
    }
    for (size_t i = 0; i + kSnapshotsKept < seqs.size(); ++i) snapshots_.erase({s.kind, seqs[i]});
  }
  return {};
}

Result<int64_t> MemoryJournal::LastSeq() {
  std::lock_guard lock(mu_);
  return events_.empty() ? 0 : events_.rbegin()->first;
}

Result<std::optional<SnapshotRecord>> MemoryJournal::LatestSnapshot(const std::string& kind) {
  std::lock_guard lock(mu_);
  std::optional<SnapshotRecord> newest;
  for (const auto& [key, record] : snapshots_) {
    if (key.first == kind) newest = record;  // ascending seq: the last one wins
  }
  return newest;
}

Status MemoryJournal::ReadEvents(int64_t after_seq, int64_t limit,
                                 const std::function<bool(const JournalEvent&)>& each) {
  std::vector<JournalEvent> found;
  {
    std::lock_guard lock(mu_);
    for (auto it = events_.upper_bound(after_seq);
         it != events_.end() && (limit < 0 || static_cast<int64_t>(found.size()) < limit); ++it) {
      found.push_back(it->second);
    }
  }
  for (const JournalEvent& e : found) {
    if (!each(e)) break;
  }
  return {};
}

Result<std::vector<TokenRecord>> MemoryJournal::Tokens() {
  std::lock_guard lock(mu_);
  std::vector<TokenRecord> out;
  for (const auto& [hash, t] : tokens_) out.push_back(t);
  std::sort(out.begin(), out.end(), [](const TokenRecord& a, const TokenRecord& b) {
    return std::tie(a.created_ms, a.hash_hex) < std::tie(b.created_ms, b.hash_hex);
  });
  return out;
}

Result<std::optional<std::string>> MemoryJournal::Meta(const std::string& key) {
  std::lock_guard lock(mu_);
  auto it = meta_.find(key);
  if (it == meta_.end()) return std::optional<std::string>();
  return std::optional<std::string>(it->second);
}

}  // namespace gpupool
