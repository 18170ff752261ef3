// The simulator around the Engine: determinism, invariants under random
// workloads, and the accounting of a run.
#include "src/sim/simulator.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "src/base/check.h"
#include "src/control/control_loops.h"
#include "src/model/gpu_catalog.h"
#include "tests/builders.h"
#include "src/sched/target_workload.h"
#include "src/sim/scenario_runner.h"

namespace gpupool {
namespace {

using namespace std::chrono_literals;

// Two teams on one A100 pool: training gangs (checkpointable, some high
// priority) and inference shares, with lognormal run times.
Scenario TwoTeams(uint64_t seed, double rate_per_hour = 20) {
  Scenario s;
  s.name = "two-teams";
  s.seed = seed;
  s.horizon = 12h;
  s.engine.policy = "best";
  s.nodes.push_back(NodeGroupConfig{8, "", "A100-80GB", 8, 128000, 1 << 20, "r", "z", 2, ""});
  s.pools.push_back(PoolConfig{"a100", {"A100-80GB"}, {}, {}});
  s.tenants.push_back(TenantConfig{"research", {{"a100", QuotaConfig{32, 64, 1, false}}}});
  s.tenants.push_back(TenantConfig{"product", {{"a100", QuotaConfig{16, 64, 1, false}}}});
  JobTemplate train;
  train.name = "train";
  train.kind = JobKind::kTraining;
  train.priority = "normal";
  train.gpus = 4;
  train.cpu_milli = 16000;
  train.replicas = {1, 2};
  train.checkpointable = true;
  train.checkpoint_duration = 30s;
  train.duration = DurationModel{DurationModel::Kind::kLogNormal, 0s, 3600, 1.0, 1.0, 60s, 48h};
  JobTemplate urgent = train;
  urgent.name = "urgent";
  urgent.priority = "high";
  urgent.weight = 0.3;
  urgent.checkpointable = false;
  urgent.checkpoint_interval = 10min;
  JobTemplate serve;
  serve.name = "serve";
  serve.kind = JobKind::kOnlineInference;
  serve.priority = "normal";
  serve.gpus = 1;
  serve.gpu_milli = 250;
  serve.cpu_milli = 4000;
  serve.duration = DurationModel{DurationModel::Kind::kLogNormal, 0s, 1800, 1.0, 1.0, 60s, 48h};
  ArrivalProcess arrivals{ArrivalProcess::Kind::kPoisson, rate_per_hour, 0.5, 14, 0s, 10h};
  s.workloads.push_back(TenantWorkload{"research", arrivals, {train, urgent}});
  ArrivalProcess diurnal = arrivals;
  diurnal.kind = ArrivalProcess::Kind::kDiurnal;
  s.workloads.push_back(TenantWorkload{"product", diurnal, {serve, train}});
  return s;
}

TEST(SimulatorTest, SameScenarioSameSeedGivesTheSameEventLogByteForByte) {
  const Scenario s = TwoTeams(7);
  auto a = RunScenario(s, {});
  auto b = RunScenario(s, {});
  ASSERT_TRUE(a.has_value()) << a.error().message;
  ASSERT_TRUE(b.has_value());
  EXPECT_EQ(a->event_log_sha256, b->event_log_sha256);
  EXPECT_EQ(a->events, b->events);
  auto c = RunScenario(TwoTeams(8), {});
  ASSERT_TRUE(c.has_value());
  EXPECT_NE(a->event_log_sha256, c->event_log_sha256);
}

TEST(SimulatorTest, InvariantsHoldAfterEveryEventOverManySeeds) {
  int64_t preemptions = 0, completed = 0;
  for (uint64_t seed = 1; seed <= 12; ++seed) {
    RunOptions o;
    o.check_invariants = true;
    auto r = RunScenario(TwoTeams(seed, 40), o);
    ASSERT_TRUE(r.has_value()) << "seed " << seed << ": " << r.error().message;
    // No job lost or duplicated: every submitted job is rejected, completed or still there.
    EXPECT_EQ(r->all.submitted, r->all.rejected + r->all.completed + r->unfinished) << "seed " << seed;
    preemptions += r->preemptions;
    completed += r->all.completed;
  }
  EXPECT_GT(completed, 100);
  EXPECT_GT(preemptions, 0);  // the workload is contended enough to exercise preemption
}

TEST(SimulatorTest, ReportAccountsForTheRun) {
  auto r = RunScenario(TwoTeams(3), {});
  ASSERT_TRUE(r.has_value()) << r.error().message;
  EXPECT_GT(r->allocation_pct_mean, 0);
  EXPECT_LE(r->allocation_pct_mean, 100);
  EXPECT_EQ(r->by_tenant.size(), 2u);
  EXPECT_NEAR(r->by_tenant.at("research").entitlement_guaranteed_pct, 50.0, 1e-9);  // 32 of 64 GPUs
  EXPECT_NEAR(r->by_tenant.at("product").entitlement_guaranteed_pct, 25.0, 1e-9);
  EXPECT_EQ(r->by_priority.count("high"), 1u);
  EXPECT_EQ(r->allocation_series.size(), static_cast<size_t>(12 * 12 + 1));  // every 5 min over 12 h, and t=0
  EXPECT_EQ(r->event_log_sha256.size(), 64u);
  const auto j = ToJson(*r);
  EXPECT_TRUE(j.contains("event_log_sha256"));
  EXPECT_TRUE(j["by_priority"]["high"]["wait_s"].contains("p99"));
}

// Honest simulation (issue 16): nothing decided before a moment depends on
// what arrives after it. The same scenario with a burst of other shapes
// late in the run decides the same events up to the burst, FGD+'s learned
// target included (the simulator once built it from every job of the run).
std::vector<std::string> EventsBefore(const Scenario& s, int64_t before_ms, const std::string& log) {
  RunOptions options;
  options.event_log_path = log;
  auto r = RunScenario(s, options);
  EXPECT_TRUE(r.has_value()) << r.error().message;
  std::vector<std::string> out;
  std::ifstream in(log);
  for (std::string line; std::getline(in, line);) {
    if (nlohmann::json::parse(line)["at"].get<int64_t>() < before_ms) out.push_back(line);
  }
  std::filesystem::remove(log);
  return out;
}

TEST(SimulatorTest, DecisionsBeforeAMomentDoNotDependOnLaterArrivals) {
  const Scenario plain = TwoTeams(7);
  Scenario late = plain;
  JobTemplate odd;
  odd.name = "odd";
  odd.kind = JobKind::kBatchInference;
  odd.priority = "normal";
  odd.gpus = 1;
  odd.gpu_milli = 300;
  odd.cpu_milli = 24000;
  odd.duration = DurationModel{DurationModel::Kind::kLogNormal, 0s, 1800, 1.0, 1.0, 60s, 48h};
  late.workloads.push_back(TenantWorkload{"product", ArrivalProcess{ArrivalProcess::Kind::kPoisson, 200, 0.5, 14, 8h, 9h},
                                          {odd}});
  const std::string dir = ::testing::TempDir();
  const auto a = EventsBefore(plain, 8 * 3600 * 1000, dir + "plain.jsonl");
  const auto b = EventsBefore(late, 8 * 3600 * 1000, dir + "late.jsonl");
  ASSERT_GT(a.size(), 500u);
  EXPECT_EQ(a, b);
  EXPECT_NE(EventsBefore(plain, 12 * 3600 * 1000, dir + "plain.jsonl"),
            EventsBefore(late, 12 * 3600 * 1000, dir + "late.jsonl"));  // the burst did arrive
}

// --- one small world, jobs given by hand ---------------------------------------

// One tenant, one pool, `nodes` H100 nodes of `gpus` GPUs, the jobs given,
// run by the simulator; the event log comes back parsed.
struct SmallWorld {
  EngineConfig config;
  SimOptions options;
  int nodes = 1, gpus = 1;
  std::vector<std::string> tenants = {"team"};

  Result<std::vector<nlohmann::json>> Run(std::vector<SimJob> jobs, SimReport* report = nullptr) {
    const std::string log = ::testing::TempDir() + "small-world-" +
                            ::testing::UnitTest::GetInstance()->current_test_info()->name() + ".jsonl";
    options.event_log_path = log;
    options.check_invariants = true;
    const GpuModelId h100 = *Catalog::Builtin().Find("H100");
    GP_ASSIGN_OR_RETURN(auto engine, CreateEngine(config, AttributeTable{}));
    Simulator sim(engine.get(), std::move(jobs), options);
    Engine& e = *engine;
    for (const std::string& t : tenants) GP_CHECK(e.AddTenant(t, kTimeOrigin, sim.sink()).has_value());
    GP_CHECK(e.AddPool("h100", PoolSelector{}, {}, kTimeOrigin, sim.sink()).has_value());
    for (int n = 0; n < nodes; ++n) {
      NodeSpec spec{"node-" + std::to_string(n), 64000, 512 * 1024, gpus, h100, 0, 0};
      GP_CHECK(e.AddNode(spec, "r", "z", "rack", kTimeOrigin, sim.sink()).has_value());
    }
    for (size_t t = 0; t < tenants.size(); ++t) {
      const int64_t all = int64_t{nodes} * gpus * kMilliPerGpu;
      GP_CHECK(e.SetQuota(static_cast<TenantId>(t), 0, Quota{0, all, 1, false}, kTimeOrigin, sim.sink()).has_value());
    }
    GP_ASSIGN_OR_RETURN(auto r, sim.Run("small-world"));
    if (report) *report = r;
    std::vector<nlohmann::json> events;
    std::ifstream in(log);
    for (std::string line; std::getline(in, line);) events.push_back(nlohmann::json::parse(line));
    std::filesystem::remove(log);
    return events;
  }
};

SimJob OneGpuJob(TenantId tenant, Instant arrival, Duration work) {
  SimJob j;
  j.spec.name = "job";
  j.spec.tenant = tenant;
  j.spec.kind = JobKind::kTraining;
  j.spec.demand = testing::Whole(1, 4000, 16384);
  j.spec.checkpointable = true;
  j.spec.checkpoint_duration = 20s;
  j.arrival = arrival;
  j.work = work;
  j.priority_class = "normal";
  return j;
}

// Milliseconds of the first event of `type` (for `job` when >= 0) at or after `from_ms`; -1 if none.
int64_t FirstAt(const std::vector<nlohmann::json>& log, const std::string& type, int64_t job = -1,
                int64_t from_ms = 0) {
  for (const auto& e : log) {
    if (e["type"] != type || e["at"].get<int64_t>() < from_ms) continue;
    if (job >= 0 && !(e.contains("job") && e["job"] == job)) continue;
    return e["at"].get<int64_t>();
  }
  return -1;
}

// RECLAIM-1 through the simulator: a task busy for 10 minutes, then idle.
// Every transition lands where the configuration puts it: polls every 5 s
// from its start, 3 idle polls, 15 s of grace, a 20 s checkpoint; its owner
// submits it again 10 minutes (the think time) after its release, whatever
// its utilization does; it reads its checkpoint back (20 s) after the start
// latency each time it comes back, and it ends when its work is done.
TEST(SimulatorReclaimTest, OneIdleTaskFollowsTheConfigurationExactly) {
  SmallWorld w;
  w.config.reclaim.idle = true;  // poll 5 s, below 10% for 3 polls, grace 15 s: the defaults
  w.options.start_latency = 10s;
  w.options.tick = 30s;
  w.options.horizon = 2h;
  w.options.think_time.kind = DurationModel::Kind::kFixed;
  w.options.think_time.fixed = 10min;
  SimJob j = OneGpuJob(0, Instant(1000ms), 20min);
  j.utilization.given = true;
  j.utilization.kind = UtilizationModel::Kind::kBursty;
  j.utilization.busy = 0.9;
  j.utilization.idle = 0.01;
  j.utilization.busy_for = 10min;
  j.utilization.idle_for = 10min;
  SimReport report;
  auto log = w.Run({j}, &report);
  ASSERT_TRUE(log.has_value()) << log.error().message;
  const int64_t placed = FirstAt(*log, "JobPlaced", 1);
  ASSERT_EQ(placed, 1000);
  const int64_t run_start = placed + 10'000;
  const int64_t idle_from = run_start + 600'000;  // busy for 10 minutes
  // Polls at run_start + 5 s k; the polls at idle_from, +5 s and +10 s are idle.
  EXPECT_EQ(FirstAt(*log, "JobIdleSuspected", 1), idle_from + 10'000);
  EXPECT_EQ(FirstAt(*log, "ReclaimStarted", 1), idle_from + 10'000 + 15'000);
  const int64_t released = idle_from + 25'000 + 20'000;
  EXPECT_EQ(FirstAt(*log, "JobReclaimed", 1), released);
  EXPECT_EQ(FirstAt(*log, "JobIdleRecovered"), -1);
  // Its owner is back 10 minutes after the release (its utilization rose
  // 9 min 15 s after it): submitted again (a new job id) and placed at once;
  // its utilization clock keeps running from the first start.
  EXPECT_EQ(FirstAt(*log, "JobSubmitted", 2), released + 600'000);
  EXPECT_EQ(FirstAt(*log, "JobPlaced", 2), released + 600'000);
  const int64_t restart = 10'000 + 20'000;  // start latency, then the restore
  const int64_t second_start = released + 600'000 + restart;
  const int64_t second_idle = idle_from + 1'200'000;  // the next idle stretch of the cycle
  EXPECT_EQ(FirstAt(*log, "JobIdleSuspected", 2), second_idle + 10'000);
  const int64_t released_again = second_idle + 45'000;
  EXPECT_EQ(FirstAt(*log, "JobReclaimed", 2), released_again);
  // Work counts while it runs (until its checkpoint starts); the third
  // stint does the rest.
  const int64_t first_ms = (idle_from + 25'000) - run_start;
  const int64_t second_ms = (second_idle + 25'000) - second_start;
  const int64_t third_start = released_again + 600'000 + restart;
  EXPECT_EQ(FirstAt(*log, "JobPlaced", 3), third_start - restart);
  EXPECT_EQ(FirstAt(*log, "JobFinished", 3), third_start + (20 * 60'000 - first_ms - second_ms));
  EXPECT_EQ(report.reclaim.idle_reclaims, 2);
  EXPECT_EQ(report.reclaim.resumed, 2);
  EXPECT_DOUBLE_EQ(report.reclaim.reclaim_latency_s.p50, 45.0);  // idle start to release
  EXPECT_DOUBLE_EQ(report.reclaim.resume_latency_s.p50, 30.0);   // the start latency and the restore
  // Busy again 9 min 15 s after each release, running again 75 s later.
  EXPECT_NEAR(report.reclaim.busy_while_away_hours, 2 * 75 / 3600.0, 1e-9);
  EXPECT_EQ(report.all.completed, 1);
}

// RECLAIM-1: a dip shorter than the idle polls never reaches the engine as
// idleness; one within the grace is recovered and the task keeps its GPU.
TEST(SimulatorReclaimTest, ShortDipsAreRidingOutAndGraceRecovers) {
  for (const auto& [idle_for, suspected] : {std::pair{Duration(8s), false}, std::pair{Duration(20s), true}}) {
    SmallWorld w;
    w.config.reclaim.idle = true;
    w.options.start_latency = 10s;
    w.options.horizon = 1h;
    SimJob j = OneGpuJob(0, Instant(0ms), 20min);
    j.utilization.given = true;
    j.utilization.kind = UtilizationModel::Kind::kBursty;
    j.utilization.busy_for = 5min;
    j.utilization.idle_for = idle_for;
    auto log = w.Run({j});
    ASSERT_TRUE(log.has_value()) << log.error().message;
    EXPECT_EQ(FirstAt(*log, "JobIdleSuspected") >= 0, suspected) << ToSeconds(idle_for);
    EXPECT_EQ(FirstAt(*log, "JobIdleRecovered") >= 0, suspected) << ToSeconds(idle_for);
    EXPECT_EQ(FirstAt(*log, "ReclaimStarted"), -1) << ToSeconds(idle_for);
    EXPECT_GE(FirstAt(*log, "JobFinished"), 0) << ToSeconds(idle_for);
  }
}

// PART-1: two time-sliced tasks whose loads add up to more than the GPU
// slow each other down (switch overhead and contention); the same tasks on
// MIG instances do not slow each other, but each wants more than its
// instance gives and runs at the instance's share over its load.
TEST(SimulatorSharingTest, TimeSlicingSlowsCoLocatedTasksAndMigDoesNot) {
  auto run = [](ShareMode mode, double load) {
    SmallWorld w;
    w.options.start_latency = 0s;
    w.options.horizon = 4h;
    w.options.costs.time_slice_overhead = 0.04;
    std::vector<SimJob> jobs;
    for (int i = 0; i < 2; ++i) {
      SimJob j = OneGpuJob(0, Instant(0ms), 1h);
      j.spec.demand = testing::Share(400, 4000, 16384);
      j.spec.demand.mode = mode;
      j.spec.demand.gpu_memory_mib = 20000;
      j.utilization.given = true;
      j.utilization.busy = load;
      jobs.push_back(j);
    }
    SimReport report;
    auto log = w.Run(jobs, &report);
    GP_CHECK(log.has_value()) << log.error().message;
    return std::pair{report, FirstAt(*log, "JobFinished")};
  };
  // Loads 0.75 + 0.75 = 1.5: each runs at (1 - 0.04) / 1.5 of its speed alone.
  const auto [sliced, sliced_end] = run(ShareMode::kTimeSlice, 0.75);
  EXPECT_NEAR(sliced_end / 1000.0, 3600 * 1.5 / 0.96, 1.0);
  EXPECT_NEAR(sliced.sharing.interference_slowdown_pct, 100 * (1.5 / 0.96 - 1), 0.1);
  // Loads that fit (0.3 + 0.3): only the switch overhead.
  const auto [light, light_end] = run(ShareMode::kTimeSlice, 0.3);
  EXPECT_NEAR(light_end / 1000.0, 3600 / 0.96, 1.0);
  // MIG: isolated instances, a MIG set-up before the start. 0.4 of a GPU
  // with 20,000 MiB is a 3g.40gb instance of the H100 (3 of 7 compute
  // slices, charged 428 milli): a task that wants 0.75 runs at 0.428 / 0.75.
  const auto [mig, mig_end] = run(ShareMode::kMig, 0.75);
  EXPECT_NEAR(mig_end / 1000.0, ToSeconds(SharingCosts{}.mig_setup) + 3600 * 0.75 / 0.428, 1.0);
  EXPECT_NEAR(mig.sharing.interference_slowdown_pct, 0.0, 1e-9);
  EXPECT_NEAR(mig.sharing.share_limit_slowdown_pct, 100 * (0.75 / 0.428 - 1), 0.1);
  EXPECT_NEAR(mig.sharing.sharing_slowdown_pct, 100 * (0.75 / 0.428 - 1), 0.1);
  EXPECT_EQ(mig.sharing.mig_setups, 2);
  // Loads within the instance (0.3 of 0.428): no slowdown at all.
  const auto [mig_light, mig_light_end] = run(ShareMode::kMig, 0.3);
  EXPECT_NEAR(mig_light_end / 1000.0, 3600 + ToSeconds(SharingCosts{}.mig_setup), 1.0);
  EXPECT_NEAR(mig_light.sharing.sharing_slowdown_pct, 0.0, 1e-9);
  // MPS: the share's active threads limit it the same way (0.4 as asked:
  // MPS shares are not rounded to profiles), and nothing else slows it.
  const auto [mps, mps_end] = run(ShareMode::kMps, 0.75);
  EXPECT_NEAR(mps_end / 1000.0, 3600 * 0.75 / 0.4, 1.0);
  EXPECT_NEAR(mps.sharing.interference_slowdown_pct, 0.0, 1e-9);
  EXPECT_NEAR(mps.sharing.share_limit_slowdown_pct, 100 * (0.75 / 0.4 - 1), 0.1);
}

// OPS-4 through the simulator: a node stops heartbeating; after the timeout
// its job is placed on the other node, resuming from its last periodic
// checkpoint; the lost work and the replacement latency are reported.
TEST(SimulatorRecoveryTest, AFailedNodesJobMovesAndLosesOnlyWorkSinceItsCheckpoint) {
  SmallWorld w;
  w.nodes = 2;
  w.config.heartbeat_timeout = 15s;
  w.options.tick = 5s;
  w.options.start_latency = 10s;
  w.options.horizon = 6h;
  SimJob j = OneGpuJob(0, Instant(0ms), 2h);
  j.spec.checkpoint_interval = 30min;
  // The job lands on node-0 (the first node); it fails 50 minutes in.
  w.options.faults.push_back(FaultSpec{"node-0", 50min + 10s + 2500ms, 30min});
  SimReport report;
  auto log = w.Run({j}, &report);
  ASSERT_TRUE(log.has_value()) << log.error().message;
  ASSERT_EQ(report.recovery.interruptions, 1);
  EXPECT_EQ(report.recovery.node_failures, 1);
  // Ran 50 min 2.5 s; the checkpoint at 30 min saved 30 of them (the
  // periodic checkpoints cost 2.5% of speed, so a little less was computed).
  const double lost_s = report.recovery.lost_work_s.mean;
  EXPECT_GT(lost_s, 0.97 * (20 * 60 + 2.5) * (1 - 0.025) * 0.95);
  EXPECT_LT(lost_s, 20 * 60 + 3);
  // Last heartbeat at the tick before the fault; down after 15 s of silence,
  // at the first tick past it; then placed at once on node-1, running again
  // after the start latency (10 s) and reading its checkpoint back (20 s).
  const int64_t fault_ms = (50 * 60 + 10) * 1000 + 2500;
  const int64_t down = FirstAt(*log, "NodeDown");
  EXPECT_GT(down, fault_ms);
  EXPECT_LE(down - fault_ms, 15'000 + 5'000);
  EXPECT_NEAR(report.recovery.placement_latency_s.p50, (down - fault_ms) / 1000.0, 1e-9);
  const double replace_s = report.recovery.replace_latency_s.p50;
  EXPECT_NEAR(replace_s, (down - fault_ms) / 1000.0 + 10 + 20, 1e-9);
  EXPECT_LE(replace_s, 50.0);
  // The node comes back scrubbed, and the job completes.
  EXPECT_GE(FirstAt(*log, "NodeUp"), fault_ms + 30 * 60 * 1000);
  EXPECT_GE(FirstAt(*log, "JobFinished"), 0);
  EXPECT_EQ(report.all.completed, 1);
}

// Everything at once over many seeds, with node failures injected and every
// invariant checked after every event (no GPU over-allocated, no memory
// reused across tenants unscrubbed, only valid MIG layouts, reservations
// consistent): sharing modes, idle reclamation, deadlines, faults.
TEST(SimulatorTest, InvariantsHoldWithSharingReclaimAndFaultsOverManySeeds) {
  int64_t reclaims = 0, interruptions = 0, mig = 0, scrubs = 0, completed = 0;
  for (uint64_t seed = 1; seed <= 10; ++seed) {
    Scenario s = TwoTeams(seed, 40);
    s.engine.reclaim.idle = true;
    s.engine.heartbeat_timeout = 20s;
    s.tick = 10s;
    for (TenantWorkload& w : s.workloads) {
      for (JobTemplate& t : w.jobs) {
        if (t.gpu_milli < kMilliPerGpu) {  // the shares: a mix of modes, some idle often
          t.sharing = seed % 2 ? "auto" : "mig";
          t.gpu_memory_mib = 12 * 1024;
          t.utilization.given = true;
          t.utilization.kind = UtilizationModel::Kind::kBursty;
          t.utilization.busy_for = 20min;
          t.utilization.idle_for = 15min;
          t.utilization.phase_jitter = 30min;
        }
        if (t.name == "urgent") t.deadline_after = 3h;
      }
    }
    for (int f = 0; f < 4; ++f) {
      s.faults.push_back(FaultSpec{"a100-80gb-" + std::to_string((seed + f * 3) % 8), Duration(1h) * (1 + 2 * f) +
                                                                                           Duration(seed * 777ms),
                                   20min});
    }
    RunOptions o;
    o.check_invariants = true;
    auto r = RunScenario(s, o);
    ASSERT_TRUE(r.has_value()) << "seed " << seed << ": " << r.error().message;
    // No job lost: each is rejected, completed, ended (reclaimed and never back) or still there.
    EXPECT_EQ(r->all.submitted, r->all.rejected + r->all.completed + r->unfinished + r->ended) << "seed " << seed;
    reclaims += r->reclaim.idle_reclaims;
    interruptions += r->recovery.interruptions;
    mig += r->sharing.mig_setups;
    scrubs += r->sharing.scrubs;
    completed += r->all.completed;
    EXPECT_EQ(r->recovery.node_failures, 4) << "seed " << seed;
  }
  EXPECT_GT(reclaims, 0);
  EXPECT_GT(interruptions, 0);
  EXPECT_GT(mig, 0);
  EXPECT_GT(completed, 100);
  (void)scrubs;
}

}  // namespace
}  // namespace gpupool
