// Utilization models: constant, bursty cycles and replayed duty-cycle
// series, with the segment arithmetic idle reclamation relies on.
#include "src/sim/utilization.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>

#include "src/config/traces_dir.h"

namespace gpupool {
namespace {

using namespace std::chrono_literals;

UtilizationModel Bursty() {
  UtilizationModel m;
  m.kind = UtilizationModel::Kind::kBursty;
  m.busy = 0.8;
  m.idle = 0.0;
  m.busy_for = 30min;
  m.idle_for = 10min;
  return m;
}

TEST(UtilizationTest, ConstantNeverChanges) {
  UtilizationModel m;
  m.busy = 0.6;
  const Utilization u(m, nullptr, 0s);
  EXPECT_DOUBLE_EQ(u.At(5h), 0.6);
  EXPECT_DOUBLE_EQ(u.mean(), 0.6);
  EXPECT_EQ(u.NextChange(1h), Duration::max());
  EXPECT_EQ(u.SegmentStart(3h), 0s);
  EXPECT_FALSE(u.CanDropBelow(0.5));
  EXPECT_TRUE(u.CanDropBelow(0.7));
  EXPECT_EQ(u.TimeBelow(0s, 2h, 0.7), 2h);
  EXPECT_EQ(u.TimeBelow(0s, 2h, 0.5), 0s);
}

TEST(UtilizationTest, BurstyCyclesBetweenBusyAndIdle) {
  const Utilization u(Bursty(), nullptr, 0s);
  EXPECT_DOUBLE_EQ(u.At(0s), 0.8);
  EXPECT_DOUBLE_EQ(u.At(29min), 0.8);
  EXPECT_DOUBLE_EQ(u.At(30min), 0.0);
  EXPECT_DOUBLE_EQ(u.At(39min), 0.0);
  EXPECT_DOUBLE_EQ(u.At(40min), 0.8);
  EXPECT_DOUBLE_EQ(u.mean(), 0.6);
  EXPECT_EQ(u.NextChange(5min), 30min);
  EXPECT_EQ(u.NextChange(30min), 40min);
  EXPECT_EQ(u.SegmentStart(35min), 30min);
  EXPECT_EQ(u.SegmentStart(75min), 70min);
  EXPECT_EQ(u.SegmentStart(45min), 40min);
  // Two cycles: 2 x 10 min idle.
  EXPECT_EQ(u.TimeBelow(0s, 80min, 0.1), 20min);
  EXPECT_EQ(u.TimeBelow(35min, 45min, 0.1), 5min);
}

TEST(UtilizationTest, PhaseShiftsTheCycleButNotBeforeTheStart) {
  // Phase 25 min: the job starts 5 min before its first idle spell.
  const Utilization u(Bursty(), nullptr, 25min);
  EXPECT_DOUBLE_EQ(u.At(0s), 0.8);
  EXPECT_DOUBLE_EQ(u.At(5min), 0.0);
  EXPECT_EQ(u.NextChange(0s), 5min);
  EXPECT_EQ(u.SegmentStart(7min), 5min);
  // The busy spell it started in began before the job: clamp to its start.
  EXPECT_EQ(u.SegmentStart(2min), 0s);
}

TEST(UtilizationTest, TraceSeriesReplaysMinuteSamplesInALoop) {
  const std::vector<double> series{0.5, 0.0, 0.0, 0.9};
  UtilizationModel m;
  m.kind = UtilizationModel::Kind::kTrace;
  const Utilization u(m, &series, 0s);
  EXPECT_DOUBLE_EQ(u.At(30s), 0.5);
  EXPECT_DOUBLE_EQ(u.At(90s), 0.0);
  EXPECT_DOUBLE_EQ(u.At(4min + 10s), 0.5);  // looped
  EXPECT_DOUBLE_EQ(u.mean(), 0.35);
  // The idle run covers minutes 1 and 2.
  EXPECT_EQ(u.SegmentStart(2min + 30s), 1min);
  EXPECT_EQ(u.NextChange(90s), 2min);
  EXPECT_EQ(u.TimeBelow(0s, 4min, 0.1), 2min);
  EXPECT_TRUE(u.CanDropBelow(0.1));
  EXPECT_FALSE(u.CanDropBelow(0.0));
}

TEST(UtilizationTest, FindsTheNextIdleAndBusyMomentsAndWhenIdlenessBegan) {
  const Utilization u(Bursty(), nullptr, 0s);  // busy [0, 30m), idle [30m, 40m), ...
  EXPECT_EQ(u.NextBelow(5min, 0.1), 30min);
  EXPECT_EQ(u.NextBelow(35min, 0.1), 35min);
  EXPECT_EQ(u.NextAtOrAbove(35min, 0.1), 40min);
  EXPECT_EQ(u.NextAtOrAbove(5min, 0.1), 5min);
  EXPECT_EQ(u.BelowSince(38min, 0.1), 30min);

  // A series idle at two different low levels: one idle stretch.
  const std::vector<double> series{0.5, 0.05, 0.0, 0.03, 0.7};
  UtilizationModel m;
  m.kind = UtilizationModel::Kind::kTrace;
  const Utilization t(m, &series, 0s);
  EXPECT_EQ(t.BelowSince(3min + 10s, 0.1), 1min);
  EXPECT_EQ(t.NextAtOrAbove(90s, 0.1), 4min);
  EXPECT_EQ(t.NextBelow(4min + 5s, 0.1), 6min);  // looped: minute 6 is sample 1

  UtilizationModel busy;
  busy.busy = 0.9;
  const Utilization c(busy, nullptr, 0s);
  EXPECT_EQ(c.NextBelow(0s, 0.1), Duration::max());
  // A series that starts idle: idleness began no earlier than the start.
  const std::vector<double> idle_first{0.0, 0.0, 0.9};
  const Utilization i(m, &idle_first, 0s);
  EXPECT_EQ(i.BelowSince(90s, 0.1), 0s);
}

std::string WriteTemp(const std::string& name, const std::string& text) {
  const std::string path = ::testing::TempDir() + name;
  std::ofstream(path) << text;
  return path;
}

TEST(UtilizationTest, LoadsDutyCyclesPerPodInTimeOrder) {
  const std::string path = WriteTemp("duty_ok.csv",
                                     "value,timestamp_anon,container_ip\n"
                                     "50,120,b\n"
                                     "10,60,b\n"
                                     "0,60,a\n"
                                     "100,120,a\n");
  auto pods = LoadDutyCycles(path);
  ASSERT_TRUE(pods.has_value()) << pods.error().message;
  ASSERT_EQ(pods->size(), 2u);
  EXPECT_EQ((*pods)[0], (std::vector<double>{0.0, 1.0}));  // pod a
  EXPECT_EQ((*pods)[1], (std::vector<double>{0.1, 0.5}));  // pod b, sorted by time
}

TEST(UtilizationTest, BadDutyCycleFilesNameTheProblem) {
  auto bad_value = LoadDutyCycles(WriteTemp("duty_bad.csv", "value,timestamp_anon,container_ip\n140,60,a\n"));
  ASSERT_FALSE(bad_value.has_value());
  EXPECT_NE(bad_value.error().message.find("value"), std::string::npos) << bad_value.error().message;
  EXPECT_NE(bad_value.error().message.find("0 to 100"), std::string::npos) << bad_value.error().message;
  EXPECT_NE(bad_value.error().message.find(":2"), std::string::npos) << bad_value.error().message;

  auto not_number = LoadDutyCycles(WriteTemp("duty_nan.csv", "value,timestamp_anon,container_ip\nbusy,60,a\n"));
  ASSERT_FALSE(not_number.has_value());
  EXPECT_NE(not_number.error().message.find("expected a number"), std::string::npos);

  auto no_columns = LoadDutyCycles(WriteTemp("duty_cols.csv", "a,b,c\n1,2,3\n"));
  ASSERT_FALSE(no_columns.has_value());
  EXPECT_NE(no_columns.error().message.find("container_ip"), std::string::npos);

  auto empty = LoadDutyCycles(WriteTemp("duty_empty.csv", "value,timestamp_anon,container_ip\n"));
  ASSERT_FALSE(empty.has_value());
  EXPECT_NE(empty.error().message.find("no samples"), std::string::npos);

  EXPECT_FALSE(LoadDutyCycles(::testing::TempDir() + "missing.csv").has_value());
}

TEST(UtilizationTest, RealGenAiSeriesAreMostlyIdle) {
  const std::string path = TraceFile(kGpuDutyCycleTraceFile);
  if (path.empty()) GTEST_SKIP() << "the GenAI duty-cycle trace is not here (../shared/traces); skipping";
  auto pods = LoadDutyCycles(path);
  ASSERT_TRUE(pods.has_value()) << pods.error().message;
  EXPECT_EQ(pods->size(), 143u);
  size_t samples = 0, idle = 0;
  for (const auto& p : *pods) {
    for (double v : p) {
      ++samples;
      idle += v < 0.05;
    }
  }
  EXPECT_GT(samples, 150000u);
  // The README: the median sample is 0%.
  EXPECT_GT(static_cast<double>(idle) / static_cast<double>(samples), 0.5);
}

}  // namespace
}  // namespace gpupool
