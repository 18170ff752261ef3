#include "src/base/rng.h"

#include <gtest/gtest.h>

#include <vector>

namespace gpupool {
namespace {

TEST(RngTest, SameSeedSameSequence) {
  Rng a(42), b(42), c(43);
  for (int i = 0; i < 100; ++i) {
    const uint64_t x = a.Next();
    EXPECT_EQ(x, b.Next());
    (void)c;
  }
  EXPECT_NE(Rng(42).Next(), Rng(43).Next());
}

TEST(RngTest, BelowStaysInRangeAndCoversIt) {
  Rng rng(7);
  std::vector<int> hits(10);
  for (int i = 0; i < 10000; ++i) {
    const uint64_t x = rng.Below(10);
    ASSERT_LT(x, 10u);
    ++hits[x];
  }
  for (int h : hits) EXPECT_GT(h, 800);
}

TEST(RngTest, ShuffleIsAPermutation) {
  Rng rng(1);
  std::vector<int> v{0, 1, 2, 3, 4, 5, 6, 7};
  rng.Shuffle(std::span<int>(v));
  std::vector<int> sorted = v;
  std::sort(sorted.begin(), sorted.end());
  EXPECT_EQ(sorted, (std::vector<int>{0, 1, 2, 3, 4, 5, 6, 7}));
}

}  // namespace
}  // namespace gpupool
