// Token buckets by key (issue 22, "limits on everything"): a tenant token's
// requests, and the failed authentications of one client address.
//
// Each key's bucket holds at most `burst` requests and refills at
// `per_second`; a request that finds it empty is refused with the time
// until one request's worth has refilled (the answer's Retry-After).
// Memory is bounded: at most `max_keys` buckets; past that, full buckets
// (keys idle long enough to have refilled) are forgotten first, then the
// fullest tenth. A forgotten key starts again with a full bucket.
//
// Time is passed in (steady clock), so tests need no sleeps.
//
// Thread-safety: Take may be called from any thread.
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>

namespace gpupool {

struct RateLimit {
  double per_second = 0;  // 0: no limit
  double burst = 0;       // >= 1 when per_second > 0
};

class RateLimiter {
 public:
  using Clock = std::chrono::steady_clock;
  static constexpr size_t kDefaultMaxKeys = 100000;

  explicit RateLimiter(RateLimit limit, size_t max_keys = kDefaultMaxKeys);

  // Takes one request from `key`'s bucket. nullopt: allowed; otherwise
  // refused, with how long until the bucket holds one again (>= 1 ms).
  std::optional<std::chrono::milliseconds> Take(std::string_view key, Clock::time_point now);
  // Whether `key`'s bucket is empty, without taking from it.
  std::optional<std::chrono::milliseconds> WouldRefuse(std::string_view key, Clock::time_point now);

  size_t keys() const;

 private:
  struct Bucket {
    double tokens = 0;
    Clock::time_point at{};
  };
  Bucket& BucketLocked(std::string_view key, Clock::time_point now);
  void EvictLocked(Clock::time_point now);
  std::optional<std::chrono::milliseconds> RefusalLocked(const Bucket& b) const;

  const RateLimit limit_;
  const size_t max_keys_;
  mutable std::mutex mu_;
  std::map<std::string, Bucket, std::less<>> buckets_;  // guarded by mu_
};

}  // namespace gpupool
