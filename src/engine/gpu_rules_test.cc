// The Engine's rules for what a node can enforce (issue 15, EXEC-8, EXEC-11
// and REQUIREMENTS' lessons): an MPS GPU serves one tenant at a time, an
// unhealthy GPU takes no new work, and shares are placed against the memory
// their neighbours really use.
#include <gtest/gtest.h>

#include "src/engine/snapshot.h"
#include "tests/engine_harness.h"

namespace gpupool {
namespace {

using testing::EngineHarness;
using testing::Share;

JobSpec MpsShare(TenantId t, int32_t milli) {
  JobSpec s;
  s.tenant = t;
  s.demand = Share(milli, 1000, 1024);
  s.demand.mode = ShareMode::kMps;
  s.demand.gpu_memory_mib = 8192;
  return s;
}

TEST(MpsTenantRuleTest, AnMpsGpuServesOneTenantAtATime) {
  EngineHarness h(EngineConfig{});
  const PoolId pool = h.Pool("p");
  const TenantId a = h.Tenant("a", pool, 0, 1);
  const TenantId b = h.Tenant("b", pool, 0, 1);
  h.Node("n0", 1);
  const JobId a1 = h.Submit(MpsShare(a, 300));
  const JobId b1 = h.Submit(MpsShare(b, 300));
  const JobId a2 = h.Submit(MpsShare(a, 300));
  EXPECT_EQ(h.job(a1).state, JobState::kRunning);
  EXPECT_EQ(h.job(a2).state, JobState::kRunning) << "the same tenant's shares join its MPS GPU";
  EXPECT_EQ(h.job(b1).state, JobState::kPending) << "another tenant's MPS share must not join it";
  EXPECT_EQ(h.engine->state().cluster.node(0).mps_tenant[0], a);
  h.ExpectSnapshotRoundTrip();
  auto back = DecodeSnapshot(EncodeSnapshot(h.engine->state()), h.engine->config().lending);
  ASSERT_TRUE(back.has_value()) << back.error().message;
  EXPECT_EQ(back->cluster.node(0).mps_tenant[0], a) << "derived again from the allocations' owners";
  EXPECT_EQ(back->job(b1).spec.demand.mps_tenant, b);

  ASSERT_TRUE(h.engine->Finish(a1, true, h.now, h.sink).has_value());
  EXPECT_EQ(h.job(b1).state, JobState::kPending) << "a2 still holds the GPU's MPS daemon for tenant a";
  ASSERT_TRUE(h.engine->Finish(a2, true, h.now, h.sink).has_value());
  EXPECT_EQ(h.job(b1).state, JobState::kRunning) << "the GPU is idle again (scrubbed first), so b may use it";
  EXPECT_EQ(h.engine->state().cluster.node(0).mps_tenant[0], b);
}

TEST(MpsTenantRuleTest, AnotherTenantsMpsShareTakesAnotherGpu) {
  EngineHarness h(EngineConfig{});
  const PoolId pool = h.Pool("p");
  const TenantId a = h.Tenant("a", pool, 0, 2);
  const TenantId b = h.Tenant("b", pool, 0, 2);
  h.Node("n0", 2);
  const JobId a1 = h.Submit(MpsShare(a, 300));
  const JobId b1 = h.Submit(MpsShare(b, 300));
  ASSERT_EQ(h.job(a1).state, JobState::kRunning);
  ASSERT_EQ(h.job(b1).state, JobState::kRunning);
  EXPECT_NE(h.job(a1).placements[0].gpus, h.job(b1).placements[0].gpus);
  // Time-sliced shares are not bound to a tenant by MPS: they may share.
  JobSpec ts = MpsShare(b, 300);
  ts.demand.mode = ShareMode::kTimeSlice;
  ts.demand.mps_tenant = b;  // as if scoped before its mode changed
  ScopeMpsShares(ts);
  EXPECT_EQ(ts.demand.mps_tenant, -1);
}

TEST(MpsTenantRuleTest, ScopeSetsTheTenantOnMpsSharesOnly) {
  JobSpec s = MpsShare(3, 250);
  ScopeMpsShares(s);
  EXPECT_EQ(s.demand.mps_tenant, 3);
  s.demand.mode = ShareMode::kMig;
  ScopeMpsShares(s);
  EXPECT_EQ(s.demand.mps_tenant, -1);
  s.stages = {Share(200), Share(300)};
  s.stages[1].mode = ShareMode::kMps;
  ScopeMpsShares(s);
  EXPECT_EQ(s.stages[0].mps_tenant, -1);
  EXPECT_EQ(s.stages[1].mps_tenant, 3);
}

JobSpec WholeGpuJob(EngineHarness& h, TenantId t, bool checkpointable) {
  JobSpec s = h.Spec(t, 1, checkpointable);
  s.demand.cpu_milli = 1000;
  return s;
}

TEST(GpuHealthTest, AnUnhealthyGpuTakesNoNewWorkUntilItIsHealthyAgain) {
  EngineHarness h(EngineConfig{});
  const PoolId pool = h.Pool("p");
  const TenantId a = h.Tenant("a", pool, 0, 2);
  const NodeIndex n = h.Node("n0", 2);
  ASSERT_TRUE(h.engine->ReportGpuHealth(n, 0b01, "GPU 0: XID 79 (fallen off the bus)", h.now, h.sink).has_value());
  ASSERT_EQ(h.Of<GpuHealthChanged>().size(), 1u);
  EXPECT_EQ(h.Of<GpuHealthChanged>()[0].reason, "GPU 0: XID 79 (fallen off the bus)");
  // The same set again decides nothing.
  ASSERT_TRUE(h.engine->ReportGpuHealth(n, 0b01, "GPU 0: XID 79 (fallen off the bus)", h.now, h.sink).has_value());
  EXPECT_EQ(h.Of<GpuHealthChanged>().size(), 1u);

  const JobId j1 = h.Submit(WholeGpuJob(h, a, true));
  const JobId j2 = h.Submit(WholeGpuJob(h, a, true));
  EXPECT_EQ(h.job(j1).state, JobState::kRunning);
  EXPECT_EQ(h.job(j1).placements[0].gpus, 0b10) << "only the healthy GPU takes work";
  EXPECT_EQ(h.job(j2).state, JobState::kPending);
  JobSpec share = MpsShare(a, 200);
  share.demand.mode = ShareMode::kTimeSlice;
  const JobId j3 = h.Submit(share);
  EXPECT_EQ(h.job(j3).state, JobState::kPending) << "nor does a share go to the unhealthy GPU";
  h.ExpectSnapshotRoundTrip();
  auto back = DecodeSnapshot(EncodeSnapshot(h.engine->state()), h.engine->config().lending);
  ASSERT_TRUE(back.has_value()) << back.error().message;
  EXPECT_EQ(back->cluster.node(n).gpu_unhealthy, 0b01);

  ASSERT_TRUE(h.engine->Cancel(j3, h.now, h.sink).has_value());
  ASSERT_TRUE(h.engine->ReportGpuHealth(n, 0, "", h.now, h.sink).has_value());
  EXPECT_EQ(h.job(j2).state, JobState::kRunning);
  EXPECT_EQ(h.job(j2).placements[0].gpus, 0b01);
}

TEST(GpuHealthTest, CheckpointableWorkMovesOffAGpuThatTurnsUnhealthy) {
  EngineHarness h(EngineConfig{});
  const PoolId pool = h.Pool("p");
  const TenantId a = h.Tenant("a", pool, 0, 4);
  const NodeIndex n0 = h.Node("n0", 2);
  const JobId movable = h.Submit(WholeGpuJob(h, a, true));
  const JobId stays = h.Submit(WholeGpuJob(h, a, false));
  ASSERT_EQ(h.job(movable).placements[0].gpus, 0b01);
  ASSERT_EQ(h.job(stays).placements[0].gpus, 0b10);
  h.Node("n1", 2);
  ASSERT_TRUE(h.engine->ReportGpuHealth(n0, 0b11, "GPU 0: XID 48; GPU 1: XID 48", h.now, h.sink).has_value());
  const auto moves = h.Of<PreemptionStarted>();
  ASSERT_EQ(moves.size(), 1u) << "only the checkpointable job moves";
  EXPECT_EQ(moves[0].victim, movable);
  EXPECT_EQ(moves[0].reason, PreemptReason::kGpuUnhealthy);
  EXPECT_TRUE(moves[0].checkpoint);
  EXPECT_EQ(h.job(stays).state, JobState::kRunning) << "what cannot checkpoint runs on until it ends";
  ASSERT_TRUE(h.engine->CheckpointDone(movable, h.now, h.sink).has_value());
  EXPECT_EQ(h.job(movable).state, JobState::kRunning);
  EXPECT_NE(h.job(movable).placements[0].node, n0);
}

TEST(GpuHealthTest, BadReportsAreRefused) {
  EngineHarness h(EngineConfig{});
  h.Pool("p");
  const NodeIndex n = h.Node("n0", 2);
  EXPECT_FALSE(h.engine->ReportGpuHealth(n, 0b100, "x", h.now, h.sink).has_value());
  EXPECT_FALSE(h.engine->ReportGpuHealth(7, 0, "", h.now, h.sink).has_value());
  EXPECT_TRUE(h.Of<GpuHealthChanged>().empty());
}

TEST(ObservedMemoryTest, SharesArePlacedAgainstWhatTheirNeighboursReallyUse) {
  EngineHarness h(EngineConfig{});
  const PoolId pool = h.Pool("p");
  const TenantId a = h.Tenant("a", pool, 0, 1);
  h.Node("n0", 1);  // one H100: 81559 MiB
  JobSpec small = MpsShare(a, 250);
  small.demand.mode = ShareMode::kTimeSlice;
  small.demand.gpu_memory_mib = 20000;
  const JobId first = h.Submit(small);
  ASSERT_EQ(h.job(first).state, JobState::kRunning);
  // It asked for 20000 MiB but uses 60000: the GPU has about 21.5 GiB left,
  // not 61.5, so a second 40000 MiB share must wait.
  ASSERT_TRUE(h.engine->ReportTaskMemory(first, 0, 60000, h.now, h.sink).has_value());
  ASSERT_EQ(h.Of<TaskMemoryObserved>().size(), 1u);
  EXPECT_EQ(h.Of<TaskMemoryObserved>()[0].used_mib, 60160) << "rounded up to a 256 MiB step";
  // Lower or barely higher readings decide nothing: the peak is kept.
  ASSERT_TRUE(h.engine->ReportTaskMemory(first, 0, 30000, h.now, h.sink).has_value());
  ASSERT_TRUE(h.engine->ReportTaskMemory(first, 0, 60100, h.now, h.sink).has_value());
  EXPECT_EQ(h.Of<TaskMemoryObserved>().size(), 1u);
  JobSpec big = small;
  big.demand.gpu_memory_mib = 40000;
  const JobId second = h.Submit(big);
  EXPECT_EQ(h.job(second).state, JobState::kPending);
  JobSpec fits = small;
  fits.demand.gpu_memory_mib = 20000;
  const JobId third = h.Submit(fits);
  EXPECT_EQ(h.job(third).state, JobState::kRunning) << "what really is free still takes work";
  h.ExpectSnapshotRoundTrip();
  auto back = DecodeSnapshot(EncodeSnapshot(h.engine->state()), h.engine->config().lending);
  ASSERT_TRUE(back.has_value()) << back.error().message;
  EXPECT_EQ(back->cluster.node(0).gpu_memory_free_mib[0], h.engine->state().cluster.node(0).gpu_memory_free_mib[0]);
  // When it ends, all it held comes back.
  ASSERT_TRUE(h.engine->Finish(first, true, h.now, h.sink).has_value());
  EXPECT_EQ(h.job(second).state, JobState::kRunning);
  EXPECT_FALSE(h.engine->ReportTaskMemory(first, 0, 1, h.now, h.sink).has_value()) << "no longer running";
  EXPECT_FALSE(h.engine->ReportTaskMemory(third, 0, -1, h.now, h.sink).has_value());
  EXPECT_FALSE(h.engine->ReportTaskMemory(third, 3, 1, h.now, h.sink).has_value());
}

TEST(ObservedMemoryTest, AChargeNeverBooksAGpuBelowZero) {
  EngineHarness h(EngineConfig{});
  const PoolId pool = h.Pool("p");
  const TenantId a = h.Tenant("a", pool, 0, 2);
  h.Node("n0", 1);
  JobSpec s = MpsShare(a, 250);
  s.demand.mode = ShareMode::kTimeSlice;
  s.demand.gpu_memory_mib = 1000;
  const JobId j = h.Submit(s);
  ASSERT_TRUE(h.engine->ReportTaskMemory(j, 0, 500000, h.now, h.sink).has_value());
  EXPECT_EQ(h.engine->state().cluster.node(0).gpu_memory_free_mib[0], 0);
  ASSERT_TRUE(h.engine->ReportTaskMemory(j, 0, 600000, h.now, h.sink).has_value());
  EXPECT_EQ(h.Of<TaskMemoryObserved>().size(), 1u) << "nothing left to charge";
  // A whole GPU's memory is its own: no charge, no event.
  JobSpec whole = h.Spec(a, 1);
  h.Node("n1", 1);
  const JobId w = h.Submit(whole);
  ASSERT_EQ(h.job(w).state, JobState::kRunning);
  ASSERT_TRUE(h.engine->ReportTaskMemory(w, 0, 90000, h.now, h.sink).has_value());
  EXPECT_EQ(h.Of<TaskMemoryObserved>().size(), 1u);
}

JobSpec MigShare(TenantId t, int32_t milli, int32_t memory_mib) {
  JobSpec s;
  s.tenant = t;
  s.demand = Share(milli, 1000, 1024);
  s.demand.mode = ShareMode::kMig;
  s.demand.gpu_memory_mib = memory_mib;
  s.checkpointable = true;
  s.checkpoint_duration = std::chrono::seconds(30);
  return s;
}

TEST(EngineMigLayoutTest, AReportedModeDecidesWhatAGpuTakes) {
  EngineHarness h(EngineConfig{});
  const PoolId pool = h.Pool("p");
  const TenantId a = h.Tenant("a", pool, 0, 2);
  const NodeIndex n = h.Node("n0", 2);  // H100s
  ASSERT_TRUE(h.engine->ReportMigLayout(n, 0, true, {}, h.now, h.sink).has_value());
  ASSERT_TRUE(h.engine->ReportMigLayout(n, 1, false, {}, h.now, h.sink).has_value());
  EXPECT_EQ(h.Of<MigLayoutReported>().size(), 2u);
  // Again, unchanged: nothing to decide.
  ASSERT_TRUE(h.engine->ReportMigLayout(n, 0, true, {}, h.now, h.sink).has_value());
  EXPECT_EQ(h.Of<MigLayoutReported>().size(), 2u);
  const JobId whole = h.Submit(h.Spec(a, 1));
  const JobId mig = h.Submit(MigShare(a, 300, 20000));
  ASSERT_EQ(h.job(whole).state, JobState::kRunning);
  EXPECT_EQ(h.job(whole).placements[0].gpus, 0b10) << "a GPU in MIG mode is no whole GPU";
  ASSERT_EQ(h.job(mig).state, JobState::kRunning);
  EXPECT_EQ(h.job(mig).placements[0].gpus, 0b01) << "a MIG share goes only where MIG mode is on";
  const JobId second_whole = h.Submit(h.Spec(a, 1));
  EXPECT_EQ(h.job(second_whole).state, JobState::kPending);
  h.ExpectSnapshotRoundTrip();
  auto back = DecodeSnapshot(EncodeSnapshot(h.engine->state()), h.engine->config().lending);
  ASSERT_TRUE(back.has_value()) << back.error().message;
  EXPECT_EQ(back->cluster.node(n).mig_enabled, 0b01);
  EXPECT_EQ(back->cluster.node(n).mig_reported, 0b11);
}

TEST(EngineMigLayoutTest, AnExistingLayoutIsAdoptedAndUsedNeverCutInto) {
  EngineHarness h(EngineConfig{});
  const PoolId pool = h.Pool("p");
  const TenantId a = h.Tenant("a", pool, 0, 1);
  const NodeIndex n = h.Node("n0", 1);
  // The operator cut the GPU into 3g.40gb@4 and 4g.40gb@0.
  ASSERT_TRUE(h.engine->ReportMigLayout(n, 0, true, {{"3g.40gb", 4}, {"4g.40gb", 0}}, h.now, h.sink).has_value());
  ASSERT_EQ(h.Of<MigLayoutReported>().size(), 1u);
  EXPECT_EQ(h.Of<MigLayoutReported>()[0].instances, (std::vector<MigSlot>{{"4g.40gb", 0}, {"3g.40gb", 4}}));
  const JobId three = h.Submit(MigShare(a, 300, 20000));  // a 3g: the existing one at slice 4
  ASSERT_EQ(h.job(three).state, JobState::kRunning);
  const Allocation& at = h.engine->state().cluster.allocation(h.job(three).placements[0].allocation);
  EXPECT_EQ(at.mig_start, 4);
  // A 1g would fit in the free slices by first fit (slice 0), but they are
  // the 4g instance's: the layout is a fact, so it waits.
  const JobId one = h.Submit(MigShare(a, 100, 5000));
  EXPECT_EQ(h.job(one).state, JobState::kPending);
  EXPECT_TRUE(h.Of<MigRecutStarted>().empty()) << "nor is a reported layout re-cut";
  const JobId four = h.Submit(MigShare(a, 500, 30000));  // a 4g: the existing one at 0
  ASSERT_EQ(h.job(four).state, JobState::kRunning);
  EXPECT_EQ(h.engine->state().cluster.allocation(h.job(four).placements[0].allocation).mig_start, 0);
  // The operator destroys the 4g instance (the job on it finished first):
  // its slices take other profiles again.
  ASSERT_TRUE(h.engine->Finish(four, true, h.now, h.sink).has_value());
  ASSERT_TRUE(h.engine->ReportMigLayout(n, 0, true, {{"3g.40gb", 4}}, h.now, h.sink).has_value());
  EXPECT_EQ(h.job(one).state, JobState::kRunning);
  h.ExpectSnapshotRoundTrip();
}

TEST(EngineMigLayoutTest, AnInstanceThatClashesWithThePlanIsAMismatchNamingBoth) {
  EngineHarness h(EngineConfig{});
  const PoolId pool = h.Pool("p");
  const TenantId a = h.Tenant("a", pool, 0, 1);
  const NodeIndex n = h.Node("n0", 1);
  ASSERT_TRUE(h.engine->ReportMigLayout(n, 0, true, {}, h.now, h.sink).has_value());
  const JobId j = h.Submit(MigShare(a, 300, 20000));  // planned: 3g.40gb at first fit, slice 0
  ASSERT_EQ(h.job(j).state, JobState::kRunning);
  ASSERT_EQ(h.engine->state().cluster.allocation(h.job(j).placements[0].allocation).mig_start, 0);
  // The hardware has a 4g.40gb at 0 instead (someone cut it by hand).
  for (int i = 0; i < 3; ++i) {
    ASSERT_TRUE(h.engine->ReportMigLayout(n, 0, true, {{"4g.40gb", 0}, {"2g.20gb", 4}}, h.now, h.sink).has_value());
  }
  const auto mismatches = h.Of<MigLayoutMismatch>();
  ASSERT_EQ(mismatches.size(), 1u) << "said once, not at every report";
  EXPECT_EQ(mismatches[0].reported, "4g.40gb@0");
  EXPECT_EQ(mismatches[0].planned, "3g.40gb@0 (job " + std::to_string(j) + ")");
  // The 2g at 4 does not clash and is adopted; the 4g is not.
  EXPECT_EQ(h.Of<MigLayoutReported>().back().instances, (std::vector<MigSlot>{{"2g.20gb", 4}}));
}

TEST(EngineMigLayoutTest, BadReportsNameTheField) {
  EngineHarness h(EngineConfig{});
  h.Pool("p");
  const NodeIndex n = h.Node("n0", 1);
  auto refused = [&](int gpu, bool on, std::vector<MigSlot> slots, const std::string& words) {
    auto r = h.engine->ReportMigLayout(n, gpu, on, std::move(slots), h.now, h.sink);
    ASSERT_FALSE(r.has_value());
    EXPECT_NE(r.error().message.find(words), std::string::npos) << r.error().message;
  };
  refused(3, true, {}, "gpus[3]");
  refused(0, false, {{"3g.40gb", 4}}, "without MIG mode");
  refused(0, true, {{"5g.50gb", 0}}, "unknown profile '5g.50gb'");
  refused(0, true, {{"3g.40gb", 2}}, "3g.40gb@2 is not a placement");
  refused(0, true, {{"4g.40gb", 0}, {"3g.40gb", 0}}, "overlap");
  EXPECT_TRUE(h.Of<MigLayoutReported>().empty());
}

}  // namespace
}  // namespace gpupool
