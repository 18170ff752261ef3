#include "src/server/rate_limiter.h"

#include <gtest/gtest.h>

namespace gpupool {
namespace {

using std::chrono::milliseconds;
using Clock = RateLimiter::Clock;

TEST(RateLimiterTest, AllowsTheBurstThenRefusesWithTheTimeToWait) {
  RateLimiter r(RateLimit{10, 5});
  const auto t0 = Clock::time_point{} + std::chrono::hours(1);
  for (int i = 0; i < 5; ++i) EXPECT_FALSE(r.Take("a", t0)) << i;
  auto refused = r.Take("a", t0);
  ASSERT_TRUE(refused);
  EXPECT_EQ(*refused, milliseconds(100));  // one request per 100 ms
  EXPECT_FALSE(r.Take("b", t0));            // other keys have their own bucket
}

TEST(RateLimiterTest, RefillsAtItsRateUpToTheBurst) {
  RateLimiter r(RateLimit{10, 5});
  const auto t0 = Clock::time_point{} + std::chrono::hours(1);
  for (int i = 0; i < 5; ++i) r.Take("a", t0);
  EXPECT_TRUE(r.Take("a", t0 + milliseconds(50)));
  EXPECT_FALSE(r.Take("a", t0 + milliseconds(100)));
  EXPECT_TRUE(r.Take("a", t0 + milliseconds(100)));
  // A long pause refills the bucket to the burst, not beyond.
  const auto t1 = t0 + std::chrono::seconds(60);
  for (int i = 0; i < 5; ++i) EXPECT_FALSE(r.Take("a", t1)) << i;
  EXPECT_TRUE(r.Take("a", t1));
}

TEST(RateLimiterTest, WouldRefuseTakesNothing) {
  RateLimiter r(RateLimit{1, 1});
  const auto t0 = Clock::time_point{} + std::chrono::hours(1);
  EXPECT_FALSE(r.WouldRefuse("a", t0));
  EXPECT_FALSE(r.WouldRefuse("a", t0));
  EXPECT_FALSE(r.Take("a", t0));
  EXPECT_TRUE(r.WouldRefuse("a", t0));
}

TEST(RateLimiterTest, NoLimitWhenTheRateIsZero) {
  RateLimiter r(RateLimit{0, 0});
  for (int i = 0; i < 1000; ++i) EXPECT_FALSE(r.Take("a", Clock::now()));
  EXPECT_EQ(r.keys(), 0u);
}

TEST(RateLimiterTest, KeepsAtMostMaxKeysForgettingIdleOnesFirst) {
  RateLimiter r(RateLimit{1, 2}, 3);
  const auto t0 = Clock::time_point{} + std::chrono::hours(1);
  r.Take("busy", t0);
  r.Take("busy", t0);  // empty
  r.Take("x", t0);
  r.Take("y", t0);
  EXPECT_EQ(r.keys(), 3u);
  r.Take("z", t0 + milliseconds(10));
  EXPECT_EQ(r.keys(), 3u);
  // The emptied bucket is still remembered (forgetting it would lift the limit): a fuller one went.
  EXPECT_TRUE(r.Take("busy", t0 + milliseconds(10)));
  for (int i = 0; i < 100; ++i) r.Take("k" + std::to_string(i), t0 + milliseconds(20 + i));
  EXPECT_LE(r.keys(), 3u);
}

}  // namespace
}  // namespace gpupool
