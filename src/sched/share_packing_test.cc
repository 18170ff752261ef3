#include "src/sched/share_packing.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <vector>

namespace gpupool {
namespace {

constexpr double kEps = 1e-7;

SharePackingModel SolveOk(const std::vector<ShareRate>& rates) {
  auto m = SharePackingModel::Solve(rates);
  EXPECT_TRUE(m.has_value()) << (m ? "" : m.error().message);
  return m ? std::move(*m) : SharePackingModel();
}

TEST(SharePackingTest, OnlyHalves) {
  // Two 500s per GPU: price 0.5, V(1000) = 1, V(h) = 0.5 floor(h / 500).
  const SharePackingModel m = SolveOk({{500, 3.0}});
  EXPECT_NEAR(m.Price(500), 0.5, kEps);
  EXPECT_NEAR(m.HoleValue(1000), 1.0, kEps);
  EXPECT_NEAR(m.HoleValue(999), 0.5, kEps);
  EXPECT_NEAR(m.HoleValue(499), 0.0, kEps);
  EXPECT_NEAR(m.Loss(1000, 500), 0.0, kEps);
  EXPECT_NEAR(m.Loss(700, 500), 0.0, kEps);
  EXPECT_NEAR(m.gpus_per_unit(), 0.5, kEps);  // half a GPU per share
  EXPECT_EQ(m.Price(400), 0.0);                // not solved for: free
}

TEST(SharePackingTest, OnlySixHundreds) {
  // One 600 per GPU: price 1, V(1000) = 1, V(400) = 0.
  const SharePackingModel m = SolveOk({{600, 1.0}});
  EXPECT_NEAR(m.Price(600), 1.0, kEps);
  EXPECT_NEAR(m.HoleValue(1000), 1.0, kEps);
  EXPECT_NEAR(m.HoleValue(599), 0.0, kEps);
  EXPECT_NEAR(m.Loss(1000, 600), 0.0, kEps);
  EXPECT_NEAR(m.gpus_per_unit(), 1.0, kEps);
}

TEST(SharePackingTest, IncompatibleSizesGiveAPositiveLoss) {
  // 500 and 600 never share a GPU: y500 = 0.5, y600 = 1. A 500 in a 900 hole
  // wastes the room of a 600: Loss(900, 500) = V(900) - 0.5 - V(400) = 0.5.
  const SharePackingModel m = SolveOk({{500, 1.0}, {600, 1.0}});
  EXPECT_NEAR(m.Price(500), 0.5, kEps);
  EXPECT_NEAR(m.Price(600), 1.0, kEps);
  EXPECT_NEAR(m.HoleValue(900), 1.0, kEps);
  EXPECT_NEAR(m.Loss(900, 500), 0.5, kEps);
  EXPECT_NEAR(m.Loss(1000, 500), 0.0, kEps);
  EXPECT_NEAR(m.Loss(900, 600), 0.0, kEps);
  // Rates 1:1 normalised to 0.5 each: 0.5 x 0.5 + 0.5 x 1 = 0.75 GPU per share.
  EXPECT_NEAR(m.gpus_per_unit(), 0.75, kEps);
}

TEST(SharePackingTest, ScarceSmallSharesFillTheHolesOfLargeOnes) {
  // 810s with a few 160s (10 : 1): every 160 rides in an 810's 190 hole, so it
  // costs nothing (y160 = 0, y810 = 1) and one GPU serves each 810:
  // 10/11 GPU per share. A pattern {810, 160} had to be generated.
  const SharePackingModel m = SolveOk({{810, 10.0}, {160, 1.0}});
  EXPECT_NEAR(m.Price(810), 1.0, kEps);
  EXPECT_NEAR(m.Price(160), 0.0, kEps);
  EXPECT_NEAR(m.Loss(190, 160), 0.0, kEps);
  EXPECT_NEAR(m.Loss(1000, 810), 0.0, kEps);
  EXPECT_NEAR(m.gpus_per_unit(), 10.0 / 11.0, kEps);
  EXPECT_GE(m.patterns_generated(), 1);

  // Plentiful 160s (1 : 100): the 160s that do not fit beside an 810 go six to
  // a GPU, so y160 = 1/6, y810 = 5/6 and V(190) = 1/6; still Loss(190, 160) = 0.
  // GPUs per share: 1/101 (810 + 160) + (99/101) / 6 = 105/606.
  const SharePackingModel p = SolveOk({{810, 1.0}, {160, 100.0}});
  EXPECT_NEAR(p.Price(160), 1.0 / 6.0, kEps);
  EXPECT_NEAR(p.Price(810), 5.0 / 6.0, kEps);
  EXPECT_NEAR(p.HoleValue(190), 1.0 / 6.0, kEps);
  EXPECT_NEAR(p.Loss(190, 160), 0.0, kEps);
  EXPECT_NEAR(p.gpus_per_unit(), 105.0 / 606.0, kEps);
}

TEST(SharePackingTest, RatesOfOneSizeAddUp) {
  // Two entries of the same size act as one: the model matches a single entry.
  const SharePackingModel a = SolveOk({{810, 4.0}, {810, 6.0}, {160, 1.0}});
  const SharePackingModel b = SolveOk({{810, 10.0}, {160, 1.0}});
  EXPECT_NEAR(a.gpus_per_unit(), b.gpus_per_unit(), kEps);
  EXPECT_NEAR(a.Price(160), b.Price(160), kEps);
}

TEST(SharePackingTest, InvalidInputIsAnError) {
  const std::vector<std::vector<ShareRate>> bad = {
      {{0, 1.0}},
      {{1000, 1.0}},
      {{-5, 1.0}},
      {{500, 0.0}},
      {{500, -1.0}},
      {{500, std::numeric_limits<double>::quiet_NaN()}},
      {{500, 1.0}, {1200, 1.0}},
  };
  for (const auto& rates : bad) {
    auto m = SharePackingModel::Solve(rates);
    ASSERT_FALSE(m.has_value()) << rates.back().milli << " " << rates.back().rate;
    EXPECT_EQ(m.error().code, ErrorCode::kInvalidArgument);
    EXPECT_FALSE(m.error().message.empty());
  }
  EXPECT_TRUE(SharePackingModel::Solve(std::vector<ShareRate>{{1, 1.0}, {999, 1.0}}).has_value());
}

TEST(SharePackingTest, EmptyInputGivesAllZero) {
  const SharePackingModel m = SolveOk({});
  for (int h = 0; h <= 1000; h += 50) EXPECT_EQ(m.HoleValue(h), 0.0) << h;
  for (int s = 1; s < 1000; s += 37) {
    EXPECT_EQ(m.Price(s), 0.0);
    EXPECT_EQ(m.Loss(1000, s), 0.0);
  }
  EXPECT_EQ(m.gpus_per_unit(), 0.0);
  EXPECT_EQ(m.patterns_generated(), 0);
}

}  // namespace
}  // namespace gpupool
