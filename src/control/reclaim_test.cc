// Idle reclamation (RECLAIM-1) and deadline eviction (RECLAIM-2) on their
// own, through a fake Engine: the count of low reports, suspicion, grace,
// which stops reset the count, and deadlines.
#include "src/control/reclaim.h"

#include <gtest/gtest.h>

#include "tests/engine_harness.h"
#include "tests/fake_engine_view.h"

namespace gpupool {
namespace {

using namespace std::chrono_literals;
using testing::EngineHarness;
using testing::FakeEngineView;
using testing::Whole;

ReclaimConfig Idle() {
  ReclaimConfig c;
  c.idle = true;
  c.idle_below_pct = 10;
  c.idle_polls = 3;
  c.grace = 15s;
  return c;
}

TEST(IdleReclaimTest, ThreeLowReportsMakeASuspectAndOneMoreAfterTheGraceReclaimsIt) {
  FakeEngineView f;
  IdleReclaim loop(Idle());
  f.observer = &loop;
  const JobId job = f.Run(f.Node("a"), 0b1);
  for (int i = 0; i < 2; ++i) loop.Utilization(f.state().job(job), 5, f, f);
  EXPECT_TRUE(f.events.empty());
  loop.Utilization(f.state().job(job), 5, f, f);
  ASSERT_EQ(f.Of<JobIdleSuspected>().size(), 1u);
  f.clock += 14s;
  loop.Utilization(f.state().job(job), 5, f, f);
  EXPECT_TRUE(f.Of<ReclaimStarted>().empty());  // still in its grace
  f.clock += 1s;
  loop.Utilization(f.state().job(job), 5, f, f);
  ASSERT_EQ(f.Of<ReclaimStarted>().size(), 1u);
  EXPECT_EQ(f.Of<ReclaimStarted>()[0].reason, ReclaimReason::kIdle);
  // It cannot checkpoint: reclaimed at once, its count forgotten, and what
  // it freed is offered at once.
  ASSERT_EQ(f.Of<JobReclaimed>().size(), 1u);
  EXPECT_EQ(loop.low_polls(job), 0);
  EXPECT_EQ(f.passes, 1);
}

TEST(IdleReclaimTest, ABusyReportClearsTheSuspicionAndTheCount) {
  FakeEngineView f;
  IdleReclaim loop(Idle());
  const JobId job = f.Run(f.Node("a"), 0b1);
  for (int i = 0; i < 3; ++i) loop.Utilization(f.state().job(job), 5, f, f);
  loop.Utilization(f.state().job(job), 50, f, f);
  EXPECT_EQ(f.Of<JobIdleRecovered>().size(), 1u);
  EXPECT_EQ(loop.low_polls(job), 0);
}

TEST(IdleReclaimTest, TickReclaimsASuspectWhoseGraceRanOutWithoutAReport) {
  FakeEngineView f;
  IdleReclaim loop(Idle());
  JobSpec spec;
  spec.checkpointable = true;
  const JobId job = f.Run(f.Node("a"), 0b1, spec);
  for (int i = 0; i < 3; ++i) loop.Utilization(f.state().job(job), 5, f, f);
  f.clock += 14s;
  loop.Tick(f, f);
  EXPECT_TRUE(f.Of<ReclaimStarted>().empty());
  f.clock += 1s;
  loop.Tick(f, f);
  ASSERT_EQ(f.Of<ReclaimStarted>().size(), 1u);
  EXPECT_TRUE(f.Of<ReclaimStarted>()[0].checkpoint);
  EXPECT_TRUE(f.Of<JobReclaimed>().empty());  // after its checkpoint
}

TEST(IdleReclaimTest, AMoveByAnotherLoopRestartsTheCountAPreemptionForAnotherJobDoesNot) {
  for (PreemptReason reason : {PreemptReason::kDrain, PreemptReason::kDefrag, PreemptReason::kHotspot,
                               PreemptReason::kGpuUnhealthy, PreemptReason::kPriority,
                               PreemptReason::kGuaranteeReclaim, PreemptReason::kMigRecut}) {
    FakeEngineView f;
    IdleReclaim loop(Idle());
    f.observer = &loop;
    const JobId job = f.Run(f.Node("a"), 0b1);
    for (int i = 0; i < 2; ++i) loop.Utilization(f.state().job(job), 5, f, f);
    f.Emit(PreemptionStarted{job, -1, reason, true});
    const bool moved_by_a_loop = reason == PreemptReason::kDrain || reason == PreemptReason::kDefrag ||
                                 reason == PreemptReason::kHotspot || reason == PreemptReason::kGpuUnhealthy;
    EXPECT_EQ(loop.low_polls(job), moved_by_a_loop ? 0 : 2) << static_cast<int>(reason);
  }
}

TEST(IdleReclaimTest, OffItCountsNothing) {
  FakeEngineView f;
  IdleReclaim loop(ReclaimConfig{});
  const JobId job = f.Run(f.Node("a"), 0b1);
  for (int i = 0; i < 10; ++i) loop.Utilization(f.state().job(job), 0, f, f);
  f.clock += 1h;
  loop.Tick(f, f);
  EXPECT_TRUE(f.events.empty());
  EXPECT_EQ(loop.low_polls(job), 0);
}

TEST(DeadlineEvictionTest, AJobPastItsDeadlineIsReclaimedOthersKeepRunning) {
  FakeEngineView f;
  DeadlineEviction loop(ReclaimConfig{});
  const NodeIndex a = f.Node("a");
  JobSpec due;
  due.deadline = Instant{} + 60s;
  JobSpec later;
  later.deadline = Instant{} + 120s;
  const JobId first = f.Run(a, 0b1, due);
  f.Run(a, 0b10, later);
  f.Run(a, 0b100);
  f.clock += 59s;
  loop.Tick(f, f);
  EXPECT_TRUE(f.events.empty());
  f.clock += 1s;
  loop.Tick(f, f);
  ASSERT_EQ(f.Of<ReclaimStarted>().size(), 1u);
  EXPECT_EQ(f.Of<ReclaimStarted>()[0].job, first);
  EXPECT_EQ(f.Of<ReclaimStarted>()[0].reason, ReclaimReason::kDeadline);
}

TEST(DeadlineEvictionTest, OffDeadlinesPassWithoutEviction) {
  FakeEngineView f;
  ReclaimConfig off;
  off.deadlines = false;
  DeadlineEviction loop(off);
  JobSpec due;
  due.deadline = Instant{} + 60s;
  f.Run(f.Node("a"), 0b1, due);
  f.clock += 1h;
  loop.Tick(f, f);
  EXPECT_TRUE(f.events.empty());
}

// Through a real Engine (tests/engine_harness.h).
EngineConfig Config(const ReclaimConfig& reclaim) {
  EngineConfig c;
  c.policy = "BestFit";
  c.reclaim = reclaim;
  return c;
}

TEST(EngineReclaimTest, AnIdleTaskIsNotifiedCheckpointedAndReclaimedOnTheConfiguredTimeline) {
  ReclaimConfig rc;
  rc.idle = true;  // poll 5 s, below 10% for 3 polls, grace 15 s (the defaults)
  EngineHarness h(Config(rc));
  const PoolId p = h.Pool("gpu");
  h.Node("n0", 1);
  const TenantId a = h.Tenant("a", p, 1, 1);
  const JobId j = h.Submit(h.Spec(a, 1, /*checkpointable=*/true));
  auto at = [](Duration d) { return kTimeOrigin + d; };
  // Busy for a minute, then idle.
  for (Duration t = 5s; t <= 60s; t += 5s) ASSERT_TRUE(h.engine->ReportUtilization(j, 55, at(t), h.sink));
  ASSERT_TRUE(h.engine->ReportUtilization(j, 3, at(65s), h.sink));
  ASSERT_TRUE(h.engine->ReportUtilization(j, 2, at(70s), h.sink));
  EXPECT_TRUE(h.Of<JobIdleSuspected>().empty());
  ASSERT_TRUE(h.engine->ReportUtilization(j, 0, at(75s), h.sink));  // third low poll
  ASSERT_EQ(h.Of<JobIdleSuspected>().size(), 1u);
  EXPECT_EQ(h.events.back().at, at(75s));
  ASSERT_TRUE(h.engine->ReportUtilization(j, 0, at(80s), h.sink));
  ASSERT_TRUE(h.engine->ReportUtilization(j, 0, at(85s), h.sink));
  EXPECT_TRUE(h.Of<ReclaimStarted>().empty());  // still in its grace period
  ASSERT_TRUE(h.engine->ReportUtilization(j, 0, at(90s), h.sink));  // 15 s after the notice
  ASSERT_EQ(h.Of<ReclaimStarted>().size(), 1u);
  EXPECT_EQ(h.events.back().at, at(90s));
  EXPECT_TRUE(h.Of<ReclaimStarted>()[0].checkpoint);
  EXPECT_EQ(h.state(j), JobState::kCheckpointing);
  // The checkpoint takes 8 s; then the GPU is released and offered at once.
  const JobId next = h.Submit(h.Spec(a, 1, false));
  EXPECT_EQ(h.state(next), JobState::kPending);
  ASSERT_TRUE(h.engine->CheckpointDone(j, at(98s), h.sink));
  ASSERT_EQ(h.Of<JobReclaimed>().size(), 1u);
  EXPECT_EQ(h.state(next), JobState::kRunning);
  for (const Event& e : h.events) {
    if (std::holds_alternative<JobReclaimed>(e.body)) {
      EXPECT_EQ(e.at, at(98s));
    }
    if (const auto* placed = std::get_if<JobPlaced>(&e.body); placed && placed->job == next) {
      EXPECT_EQ(e.at, at(98s));
    }
  }
}

TEST(EngineReclaimTest, ATaskThatRecoversInItsGraceKeepsItsGpu) {
  ReclaimConfig rc;
  rc.idle = true;
  EngineHarness h(Config(rc));
  const PoolId p = h.Pool("gpu");
  h.Node("n0", 1);
  const TenantId a = h.Tenant("a", p, 1, 1);
  const JobId j = h.Submit(h.Spec(a, 1, false));
  for (Duration t : {5s, 10s, 15s}) ASSERT_TRUE(h.engine->ReportUtilization(j, 1, kTimeOrigin + t, h.sink));
  ASSERT_EQ(h.Of<JobIdleSuspected>().size(), 1u);
  ASSERT_TRUE(h.engine->ReportUtilization(j, 40, kTimeOrigin + 20s, h.sink));
  ASSERT_EQ(h.Of<JobIdleRecovered>().size(), 1u);
  for (Duration t : {25s, 30s, 35s, 40s}) ASSERT_TRUE(h.engine->ReportUtilization(j, 50, kTimeOrigin + t, h.sink));
  h.engine->Tick(kTimeOrigin + 60s, h.sink);
  EXPECT_TRUE(h.Of<ReclaimStarted>().empty());
  EXPECT_EQ(h.state(j), JobState::kRunning);
}

TEST(EngineReclaimTest, AJobPastItsDeadlineIsCheckpointedAndStopped) {
  EngineHarness h(Config(ReclaimConfig{}));
  const PoolId p = h.Pool("gpu");
  h.Node("n0", 1);
  const TenantId a = h.Tenant("a", p, 1, 1);
  JobSpec s;
  s.tenant = a;
  s.demand = Whole(1, 1000);
  s.deadline = kTimeOrigin + 2h;
  s.checkpointable = false;
  const JobId j = *h.engine->Submit(s, h.now, h.sink);
  h.engine->Tick(kTimeOrigin + 1h, h.sink);
  EXPECT_EQ(h.state(j), JobState::kRunning);
  h.engine->Tick(kTimeOrigin + 2h, h.sink);
  ASSERT_EQ(h.Of<ReclaimStarted>().size(), 1u);
  EXPECT_EQ(h.Of<ReclaimStarted>()[0].reason, ReclaimReason::kDeadline);
  EXPECT_EQ(h.Of<JobReclaimed>().size(), 1u);
  EXPECT_EQ(h.engine->state().find_job(j), nullptr);
}

}  // namespace
}  // namespace gpupool
