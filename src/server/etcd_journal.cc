// The etcd journal (see etcd_journal.h).
#include "src/server/etcd_journal.h"

#include <algorithm>
#include <cstdio>
#include <map>
#include <mutex>
#include <optional>
#include <random>

#include <nlohmann/json.hpp>

#include "src/server/auth.h"

namespace gpupool {
namespace {

using nlohmann::json;

std::string Padded(int64_t n, int width) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%0*lld", width, static_cast<long long>(n));
  return buf;
}

// nlohmann's dump throws on text that is not UTF-8: an error as a value.
Result<std::string> Dump(const json& j, const std::string& what) {
  try {
    return j.dump();
  } catch (const std::exception& e) {
    return InvalidArgument("etcd journal: " + what + ": " + e.what());
  }
}

Result<json> Parse(const std::string& text, const std::string& key) {
  json j = json::parse(text, nullptr, false);
  if (j.is_discarded()) return IoError("etcd journal: " + key + " is not JSON");
  return j;
}

// A token record: [hash, principal, created_ms] as earlier releases wrote
// it, or with [id, name, salt, role, expires_ms] after.
std::optional<TokenRecord> TokenFromJson(const json& t) {
  if (!t.is_array() || (t.size() != 3 && t.size() != 8)) return std::nullopt;
  if (!t[0].is_string() || !t[1].is_string() || !t[2].is_number_integer()) return std::nullopt;
  TokenRecord r{.hash_hex = t[0].get<std::string>(), .tenant = t[1].get<std::string>(), .created_ms = t[2].get<int64_t>()};
  if (t.size() == 3) return r;
  for (size_t i = 3; i < 7; ++i) {
    if (!t[i].is_string()) return std::nullopt;
  }
  if (!t[7].is_number_integer()) return std::nullopt;
  r.id = t[3].get<std::string>();
  r.name = t[4].get<std::string>();
  r.salt_hex = t[5].get<std::string>();
  r.role = t[6].get<std::string>();
  r.expires_ms = t[7].get<int64_t>();
  return r;
}

// A reference to a value stored as parts (PREFIX/chunks/<id>/...).
struct ChunkRef {
  std::string id;
  int64_t parts = 0;
  int64_t bytes = 0;
  json ToJson() const { return json{{"id", id}, {"n", parts}, {"bytes", bytes}}; }
  static Result<ChunkRef> FromJson(const json& j, const std::string& key) {
    if (!j.is_object() || !j.contains("id") || !j["id"].is_string() || !j.contains("n") ||
        !j["n"].is_number_integer() || !j.contains("bytes") || !j["bytes"].is_number_integer()) {
      return IoError("etcd journal: " + key + ": malformed chunk reference");
    }
    return ChunkRef{j["id"].get<std::string>(), j["n"].get<int64_t>(), j["bytes"].get<int64_t>()};
  }
};

class EtcdJournal final : public Journal {
 public:
  EtcdJournal(EtcdClient& client, EtcdJournalOptions options, std::string writer_id)
      : client_(client), options_(std::move(options)), writer_id_(std::move(writer_id)) {}

  Status Load() {
    const std::string base = options_.prefix + "/";
    EtcdRange format{base + "format"};
    GP_ASSIGN_OR_RETURN(auto f, client_.Range(format));
    if (!f.kvs.empty()) {
      if (f.kvs[0].value != kEtcdJournalFormat) {
        return FailedPrecondition("etcd " + options_.prefix + ": holds a journal of format '" + f.kvs[0].value +
                                  "'; this gpupool reads '" + kEtcdJournalFormat + "'");
      }
      format_written_ = true;
    } else {
      // No journal yet: the prefix must hold nothing but a leader key.
      EtcdRange all{base, PrefixEnd(base), /*limit=*/3, false, /*keys_only=*/true};
      GP_ASSIGN_OR_RETURN(auto keys, client_.Range(all));
      for (const EtcdKeyValue& kv : keys.kvs) {
        if (kv.key != base + "leader") {
          return FailedPrecondition("etcd " + options_.prefix + ": holds keys not written by gpupool (" + kv.key +
                                    ", no " + base + "format): is --etcd-prefix right?");
        }
      }
    }
    for (const char* kind : {"engine", "read-model"}) {
      const std::string p = base + "snapshots/" + kind + "/";
      EtcdRange r{p, PrefixEnd(p), 0, false, /*keys_only=*/true};
      GP_ASSIGN_OR_RETURN(auto keys, client_.Range(r));
      for (const EtcdKeyValue& kv : keys.kvs) snapshot_keys_[kind].push_back(kv.key);
    }
    return {};
  }

  Status Commit(const JournalBatch& batch) override {
    if (batch.empty()) return {};
    if (options_.right) {
      if (std::string lost = options_.right->LostReason(); !lost.empty()) return NotLeader(lost);
    }
    TxnPlan plan{options_.prefix + "/"};
    if (options_.right) {
      plan.compares.push_back(EtcdCompare{options_.right->fence_key(), EtcdCompare::Target::kCreateRevision,
                                          EtcdCompare::Result::kEqual, options_.right->fence_create_revision(), ""});
    }
    if (!format_written_) plan.ops.push_back(EtcdOp::Put(plan.base + "format", kEtcdJournalFormat));
    GP_TRY(PlanEvents(batch.events, plan));
    GP_TRY(PlanTokens(batch.tokens, plan));
    GP_TRY(PlanRevocations(batch.revocations, plan));
    GP_TRY(PlanMeta(batch.meta, plan));
    plan.kept = snapshot_keys_;
    GP_TRY(PlanSnapshots(batch.snapshots, plan));
    // The pruned headers are read in the same transaction (before their
    // deletion) to find their parts.
    std::vector<EtcdOp> success;
    for (const std::string& key : plan.pruned) success.push_back(EtcdOp::Get(key));
    const size_t reads = success.size();
    for (EtcdOp& op : plan.ops) success.push_back(std::move(op));
    GP_ASSIGN_OR_RETURN(EtcdTxnResult r, client_.Txn(plan.compares, success));
    if (!r.succeeded) return WhyRefused(plan.events_key);
    format_written_ = true;
    snapshot_keys_ = std::move(plan.kept);
    DeletePrunedChunks(plan, r, reads);
    return {};
  }

  Result<int64_t> LastSeq() override {
    const std::string p = options_.prefix + "/journal/";
    GP_ASSIGN_OR_RETURN(auto r, client_.Range(EtcdRange{p, PrefixEnd(p), 1, /*descending=*/true}));
    if (r.kvs.empty()) return int64_t{0};
    GP_ASSIGN_OR_RETURN(json h, Parse(r.kvs[0].value, r.kvs[0].key));
    if (!h.contains("last") || !h["last"].is_number_integer()) return IoError("etcd journal: " + r.kvs[0].key + " has no last seq");
    return h["last"].get<int64_t>();
  }

  Result<std::optional<SnapshotRecord>> LatestSnapshot(const std::string& kind) override {
    const std::string p = options_.prefix + "/snapshots/" + kind + "/";
    GP_ASSIGN_OR_RETURN(auto r, client_.Range(EtcdRange{p, PrefixEnd(p), 1, /*descending=*/true}));
    if (r.kvs.empty()) return std::optional<SnapshotRecord>();
    const std::string& key = r.kvs[0].key;
    GP_ASSIGN_OR_RETURN(json h, Parse(r.kvs[0].value, key));
    if (!h.contains("seq") || !h["seq"].is_number_integer() || !h.contains("chunks")) {
      return IoError("etcd journal: " + key + ": malformed snapshot header");
    }
    GP_ASSIGN_OR_RETURN(ChunkRef ref, ChunkRef::FromJson(h["chunks"], key));
    SnapshotRecord s;
    s.kind = kind;
    s.seq = h["seq"].get<int64_t>();
    s.created_ms = h.value("created_ms", int64_t{0});
    GP_ASSIGN_OR_RETURN(s.bytes, ReadChunks(ref, key));
    return std::optional<SnapshotRecord>(std::move(s));
  }

  Status ReadEvents(int64_t after_seq, int64_t limit, const std::function<bool(const JournalEvent&)>& each) override {
    const std::string p = options_.prefix + "/journal/";
    const std::string end = PrefixEnd(p);
    // The batch holding after_seq + 1 starts at or before it.
    std::string from = p + Padded(after_seq + 1, 20);
    {
      GP_ASSIGN_OR_RETURN(auto r, client_.Range(EtcdRange{p, from + '\0', 1, /*descending=*/true}));
      if (!r.kvs.empty()) from = r.kvs[0].key;
    }
    int64_t given = 0;
    constexpr int64_t kBatchesPerRead = 8;  // each up to ~0.5 MiB inline
    for (;;) {
      GP_ASSIGN_OR_RETURN(auto r, client_.Range(EtcdRange{from, end, kBatchesPerRead}));
      for (const EtcdKeyValue& kv : r.kvs) {
        GP_ASSIGN_OR_RETURN(json h, Parse(kv.value, kv.key));
        json events;
        if (h.contains("events")) {
          events = std::move(h["events"]);
        } else if (h.contains("chunks")) {
          GP_ASSIGN_OR_RETURN(ChunkRef ref, ChunkRef::FromJson(h["chunks"], kv.key));
          GP_ASSIGN_OR_RETURN(std::string text, ReadChunks(ref, kv.key));
          GP_ASSIGN_OR_RETURN(events, Parse(text, kv.key));
        }
        if (!events.is_array()) return IoError("etcd journal: " + kv.key + " has no events");
        JournalEvent e;
        for (const json& a : events) {
          // [seq, at_ms, type, line], then [actor, request_id] since the audit.
          if (!a.is_array() || (a.size() != 4 && a.size() != 6) || !a[0].is_number_integer() ||
              !a[1].is_number_integer() || !a[2].is_string() || !a[3].is_string() ||
              (a.size() == 6 && (!a[4].is_string() || !a[5].is_string()))) {
            return IoError("etcd journal: " + kv.key + ": malformed event");
          }
          e.seq = a[0].get<int64_t>();
          if (e.seq <= after_seq) continue;
          e.at_ms = a[1].get<int64_t>();
          e.type = a[2].get<std::string>();
          e.json = a[3].get<std::string>();
          e.actor = a.size() == 6 ? a[4].get<std::string>() : "";
          e.request_id = a.size() == 6 ? a[5].get<std::string>() : "";
          if (limit >= 0 && given >= limit) return {};
          ++given;
          if (!each(e)) return {};
        }
      }
      if (!r.more || r.kvs.empty()) return {};
      from = r.kvs.back().key + '\0';
    }
  }

  Result<std::vector<TokenRecord>> Tokens() override {
    const std::string p = options_.prefix + "/tokens/";
    GP_ASSIGN_OR_RETURN(auto r, client_.Range(EtcdRange{p, PrefixEnd(p)}));
    std::vector<TokenRecord> out;
    for (const EtcdKeyValue& kv : r.kvs) {
      GP_ASSIGN_OR_RETURN(json list, Parse(kv.value, kv.key));
      if (!list.is_array()) return IoError("etcd journal: " + kv.key + " is not a list");
      for (const json& t : list) {
        auto record = TokenFromJson(t);
        if (!record) return IoError("etcd journal: " + kv.key + ": malformed token");
        out.push_back(std::move(*record));
      }
    }
    GP_ASSIGN_OR_RETURN(auto revoked, Revocations());
    for (TokenRecord& t : out) {
      if (auto it = revoked.find(t.hash_hex); it != revoked.end()) t.revoked_ms = it->second;
    }
    std::sort(out.begin(), out.end(), [](const TokenRecord& a, const TokenRecord& b) {
      return std::tie(a.created_ms, a.hash_hex) < std::tie(b.created_ms, b.hash_hex);
    });
    return out;
  }

  // Every revocation: token hash -> the earliest time it was revoked.
  Result<std::map<std::string, int64_t>> Revocations() {
    const std::string p = options_.prefix + "/revocations/";
    GP_ASSIGN_OR_RETURN(auto r, client_.Range(EtcdRange{p, PrefixEnd(p)}));
    std::map<std::string, int64_t> out;
    for (const EtcdKeyValue& kv : r.kvs) {
      GP_ASSIGN_OR_RETURN(json list, Parse(kv.value, kv.key));
      if (!list.is_array()) return IoError("etcd journal: " + kv.key + " is not a list");
      for (const json& t : list) {
        if (!t.is_array() || t.size() != 2 || !t[0].is_string() || !t[1].is_number_integer()) {
          return IoError("etcd journal: " + kv.key + ": malformed revocation");
        }
        const int64_t at = t[1].get<int64_t>();
        auto [it, fresh] = out.emplace(t[0].get<std::string>(), at);
        if (!fresh) it->second = std::min(it->second, at);
      }
    }
    return out;
  }

  Result<std::optional<std::string>> Meta(const std::string& key) override {
    const std::string k = options_.prefix + "/meta/" + key;
    GP_ASSIGN_OR_RETURN(auto r, client_.Range(EtcdRange{k}));
    if (r.kvs.empty()) return std::optional<std::string>();
    const std::string& v = r.kvs[0].value;
    if (!v.empty() && v[0] == 'i') return std::optional<std::string>(v.substr(1));
    if (!v.empty() && v[0] == 'c') {
      GP_ASSIGN_OR_RETURN(json j, Parse(v.substr(1), k));
      GP_ASSIGN_OR_RETURN(ChunkRef ref, ChunkRef::FromJson(j, k));
      GP_ASSIGN_OR_RETURN(std::string whole, ReadChunks(ref, k));
      return std::optional<std::string>(std::move(whole));
    }
    return IoError("etcd journal: " + k + ": unknown value form");
  }

 private:
  // One batch's transaction as Commit builds it: its conditions, its
  // operations, the bytes written inline so far (the whole must stay under
  // kEtcdTxnInlineBytes), and the snapshot headers it keeps and prunes.
  struct TxnPlan {
    std::string base;  // options_.prefix + "/"
    std::vector<EtcdCompare> compares;
    std::vector<EtcdOp> ops;
    int64_t inline_bytes = 0;
    std::string events_key;  // "" when the batch has no events
    std::map<std::string, std::vector<std::string>> kept;
    std::vector<std::string> pruned;
  };

  // The events as one key, inline when small enough, else in chunks; the
  // key must not exist yet (a second writer's batch is refused).
  Status PlanEvents(const std::vector<JournalEvent>& batch_events, TxnPlan& plan) {
    if (batch_events.empty()) return {};
    const int64_t first = batch_events.front().seq, last = batch_events.back().seq;
    json events = json::array();
    for (const JournalEvent& e : batch_events) {
      json a = json::array({e.seq, e.at_ms, e.type, e.json});
      if (!e.actor.empty() || !e.request_id.empty()) {
        a.push_back(e.actor);
        a.push_back(e.request_id);
      }
      events.push_back(std::move(a));
    }
    GP_ASSIGN_OR_RETURN(std::string text, Dump(events, "events " + std::to_string(first) + ".." + std::to_string(last)));
    json header = {{"first", first}, {"last", last}};
    if (static_cast<int64_t>(text.size()) + plan.inline_bytes <= kEtcdTxnInlineBytes / 2) {
      header["events"] = std::move(events);
      plan.inline_bytes += static_cast<int64_t>(text.size());
    } else {
      GP_ASSIGN_OR_RETURN(ChunkRef ref, WriteChunks(text));
      header["chunks"] = ref.ToJson();
    }
    plan.events_key = plan.base + "journal/" + Padded(first, 20);
    plan.compares.push_back(
        EtcdCompare{plan.events_key, EtcdCompare::Target::kCreateRevision, EtcdCompare::Result::kEqual, 0, ""});
    GP_ASSIGN_OR_RETURN(std::string value, Dump(header, plan.events_key));
    plan.ops.push_back(EtcdOp::Put(plan.events_key, std::move(value)));
    return {};
  }

  Status PlanTokens(const std::vector<TokenRecord>& batch_tokens, TxnPlan& plan) {
    if (batch_tokens.empty()) return {};
    json tokens = json::array();
    for (const TokenRecord& t : batch_tokens) {
      tokens.push_back(json::array({t.hash_hex, t.tenant, t.created_ms, t.id, t.name, t.salt_hex, t.role, t.expires_ms}));
    }
    GP_ASSIGN_OR_RETURN(std::string value, Dump(tokens, "tokens"));
    plan.inline_bytes += static_cast<int64_t>(value.size());
    if (plan.inline_bytes > kEtcdTxnInlineBytes) {
      return InvalidArgument("etcd journal: " + std::to_string(batch_tokens.size()) + " tokens in one batch are over " +
                             std::to_string(kEtcdTxnInlineBytes) + " bytes");
    }
    plan.ops.push_back(EtcdOp::Put(plan.base + "tokens/" + batch_tokens.front().hash_hex, std::move(value)));
    return {};
  }

  Status PlanRevocations(const std::vector<TokenRevocation>& batch_revocations, TxnPlan& plan) {
    if (batch_revocations.empty()) return {};
    json revoked = json::array();
    for (const TokenRevocation& r : batch_revocations) revoked.push_back(json::array({r.hash_hex, r.revoked_ms}));
    GP_ASSIGN_OR_RETURN(std::string value, Dump(revoked, "revocations"));
    plan.inline_bytes += static_cast<int64_t>(value.size());
    if (plan.inline_bytes > kEtcdTxnInlineBytes) {
      return InvalidArgument("etcd journal: " + std::to_string(batch_revocations.size()) +
                             " token revocations in one batch are over " + std::to_string(kEtcdTxnInlineBytes) +
                             " bytes");
    }
    // Keyed by its content: a key written twice holds the same value.
    const std::string key = plan.base + "revocations/" + HashToken(value).substr(0, 32);
    plan.ops.push_back(EtcdOp::Put(key, std::move(value)));
    return {};
  }

  Status PlanMeta(const std::vector<std::pair<std::string, std::string>>& meta, TxnPlan& plan) {
    if (static_cast<int>(meta.size()) > kEtcdMaxMetaPerBatch) {
      return InvalidArgument("etcd journal: " + std::to_string(meta.size()) + " meta keys in one batch (at most " +
                             std::to_string(kEtcdMaxMetaPerBatch) + ")");
    }
    for (const auto& [key, value] : meta) {
      if (static_cast<int64_t>(value.size()) + plan.inline_bytes <= kEtcdTxnInlineBytes) {
        plan.inline_bytes += static_cast<int64_t>(value.size());
        plan.ops.push_back(EtcdOp::Put(plan.base + "meta/" + key, "i" + value));
      } else {
        GP_ASSIGN_OR_RETURN(ChunkRef ref, WriteChunks(value));
        plan.ops.push_back(EtcdOp::Put(plan.base + "meta/" + key, "c" + ref.ToJson().dump()));
      }
    }
    return {};
  }

  // Snapshots: parts first, then the header in the transaction; the oldest
  // beyond two per kind leave in the same transaction.
  Status PlanSnapshots(const std::vector<SnapshotRecord>& snapshots, TxnPlan& plan) {
    for (const SnapshotRecord& s : snapshots) {
      GP_ASSIGN_OR_RETURN(ChunkRef ref, WriteChunks(s.bytes));
      const std::string key = plan.base + "snapshots/" + s.kind + "/" + Padded(s.seq, 20);
      const json header = {{"seq", s.seq}, {"created_ms", s.created_ms}, {"bytes", ref.bytes}, {"chunks", ref.ToJson()}};
      plan.ops.push_back(EtcdOp::Put(key, header.dump()));
      std::vector<std::string>& keys = plan.kept[s.kind];
      if (std::find(keys.begin(), keys.end(), key) == keys.end()) keys.push_back(key);
      std::sort(keys.begin(), keys.end());
      while (keys.size() > 2) {
        plan.pruned.push_back(keys.front());
        plan.ops.push_back(EtcdOp::Delete(keys.front()));
        keys.erase(keys.begin());
      }
    }
    return {};
  }

  // The parts of the snapshots the committed transaction pruned (their
  // headers are its first `reads` answers).
  void DeletePrunedChunks(const TxnPlan& plan, const EtcdTxnResult& r, size_t reads) {
    for (size_t i = 0; i < reads && i < r.ranges.size(); ++i) {
      if (r.ranges[i].kvs.empty()) continue;
      auto header = Parse(r.ranges[i].kvs[0].value, plan.pruned[i]);
      if (!header || !header->contains("chunks")) continue;
      auto ref = ChunkRef::FromJson((*header)["chunks"], plan.pruned[i]);
      if (!ref) continue;
      const std::string p = plan.base + "chunks/" + ref->id + "/";
      (void)client_.DeleteRange(p, PrefixEnd(p));  // left behind on failure: never read again
    }
  }

  std::unexpected<Error> NotLeader(const std::string& why) {
    std::string leader = options_.right ? options_.right->CurrentLeader() : "";
    return FailedPrecondition(std::string(kNotLeaderPrefix) + " (" + why + ")" +
                              (leader.empty() ? "; no leader is known now" : "; the leader is " + leader));
  }

  // A transaction whose compares failed: the write right was lost, or the
  // batch's key exists (another writer got there first).
  std::unexpected<Error> WhyRefused(const std::string& events_key) {
    if (options_.right) {
      auto r = client_.Range(EtcdRange{options_.right->fence_key()});
      if (!r) return std::unexpected(r.error());
      if (r->kvs.empty() || r->kvs[0].create_revision != options_.right->fence_create_revision()) {
        return NotLeader("the leader key " + options_.right->fence_key() + " is no longer this server's");
      }
    }
    return FailedPrecondition("etcd journal: " + events_key + " already exists: another server wrote this batch");
  }

  // Writes `bytes` as parts under a fresh chunk id; they are read only
  // through a header that names the id.
  Result<ChunkRef> WriteChunks(const std::string& bytes) {
    if (static_cast<int64_t>(bytes.size()) > kEtcdMaxValueBytes) {
      return InvalidArgument("etcd journal: a value of " + std::to_string(bytes.size()) + " bytes is over " +
                             std::to_string(kEtcdMaxValueBytes));
    }
    ChunkRef ref{writer_id_ + "-" + std::to_string(++chunk_counter_), 0, static_cast<int64_t>(bytes.size())};
    const std::string p = options_.prefix + "/chunks/" + ref.id + "/";
    for (size_t off = 0; off < bytes.size() || ref.parts == 0; off += kEtcdChunkBytes) {
      GP_TRY(client_.Put(p + Padded(ref.parts, 6), bytes.substr(off, kEtcdChunkBytes)));
      ++ref.parts;
      if (bytes.empty()) break;
    }
    return ref;
  }

  Result<std::string> ReadChunks(const ChunkRef& ref, const std::string& owner) {
    const std::string p = options_.prefix + "/chunks/" + ref.id + "/";
    std::string out;
    out.reserve(static_cast<size_t>(std::clamp<int64_t>(ref.bytes, 0, kEtcdMaxValueBytes)));
    std::string from = p;
    int64_t parts = 0;
    for (;;) {
      GP_ASSIGN_OR_RETURN(auto r, client_.Range(EtcdRange{from, PrefixEnd(p), 1}));  // parts are ~1 MiB
      if (r.kvs.empty()) break;
      out += r.kvs[0].value;
      ++parts;
      from = r.kvs[0].key + '\0';
      if (!r.more) break;
    }
    if (parts != ref.parts || static_cast<int64_t>(out.size()) != ref.bytes) {
      return IoError("etcd journal: " + owner + ": its value's parts under " + p + " are incomplete (" +
                     std::to_string(parts) + " of " + std::to_string(ref.parts) + ", " + std::to_string(out.size()) +
                     " of " + std::to_string(ref.bytes) + " bytes)");
    }
    return out;
  }

  EtcdClient& client_;
  const EtcdJournalOptions options_;
  const std::string writer_id_;
  // The writer thread's (Commit; Load before it).
  bool format_written_ = false;
  int64_t chunk_counter_ = 0;
  std::map<std::string, std::vector<std::string>> snapshot_keys_;  // by kind, ascending
};

}  // namespace

Status CheckEtcdPrefix(const std::string& prefix) {
  if (prefix.size() < 2 || prefix[0] != '/' || prefix.back() == '/') {
    return InvalidArgument("--etcd-prefix: '" + prefix + "' must start with '/' and not end with '/' (e.g. /gpupool/prod)");
  }
  return {};
}

Result<std::unique_ptr<Journal>> OpenEtcdJournal(EtcdClient& client, const EtcdJournalOptions& options) {
  GP_TRY(CheckEtcdPrefix(options.prefix));
  if (auto v = client.Version(); !v) {
    return IoError("cannot reach etcd at " + client.Describe() + ": " + v.error().message);
  }
  // A chunk id no other writer uses: 64 random bits (not a decision path).
  std::random_device rd;
  const uint64_t bits = (uint64_t{rd()} << 32) ^ rd();
  char id[17];
  std::snprintf(id, sizeof id, "%016llx", static_cast<unsigned long long>(bits));
  auto journal = std::make_unique<EtcdJournal>(client, options, id);
  GP_TRY(journal->Load());
  return std::unique_ptr<Journal>(std::move(journal));
}

}  // namespace gpupool
