#include "src/server/rate_limiter.h"

#include <algorithm>
#include <cmath>
#include <vector>

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
  const auto projected = [&](const Bucket& b) {
    return b.tokens + std::chrono::duration<double>(now - b.at).count() * limit_.per_second;
  };
  std::erase_if(buckets_, [&](const auto& kv) { return projected(kv.second) >= limit_.burst; });
  if (buckets_.size() < max_keys_) return;
  // Then the fullest tenth at once, so that a stream of new keys costs one
  // pass per max_keys / 10 of them rather than one per key.
  std::vector<std::pair<double, decltype(buckets_)::iterator>> by_fill;
  by_fill.reserve(buckets_.size());
  for (auto it = buckets_.begin(); it != buckets_.end(); ++it) by_fill.emplace_back(projected(it->second), it);
  const size_t drop = std::min(by_fill.size(), max_keys_ / 10 + 1);
  std::nth_element(by_fill.begin(), by_fill.begin() + static_cast<std::ptrdiff_t>(drop - 1), by_fill.end(),
                   [](const auto& a, const auto& b) { return a.first > b.first; });
  for (size_t k = 0; k < drop; ++k) buckets_.erase(by_fill[k].second);
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
