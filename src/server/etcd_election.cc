#include "src/server/etcd_election.h"

#include <random>
#include <thread>

namespace gpupool {

// A campaigner's pause between looks at the leader key: the poll interval
// give or take a quarter, so that standbys started together do not ask etcd
// in step.
void EtcdElection::SleepAboutOnePoll() {
  thread_local std::minstd_rand rng{std::random_device{}()};
  std::uniform_real_distribution<double> factor(0.75, 1.25);
  std::this_thread::sleep_for(std::chrono::duration_cast<std::chrono::milliseconds>(options_.poll * factor(rng)));
}

EtcdElection::EtcdElection(EtcdClient& client, EtcdElectionOptions options)
    : client_(client), options_(std::move(options)), key_(options_.prefix + "/leader") {}

EtcdElection::~EtcdElection() {
  {
    std::lock_guard lock(mu_);
    stopping_ = true;
  }
  cv_.notify_all();
  if (renew_thread_.joinable()) renew_thread_.join();
}

Status EtcdElection::Campaign(const std::function<bool()>& should_stop,
                              const std::function<void(const std::string&)>& on_waiting,
                              std::function<void(const std::string&)> on_lost) {
  if (options_.ttl_seconds < 1 || options_.ttl_seconds > kMaxLeaseTtlSeconds) {
    return InvalidArgument("lease TTL " + std::to_string(options_.ttl_seconds) + " s is outside 1.." +
                           std::to_string(kMaxLeaseTtlSeconds));
  }
  using Clock = std::chrono::steady_clock;
  const auto ttl = std::chrono::seconds(options_.ttl_seconds);
  Clock::time_point last_answer = Clock::now();
  std::string last_error, seen_leader = "\x01";  // nothing reported yet
  int64_t lease = 0;
  for (;;) {
    if (should_stop()) {
      if (lease != 0) (void)client_.LeaseRevoke(lease);
      return FailedPrecondition("stopped");
    }
    if (Clock::now() - last_answer > ttl) {
      if (lease != 0) (void)client_.LeaseRevoke(lease);
      return IoError("etcd at " + client_.Describe() + " did not answer for " + std::to_string(options_.ttl_seconds) +
                     " s while campaigning: " + last_error);
    }
    // A lease that is still alive (a campaigner's lease expires when it
    // stops renewing it; a new one is granted then).
    if (lease != 0) {
      auto left = client_.LeaseKeepAlive(lease);
      if (!left) {
        last_error = left.error().message;
        SleepAboutOnePoll();
        continue;
      }
      if (*left == 0) lease = 0;
    }
    if (lease == 0) {
      auto granted = client_.LeaseGrant(options_.ttl_seconds);
      if (!granted) {
        last_error = granted.error().message;
        SleepAboutOnePoll();
        continue;
      }
      lease = *granted;
    }
    auto r = client_.Txn({EtcdCompare{key_, EtcdCompare::Target::kCreateRevision, EtcdCompare::Result::kEqual, 0, ""}},
                         {EtcdOp::Put(key_, options_.url, lease)}, {EtcdOp::Get(key_)});
    if (!r) {
      last_error = r.error().message;
      SleepAboutOnePoll();
      continue;
    }
    last_answer = Clock::now();
    if (r->succeeded) {
      lease_ = lease;
      create_revision_ = r->revision;  // the put is the transaction's only write
      on_lost_ = std::move(on_lost);
      {
        std::lock_guard lock(mu_);
        leading_ = true;
      }
      renew_thread_ = std::thread([this] { RenewLoop(); });
      return {};
    }
    const std::string leader = !r->ranges.empty() && !r->ranges[0].kvs.empty() ? r->ranges[0].kvs[0].value : "";
    if (leader != seen_leader) {
      seen_leader = leader;
      on_waiting(leader);
    }
    SleepAboutOnePoll();
  }
}

void EtcdElection::RenewLoop() {
  using Clock = std::chrono::steady_clock;
  const auto ttl = std::chrono::seconds(options_.ttl_seconds);
  const auto every = std::chrono::milliseconds(options_.ttl_seconds * 1000 / 3);
  // The lease was granted or renewed no earlier than this (the campaign's
  // last request's start is later than the lease's grant).
  Clock::time_point renewed = Clock::now();
  std::string last_error;
  for (;;) {
    {
      std::unique_lock lock(mu_);
      cv_.wait_for(lock, every, [&] { return stopping_ || !lost_.empty(); });
      if (stopping_ || !lost_.empty()) return;
    }
    const Clock::time_point sent = Clock::now();
    auto left = client_.LeaseKeepAlive(lease_);
    if (left && *left > 0) {
      renewed = sent;
      continue;
    }
    if (left) return Lose("etcd says lease " + std::to_string(lease_) + " has expired");
    last_error = left.error().message;
    if (Clock::now() - renewed >= ttl) {
      return Lose("the lease could not be renewed for " + std::to_string(options_.ttl_seconds) + " s: " + last_error);
    }
  }
}

void EtcdElection::Lose(const std::string& why) {
  {
    std::lock_guard lock(mu_);
    if (!lost_.empty() || !leading_) return;
    lost_ = why;
  }
  cv_.notify_all();
  if (on_lost_) on_lost_(why);
}

void EtcdElection::Resign() {
  {
    std::lock_guard lock(mu_);
    if (!leading_ || !lost_.empty()) return;
    lost_ = "resigned";
  }
  cv_.notify_all();
  if (renew_thread_.joinable()) renew_thread_.join();
  (void)client_.LeaseRevoke(lease_);
}

Status EtcdElection::Advertise(const std::string& url) {
  if (std::string lost = LostReason(); !lost.empty()) return FailedPrecondition(std::string(kNotLeaderPrefix) + " (" + lost + ")");
  GP_ASSIGN_OR_RETURN(auto r, client_.Txn({EtcdCompare{key_, EtcdCompare::Target::kCreateRevision,
                                                       EtcdCompare::Result::kEqual, create_revision_, ""}},
                                          {EtcdOp::Put(key_, url, lease_)}));
  if (!r.succeeded) return FailedPrecondition(std::string(kNotLeaderPrefix) + " (the leader key is another server's)");
  return {};
}

std::string EtcdElection::LostReason() const {
  std::lock_guard lock(mu_);
  if (!leading_) return "not elected";
  return lost_;
}

std::string EtcdElection::CurrentLeader() {
  auto r = client_.Range(EtcdRange{key_});
  if (!r || r->kvs.empty()) return "";
  return r->kvs[0].value;
}

}  // namespace gpupool
