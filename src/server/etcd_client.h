// A client of etcd's v3 API through its JSON gateway (HTTP/1.1 POSTs to
// /v3/kv/range, /v3/kv/put, /v3/kv/deleterange, /v3/kv/txn, /v3/lease/*,
// /v3/maintenance/status; keys and values base64 on the wire), on
// cpp-httplib, the HTTP client the project already links, over plain HTTP
// or TLS (https:// endpoints: etcd's certificate is verified against
// `tls`'s CA, and `tls`'s client certificate is presented to an etcd run
// with --client-cert-auth; issue 22). Only the calls
// the replicated journal (etcd_journal.h) and the leader election
// (etcd_election.h) need.
//
// Endpoints: a list of client URLs of one etcd cluster. A request goes to
// the endpoint that answered last; when that one cannot be reached (no
// connection, or no answer within the request timeout) the next is tried,
// each at most once per request. An answer with an error from etcd itself
// (a failed compare is not an error: see Txn) is returned as is and not
// retried elsewhere: any member answers for the whole cluster.
//
// A request that timed out may still have been applied by etcd: callers
// that must know (the journal's appends) make their writes conditional
// (Txn compares) so that a retry cannot apply twice.
//
// Limits (etcd 3.4's defaults, which a cluster may lower but rarely raises):
// kEtcdMaxRequestBytes per request, kEtcdMaxTxnOps operations per
// transaction. Callers size their requests to fit; a request over the
// limit is refused here, before it is sent.
//
// Thread-safety: every function may be called from any thread; requests
// from several threads run concurrently, each on its own connection (a
// connection is reused by one request at a time, kept alive in between).
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "src/base/client_tls.h"
#include "src/base/status.h"

namespace httplib {
class Client;
}

namespace gpupool {

inline constexpr int64_t kEtcdMaxRequestBytes = 1536 * 1024;  // etcd's --max-request-bytes default, 1.5 MiB
inline constexpr int kEtcdMaxTxnOps = 128;                    // etcd's --max-txn-ops default
inline constexpr int kEtcdMaxEndpoints = 16;

struct EtcdKeyValue {
  std::string key, value;
  int64_t create_revision = 0;
  int64_t mod_revision = 0;
  int64_t version = 0;
  int64_t lease = 0;
};

struct EtcdRangeResult {
  std::vector<EtcdKeyValue> kvs;
  bool more = false;     // more keys matched than `limit`
  int64_t count = 0;     // how many keys matched in all
  int64_t revision = 0;  // the store's revision the answer was read at
};

// A range request: `key` alone, or [key, range_end) (use PrefixEnd for a
// prefix).
struct EtcdRange {
  std::string key;
  std::string range_end;  // empty: `key` alone
  int64_t limit = 0;      // 0: no limit
  bool descending = false;  // by key
  bool keys_only = false;
  bool count_only = false;
};

// One comparison of a transaction, on one key.
struct EtcdCompare {
  enum class Target { kCreateRevision, kModRevision, kVersion, kValue, kLease };
  enum class Result { kEqual, kNotEqual, kLess, kGreater };
  std::string key;
  Target target = Target::kCreateRevision;
  Result result = Result::kEqual;
  int64_t number = 0;  // revisions, version, lease id
  std::string value;   // kValue
};

// One operation of a transaction.
struct EtcdOp {
  enum class Kind { kPut, kDeleteRange, kRange };
  Kind kind = Kind::kPut;
  std::string key;
  std::string value;      // kPut
  int64_t lease = 0;      // kPut: 0 for none
  std::string range_end;  // kDeleteRange, kRange: empty for `key` alone
  static EtcdOp Put(std::string key, std::string value, int64_t lease = 0);
  static EtcdOp Delete(std::string key, std::string range_end = "");
  static EtcdOp Get(std::string key);
};

struct EtcdTxnResult {
  bool succeeded = false;  // every compare held: the success ops ran (else the failure ops)
  int64_t revision = 0;    // the store's revision after the transaction
  // The answers of kRange ops, in order of the ops that ran (others: empty).
  std::vector<EtcdRangeResult> ranges;
};

struct EtcdClientOptions {
  std::vector<std::string> endpoints;  // "http://HOST:PORT" or "https://HOST:PORT" (one scheme), at least one
  std::chrono::milliseconds connect_timeout{1000};
  std::chrono::milliseconds request_timeout{5000};
  ClientTls tls;  // for https:// endpoints (CheckClientTls it first)
};

// The end of the range of every key starting with `prefix` (etcd's
// "prefix + 1" rule: the last byte below 0xff incremented, those after it
// dropped; "\0" when there is no such byte, meaning every key).
std::string PrefixEnd(const std::string& prefix);
// Splits "URL[,URL...]" (the --etcd flag) into endpoints; each must be
// http://HOST:PORT or https://HOST:PORT (no path), all of one scheme.
Result<std::vector<std::string>> ParseEtcdEndpoints(const std::string& text);

class EtcdClient {
 public:
  explicit EtcdClient(EtcdClientOptions options);
  ~EtcdClient();
  EtcdClient(const EtcdClient&) = delete;
  EtcdClient& operator=(const EtcdClient&) = delete;

  const std::vector<std::string>& endpoints() const { return options_.endpoints; }
  std::string Describe() const;  // the endpoints, comma-separated

  // The answering member's etcd version ("3.4.23"): proves that the
  // cluster is reachable and speaks v3.
  Result<std::string> Version();
  Result<EtcdRangeResult> Range(const EtcdRange& r);
  // Returns the store's revision after the put.
  Result<int64_t> Put(const std::string& key, const std::string& value, int64_t lease = 0);
  // Deletes [key, range_end) (or `key` alone); returns how many were deleted.
  Result<int64_t> DeleteRange(const std::string& key, const std::string& range_end = "");
  // Atomically: when every compare holds, the success ops run, else the
  // failure ops. A failed compare is a value (succeeded = false), not an error.
  Result<EtcdTxnResult> Txn(const std::vector<EtcdCompare>& compares, const std::vector<EtcdOp>& success,
                            const std::vector<EtcdOp>& failure = {});
  // A lease of `ttl_seconds` (etcd may grant more, never less): its id.
  Result<int64_t> LeaseGrant(int64_t ttl_seconds);
  // Renews the lease once; returns its new TTL in seconds, 0 when the lease
  // has expired or was revoked (then it can never be renewed).
  Result<int64_t> LeaseKeepAlive(int64_t lease);
  Status LeaseRevoke(int64_t lease);

 private:
  struct Connection;
  // POSTs `body` to `path`; the parsed JSON answer of a 200, else an error
  // naming the endpoint and etcd's message.
  Result<std::string> Post(const std::string& path, const std::string& body);
  std::unique_ptr<Connection> Take(size_t endpoint);
  void Give(std::unique_ptr<Connection> c);

  EtcdClientOptions options_;
  std::mutex mu_;
  size_t current_ = 0;                             // GUARDED_BY(mu_): the endpoint that answered last
  std::vector<std::unique_ptr<Connection>> idle_;  // GUARDED_BY(mu_): kept-alive connections
};

}  // namespace gpupool
