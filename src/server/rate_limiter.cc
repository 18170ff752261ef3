#include "src/server/rate_limiter.h"

#include <algorithm>
#include <cmath>

namespace gpupool {

RateLimiter::RateLimiter(RateLimit limit, size_t max_keys) : limit_(limit), max_keys_(std::max<size_t>(1, max_keys)) {}

RateLimiter::Bucket& RateLimiter::BucketLocked(std::string_view key, Clock::time_point now) {
  auto it = buckets_.find(key);
  if (it == buckets_.end()) {
    if (buckets_.size() >= max_keys_) EvictLocked(now);
    it = buckets_.emplace(std::string(key), Bucket{limit_.burst, now}).first;
  }
  Bucket& b = it->second;
  const double elapsed_s = std::chrono::duration<double>(now - b.at).count();
  if (elapsed_s > 0) {
    b.tokens = std::min(limit_.burst, b.tokens + elapsed_s * limit_.per_second);
    b.at = now;
  }
  return b;
}

void RateLimiter::EvictLocked(Clock::time_point now) {
  // Full buckets first: forgetting them changes nothing.
  const double refill_s = limit_.per_second > 0 ? limit_.burst / limit_.per_second : 0;
  for (auto it = buckets_.begin(); it != buckets_.end();) {
    const double idle_s = std::chrono::duration<double>(now - it->second.at).count();
    it = it->second.tokens + idle_s * limit_.per_second >= limit_.burst || idle_s >= refill_s ? buckets_.erase(it)
                                                                                             : std::next(it);
  }
  if (buckets_.size() < max_keys_) return;
  // Then the fullest: forgetting it lifts the least of a limit.
  const auto projected = [&](const Bucket& b) {
    return b.tokens + std::chrono::duration<double>(now - b.at).count() * limit_.per_second;
  };
  auto fullest = std::max_element(buckets_.begin(), buckets_.end(), [&](const auto& a, const auto& b) {
    return projected(a.second) < projected(b.second);
  });
  buckets_.erase(fullest);
}

std::optional<std::chrono::milliseconds> RateLimiter::RefusalLocked(const Bucket& b) const {
  if (b.tokens >= 1) return std::nullopt;
  const double wait_ms = std::ceil((1 - b.tokens) / limit_.per_second * 1000);
  return std::chrono::milliseconds(std::max<int64_t>(1, static_cast<int64_t>(wait_ms)));
}

std::optional<std::chrono::milliseconds> RateLimiter::Take(std::string_view key, Clock::time_point now) {
  if (limit_.per_second <= 0) return std::nullopt;
  std::lock_guard lock(mu_);
  Bucket& b = BucketLocked(key, now);
  if (auto refused = RefusalLocked(b)) return refused;
  b.tokens -= 1;
  return std::nullopt;
}

std::optional<std::chrono::milliseconds> RateLimiter::WouldRefuse(std::string_view key, Clock::time_point now) {
  if (limit_.per_second <= 0) return std::nullopt;
  std::lock_guard lock(mu_);
  return RefusalLocked(BucketLocked(key, now));
}

size_t RateLimiter::keys() const {
  std::lock_guard lock(mu_);
  return buckets_.size();
}

}  // namespace gpupool
