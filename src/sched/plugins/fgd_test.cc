#include "src/sched/plugins/fgd.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <vector>

#include "src/base/rng.h"
#include "src/sched/plugins/plugins.h"
#include "tests/builders.h"

namespace gpupool {
namespace {

using testing::CpuOnly;
using testing::NodeOf;
using testing::Share;
using testing::TypicalOf;
using testing::Whole;


TEST(FgdTest, ScoreIs50WhenPlacementChangesNothing) {
  const FragmentationModel frag = TypicalOf({{Share(500, 1000), 1.0}});
  // Before: both GPUs fit a 500-share, nothing below -> F = 0. After a whole
  // GPU on GPU0: free {0, 1000}, still fits, 0 below -> F = 0. sigmoid(0) = 0.5.
  const Node n = NodeOf(8000, {1000, 1000});
  const FgdChoice c = FgdBestChoice(frag, n, Whole(1, 1000));
  EXPECT_EQ(c.score, 50);
  EXPECT_EQ(c.gpus, 0b01);
  // A node with no free GPU milli has F = 0 before and after a CPU-only pod.
  const FgdChoice cpu = FgdBestChoice(frag, NodeOf(8000, {0, 0}), CpuOnly(1000));
  EXPECT_EQ(cpu.score, 50);
  EXPECT_EQ(cpu.gpus, 0);
}

TEST(FgdTest, PrefersTheNodeWhoseHoleTheShareFillsExactly) {
  // Typical: 1 x 1000 (p = 0.5), 300-share (p = 0.5); no CPU.
  const FragmentationModel frag = TypicalOf({{Whole(1), 0.5}, {Share(300), 0.5}});
  auto score = MakeFgdScore(&frag);
  const Demand d = Share(300);
  // Node A: free {300, 1000}. F = 0.5 x 300 (whole GPU fits, 300 below) + 0 = 150.
  //   on GPU0 -> {0, 1000}: F = 0; delta = 150 -> 100 sigmoid(0.15) = 53.7 -> 53
  //   on GPU1 -> {300, 700}: whole GPU does not fit -> 0.5 x 1000 = 500; delta = -350 -> 41.3 -> 41
  const Node a = NodeOf(8000, {300, 1000});
  const FgdChoice ca = FgdBestChoice(frag, a, d);
  EXPECT_EQ(ca.score, 53);
  EXPECT_EQ(ca.gpus, 0b01);
  // Node B: free {1000, 1000}, F = 0 -> {700, 1000}: F = 0.5 x 700 = 350; delta = -350 -> 41
  const Node b = NodeOf(8000, {1000, 1000});
  EXPECT_EQ(FgdBestChoice(frag, b, d).score, 41);
  EXPECT_EQ(score->Score(a, d), 53);
  EXPECT_EQ(score->Score(b, d), 41);

  // Inside one node: a 500-share on free {700, 500, 1000} with a 500-share typical.
  //   GPU0 -> {200, 500, 1000}: F = 200 -> 100 sigmoid(-0.2) = 45.0 -> 45
  //   GPU1 -> {700, 0, 1000}:   F = 0   -> 50
  //   GPU2 -> {700, 500, 500}:  F = 0   -> 50 (a tie with GPU1: GPU1 is kept)
  const FragmentationModel f500 = TypicalOf({{Share(500), 1.0}});
  const FgdChoice c = FgdBestChoice(f500, NodeOf(8000, {700, 500, 1000}), Share(500));
  EXPECT_EQ(c.score, 50);
  EXPECT_EQ(c.gpus, 0b010);
}

TEST(FgdTest, BestChoiceTakesTheLowestIndexOnEqualIntegerScores) {
  // free {1000, 500}, 500-share typical: GPU0 -> {500, 500}: F = 0; GPU1 ->
  // {1000, 0}: F = 0. Both 50: FGD keeps GPU0, not the exact fit (unlike best-fit).
  const FragmentationModel frag = TypicalOf({{Share(500), 1.0}});
  const Node n = NodeOf(8000, {1000, 500});
  const FgdChoice c = FgdBestChoice(frag, n, Share(500));
  EXPECT_EQ(c.score, 50);
  EXPECT_EQ(c.gpus, 0b01);
  Rng rng(0);
  EXPECT_EQ(MakeFgdGpuSelector(&frag)->Select(n, Share(500), rng), 0b01);
  // Whole GPUs: the lowest-index fully free ones.
  const Node m = NodeOf(8000, {1000, 200, 1000, 1000});
  EXPECT_EQ(FgdBestChoice(frag, m, Whole(2)).gpus, 0b0101);
  EXPECT_EQ(MakeFgdGpuSelector(&frag)->Select(m, Whole(2), rng), 0b0101);
}

TEST(FgdTest, NodeAfterSubtractsAndRecomputes) {
  Node n = NodeOf(10000, {1000, 600, 1000});
  n.memory_mib_free = 5000;
  const Node after = NodeAfter(n, Demand{2000, 1000, 1, 400, kAnyGpuModel}, 0b010);
  EXPECT_EQ(after.cpu_milli_free, 8000);
  EXPECT_EQ(after.memory_mib_free, 4000);
  EXPECT_EQ(after.gpu_free_milli[0], 1000);
  EXPECT_EQ(after.gpu_free_milli[1], 200);
  EXPECT_EQ(after.gpu_free_milli[2], 1000);
  EXPECT_EQ(after.gpu_milli_free_total, 2200);
  EXPECT_EQ(after.max_gpu_free_milli, 1000);
  EXPECT_EQ(after.gpus_fully_free, 2);
  EXPECT_EQ(after.cpu_milli_total, n.cpu_milli_total);

  const Node two = NodeAfter(n, Demand{3000, 0, 2, 1000, kAnyGpuModel}, 0b101);
  EXPECT_EQ(two.cpu_milli_free, 7000);
  EXPECT_EQ(two.gpu_free_milli[0], 0);
  EXPECT_EQ(two.gpu_free_milli[1], 600);
  EXPECT_EQ(two.gpu_free_milli[2], 0);
  EXPECT_EQ(two.gpu_milli_free_total, 600);
  EXPECT_EQ(two.max_gpu_free_milli, 600);
  EXPECT_EQ(two.gpus_fully_free, 0);

  // Agrees with what the cluster does on a real allocation.
  Cluster c;
  const NodeIndex i = *c.AddNode(NodeSpec{"x", 16000, 4096, 4, 0});
  c.Allocate(i, Share(300), 0b0100);
  const Demand d{1500, 100, 1, 600, kAnyGpuModel};
  const Node predicted = NodeAfter(c.node(i), d, 0b0100);
  c.Allocate(i, d, 0b0100);
  const Node& real = c.node(i);
  EXPECT_EQ(predicted.cpu_milli_free, real.cpu_milli_free);
  EXPECT_EQ(predicted.memory_mib_free, real.memory_mib_free);
  EXPECT_EQ(predicted.gpu_free_milli, real.gpu_free_milli);
  EXPECT_EQ(predicted.gpu_milli_free_total, real.gpu_milli_free_total);
  EXPECT_EQ(predicted.max_gpu_free_milli, real.max_gpu_free_milli);
  EXPECT_EQ(predicted.gpus_fully_free, real.gpus_fully_free);
}

}  // namespace
}  // namespace gpupool
