// Exact scores of the published policies (DotProd, GpuClustering, GpuPacking,
// BestFit) on hand-built nodes, and the GPU selectors. Every expected value
// is worked out by hand from the formulas in published_scores.cc.
#include <gtest/gtest.h>

#include <bit>
#include <memory>
#include <set>
#include <vector>

#include "src/base/rng.h"
#include "src/model/cluster.h"
#include "src/sched/plugins/plugins.h"
#include "tests/builders.h"

namespace gpupool {
namespace {

using testing::CpuOnly;
using testing::NodeOf;
using testing::Share;
using testing::TypicalOf;
using testing::Whole;


constexpr int64_t kBigMemory = int64_t{1} << 30;

NodeIndex AddIdle(Cluster& c, int gpus, int64_t cpu, GpuModelId model = 0) {
  static int serial = 0;
  auto added = c.AddNode(NodeSpec{"n" + std::to_string(serial++), cpu, kBigMemory, gpus,
                                  gpus > 0 ? model : kNoGpuModel});
  EXPECT_TRUE(added.has_value());
  return *added;
}

// A node whose GPU g has free milli free[g]: a share of 1000 - free[g] (or a
// whole GPU when free[g] == 0) is placed on each partly used GPU, with no CPU.
NodeIndex AddWithFree(Cluster& c, int64_t cpu, const std::vector<int>& free) {
  const NodeIndex i = AddIdle(c, static_cast<int>(free.size()), cpu);
  for (size_t g = 0; g < free.size(); ++g) {
    if (free[g] == kMilliPerGpu) continue;
    const Demand d = free[g] == 0 ? Whole(1) : Share(kMilliPerGpu - free[g]);
    c.Allocate(i, d, static_cast<GpuMask>(1u << g));
  }
  return i;
}

// ---------------------------------------------------------------- DotProd

TEST(DotProdScoreTest, ExactScores) {
  auto score = MakeDotProdScore();
  Cluster c;
  const NodeIndex idle8 = AddIdle(c, 8, 128000);
  // CPU-only 32 cores on an idle 128-core 8-GPU node:
  //   node = (1, 1), pod = (0.25, 0); dot = 0.25; 100 * (1 - 0.125) = 87.5 -> 87
  EXPECT_EQ(score->Score(c.node(idle8), CpuOnly(32000)), 87);
  // A 500-milli share with 16 cores on the same node:
  //   pod = (0.125, 0.0625); dot = 0.1875; 100 * (1 - 0.09375) = 90.625 -> 90
  EXPECT_EQ(score->Score(c.node(idle8), Share(500, 16000)), 90);

  // 4 whole GPUs with 32 cores on a node with 64 cores and 6000 milli free:
  //   node = (0.5, 0.75), pod = (0.25, 0.5); dot = 0.125 + 0.375 = 0.5;
  //   100 * (1 - 0.25) = 75
  const NodeIndex half = AddWithFree(c, 128000, {1000, 1000, 1000, 1000, 1000, 1000, 0, 0});
  c.Allocate(half, CpuOnly(64000), 0);
  ASSERT_EQ(c.node(half).cpu_milli_free, 64000);
  ASSERT_EQ(c.node(half).gpu_milli_free_total, 6000);
  EXPECT_EQ(score->Score(c.node(half), Whole(4, 32000)), 75);

  // 1 whole GPU with 8 cores on a node with 96 cores and 2000 milli free:
  //   node = (0.75, 0.25), pod = (0.0625, 0.125);
  //   dot = 0.046875 + 0.03125 = 0.078125; 100 * (1 - 0.0390625) = 96.09 -> 96
  const NodeIndex full = AddWithFree(c, 96000, {0, 0, 0, 0, 0, 0, 1000, 1000});
  EXPECT_EQ(score->Score(c.node(full), Whole(1, 8000)), 96);
  // The fuller node (along the used dimensions) wins.
  EXPECT_GT(score->Score(c.node(full), Whole(1, 8000)), score->Score(c.node(idle8), Whole(1, 8000)));
}

// ---------------------------------------------------------- GpuClustering

TEST(GpuClusteringScoreTest, IdleNodeBaseDependsOnFreeMilliOnly) {
  auto score = MakeGpuClusteringScore();
  Cluster c;
  // base = floor(25 * (8000 - free) / 8000), + 25 for a node without GPU work.
  const NodeIndex g1 = AddIdle(c, 1, 32000);  // 25 * 7000 / 8000 = 21.875 -> 21; + 25 = 46
  const NodeIndex g2 = AddIdle(c, 2, 32000);  // 25 * 6000 / 8000 = 18.75  -> 18; + 25 = 43
  const NodeIndex g4 = AddIdle(c, 4, 32000);  // 25 * 4000 / 8000 = 12.5   -> 12; + 25 = 37
  const NodeIndex g8 = AddIdle(c, 8, 32000);  // 0 + 25 = 25
  for (const Demand& d : {Share(300), Whole(1)}) {
    EXPECT_EQ(score->Score(c.node(g1), d), 46);
    EXPECT_EQ(score->Score(c.node(g2), d), 43);
    EXPECT_EQ(score->Score(c.node(g4), d), 37);
    EXPECT_EQ(score->Score(c.node(g8), d), 25);
  }
  EXPECT_EQ(score->Score(c.node(g4), Whole(4)), 37);
  EXPECT_EQ(score->Score(c.node(g8), Whole(8)), 25);
  // A CPU-only resident does not make a node "used" for this policy.
  c.Allocate(g8, CpuOnly(4000), 0);
  EXPECT_EQ(score->Score(c.node(g8), Share(300)), 25);
}

TEST(GpuClusteringScoreTest, KindBands) {
  auto score = MakeGpuClusteringScore();
  Cluster c;
  const NodeIndex n = AddIdle(c, 8, 128000);
  c.Allocate(n, Share(300), 0b1);
  c.Allocate(n, Share(500), 0b10);
  // free = 8000 - 800 = 7200; base = floor(25 * 800 / 8000) = floor(2.5) = 2.
  EXPECT_EQ(score->Score(c.node(n), Share(250)), 2 + 75);  // only the same kind (shares)
  EXPECT_EQ(score->Score(c.node(n), Whole(1)), 2);         // only other kinds
  EXPECT_EQ(score->Score(c.node(n), Whole(2)), 2);

  const AllocationId one = c.Allocate(n, Whole(1), 0b100);
  // free = 6200; base = floor(25 * 1800 / 8000) = floor(5.625) = 5.
  EXPECT_EQ(score->Score(c.node(n), Share(250)), 5 + 50);  // this kind and others
  EXPECT_EQ(score->Score(c.node(n), Whole(1)), 5 + 50);
  EXPECT_EQ(score->Score(c.node(n), Whole(2)), 5);  // 2-GPU is another kind than 1-GPU

  // CPU-only demands score 0 everywhere.
  EXPECT_EQ(score->Score(c.node(n), CpuOnly(1000)), 0);
  const NodeIndex idle = AddIdle(c, 1, 32000);
  EXPECT_EQ(score->Score(c.node(idle), CpuOnly(1000)), 0);

  // Releasing the whole GPU makes the node share-only again: free 7200, base 2.
  c.Release(one);
  EXPECT_EQ(score->Score(c.node(n), Share(250)), 2 + 75);
  EXPECT_EQ(score->Score(c.node(n), Whole(1)), 2);
}

// ------------------------------------------------------------- GpuPacking

TEST(GpuPackingScoreTest, IdleNodeBand) {
  auto score = MakeGpuPackingScore();
  Cluster c;
  // Idle node: max(33 - G, G).
  EXPECT_EQ(score->Score(c.node(AddIdle(c, 1, 32000)), Share(500)), 32);
  EXPECT_EQ(score->Score(c.node(AddIdle(c, 2, 32000)), Whole(1)), 31);
  EXPECT_EQ(score->Score(c.node(AddIdle(c, 4, 32000)), Whole(4)), 29);
  const NodeIndex g8 = AddIdle(c, 8, 32000);
  EXPECT_EQ(score->Score(c.node(g8), Whole(8)), 25);
  // CPU-only residents leave it idle; a CPU-only demand scores 0 anywhere.
  c.Allocate(g8, CpuOnly(1000), 0);
  EXPECT_EQ(score->Score(c.node(g8), Share(100)), 25);
  EXPECT_EQ(score->Score(c.node(g8), CpuOnly(1000)), 0);
}

TEST(GpuPackingScoreTest, FreshGpusAndSharedBands) {
  auto score = MakeGpuPackingScore();
  Cluster c;
  // GPU0 700 free, GPU1 500 free, GPU7 250 free, others fully free.
  const NodeIndex n = AddWithFree(c, 128000, {700, 500, 1000, 1000, 1000, 1000, 1000, 250});
  // Shared band: the tightest fitting GPU's floor(free / 10) = r; 100 - floor(r / 10).
  EXPECT_EQ(score->Score(c.node(n), Share(400)), 95);  // GPU1: r = 50 -> 100 - 5
  EXPECT_EQ(score->Score(c.node(n), Share(600)), 93);  // GPU0: r = 70 -> 100 - 7
  EXPECT_EQ(score->Score(c.node(n), Share(200)), 98);  // GPU7: r = 25 -> 100 - 2
  // Needs k fully free GPUs on a used node: 50 - k.
  EXPECT_EQ(score->Score(c.node(n), Share(800)), 49);  // falls back to a fresh GPU
  EXPECT_EQ(score->Score(c.node(n), Whole(1)), 49);
  EXPECT_EQ(score->Score(c.node(n), Whole(2)), 48);
  EXPECT_EQ(score->Score(c.node(n), Whole(4)), 46);
  EXPECT_EQ(score->Score(c.node(n), CpuOnly(1000)), 0);
  // A 16-GPU node taking 8 fresh GPUs: 50 - 8 = 42 (the floor at 33 is not reached).
  Cluster c16;
  const NodeIndex n16 = AddWithFree(c16, 128000, {100, 1000, 1000, 1000, 1000, 1000, 1000, 1000, 1000, 1000, 1000,
                                                  1000, 1000, 1000, 1000, 1000});
  EXPECT_EQ(score->Score(c16.node(n16), Whole(8)), 42);
  EXPECT_EQ(score->Score(c16.node(n16), Share(50)), 99);  // r = 10 -> 100 - 1
}

// ---------------------------------------------------------------- BestFit

TEST(BestFitScoreTest, ExactScores) {
  auto score = MakeBestFitScore();
  Cluster c;
  const NodeIndex idle = AddIdle(c, 8, 128000);
  // CPU-only 32 cores: s = 0.5 * 96000/128000 + 0.5 * 8000/8000 = 0.375 + 0.5 = 0.875;
  //   100 * 0.125 = 12.5 -> 12
  EXPECT_EQ(score->Score(c.node(idle), CpuOnly(32000)), 12);

  // 500 share, 8 cores, on a node with 64 cores and 2000 milli free:
  //   s = 0.5 * 56000/128000 + 0.5 * 1500/8000 = 0.21875 + 0.09375 = 0.3125; 68.75 -> 68
  const NodeIndex a = AddWithFree(c, 128000, {0, 0, 0, 0, 0, 0, 1000, 1000});
  c.Allocate(a, CpuOnly(64000), 0);
  EXPECT_EQ(score->Score(c.node(a), Share(500, 8000)), 68);

  // 2 whole GPUs, 16 cores, on a node with 32 cores and 4000 milli free:
  //   s = 0.5 * 16000/128000 + 0.5 * 2000/8000 = 0.0625 + 0.125 = 0.1875; 81.25 -> 81
  const NodeIndex b = AddWithFree(c, 32000, {0, 0, 0, 0, 1000, 1000, 1000, 1000});
  EXPECT_EQ(score->Score(c.node(b), Whole(2, 16000)), 81);

  // A perfect fit leaves nothing: s = 0 -> 100.
  const NodeIndex exact = AddIdle(c, 1, 8000);
  EXPECT_EQ(score->Score(c.node(exact), Whole(1, 8000)), 100);

  // A node larger than the normalisation spec clamps at 0:
  //   s = 0.5 * 256000/128000 + 0.5 * 8000/8000 = 1.5 -> -50 -> 0
  const NodeIndex huge = AddIdle(c, 8, 256000);
  EXPECT_EQ(score->Score(c.node(huge), CpuOnly(0)), 0);
}

// ------------------------------------------------------------ GPU selectors

TEST(LowestFreeGpusTest, TakesLowestIndexFullyFreeGpus) {
  Cluster c;
  const NodeIndex n = AddWithFree(c, 32000, {1000, 0, 1000, 500, 1000});
  EXPECT_EQ(LowestFreeGpus(c.node(n), 1), 0b00001);
  EXPECT_EQ(LowestFreeGpus(c.node(n), 2), 0b00101);
  EXPECT_EQ(LowestFreeGpus(c.node(n), 3), 0b10101);
  EXPECT_EQ(LowestFreeGpus(c.node(n), 0), 0);
}

TEST(BestGpuSelectorTest, TightestFittingGpuLowestIndexOnTies) {
  auto sel = MakeBestFitGpuSelector();
  Rng rng(1);
  Cluster c;
  const NodeIndex n = AddWithFree(c, 32000, {700, 500, 1000, 500});
  const Node& node = c.node(n);
  EXPECT_EQ(sel->Select(node, Share(400), rng), 0b0010);  // 500 on GPU1 and GPU3: GPU1
  EXPECT_EQ(sel->Select(node, Share(500), rng), 0b0010);
  EXPECT_EQ(sel->Select(node, Share(600), rng), 0b0001);  // only 700 and 1000 fit: 700
  EXPECT_EQ(sel->Select(node, Share(800), rng), 0b0100);  // only the fresh GPU fits
  EXPECT_EQ(sel->Select(node, Whole(1), rng), 0b0100);

  const NodeIndex m = AddWithFree(c, 32000, {1000, 300, 1000, 1000});
  EXPECT_EQ(sel->Select(c.node(m), Whole(2), rng), 0b0101);  // lowest-index fully free
  EXPECT_EQ(sel->Select(c.node(m), Whole(3), rng), 0b1101);
  EXPECT_EQ(sel->Select(c.node(m), Share(300), rng), 0b0010);
}

TEST(RandomGpuSelectorTest, AlwaysFitsAndReachesEveryFittingGpu) {
  auto sel = MakeRandomGpuSelector();
  Rng rng(12345);
  Cluster c;
  const NodeIndex n = AddWithFree(c, 32000, {700, 500, 1000, 200, 0});
  const Node& node = c.node(n);
  const Demand d = Share(400);
  std::set<int> chosen;
  for (int i = 0; i < 400; ++i) {
    const GpuMask m = sel->Select(node, d, rng);
    ASSERT_EQ(std::popcount(m), 1);
    ASSERT_TRUE(GpusSatisfy(node, d, m)) << m;
    chosen.insert(std::countr_zero(m));
  }
  EXPECT_EQ(chosen, (std::set<int>{0, 1, 2}));
  // Whole GPUs: the lowest-index fully free ones, no randomness.
  for (int i = 0; i < 20; ++i) EXPECT_EQ(sel->Select(node, Whole(1), rng), 0b00100);
  const NodeIndex m = AddWithFree(c, 32000, {1000, 300, 1000, 1000});
  for (int i = 0; i < 20; ++i) EXPECT_EQ(sel->Select(c.node(m), Whole(2), rng), 0b0101);
}

}  // namespace
}  // namespace gpupool
