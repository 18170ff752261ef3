#include "src/client/table.h"

#include <gtest/gtest.h>

namespace gpupool {
namespace {

TEST(FormatTableTest, AlignsColumnsWithoutTrailingSpaces) {
  EXPECT_EQ(FormatTable({"ID", "NAME", "STATE"}, {{"1", "train-a", "running"}, {"12", "x", ""}}),
            "ID   NAME      STATE\n"
            "1    train-a   running\n"
            "12   x\n");
}

TEST(FormatTableTest, ShortRowsArePaddedAndWidthsCountCodePoints) {
  EXPECT_EQ(FormatTable({"A", "B", "C"}, {{"\xc3\xa9t\xc3\xa9"}, {"x", "y", "z"}}),
            "A     B   C\n"
            "\xc3\xa9t\xc3\xa9\n"
            "x     y   z\n");
}

TEST(FormatTableTest, HeaderOnlyWhenNoRows) { EXPECT_EQ(FormatTable({"NAME", "POOL"}, {}), "NAME   POOL\n"); }

TEST(FormatKeyValuesTest, AlignsValuesAndContinuesItems) {
  EXPECT_EQ(FormatKeyValues({{"id", "17"}, {"placements", "n1 GPUs 0,1"}, {"", "n2 GPUs 0"}, {"reason", ""}}),
            "id:          17\n"
            "placements:  n1 GPUs 0,1\n"
            "             n2 GPUs 0\n"
            "reason:\n");
}

TEST(FormatNumberTest, WholeNumbersAndFractions) {
  EXPECT_EQ(FormatNumber(8), "8");
  EXPECT_EQ(FormatNumber(0.25), "0.25");
  EXPECT_EQ(FormatNumber(1.0 / 3.0), "0.333");
  EXPECT_EQ(FormatNumber(2.0005), "2.001");
  EXPECT_EQ(FormatNumber(-0.0001), "0");
  EXPECT_EQ(FormatNumber(1024.5), "1024.5");
}

TEST(FormatAgeTest, LargestUnitsFirst) {
  EXPECT_EQ(FormatAge(-5000), "0s");
  EXPECT_EQ(FormatAge(999), "0s");
  EXPECT_EQ(FormatAge(45'000), "45s");
  EXPECT_EQ(FormatAge(200'000), "3m20s");
  EXPECT_EQ(FormatAge(180'000), "3m");
  EXPECT_EQ(FormatAge(12 * 60'000 + 5000), "12m");
  EXPECT_EQ(FormatAge((5 * 60 + 10) * 60'000), "5h10m");
  EXPECT_EQ(FormatAge(18 * 3600'000 + 60'000), "18h");
  EXPECT_EQ(FormatAge((3 * 24 + 4) * 3600'000LL), "3d4h");
  EXPECT_EQ(FormatAge(12 * 86400'000LL), "12d");
}

TEST(ParseTimeMillisTest, Rfc3339) {
  EXPECT_EQ(ParseTimeMillis("1970-01-01T00:00:00Z"), 0);
  EXPECT_EQ(ParseTimeMillis("2026-11-29T12:00:00.000Z"), 1795953600000LL);
  EXPECT_EQ(ParseTimeMillis("2026-11-29T12:00:00.5Z"), 1795953600500LL);
  EXPECT_EQ(ParseTimeMillis("2026-11-29T12:00:00.123456Z"), 1795953600123LL);
  EXPECT_EQ(ParseTimeMillis("2026-11-29T13:30:00+01:30"), 1795953600000LL);
  EXPECT_EQ(ParseTimeMillis("2000-02-29T00:00:00Z"), 951782400000LL);
  EXPECT_EQ(ParseTimeMillis("2026-11-29"), std::nullopt);
  EXPECT_EQ(ParseTimeMillis("2026-11-29T12:00:00"), std::nullopt);
  EXPECT_EQ(ParseTimeMillis("2026-13-01T00:00:00Z"), std::nullopt);
  EXPECT_EQ(ParseTimeMillis("2026-11-29T12:00:00.Z"), std::nullopt);
  EXPECT_EQ(ParseTimeMillis("2026-11-29T12:00:00Zjunk"), std::nullopt);
  // One parser with the server's (src/base/time_text.h): impossible dates are refused.
  EXPECT_EQ(ParseTimeMillis("2026-02-31T00:00:00Z"), std::nullopt);
  EXPECT_EQ(ParseTimeMillis("2026-02-29T00:00:00Z"), std::nullopt);
  EXPECT_EQ(ParseTimeMillis("2026-04-31T00:00:00Z"), std::nullopt);
}

}  // namespace
}  // namespace gpupool
