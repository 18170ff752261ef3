#include "src/sched/fragmentation.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <vector>
#include "tests/builders.h"

namespace gpupool {
namespace {

using testing::CpuOnly;
using testing::NodeOf;
using testing::Share;
using testing::TypicalOf;
using testing::Whole;


Demand D(int64_t cpu, int32_t gpu_count, int32_t gpu_milli, int64_t memory = 0,
         GpuModelMask models = kAnyGpuModel) {
  return Demand{cpu, memory, gpu_count, gpu_milli, models};
}

double SumOfPopularities(const std::vector<TypicalDemand>& t) {
  double s = 0;
  for (const auto& x : t) s += x.popularity;
  return s;
}

// 12 demands in 5 shapes (memory differs inside a shape):
//   A = (4000 cpu, 1 x 1000)   x4
//   C = (8000 cpu, CPU-only)   x3
//   B = (2000 cpu, 1 x 500)    x3
//   E = (1000 cpu, 1 x 300)    x1
//   F = (1000 cpu, 1 x 200)    x1
std::vector<Demand> Workload() {
  return {
      D(4000, 1, 1000, 100), D(2000, 1, 500, 10), D(8000, 0, 0, 1), D(4000, 1, 1000, 200),
      D(1000, 1, 200, 7),    D(2000, 1, 500, 20), D(8000, 0, 0, 2), D(4000, 1, 1000, 300),
      D(1000, 1, 300, 9),    D(2000, 1, 500, 30), D(8000, 0, 0, 3), D(4000, 1, 1000, 400),
  };
}

TEST(ComputeTypicalDemandsTest, GroupsIgnoringMemoryAndOrdersByCountThenLargerShape) {
  const auto workload = Workload();
  const auto t = ComputeTypicalDemands(workload, 1.0);
  ASSERT_EQ(t.size(), 5u);
  // Count descending; C and B tie at 3 -> larger cpu (C) first; E and F tie at
  // 1 with equal cpu -> larger gpu_milli (E) first.
  EXPECT_EQ(t[0].demand, D(4000, 1, 1000));
  EXPECT_EQ(t[1].demand, D(8000, 0, 0));
  EXPECT_EQ(t[2].demand, D(2000, 1, 500));
  EXPECT_EQ(t[3].demand, D(1000, 1, 300));
  EXPECT_EQ(t[4].demand, D(1000, 1, 200));
  const int64_t counts[] = {4, 3, 3, 1, 1};
  for (size_t i = 0; i < t.size(); ++i) {
    EXPECT_EQ(t[i].weight, static_cast<double>(counts[i])) << i;
    EXPECT_EQ(t[i].demand.memory_mib, 0) << i;
    EXPECT_DOUBLE_EQ(t[i].popularity, counts[i] / 12.0) << i;
  }
  EXPECT_NEAR(SumOfPopularities(t), 1.0, 1e-12);
}

TEST(ComputeTypicalDemandsTest, KeepsTheGroupThatCrossesCoverageAndRenormalises) {
  const auto workload = Workload();
  // 0.5 x 12 = 6: A (4) is below, A + C (7) crosses -> A and C, p = 4/7, 3/7.
  auto t = ComputeTypicalDemands(workload, 0.5);
  ASSERT_EQ(t.size(), 2u);
  EXPECT_DOUBLE_EQ(t[0].popularity, 4.0 / 7.0);
  EXPECT_DOUBLE_EQ(t[1].popularity, 3.0 / 7.0);
  EXPECT_NEAR(SumOfPopularities(t), 1.0, 1e-12);

  // 0.9 x 12 = 10.8: A + C + B = 10 is below, + E = 11 crosses -> 4 groups, p = c / 11.
  t = ComputeTypicalDemands(workload, 0.9);
  ASSERT_EQ(t.size(), 4u);
  EXPECT_EQ(t[3].demand, D(1000, 1, 300));
  EXPECT_DOUBLE_EQ(t[0].popularity, 4.0 / 11.0);
  EXPECT_DOUBLE_EQ(t[3].popularity, 1.0 / 11.0);
  EXPECT_NEAR(SumOfPopularities(t), 1.0, 1e-12);

  // A tiny coverage keeps only the most frequent group, with p = 1.
  t = ComputeTypicalDemands(workload, 0.01);
  ASSERT_EQ(t.size(), 1u);
  EXPECT_DOUBLE_EQ(t[0].popularity, 1.0);
}

TEST(ComputeTypicalDemandsTest, TieBreaksOnGpuCountAndModelMask) {
  const std::vector<Demand> w = {
      D(1000, 1, 1000, 0, 0b01), D(1000, 1, 1000, 0, 0b10), D(1000, 2, 1000, 0, 0b01),
  };
  const auto t = ComputeTypicalDemands(w, 1.0);
  ASSERT_EQ(t.size(), 3u);
  EXPECT_EQ(t[0].demand, D(1000, 2, 1000, 0, 0b01));  // larger gpu_count first
  EXPECT_EQ(t[1].demand, D(1000, 1, 1000, 0, 0b10));  // then larger model mask
  EXPECT_EQ(t[2].demand, D(1000, 1, 1000, 0, 0b01));
}

// One typical demand with popularity 1.
FragmentationModel Only(const Demand& d) { return FragmentationModel({TypicalDemand{d, 1.0, 1}}); }

TEST(NodeFragMilliTest, HandComputedCases) {
  // 8 cores free; GPUs free 1000, 600, 200, 0: T = 1800.
  const Node n = NodeOf(8000, {1000, 600, 200, 0});
  ASSERT_EQ(n.gpu_milli_free_total, 1800);

  // CPU-only typical demands count all free GPU milli, whether they fit or not.
  EXPECT_DOUBLE_EQ(Only(D(4000, 0, 0)).NodeFragMilli(n), 1800);
  EXPECT_DOUBLE_EQ(Only(D(16000, 0, 0)).NodeFragMilli(n), 1800);
  // GPU model not allowed: all of it.
  EXPECT_DOUBLE_EQ(Only(D(1000, 1, 500, 0, 0b10)).NodeFragMilli(n), 1800);
  // Fits: only GPUs with free < request count. 500-share: 200 + 0 = 200.
  EXPECT_DOUBLE_EQ(Only(D(1000, 1, 500)).NodeFragMilli(n), 200);
  // One whole GPU fits on GPU0: 600 + 200 + 0 = 800.
  EXPECT_DOUBLE_EQ(Only(D(1000, 1, 1000)).NodeFragMilli(n), 800);
  // A 100-share fits on every GPU with free milli; only the empty one is below: 0.
  EXPECT_DOUBLE_EQ(Only(D(1000, 1, 100)).NodeFragMilli(n), 0);
  // Two whole GPUs do not fit: all of it.
  EXPECT_DOUBLE_EQ(Only(D(1000, 2, 1000)).NodeFragMilli(n), 1800);
  // GPU fits but CPU is short: all of it.
  EXPECT_DOUBLE_EQ(Only(D(16000, 1, 500)).NodeFragMilli(n), 1800);
  // Neither fits: all of it.
  EXPECT_DOUBLE_EQ(Only(D(16000, 2, 1000)).NodeFragMilli(n), 1800);

  // Weighted: 0.25 x 200 + 0.75 x 800 = 650.
  const FragmentationModel mix({TypicalDemand{D(1000, 1, 500), 0.25, 1}, TypicalDemand{D(1000, 1, 1000), 0.75, 3}});
  EXPECT_DOUBLE_EQ(mix.NodeFragMilli(n), 650);
  // Memory plays no part.
  Node low_memory = n;
  low_memory.memory_mib_free = 0;
  EXPECT_DOUBLE_EQ(mix.NodeFragMilli(low_memory), 650);
}

TEST(NodeFragMilliTest, ZeroFreeGpuMilliIsZero) {
  const FragmentationModel cpu_only = Only(D(4000, 0, 0));
  EXPECT_DOUBLE_EQ(cpu_only.NodeFragMilli(NodeOf(8000, {0, 0})), 0);
  EXPECT_DOUBLE_EQ(Only(D(1000, 1, 500, 0, 0b10)).NodeFragMilli(NodeOf(8000, {0, 0})), 0);
  EXPECT_DOUBLE_EQ(cpu_only.NodeFragMilli(NodeOf(8000, {})), 0);  // a node without GPUs
}

}  // namespace
}  // namespace gpupool
