// Generated workloads: what requests declare as their expected duration
// (never the run time itself unless the scenario says so).
#include "src/sim/workload.h"

#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "src/sim/scenario.h"

namespace gpupool {
namespace {

using namespace std::chrono_literals;

TEST(DeclaredDurationTest, NoneFixedOrTheRunTimeWithALogNormalError) {
  Rng rng(3);
  EXPECT_FALSE(DeclaredDuration(EstimateModel{}, 2h, rng).has_value());
  EstimateModel fixed{EstimateModel::Kind::kFixed, 90min, 0, 1};
  EXPECT_EQ(DeclaredDuration(fixed, 2h, rng), Duration(90min));
  // sigma 0: exactly the run time times the bias, rounded to the second.
  EstimateModel exact{EstimateModel::Kind::kLogNormalError, 0s, 0, 2};
  EXPECT_EQ(DeclaredDuration(exact, 1001ms, rng), Duration(2s));
  // sigma 1: the log of the ratio estimate / run time is a standard normal.
  EstimateModel noisy{EstimateModel::Kind::kLogNormalError, 0s, 1.0, 1};
  double sum = 0, sum_sq = 0;
  int equal = 0;
  constexpr int kDraws = 4000;
  for (int i = 0; i < kDraws; ++i) {
    const Duration d = *DeclaredDuration(noisy, 1h, rng);
    const double x = std::log(ToSeconds(d) / 3600.0);
    sum += x;
    sum_sq += x * x;
    equal += d == Duration(1h);
  }
  const double mean = sum / kDraws;
  EXPECT_NEAR(mean, 0.0, 0.06);
  EXPECT_NEAR(std::sqrt(sum_sq / kDraws - mean * mean), 1.0, 0.05);
  EXPECT_LT(equal, 5);
}

// A scenario's templates reach the generated jobs' requests; a template
// without the key declares nothing.
TEST(DeclaredDurationTest, GeneratedJobsDeclareWhatTheirTemplateSays) {
  Scenario s;
  s.horizon = 48h;
  JobTemplate declared;
  declared.name = "declared";
  declared.priority = "normal";
  declared.duration = DurationModel{DurationModel::Kind::kLogNormal, 0s, 3600, 0.8, 1.0, 60s, 48h};
  declared.expected_duration = EstimateModel{EstimateModel::Kind::kLogNormalError, 0s, 0.5, 1};
  JobTemplate silent = declared;
  silent.name = "silent";
  silent.expected_duration = EstimateModel{};
  s.workloads.push_back(TenantWorkload{"t", ArrivalProcess{ArrivalProcess::Kind::kPoisson, 20, 0.5, 14, 0s, 40h},
                                       {declared, silent}});
  WorkloadIds ids;
  ids.tenants["t"] = 0;
  auto jobs = GenerateJobs(s, ids, nullptr, 5);
  ASSERT_TRUE(jobs.has_value()) << jobs.error().message;
  int with = 0, without = 0, exact = 0;
  for (const SimJob& j : *jobs) {
    if (j.spec.name == "silent") {
      EXPECT_FALSE(j.spec.expected_duration.has_value());
      ++without;
      continue;
    }
    ASSERT_TRUE(j.spec.expected_duration.has_value());
    ++with;
    exact += std::chrono::abs(*j.spec.expected_duration - j.work) < 1s;
  }
  EXPECT_GT(with, 100);
  EXPECT_GT(without, 100);
  EXPECT_LT(exact, with / 20);  // the run time itself only by chance
}

}  // namespace
}  // namespace gpupool
