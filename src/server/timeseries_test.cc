#include "src/server/timeseries.h"

#include <gtest/gtest.h>

namespace gpupool {
namespace {

// The start of Unix minute m, plus `s` seconds.
Instant At(int64_t m, int s = 0) { return InstantFromMillis(m * 60000 + s * 1000); }

Observation PoolsOnly(std::vector<std::pair<std::string, int32_t>> totals) {
  Observation o;
  for (auto& [name, t] : totals) o.pools.push_back({name, PoolPoint{.total_milli = t}});
  return o;
}

constexpr int64_t kT0 = 29'000'000;  // a minute in 2025

TEST(TimeSeriesRecorderTest, APointIsTheNewestObservationOfItsMinute) {
  TimeSeriesRecorder r;
  ASSERT_TRUE(r.Record(At(kT0, 1), PoolsOnly({{"a", 1000}})));
  ASSERT_TRUE(r.Record(At(kT0, 59), PoolsOnly({{"a", 2000}})));
  ASSERT_TRUE(r.Record(At(kT0 + 2, 0), PoolsOnly({{"a", 3000}})));
  const auto w = r.Pools(kT0 + 2, 4, std::nullopt);
  ASSERT_EQ(w.size(), 1u);
  EXPECT_EQ(w[0].key, "a");
  ASSERT_EQ(w[0].points.size(), 4u);
  EXPECT_FALSE(w[0].points[0].has_value());  // kT0 - 1: before the series
  EXPECT_EQ(w[0].points[1]->total_milli, 2000);
  EXPECT_FALSE(w[0].points[2].has_value());  // kT0 + 1: nothing recorded
  EXPECT_EQ(w[0].points[3]->total_milli, 3000);
}

TEST(TimeSeriesRecorderTest, TimeGoingBackIsIgnored) {
  TimeSeriesRecorder r;
  ASSERT_TRUE(r.Record(At(kT0, 30), PoolsOnly({{"a", 1000}})));
  EXPECT_FALSE(r.Record(At(kT0, 10), PoolsOnly({{"a", 5000}})));
  EXPECT_FALSE(r.Record(At(kT0 - 3), PoolsOnly({{"a", 5000}})));
  EXPECT_EQ(r.Pools(kT0, 1, std::nullopt)[0].points[0]->total_milli, 1000);
  EXPECT_EQ(*r.last_recorded(), At(kT0, 30));
}

TEST(TimeSeriesRecorderTest, TheRingKeepsTheLastDayAndWraps) {
  TimeSeriesRecorder r;
  const int64_t n = kSeriesMinutes + 100;
  for (int64_t i = 0; i < n; ++i) {
    Observation o = PoolsOnly({{"a", static_cast<int32_t>(i)}});
    o.tenants.push_back({{"t", "a"}, TenantPoint{static_cast<int32_t>(2 * i), 1}});
    o.gpus.push_back({{"n1", 0}, GpuPoint{static_cast<int32_t>(i), 40, static_cast<uint8_t>(i % 101)}});
    ASSERT_TRUE(r.Record(At(kT0 + i, 5), o));
  }
  const int64_t last = kT0 + n - 1;
  // Asking for more than a day is a day; every point of it is there and is its minute's.
  const auto pools = r.Pools(last, 5000, std::nullopt);
  ASSERT_EQ(pools[0].points.size(), static_cast<size_t>(kSeriesMinutes));
  for (int i = 0; i < kSeriesMinutes; ++i) {
    ASSERT_TRUE(pools[0].points[i].has_value()) << i;
    EXPECT_EQ(pools[0].points[i]->total_milli, n - kSeriesMinutes + i);
  }
  const auto tenants = r.Tenants(last, kSeriesMinutes, std::string("t"), std::nullopt);
  EXPECT_EQ(tenants[0].points.front()->used_milli, 2 * (n - kSeriesMinutes));
  // A window reaching back before the wrap sees nothing there (those slots hold newer minutes).
  const auto older = r.Pools(last - kSeriesMinutes, 10, std::nullopt);
  for (const auto& p : older[0].points) EXPECT_FALSE(p.has_value());
  // GPUs keep the last hour.
  const auto gpus = r.Gpus(last, kSeriesMinutes, std::nullopt);
  ASSERT_EQ(gpus[0].points.size(), static_cast<size_t>(kGpuMinutes));
  EXPECT_EQ(gpus[0].points.front()->memory_used_mib, n - kGpuMinutes);
  EXPECT_EQ(gpus[0].points.back()->memory_used_mib, n - 1);
  EXPECT_EQ(gpus[0].points.back()->util_pct, (n - 1) % 101);
}

TEST(TimeSeriesRecorderTest, WhatAnObservationNoLongerHoldsIsDropped) {
  TimeSeriesRecorder r;
  Observation o = PoolsOnly({{"a", 1000}});
  o.tenants = {{{"t1", "a"}, {500, 0}}, {{"t2", "a"}, {0, 3}}};
  o.gpus = {{{"n1", 0}, {}}, {{"n1", 1}, {}}, {{"n2", 0}, {}}};
  ASSERT_TRUE(r.Record(At(kT0), o));
  const size_t full = r.bytes();
  o.tenants.erase(o.tenants.begin());  // t1 gone
  o.gpus.pop_back();                   // n2 removed
  ASSERT_TRUE(r.Record(At(kT0 + 1), o));
  EXPECT_LT(r.bytes(), full);
  const auto tenants = r.Tenants(kT0 + 1, 2, std::nullopt, std::nullopt);
  ASSERT_EQ(tenants.size(), 1u);
  EXPECT_EQ(tenants[0].key.first, "t2");
  EXPECT_EQ(tenants[0].points[0]->queued, 3);
  EXPECT_EQ(r.Gpus(kT0 + 1, 2, std::string("n2")).size(), 0u);
  EXPECT_EQ(r.Gpus(kT0 + 1, 2, std::string("n1")).size(), 2u);
  // Back again: a new series, empty before its return.
  o.tenants.push_back({{"t1", "a"}, {700, 0}});
  ASSERT_TRUE(r.Record(At(kT0 + 2), o));
  const auto back = r.Tenants(kT0 + 2, 3, std::string("t1"), std::string("a"));
  ASSERT_EQ(back.size(), 1u);
  EXPECT_FALSE(back[0].points[0].has_value());
  EXPECT_FALSE(back[0].points[1].has_value());
  EXPECT_EQ(back[0].points[2]->used_milli, 700);
}

TEST(TimeSeriesRecorderTest, FiltersKeepTheNamedSeries) {
  TimeSeriesRecorder r;
  Observation o = PoolsOnly({{"a", 1000}, {"b", 2000}});
  o.tenants = {{{"t1", "a"}, {1, 0}}, {{"t1", "b"}, {2, 0}}, {{"t2", "b"}, {3, 0}}};
  ASSERT_TRUE(r.Record(At(kT0), o));
  EXPECT_EQ(r.Pools(kT0, 1, std::string("b"))[0].points[0]->total_milli, 2000);
  EXPECT_EQ(r.Pools(kT0, 1, std::string("c")).size(), 0u);
  EXPECT_EQ(r.Tenants(kT0, 1, std::string("t1"), std::nullopt).size(), 2u);
  const auto t = r.Tenants(kT0, 1, std::nullopt, std::string("b"));
  ASSERT_EQ(t.size(), 2u);
  EXPECT_EQ(t[1].key, (TenantPoolKey{"t2", "b"}));
}

TEST(TimeSeriesRecorderTest, TheCapsHoldAndTheMemoryStaysUnderTheStatedBound) {
  TimeSeriesRecorder r;
  Observation o;
  for (int p = 0; p < kMaxPools; ++p) o.pools.push_back({"pool-" + std::to_string(p), {}});
  for (size_t t = 0; t < kMaxTenantSeries + 10; ++t) {
    o.tenants.push_back({{"tenant-with-a-long-name-" + std::to_string(t), "pool-0"}, {}});
  }
  for (size_t g = 0; g < kMaxGpuSeries + 5; ++g) {
    o.gpus.push_back({{"node-with-a-long-name-" + std::to_string(g / 8), static_cast<int>(g % 8)}, {}});
  }
  ASSERT_TRUE(r.Record(At(kT0), o));
  EXPECT_EQ(r.untracked(), 15);
  EXPECT_EQ(r.Tenants(kT0, 1, std::nullopt, std::nullopt).size(), kMaxTenantSeries);
  EXPECT_EQ(r.Gpus(kT0, 1, std::nullopt).size(), kMaxGpuSeries);
  EXPECT_LE(r.bytes(), TimeSeriesRecorder::kMaxBytes);
  EXPECT_GT(r.bytes(), TimeSeriesRecorder::kMaxBytes * 9 / 10);
  EXPECT_LT(TimeSeriesRecorder::kMaxBytes, size_t{64} << 20);
  // Recording again at the caps grows nothing.
  const size_t before = r.bytes();
  ASSERT_TRUE(r.Record(At(kT0 + 1), o));
  EXPECT_EQ(r.bytes(), before);
}

TEST(TimeSeriesRecorderTest, MinutesAreUtcMinutesOfUnixTime) {
  EXPECT_EQ(TimeSeriesRecorder::MinuteOf(InstantFromMillis(0)), 0);
  EXPECT_EQ(TimeSeriesRecorder::MinuteOf(InstantFromMillis(59'999)), 0);
  EXPECT_EQ(TimeSeriesRecorder::MinuteOf(InstantFromMillis(60'000)), 1);
}

}  // namespace
}  // namespace gpupool
