#include "src/sched/comm_model.h"

#include <gtest/gtest.h>

namespace gpupool {
namespace {

constexpr double kGB = 1e9;

TEST(CommModelTest, OneNodeWithNvlinkCrossesNothing) {
  const auto e = EstimateRingAllReduce(10 * kGB, {{0, "r0", 8, true}}, LinkBandwidths{});
  EXPECT_EQ(e.workers, 8);
  EXPECT_DOUBLE_EQ(e.bytes_per_link, 2 * 7.0 / 8 * 10 * kGB);
  EXPECT_EQ(e.cross_node_links, 0);
  EXPECT_EQ(e.cross_rack_bytes, 0);
  EXPECT_DOUBLE_EQ(e.seconds_per_step, e.bytes_per_link / (450 * kGB));
}

TEST(CommModelTest, SpreadingOverRacksCostsCrossRackTrafficAndTime) {
  const LinkBandwidths bw;
  // 16 workers as 4 nodes of 4 GPUs: in one rack, or one node per rack.
  const std::vector<ReplicaSite> packed = {{0, "r0", 4, true}, {1, "r0", 4, true}, {2, "r0", 4, true}, {3, "r0", 4, true}};
  const std::vector<ReplicaSite> spread = {{0, "r0", 4, true}, {1, "r1", 4, true}, {2, "r2", 4, true}, {3, "r3", 4, true}};
  const auto a = EstimateRingAllReduce(2 * kGB, packed, bw);
  const auto b = EstimateRingAllReduce(2 * kGB, spread, bw);
  EXPECT_EQ(a.cross_node_links, 4);
  EXPECT_EQ(a.cross_rack_links, 0);
  EXPECT_EQ(b.cross_rack_links, 4);
  EXPECT_DOUBLE_EQ(b.cross_rack_bytes, 4 * b.bytes_per_link);
  EXPECT_DOUBLE_EQ(a.seconds_per_step, a.bytes_per_link / (50 * kGB));
  EXPECT_DOUBLE_EQ(b.seconds_per_step, b.bytes_per_link / (12.5 * kGB));
  // Two racks: the ring crosses between them twice, whatever the order given.
  const std::vector<ReplicaSite> two = {{3, "r1", 4, true}, {0, "r0", 4, true}, {2, "r1", 4, true}, {1, "r0", 4, true}};
  EXPECT_EQ(EstimateRingAllReduce(2 * kGB, two, bw).cross_rack_links, 2);
}

TEST(CommModelTest, ReplicasOnOneNodeAreOneGroupAndPcieIsSlow) {
  const auto e = EstimateRingAllReduce(kGB, {{5, "r0", 1, false}, {5, "r0", 1, false}}, LinkBandwidths{});
  EXPECT_EQ(e.workers, 2);
  EXPECT_EQ(e.cross_node_links, 0);
  EXPECT_DOUBLE_EQ(e.seconds_per_step, kGB / (25 * kGB));  // 2 (2-1)/2 = 1 model over PCIe
  EXPECT_EQ(EstimateRingAllReduce(kGB, {{0, "r0", 1, true}}, LinkBandwidths{}).seconds_per_step, 0);
  EXPECT_EQ(EstimateRingAllReduce(kGB, {}, LinkBandwidths{}).workers, 0);
}

}  // namespace
}  // namespace gpupool
