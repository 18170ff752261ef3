#include "src/agent/jitter.h"

#include <gtest/gtest.h>

#include <set>

namespace gpupool {
namespace {

using std::chrono::milliseconds;

TEST(JitterTest, StaysWithinAFifthBelowAndSpreads) {
  std::minstd_rand rng(22);
  std::set<int64_t> seen;
  for (int i = 0; i < 10'000; ++i) {
    const milliseconds j = Jittered(milliseconds(1000), rng);
    ASSERT_LE(j.count(), 1000);
    ASSERT_GE(j.count(), 800);
    seen.insert(j.count());
  }
  // 201 possible values: 10,000 draws see nearly all of them, both ends included.
  EXPECT_GT(seen.size(), 190u);
  EXPECT_EQ(*seen.begin(), 800);
  EXPECT_EQ(*seen.rbegin(), 1000);
}

TEST(JitterTest, ShortWaitsAreUnchanged) {
  std::minstd_rand rng(1);
  for (int ms : {0, 1, 4}) EXPECT_EQ(Jittered(milliseconds(ms), rng), milliseconds(ms));
  EXPECT_LE(Jittered(milliseconds(5), rng), milliseconds(5));
  EXPECT_GE(Jittered(milliseconds(5), rng), milliseconds(4));
}

TEST(JitterTest, AgentsSeededApartDoNotWaitInStep) {
  std::minstd_rand a(1), b(2);
  int same = 0;
  for (int i = 0; i < 100; ++i) same += Jittered(milliseconds(10'000), a) == Jittered(milliseconds(10'000), b);
  EXPECT_LT(same, 10);
}

}  // namespace
}  // namespace gpupool
