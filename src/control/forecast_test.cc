#include "src/control/forecast.h"

#include <gtest/gtest.h>

#include <cmath>
#include <numbers>

#include "src/base/rng.h"

namespace gpupool {
namespace {

// Mean absolute error of `steps`-ahead forecasts over the series (after a
// warm-up of two seasons), for Holt-Winters and for the last value
// (what a purely reactive policy knows).
std::pair<double, double> Errors(const std::vector<double>& y, HoltWintersConfig c, int steps) {
  auto hw = HoltWinters::Create(c);
  EXPECT_TRUE(hw.has_value());
  double hw_err = 0, naive_err = 0;
  int n = 0;
  for (size_t t = 0; t + steps < y.size(); ++t) {
    hw->Observe(y[t]);
    if (t < static_cast<size_t>(2 * c.season_steps)) continue;
    hw_err += std::fabs(hw->Forecast(steps) - y[t + steps]);
    naive_err += std::fabs(y[t] - y[t + steps]);
    ++n;
  }
  return {hw_err / n, naive_err / n};
}

TEST(HoltWintersTest, PredictsADailyCycleAheadOfTime) {
  // Five days of 5-minute samples: a daily wave, a slow trend and noise.
  Rng rng(7);
  std::vector<double> y;
  for (int t = 0; t < 5 * 288; ++t) {
    y.push_back(200 + 80 * std::sin(2 * std::numbers::pi * t / 288) + 0.02 * t + (rng.Uniform() - 0.5) * 10);
  }
  const auto [hw, naive] = Errors(y, HoltWintersConfig{}, 12);  // an hour ahead
  EXPECT_LT(hw, 0.4 * naive) << "holt-winters " << hw << " vs last value " << naive;
  EXPECT_LT(hw, 10);
}

TEST(HoltWintersTest, BeforeASeasonItRepeatsTheLastSample) {
  auto hw = HoltWinters::Create(HoltWintersConfig{4, 0.5, 0.1, 0.1});
  ASSERT_TRUE(hw.has_value());
  hw->Observe(3);
  hw->Observe(5);
  EXPECT_FALSE(hw->seasonal());
  EXPECT_EQ(hw->Forecast(3), 5);
  hw->Observe(1);
  hw->Observe(7);
  EXPECT_TRUE(hw->seasonal());
  EXPECT_DOUBLE_EQ(hw->Forecast(1), 3);  // the season's first offset (-1) on its mean (4)
}

TEST(HoltWintersTest, BadSettingsNameTheField) {
  EXPECT_NE(HoltWinters::Create({1, 0.3, 0.1, 0.1}).error().message.find("season_steps"), std::string::npos);
  EXPECT_NE(HoltWinters::Create({10, 0, 0.1, 0.1}).error().message.find("alpha"), std::string::npos);
  EXPECT_NE(HoltWinters::Create({10, 0.3, 1.5, 0.1}).error().message.find("beta"), std::string::npos);
  EXPECT_NE(HoltWinters::Create({10, 0.3, 0.1, -1}).error().message.find("gamma"), std::string::npos);
}

}  // namespace
}  // namespace gpupool
