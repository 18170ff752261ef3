// The replicated journal (issue 17, HA-1): the Journal interface
// (journal.h) on an etcd cluster, through EtcdClient (etcd_client.h). A
// batch is committed when etcd has committed it (a quorum of members has it
// on disk), so the server acknowledges a command only then.
//
// Keys, all under PREFIX (--etcd-prefix, e.g. /gpupool/prod):
//   PREFIX/format                      "gpupool-journal 1", written with the first batch
//   PREFIX/leader                      the leader's URL, under its lease (etcd_election.h)
//   PREFIX/journal/<first seq, %020d>  one key per batch with events: JSON
//                                      {"first":F,"last":L,"events":[[seq,at_ms,type,line],...]}
//                                      (an event with an audit: [seq,at_ms,type,line,actor,request_id]),
//                                      or {"first","last","chunks":{"id","n","bytes"}} when large
//   PREFIX/tokens/<hash of the first>  a batch's token records: JSON
//                                      [[hash,principal,created_ms,id,name,salt,role,expires_ms],...]
//                                      (the first three only, before named tokens)
//   PREFIX/revocations/<content hash>  a batch's token revocations: JSON [[hash,revoked_ms],...]
//   PREFIX/meta/<key>                  'i' + the value, or 'c' + JSON {"id","n","bytes"} when large
//   PREFIX/snapshots/<kind>/<seq, %020d>  JSON {"seq","created_ms","bytes","chunks":{"id","n"}}
//   PREFIX/chunks/<id>/<part, %06d>    the parts of a large value, kEtcdChunkBytes each at most
//
// A batch is one etcd transaction (atomic): its events' key, tokens, revocations, meta
// and snapshot headers, each compared or put at once. Large values (an
// event batch over kEtcdTxnInlineBytes, every snapshot) are first written
// as parts under a chunk id no other write uses, and become visible only
// with the header the transaction puts; parts of a batch that never
// committed are never read (they are left behind: see "Not yet" in
// docs/server.md). Sizes: a transaction holds at most kEtcdTxnInlineBytes
// of inline values and a handful of operations (one per meta key, at most
// kEtcdMaxMetaPerBatch; two per snapshot), well under etcd's 1.5 MiB and
// 128-operation limits.
//
// Fencing (HA-2): with a write right (EtcdWriteRight, the leader election),
// every transaction also compares the leader key's create revision with
// the one this server's campaign created: once the lease behind it has
// expired (the key is gone, or another server's), no transaction of this
// server can succeed, whatever it was doing meanwhile (paused, partitioned,
// slow). Commit then fails with kNotLeaderPrefix. Every transaction also
// requires its events' key to be absent, so that no batch is written twice.
//
// The newest two snapshots of each kind are kept (as the SQLite journal
// does); older headers are deleted in the transaction that adds a new one,
// their parts just after.
//
// Thread-safety: as Journal (Commit from one writer thread; reads from any).
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "src/base/status.h"
#include "src/server/etcd_client.h"
#include "src/server/journal.h"

namespace gpupool {

inline constexpr int64_t kEtcdChunkBytes = 1024 * 1024;       // one part of a large value
inline constexpr int64_t kEtcdTxnInlineBytes = 1024 * 1024;   // inline values per transaction
inline constexpr int kEtcdMaxMetaPerBatch = 64;
inline constexpr int64_t kEtcdMaxValueBytes = int64_t{4} << 30;  // 4 GiB: a snapshot larger is refused
inline constexpr const char* kEtcdJournalFormat = "gpupool-journal 1";

// Who may append: the key every transaction compares and its create
// revision (the leader key as this server's campaign created it).
class EtcdWriteRight {
 public:
  virtual ~EtcdWriteRight() = default;
  virtual const std::string& fence_key() const = 0;
  virtual int64_t fence_create_revision() const = 0;
  // Empty while this server believes it holds the right; else why not (the
  // journal then refuses at once, without asking etcd). Any thread.
  virtual std::string LostReason() const = 0;
  // The current leader's URL as etcd has it now (empty when none), for
  // the refusal's message.
  virtual std::string CurrentLeader() = 0;
};

struct EtcdJournalOptions {
  std::string prefix;  // "/gpupool/CLUSTER": starts with '/', no trailing '/'
  // Not owned; outlives the journal. Null: no fencing (tests of the
  // journal alone; the server always has one).
  EtcdWriteRight* right = nullptr;
};

// Checks that `prefix` is a valid key prefix (see EtcdJournalOptions).
Status CheckEtcdPrefix(const std::string& prefix);

// Opens the journal under options.prefix: etcd must answer, and the prefix
// must be empty or hold this format's journal (a prefix with other keys,
// or another format, is refused with a message naming it). `client` is not
// owned and outlives the journal.
Result<std::unique_ptr<Journal>> OpenEtcdJournal(EtcdClient& client, const EtcdJournalOptions& options);

}  // namespace gpupool
