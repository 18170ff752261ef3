// Leader election on etcd (issue 17, HA-2): servers sharing a prefix
// campaign for PREFIX/leader with a lease; the one that creates the key
// leads until its lease ends. The key's value is the leader's URL, for
// refusals and redirects.
//
// Campaign: a lease of ttl_seconds is granted; then, until the key is
// created (a transaction "create only if absent"), the campaigner keeps its
// lease alive and looks again every poll interval. A killed leader is
// replaced once its lease has expired: after at most the TTL (plus one
// poll), as etcd counts it.
//
// Holding: a thread renews the lease every TTL/3. The right is lost (and
// never regained: a server that lost it starts again) when etcd answers
// that the lease is gone, or when no renewal has been acknowledged within
// the TTL measured from the last acknowledged request's start (the lease
// may have expired by then, as etcd counts). LostReason then says why and
// the on_lost callback runs once. The journal (etcd_journal.h) does not
// rely on this alone: every append compares the leader key's create
// revision, so a server that has not yet noticed (paused, slow clock)
// still cannot append.
//
// Thread-safety: Campaign on one thread; LostReason, CurrentLeader from any;
// Resign after Campaign returned, not concurrently with itself.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <functional>
#include <mutex>
#include <string>
#include <thread>

#include "src/base/status.h"
#include "src/server/etcd_client.h"
#include "src/server/etcd_journal.h"

namespace gpupool {

struct EtcdElectionOptions {
  std::string prefix;      // the journal's prefix: the key is PREFIX/leader
  std::string url;         // this server's URL, the key's value
  int64_t ttl_seconds = 3; // the lease; etcd refuses less than its minimum (about 2 s with its defaults)
  std::chrono::milliseconds poll{250};  // how often a campaigner looks at the key
};

inline constexpr int64_t kMaxLeaseTtlSeconds = 600;

class EtcdElection final : public EtcdWriteRight {
 public:
  // `client` is not owned and outlives the election.
  EtcdElection(EtcdClient& client, EtcdElectionOptions options);
  ~EtcdElection() override;  // stops the renewing thread (does not resign)
  EtcdElection(const EtcdElection&) = delete;
  EtcdElection& operator=(const EtcdElection&) = delete;

  // Blocks until this server leads (then the renewing thread runs), or
  // `should_stop` (asked every poll) returns true (kFailedPrecondition
  // "stopped"), or etcd cannot be reached for longer than the TTL (kIo).
  // `on_waiting` is told the current leader's URL whenever it changes.
  // `on_lost` (any thread, once) is told why the right was lost.
  Status Campaign(const std::function<bool()>& should_stop, const std::function<void(const std::string&)>& on_waiting,
                  std::function<void(const std::string&)> on_lost);
  // Gives the leadership up now (the lease is revoked: a campaigner takes
  // over within one poll). The right is lost afterwards.
  void Resign();
  // While leading: replaces the key's value with `url` (known only once the
  // server has bound its port), in a transaction fenced as appends are.
  Status Advertise(const std::string& url);

  // EtcdWriteRight.
  const std::string& fence_key() const override { return key_; }
  int64_t fence_create_revision() const override { return create_revision_; }
  std::string LostReason() const override;
  std::string CurrentLeader() override;

  int64_t lease() const { return lease_; }

 private:
  void RenewLoop();
  void SleepAboutOnePoll();
  void Lose(const std::string& why);

  EtcdClient& client_;
  const EtcdElectionOptions options_;
  const std::string key_;
  // Set by Campaign before the renewing thread starts; read-only afterwards.
  int64_t lease_ = 0;
  int64_t create_revision_ = 0;
  std::function<void(const std::string&)> on_lost_;

  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::string lost_;      // GUARDED_BY(mu_): empty while held
  bool leading_ = false;  // GUARDED_BY(mu_)
  bool stopping_ = false; // GUARDED_BY(mu_)
  std::thread renew_thread_;
};

}  // namespace gpupool
