#include "src/sched/plugins/fgd_plus.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "src/base/rng.h"
#include "src/sched/plugins/fgd.h"
#include "src/sched/plugins/plugins.h"
#include "tests/builders.h"

namespace gpupool {
namespace {

using testing::CpuOnly;
using testing::NodeOf;
using testing::Share;
using testing::TypicalOf;
using testing::Whole;


SharePackingModel Packing(std::vector<ShareRate> rates) {
  auto m = SharePackingModel::Solve(rates);
  EXPECT_TRUE(m.has_value());
  return std::move(*m);
}

TEST(FgdPlusTest, ShareAvoidsAPositiveLossHoleEvenIfUsed) {
  // 500s and 600s cannot share a GPU: prices y500 = 0.5, y600 = 1;
  // V(900) = 1 (a 600), V(400) = 0 -> Loss(900, 500) = 1 - 0.5 - 0 = 0.5;
  // Loss(1000, 500) = 1 - 0.5 - V(500) = 0.
  const SharePackingModel packing = Packing({{500, 1.0}, {600, 1.0}});
  ASSERT_NEAR(packing.Loss(900, 500), 0.5, 1e-9);
  ASSERT_NEAR(packing.Loss(1000, 500), 0.0, 1e-9);
  const FragmentationModel frag = TypicalOf({{Share(500), 0.5}, {Share(600), 0.5}});
  const FgdPlusConfig config{&frag, &packing, 0};

  // Free {900, 1000}: GPU0 is used (criterion 3 would prefer it) but loses
  // 0.5 GPU of packing worth; GPU1 loses nothing and wins.
  // FGD of GPU1: {900, 500}: F = 0.5 x 500 (600 does not fit GPU1) = 250 ->
  //   100 sigmoid(-0.25) = 43.8 -> 43; score = (0 - 0 + 0) x 128 + 43.
  const Node n = NodeOf(8000, {900, 1000});
  const FgdPlusChoice c = FgdPlusBestChoice(config, n, Share(500));
  EXPECT_EQ(c.gpus, 0b10);
  EXPECT_EQ(c.score, 43);
  Rng rng(0);
  EXPECT_EQ(MakeFgdPlusGpuSelector(config)->Select(n, Share(500), rng), 0b10);

  // Across nodes: a fresh node beats a node whose only hole would be wasted.
  auto score = MakeFgdPlusScore(config);
  EXPECT_GT(score->Score(NodeOf(8000, {1000}), Share(500)), score->Score(NodeOf(8000, {900}), Share(500)));
}

TEST(FgdPlusTest, ShareTakesAUsedGpuOverAFreshOneWhenLossesTie) {
  // Only 500s: every Loss is 0. FGD alone ties the two GPUs at 50 and would
  // take GPU0 (lowest index); FGD+ takes the used GPU1.
  const SharePackingModel packing = Packing({{500, 1.0}});
  const FragmentationModel frag = TypicalOf({{Share(500), 1.0}});
  const FgdPlusConfig config{&frag, &packing, 0};
  const Node n = NodeOf(8000, {1000, 500});
  ASSERT_EQ(FgdBestChoice(frag, n, Share(500)).gpus, 0b01);
  const FgdPlusChoice c = FgdPlusBestChoice(config, n, Share(500));
  EXPECT_EQ(c.gpus, 0b10);
  EXPECT_EQ(c.score, 1 * 128 + 50);

  auto score = MakeFgdPlusScore(config);
  EXPECT_GT(score->Score(n, Share(500)), score->Score(NodeOf(8000, {1000, 1000}), Share(500)));
  // Equal free milli: the lower index.
  EXPECT_EQ(FgdPlusBestChoice(config, NodeOf(8000, {1000, 500, 500}), Share(500)).gpus, 0b010);
}

TEST(FgdPlusTest, CpuReserveCriterionBeatsFgd) {
  // Typical: 1 x 1000 with 10 cores.
  //  A: 8 cores, 3 GPUs: before, CPU short -> F = 3000; after a 1 x 1000 with
  //     4 cores, F = 2000: delta = 1000 -> 100 sigmoid(1) = 73.1 -> 73.
  //  B: 16 cores, 3 GPUs: F = 0 before and after (12 cores >= 10) -> 50.
  const SharePackingModel packing = Packing({});
  const FragmentationModel frag = TypicalOf({{Whole(1, 10000), 1.0}});
  const Node a = NodeOf(8000, {1000, 1000, 1000});
  const Node b = NodeOf(16000, {1000, 1000, 1000});
  const Demand d = Whole(1, 4000);

  // Without a reserve FGD+ is FGD here: A wins.
  const FgdPlusConfig off{&frag, &packing, 0};
  EXPECT_EQ(FgdPlusBestChoice(off, a, d).score, 73);
  EXPECT_EQ(FgdPlusBestChoice(off, b, d).score, 50);

  // Reserve 4 cores per free GPU: A keeps 4 cores for 2 GPUs (needs 8):
  // stranded, -2 x 128. B keeps 12 >= 8.
  const FgdPlusConfig on{&frag, &packing, 4000};
  EXPECT_EQ(FgdPlusBestChoice(on, a, d).score, -256 + 73);
  EXPECT_EQ(FgdPlusBestChoice(on, b, d).score, 50);
  EXPECT_EQ(FgdPlusBestChoice(on, a, d).gpus, 0b001);

  // Boundary: exactly the reserve left is not stranded. 12 cores, after 8 for
  // 2 free GPUs x 4 = 8.
  const Node edge = NodeOf(12000, {1000, 1000, 1000});
  const int64_t fgd_edge = FgdBestChoice(frag, edge, d).score;
  EXPECT_EQ(FgdPlusBestChoice(on, edge, d).score, fgd_edge);

  // Partly free GPUs count by their free fraction: a 500-share on {1000} with
  // 3 cores after placement keeps 500 milli -> needs 2 cores: fine; with 1
  // core after placement it is stranded.
  const SharePackingModel p500 = Packing({{500, 1.0}});
  const FgdPlusConfig share_on{&frag, &p500, 4000};
  const FgdPlusConfig share_off{&frag, &p500, 0};
  const Node roomy = NodeOf(4000, {1000});
  const Node tight = NodeOf(2000, {1000});
  EXPECT_EQ(FgdPlusBestChoice(share_on, roomy, Share(500, 1000)).score,
            FgdPlusBestChoice(share_off, roomy, Share(500, 1000)).score);
  EXPECT_EQ(FgdPlusBestChoice(share_on, tight, Share(500, 1000)).score,
            FgdPlusBestChoice(share_off, tight, Share(500, 1000)).score - 2 * 128);
  // CPU-only demands too: 16 cores, 3 free GPUs need 12; taking 8 strands it.
  EXPECT_EQ(FgdPlusBestChoice(on, b, CpuOnly(8000)).score, FgdBestChoice(frag, b, CpuOnly(8000)).score - 256);
}

TEST(FgdPlusTest, CpuReservePerGpuMilliFormula) {
  // Cluster: 128 cores, 8 GPUs -> 16000 per GPU. CPU-only demands: 8 + 4 = 12
  // cores; GPU demands: 1000 + 500 milli -> 12000 x 1000 / 1500 = 8000 per GPU.
  // 0.57 x (16000 - 8000) = 4560.
  const std::vector<Demand> demands = {CpuOnly(8000), CpuOnly(4000), Whole(1, 2000), Share(500, 1000)};
  EXPECT_EQ(CpuReservePerGpuMilli(128000, 8000, demands), std::llround(kCpuReserveShare * 8000));
  EXPECT_EQ(CpuReservePerGpuMilli(128000, 8000, demands), 4560);
  // No GPU demand: the whole 16000 per GPU is spare -> 0.57 x 16000 = 9120.
  const std::vector<Demand> cpu_only = {CpuOnly(8000)};
  EXPECT_EQ(CpuReservePerGpuMilli(128000, 8000, cpu_only), 9120);
  // CPU-only demand beyond the cluster's CPU per GPU: never negative.
  const std::vector<Demand> heavy = {CpuOnly(64000), Share(100)};
  EXPECT_EQ(CpuReservePerGpuMilli(128000, 8000, heavy), 0);
  // No GPUs in the cluster: 0.
  EXPECT_EQ(CpuReservePerGpuMilli(128000, 0, demands), 0);
}

}  // namespace
}  // namespace gpupool
