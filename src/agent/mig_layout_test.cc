#include "src/agent/mig_layout.h"

#include <gtest/gtest.h>

namespace gpupool {
namespace {

TEST(MigLayoutTest, ProfilesByNameWithOrWithoutAComputePrefix) {
  const MigTable& h100 = *FindMigTable("H100");
  EXPECT_EQ(h100.profiles[MigProfileIndex(h100, "3g.40gb")].name, "3g.40gb");
  EXPECT_EQ(MigProfileIndex(h100, "1c.3g.40gb"), MigProfileIndex(h100, "3g.40gb"));
  EXPECT_TRUE(h100.profiles[MigProfileIndex(h100, "1g.10gb+me")].media_extensions);
  EXPECT_EQ(MigProfileIndex(h100, "3g.20gb"), -1);  // an A100-40GB name
  EXPECT_EQ(MigProfileIndex(h100, ""), -1);
}

TEST(MigLayoutTest, SlicesStayOnTheGpu) {
  const MigTable& h100 = *FindMigTable("H100");
  const int p3 = MigProfileIndex(h100, "3g.40gb");
  EXPECT_EQ(MigSlices(h100, p3, 4), 0xF0);
  EXPECT_EQ(MigSlices(h100, p3, 5), 0);   // would run past slice 7
  EXPECT_EQ(MigSlices(h100, p3, -1), 0);
  EXPECT_EQ(MigSlices(h100, -1, 0), 0);
}

TEST(MigLayoutTest, RefusesWhatTheDriverRefuses) {
  const MigTable& a100 = *FindMigTable("A100-80GB");
  const int g1 = MigProfileIndex(a100, "1g.10gb"), me = MigProfileIndex(a100, "1g.10gb+me"),
            g3 = MigProfileIndex(a100, "3g.40gb"), g4 = MigProfileIndex(a100, "4g.40gb"),
            g7 = MigProfileIndex(a100, "7g.80gb");
  EXPECT_EQ(CheckMigPlacement(a100, {}, g3, 4), MigRefusal::kNone);
  EXPECT_EQ(CheckMigPlacement(a100, {}, g3, 2), MigRefusal::kBadPlacement);  // 3g starts at 0 or 4
  EXPECT_EQ(CheckMigPlacement(a100, {}, g7, 1), MigRefusal::kBadPlacement);
  EXPECT_EQ(CheckMigPlacement(a100, {}, -1, 0), MigRefusal::kUnknownProfile);
  EXPECT_EQ(CheckMigPlacement(a100, {{g1, 5}}, g3, 4), MigRefusal::kOverlap);
  EXPECT_EQ(CheckMigPlacement(a100, {{g1, 3}}, g3, 4), MigRefusal::kNone);
  EXPECT_EQ(CheckMigPlacement(a100, {{g3, 4}}, g4, 0), MigRefusal::kNone);
  EXPECT_EQ(CheckMigPlacement(a100, {{g4, 0}}, g4, 0), MigRefusal::kOverlap);
  EXPECT_EQ(CheckMigPlacement(a100, {{me, 0}}, me, 1), MigRefusal::kInstanceLimit);  // max one +me
  std::vector<std::pair<int, int>> seven;
  for (int s = 0; s < 7; ++s) seven.emplace_back(g1, s);
  EXPECT_EQ(CheckMigPlacement(a100, seven, g1, 7), MigRefusal::kBadPlacement);  // no 8th 1g start
  EXPECT_EQ(MigStartsText(a100, g3), "0, 4");
  EXPECT_STREQ(MigRefusalText(MigRefusal::kOverlap), "overlaps an existing GPU instance");
}

}  // namespace
}  // namespace gpupool
