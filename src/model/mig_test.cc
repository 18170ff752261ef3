#include "src/model/mig.h"

#include <gtest/gtest.h>

#include <bit>

#include "src/base/rng.h"
#include "src/model/cluster.h"
#include "src/model/mig_charge.h"

namespace gpupool {
namespace {

TEST(MigTablesTest, EveryDocumentedModelHasItsProfiles) {
  for (const char* model : {"A100-40GB", "A100-80GB", "A30", "H100", "H200"}) {
    const MigTable* t = FindMigTable(model);
    ASSERT_NE(t, nullptr) << model;
    ASSERT_TRUE(Catalog::Builtin().Find(model).has_value()) << model << " is not in the catalog";
    for (const MigProfile& p : t->profiles) {
      for (uint8_t start : p.starts) {
        EXPECT_LE(start + p.memory_slices, t->memory_slices) << model << " " << p.name;
        EXPECT_EQ(start % p.memory_slices, 0) << model << " " << p.name << " starts on its own size";
      }
      EXPECT_LE(p.compute_slices, t->compute_slices);
    }
  }
  EXPECT_EQ(FindMigTable("T4"), nullptr);
  // Spot checks against nvidia-smi mig -lgipp.
  const MigTable& a100 = *FindMigTable("A100-40GB");
  EXPECT_EQ(a100.profiles[4].name, "3g.20gb");
  EXPECT_EQ(a100.profiles[4].starts, (std::vector<uint8_t>{0, 4}));
  EXPECT_EQ(a100.profiles[3].starts, (std::vector<uint8_t>{0, 2, 4}));
  EXPECT_EQ(FindMigTable("A30")->profiles.back().name, "4g.24gb");
  EXPECT_EQ(FindMigTable("H200")->profiles.back().name, "7g.141gb");
}

TEST(MigTablesTest, SmallestProfileThatHoldsTheNeed) {
  const MigTable& a100 = *FindMigTable("A100-40GB");
  EXPECT_EQ(a100.profiles[SmallestProfile(a100, 1, 4000)].name, "1g.5gb");
  EXPECT_EQ(a100.profiles[SmallestProfile(a100, 1, 9000)].name, "1g.10gb");  // fewer compute than 2g.10gb
  EXPECT_EQ(a100.profiles[SmallestProfile(a100, 2, 9000)].name, "2g.10gb");
  EXPECT_EQ(a100.profiles[SmallestProfile(a100, 4, 1)].name, "4g.20gb");
  EXPECT_EQ(a100.profiles[SmallestProfile(a100, 5, 1)].name, "7g.40gb");
  EXPECT_EQ(SmallestProfile(a100, 1, 50000), -1);
}

TEST(MigChargeTest, AnInstanceIsChargedItsComputeSlicesOverTheGpus) {
  const GpuModelMask h100 = GpuModelMask{1} << *Catalog::Builtin().Find("H100");
  const GpuModelMask a100 = GpuModelMask{1} << *Catalog::Builtin().Find("A100-80GB");
  const GpuModelMask a30 = GpuModelMask{1} << *Catalog::Builtin().Find("A30");
  EXPECT_EQ(MigChargedMilli(300, 0, h100), 428) << "300 milli needs a 3g instance: 3/7 of the GPU";
  EXPECT_EQ(MigChargedMilli(100, 0, h100), 142) << "a 1g instance: 1/7";
  EXPECT_EQ(MigChargedMilli(100, 30000, h100), 428) << "its memory needs a 3g.40gb: charged its 3 slices";
  EXPECT_EQ(MigChargedMilli(999, 0, h100), 999) << "7g: the whole GPU, still a share";
  EXPECT_EQ(MigChargedMilli(300, 0, h100 | a100), 428) << "7-slice models agree";
  EXPECT_EQ(MigChargedMilli(200, 0, a30), 250) << "a 1g of the 4-slice A30";
  EXPECT_EQ(MigChargedMilli(200, 0, a30 | h100), 200) << "disagreeing models: as asked";
  EXPECT_EQ(MigChargedMilli(300, 0, GpuModelMask{1} << *Catalog::Builtin().Find("T4")), 300) << "no MIG: as asked";
  // Seven 1g instances fill a 7-slice GPU without overbooking it, and each
  // charged value maps back to its own profile.
  EXPECT_LE(7 * MigChargedMilli(1, 0, h100), kMilliPerGpu);
  for (int slices = 1; slices <= 7; ++slices) {
    const int32_t milli = MigChargedMilli(slices * kMilliPerGpu / 7, 0, h100);
    EXPECT_EQ(ComputeSlicesFor(milli, 7), slices == 5 || slices == 6 ? 7 : slices) << slices;
  }
}

TEST(MigTablesTest, PlacementsAvoidUsedSlicesAndKeepOneMediaInstance) {
  const MigTable& h100 = *FindMigTable("H100");
  // 3g at 4 (slices 4-7) leaves 4g only its start 0.
  EXPECT_EQ(FindPlacement(h100, 5, SliceMask(h100, 4, 4), 0), std::optional<uint8_t>(0));
  // 3g at 0 (slices 0-3) blocks 4g, whose only start is 0.
  EXPECT_EQ(FindPlacement(h100, 5, SliceMask(h100, 4, 0), 0), std::nullopt);
  // 2g starts at 0, 2, 4 only: with 0-3 and 4-5 used, none is left though 6-7 are free.
  EXPECT_EQ(FindPlacement(h100, 3, 0b00111111, 0), std::nullopt);
  EXPECT_EQ(FindPlacement(h100, 0, 0b00111111, 0), std::optional<uint8_t>(6));
  EXPECT_EQ(FindPlacement(h100, 1, 0, 1), std::nullopt);  // a second +me
  EXPECT_TRUE(IsValidLayout(h100, {{5, 0}, {4, 4}}));     // 4g + 3g (R510+)
  EXPECT_FALSE(IsValidLayout(h100, {{4, 0}, {5, 0}}));    // overlap
  EXPECT_FALSE(IsValidLayout(h100, {{0, 7}}));            // 1g cannot start at 7
  EXPECT_FALSE(IsValidLayout(h100, {{1, 0}, {1, 1}}));    // two +me
}

// The allocator, driven at random, only ever produces layouts the hardware
// accepts, on every MIG model.
TEST(MigAllocatorTest, RandomChurnKeepsEveryLayoutValid) {
  for (const char* model : {"A100-40GB", "A100-80GB", "A30", "H100", "H200"}) {
    const GpuModelId id = *Catalog::Builtin().Find(model);
    const MigTable& table = *FindMigTable(model);
    Cluster c;
    ASSERT_TRUE(c.AddNode(NodeSpec{"n", 1'000'000, 1 << 24, 2, id}).has_value());
    Rng rng(7);
    std::vector<AllocationId> live;
    int placed = 0;
    for (int step = 0; step < 3000; ++step) {
      if (!live.empty() && rng.Below(3) == 0) {
        const size_t k = rng.Below(live.size());
        c.Release(live[k]);
        live.erase(live.begin() + static_cast<std::ptrdiff_t>(k));
      } else {
        Demand d;
        d.gpu_count = 1;
        d.gpu_milli = static_cast<int32_t>(1 + rng.Below(999));
        d.gpu_memory_mib = static_cast<int32_t>(rng.Below(static_cast<uint64_t>(table.profiles.back().memory_mib)));
        d.mode = ShareMode::kMig;
        if (CheckFit(c.node(0), d) != FitFailure::kNone) continue;
        GpuMask gpus = 0;
        for (int g = 0; g < 2 && !gpus; ++g) {
          if (GpuFits(c.node(0), g, d)) gpus = static_cast<GpuMask>(1u << g);
        }
        live.push_back(c.Allocate(0, d, gpus));
        ++placed;
      }
      // Rebuild each GPU's instances from the live allocations.
      for (int g = 0; g < 2; ++g) {
        std::vector<std::pair<int, uint8_t>> instances;
        for (AllocationId a : live) {
          const Allocation& al = c.allocation(a);
          if (al.gpus >> g & 1) instances.emplace_back(al.mig_profile, al.mig_start);
        }
        ASSERT_TRUE(IsValidLayout(table, instances)) << model << " step " << step;
        uint8_t mask = 0;
        for (const auto& [p, s] : instances) mask |= SliceMask(table, p, s);
        ASSERT_EQ(c.node(0).mig_used_slices[g], mask);
        ASSERT_EQ(c.node(0).gpu_mode[g], instances.empty() ? GpuMode::kIdle : GpuMode::kMig);
      }
    }
    EXPECT_GT(placed, 500) << model;
  }
}

TEST(SharingModesTest, AGpuServesOneModeAtATime) {
  const GpuModelId a100 = *Catalog::Builtin().Find("A100-80GB");
  Cluster c;
  ASSERT_TRUE(c.AddNode(NodeSpec{"n", 1'000'000, 1 << 24, 1, a100}).has_value());
  Demand mps{1000, 0, 1, 300, kAnyGpuModel};
  mps.mode = ShareMode::kMps;
  mps.gpu_memory_mib = 20000;
  Demand slice = mps;
  slice.mode = ShareMode::kTimeSlice;
  Demand mig = mps;
  mig.mode = ShareMode::kMig;
  const AllocationId a = c.Allocate(0, mps, 1);
  EXPECT_EQ(c.node(0).gpu_mode[0], GpuMode::kMps);
  EXPECT_EQ(CheckFit(c.node(0), slice), FitFailure::kGpuCapacity);  // the GPU is in MPS use
  EXPECT_EQ(CheckFit(c.node(0), mig), FitFailure::kGpuCapacity);
  EXPECT_EQ(CheckFit(c.node(0), mps), FitFailure::kNone);
  const AllocationId b = c.Allocate(0, mps, 1);
  const AllocationId d = c.Allocate(0, mps, 1);
  EXPECT_EQ(c.node(0).gpu_memory_free_mib[0], 81920 - 60000);
  EXPECT_EQ(CheckFit(c.node(0), mps), FitFailure::kGpuCapacity);  // 3 x 300 milli: 100 left
  c.Release(a);
  c.Release(b);
  c.Release(d);
  EXPECT_EQ(c.node(0).gpu_mode[0], GpuMode::kIdle);
  EXPECT_EQ(CheckFit(c.node(0), mig), FitFailure::kNone);
}

TEST(ScrubTest, AnotherTenantNeedsAScrubTheSameTenantDoesNot) {
  const GpuModelId h100 = *Catalog::Builtin().Find("H100");
  Cluster c;
  ASSERT_TRUE(c.AddNode(NodeSpec{"n", 1'000'000, 1 << 24, 2, h100}).has_value());
  Demand whole{1000, 0, 1, 1000, kAnyGpuModel};
  const AllocationId a = c.Allocate(0, whole, 0b01, /*owner=*/3);
  c.Release(a);
  EXPECT_EQ(c.NeedsScrub(0, 0b01, 3), 0);
  EXPECT_EQ(c.NeedsScrub(0, 0b01, 4), 0b01);
  EXPECT_EQ(c.NeedsScrub(0, 0b10, 4), 0);
  EXPECT_DEATH(c.Allocate(0, whole, 0b01, 4), "scrub them first");
  c.Scrub(0, 0b01);
  EXPECT_EQ(c.NeedsScrub(0, 0b01, 4), 0);
  c.Allocate(0, whole, 0b01, 4);
}

}  // namespace
}  // namespace gpupool
