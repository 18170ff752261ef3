#include "src/cli/parse.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <vector>

namespace gpupool {
namespace {

using Seeds = std::vector<uint64_t>;
using Names = std::vector<std::string>;

std::string SeedError(std::string_view text) {
  auto r = ParseSeedList("--seeds", text);
  EXPECT_FALSE(r.has_value()) << "accepted '" << text << "'";
  if (r) return "";
  EXPECT_EQ(r.error().code, ErrorCode::kInvalidArgument);
  return r.error().message;
}

TEST(ParseSeedListTest, SingleSeed) {
  EXPECT_EQ(ParseSeedList("--seeds", "42").value(), Seeds{42});
  EXPECT_EQ(ParseSeedList("--seeds", "0").value(), Seeds{0});
  EXPECT_EQ(ParseSeedList("--seeds", "18446744073709551615").value(), Seeds{UINT64_MAX});
}

TEST(ParseSeedListTest, InclusiveRange) {
  EXPECT_EQ(ParseSeedList("--seeds", "42-51").value(), (Seeds{42, 43, 44, 45, 46, 47, 48, 49, 50, 51}));
  EXPECT_EQ(ParseSeedList("--seeds", "7-7").value(), Seeds{7});
}

TEST(ParseSeedListTest, CommaList) {
  EXPECT_EQ(ParseSeedList("--seeds", "1,3,5").value(), (Seeds{1, 3, 5}));
  // Order is kept as written.
  EXPECT_EQ(ParseSeedList("--seeds", "9,2").value(), (Seeds{9, 2}));
}

TEST(ParseSeedListTest, RangesAndSingles) {
  EXPECT_EQ(ParseSeedList("--seeds", "1-3,7").value(), (Seeds{1, 2, 3, 7}));
  EXPECT_EQ(ParseSeedList("--seeds", "10,1-2,20-21").value(), (Seeds{10, 1, 2, 20, 21}));
}

TEST(ParseSeedListTest, RangeEndingAtTheLargestValue) {
  EXPECT_EQ(ParseSeedList("--seeds", "18446744073709551614-18446744073709551615").value(),
            (Seeds{UINT64_MAX - 1, UINT64_MAX}));
  EXPECT_EQ(ParseSeedList("--seeds", "18446744073709551615-18446744073709551615").value(), Seeds{UINT64_MAX});
}

TEST(ParseSeedListTest, NotANumber) {
  EXPECT_EQ(SeedError("a"), "--seeds: expected a non-negative integer, got 'a'");
  EXPECT_EQ(SeedError("1,x"), "--seeds: expected a non-negative integer, got 'x'");
  EXPECT_EQ(SeedError("1-b"), "--seeds: expected a non-negative integer, got 'b'");
  EXPECT_EQ(SeedError("4 "), "--seeds: expected a non-negative integer, got '4 '");
  EXPECT_EQ(SeedError("1.5"), "--seeds: expected a non-negative integer, got '1.5'");
  EXPECT_EQ(SeedError("1-2-3"), "--seeds: expected a non-negative integer, got '2-3'");
  EXPECT_EQ(SeedError("18446744073709551616"),
            "--seeds: expected a non-negative integer, got '18446744073709551616'");
  // A leading '-' is a range with an empty start, not a negative number.
  EXPECT_EQ(SeedError("-5"), "--seeds: expected a non-negative integer, got nothing (seeds are >= 0)");
  EXPECT_EQ(SeedError("5-"), "--seeds: expected a non-negative integer, got nothing (seeds are >= 0)");
}

TEST(ParseSeedListTest, ReversedRange) {
  EXPECT_EQ(SeedError("5-3"), "--seeds: range '5-3' runs backwards");
}

TEST(ParseSeedListTest, EmptyItems) {
  EXPECT_EQ(SeedError(""), "--seeds: empty item in ''");
  EXPECT_EQ(SeedError("1,,2"), "--seeds: empty item in '1,,2'");
  EXPECT_EQ(SeedError("1,"), "--seeds: empty item in '1,'");
  EXPECT_EQ(SeedError(",1"), "--seeds: empty item in ',1'");
}

TEST(ParseSeedListTest, TooManySeeds) {
  auto max = ParseSeedList("--seeds", "0-9999");
  ASSERT_TRUE(max) << max.error().message;
  ASSERT_EQ(max->size(), 10000u);
  EXPECT_EQ(max->front(), 0u);
  EXPECT_EQ(max->back(), 9999u);
  EXPECT_EQ(SeedError("0-10000"), "--seeds: range '0-10000' is too long");
  EXPECT_EQ(SeedError("5-18446744073709551615"), "--seeds: range '5-18446744073709551615' is too long");
  EXPECT_EQ(SeedError("0-9999,20000"), "--seeds: more than 10000 seeds");
  EXPECT_EQ(SeedError("0-5000,6000-11000"), "--seeds: more than 10000 seeds");
}

TEST(ParseSeedListTest, FlagNameIsUsedInMessages) {
  auto r = ParseSeedList("--other", "z");
  ASSERT_FALSE(r);
  EXPECT_TRUE(r.error().message.starts_with("--other: ")) << r.error().message;
}

TEST(ParseNameListTest, Splits) {
  EXPECT_EQ(ParseNameList("--policies", "A").value(), Names{"A"});
  EXPECT_EQ(ParseNameList("--policies", "A,B,C").value(), (Names{"A", "B", "C"}));
  EXPECT_EQ(ParseNameList("--policies", "fgd,best-fit,random").value(), (Names{"fgd", "best-fit", "random"}));
}

TEST(ParseNameListTest, EmptyItemsAreErrors) {
  for (std::string_view bad : {"", ",", "A,", ",A", "A,,B"}) {
    auto r = ParseNameList("--policies", bad);
    ASSERT_FALSE(r) << "accepted '" << bad << "'";
    EXPECT_EQ(r.error().code, ErrorCode::kInvalidArgument);
    EXPECT_EQ(r.error().message, "--policies: empty item in '" + std::string(bad) + "'");
  }
}

}  // namespace
}  // namespace gpupool
