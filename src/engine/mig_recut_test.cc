// Vertical scaling (PART-5): a MIG GPU is re-cut when a waiting job's
// profile has enough free slices there but no free documented start. The
// planner alone first, then scenarios through the Engine; every event is
// followed by the state's invariants and a check that every GPU's MIG
// layout is one the hardware accepts.
#include "src/engine/mig_recut.h"

#include <gtest/gtest.h>

#include <bit>

#include "src/base/rng.h"
#include "src/control/control_loops.h"
#include "src/engine/engine.h"
#include "src/model/mig.h"
#include "tests/builders.h"

namespace gpupool {
namespace {

using namespace std::chrono_literals;

// --- the planner ---------------------------------------------------------------

const MigTable& A100() { return *FindMigTable("A100-80GB"); }
int ProfileNamed(const MigTable& t, const std::string& name) {
  for (int p = 0; p < static_cast<int>(t.profiles.size()); ++p) {
    if (t.profiles[p].name == name) return p;
  }
  ADD_FAILURE() << "no profile " << name;
  return -1;
}

TEST(MigRecutPlanTest, ScatteredSmallInstancesMoveOneToMakeRoomForA3g) {
  const MigTable& t = A100();
  const int g1 = ProfileNamed(t, "1g.10gb"), g3 = ProfileNamed(t, "3g.40gb");
  // 1g at slices 1 and 5: six slices free, yet neither start of a 3g (0, 4).
  ASSERT_FALSE(FindPlacement(t, g3, SliceMask(t, g1, 1) | SliceMask(t, g1, 5), 0).has_value());
  const auto plan = PlanMigRecut(t, {{g1, 1, true, 10}, {g1, 5, true, 10}}, g3);
  ASSERT_TRUE(plan.has_value());
  EXPECT_EQ(plan->moved_count, 1);
  EXPECT_EQ(plan->moved, 1u);  // equal costs: the lowest mask, the instance at slice 1
  EXPECT_EQ(plan->start, 0);
  EXPECT_TRUE(IsValidLayout(t, plan->layout));
  EXPECT_EQ(plan->layout, (std::vector<std::pair<int, uint8_t>>{{g1, 5}, {g3, 0}, {g1, 4}}));
}

TEST(MigRecutPlanTest, TheCheaperInstanceMovesAndUnmovableOnesStay) {
  const MigTable& t = A100();
  const int g1 = ProfileNamed(t, "1g.10gb"), g3 = ProfileNamed(t, "3g.40gb");
  auto plan = PlanMigRecut(t, {{g1, 1, true, 50}, {g1, 5, true, 10}}, g3);
  ASSERT_TRUE(plan.has_value());
  EXPECT_EQ(plan->moved, 2u);
  EXPECT_EQ(plan->start, 4);
  plan = PlanMigRecut(t, {{g1, 1, true, 10}, {g1, 5, false, 0}}, g3);
  ASSERT_TRUE(plan.has_value());
  EXPECT_EQ(plan->moved, 1u);
  EXPECT_FALSE(PlanMigRecut(t, {{g1, 1, false, 0}, {g1, 5, false, 0}}, g3).has_value());
}

TEST(MigRecutPlanTest, NoPlanWithoutEnoughSlicesOrPastTheProfileLimit) {
  const MigTable& t = A100();
  const int g1 = ProfileNamed(t, "1g.10gb"), g3 = ProfileNamed(t, "3g.40gb"), g4 = ProfileNamed(t, "4g.40gb");
  // 5 slices used: a 4-slice profile cannot fit however the GPU is cut.
  EXPECT_FALSE(PlanMigRecut(t, {{g1, 0, true, 1}, {g1, 2, true, 1}, {g1, 4, true, 1}, {g1, 5, true, 1}, {g1, 6, true, 1}},
                            g3)
                   .has_value());
  // One 4g at most per GPU.
  EXPECT_FALSE(PlanMigRecut(t, {{g4, 0, true, 1}}, g4).has_value());
  // A profile that fits as things are needs no move.
  const auto plan = PlanMigRecut(t, {{g1, 1, true, 1}}, g3);
  ASSERT_TRUE(plan.has_value());
  EXPECT_EQ(plan->moved, 0u);
  EXPECT_EQ(plan->start, 4);
}

TEST(MigRecutPlanTest, FourSliceA30AndEightSliceH100) {
  const MigTable& a30 = *FindMigTable("A30");
  const int a1 = ProfileNamed(a30, "1g.6gb"), a2 = ProfileNamed(a30, "2g.12gb");
  // 1g at 1 and 2: two slices free (0, 3) but no 2g start (0, 2) free.
  auto plan = PlanMigRecut(a30, {{a1, 1, true, 1}, {a1, 2, true, 1}}, a2);
  ASSERT_TRUE(plan.has_value());
  EXPECT_EQ(plan->moved_count, 1);
  EXPECT_TRUE(IsValidLayout(a30, plan->layout));
  const MigTable& h100 = *FindMigTable("H100");
  const int h1 = ProfileNamed(h100, "1g.10gb"), h4 = ProfileNamed(h100, "4g.40gb");
  // The 4g's only start is 0: both 1g inside slices 0-3 move, the one at 5 stays.
  plan = PlanMigRecut(h100, {{h1, 1, true, 1}, {h1, 2, true, 1}, {h1, 5, true, 1}}, h4);
  ASSERT_TRUE(plan.has_value());
  EXPECT_EQ(plan->moved, 3u);
  EXPECT_EQ(plan->start, 0);
  EXPECT_TRUE(IsValidLayout(h100, plan->layout));
}

TEST(MigRecutPlanTest, MovedInstancesMustFitBackInAnyOrder) {
  const MigTable& t = A100();
  const int g1x2 = ProfileNamed(t, "1g.20gb"), g2 = ProfileNamed(t, "2g.20gb"), g4 = ProfileNamed(t, "4g.40gb");
  // A 1g.20gb at 0 and a 2g at 2 block the 4g (start 0 only). Moving both
  // puts the 4g at 0-3; a valid layout exists (2g at 4, 1g.20gb at 6), but
  // first fit reaches it only if the 2g comes back first: the 1g.20gb
  // first takes 4-5, and the 2g (starts 0, 2, 4) has nowhere to go. The
  // moved tasks come back in an order nobody controls, so no plan.
  EXPECT_TRUE(IsValidLayout(t, {{g4, 0}, {g2, 4}, {g1x2, 6}}));
  EXPECT_FALSE(PlanMigRecut(t, {{g1x2, 0, true, 1}, {g2, 2, true, 1}}, g4).has_value());
  // With the 2g alone in the way, moving it is safe.
  const auto plan = PlanMigRecut(t, {{g2, 2, true, 1}, {g1x2, 6, false, 0}}, g4);
  ASSERT_TRUE(plan.has_value());
  EXPECT_EQ(plan->moved, 1u);
  EXPECT_EQ(plan->layout, (std::vector<std::pair<int, uint8_t>>{{g1x2, 6}, {g4, 0}, {g2, 4}}));
}

// --- through the Engine -----------------------------------------------------------

class Harness {
 public:
  Harness() {
    EngineConfig config;
    config.policy = "BestFit";
    config.workload_learning.prior = {testing::Whole(1, 8000), testing::Share(500, 2000)};
    auto e = CreateEngine(config, AttributeTable{});
    EXPECT_TRUE(e.has_value()) << (e ? "" : e.error().message);
    engine = std::move(*e);
    sink = [this](const Event& ev) {
      log.push_back(ev);
      // Includes: every GPU's MIG instances form a valid layout matching its used slices.
      auto ok = CheckInvariants(engine->state());
      ASSERT_TRUE(ok.has_value()) << ok.error().message << " after " << ToJsonLine(ev);
      if (const auto* placed = std::get_if<JobPlaced>(&ev.body)) {
        auto scrubbed = CheckPlacedOnScrubbedGpus(engine->state(), *placed);
        ASSERT_TRUE(scrubbed.has_value()) << scrubbed.error().message;
      }
    };
    pool = *engine->AddPool("gpus", PoolSelector{kAnyGpuModel, {}}, {}, now, sink);
  }
  NodeIndex Node(const std::string& model, int gpus) {
    const GpuModelId m = *Catalog::Builtin().Find(model);
    NodeSpec spec{model + "-" + std::to_string(engine->state().cluster.node_count()), 96000, 1 << 20, gpus, m, 0, 0};
    auto n = engine->AddNode(spec, "r1", "z1", "rack1", now, sink);
    EXPECT_TRUE(n.has_value()) << (n ? "" : n.error().message);
    return *n;
  }
  TenantId Tenant(const std::string& name, int64_t guaranteed_milli, int64_t limit_milli) {
    const TenantId t = *engine->AddTenant(name, now, sink);
    auto ok = engine->SetQuota(t, pool, Quota{guaranteed_milli, limit_milli, 1, false}, now, sink);
    EXPECT_TRUE(ok.has_value()) << (ok ? "" : ok.error().message);
    return t;
  }
  // A MIG task: 1g.10gb (100 milli, 9000 MiB) or 3g.40gb (400, 30000) or
  // 4g.40gb (520, 30000) on an A100-80GB.
  JobId Mig(TenantId t, int32_t milli, int32_t memory_mib, bool checkpointable, int priority = 0) {
    JobSpec s;
    s.tenant = t;
    s.priority = priority;
    s.demand = Demand{1000, 4096, 1, milli, kAnyGpuModel};
    s.demand.mode = ShareMode::kMig;
    s.demand.gpu_memory_mib = memory_mib;
    s.checkpointable = checkpointable;
    s.checkpoint_duration = 20s;
    auto id = engine->Submit(s, now, sink);
    EXPECT_TRUE(id.has_value()) << (id ? "" : id.error().message);
    return *id;
  }
  JobId Small(TenantId t, bool checkpointable) { return Mig(t, 100, 9000, checkpointable); }
  JobId ThreeG(TenantId t) { return Mig(t, 400, 30000, true); }
  void Finish(JobId j) { ASSERT_TRUE(engine->Finish(j, true, now, sink).has_value()); }
  void CheckpointDone(JobId j) {
    now += 20s;
    ASSERT_TRUE(engine->CheckpointDone(j, now, sink).has_value());
  }
  JobState State(JobId id) const {
    const Job* j = engine->state().find_job(id);
    return j ? j->state : JobState::kSucceeded;
  }
  const Allocation& Alloc(JobId id) const {
    const Job& j = engine->state().job(id);
    return engine->state().cluster.allocation(j.placements.at(0).allocation);
  }
  template <class T>
  std::vector<T> Events() const {
    std::vector<T> out;
    for (const Event& e : log) {
      if (auto* b = std::get_if<T>(&e.body)) out.push_back(*b);
    }
    return out;
  }
  std::vector<std::string> Lines() const {
    std::vector<std::string> out;
    for (const Event& e : log) out.push_back(ToJsonLine(e));
    return out;
  }

  std::unique_ptr<Engine> engine;
  Engine::Sink sink;
  std::vector<Event> log;
  Instant now{};
  PoolId pool = 0;
};

// Seven 1g tasks of `owner` fill slices 0-6 of a one-GPU A100-80GB node;
// all but those at `keep` finish. Returns the jobs at each start slice.
std::vector<JobId> Fragment(Harness& h, TenantId owner, const std::vector<int>& keep,
                            const std::vector<int>& checkpointable) {
  std::vector<JobId> at(7);
  for (int i = 0; i < 7; ++i) {
    const bool ck = std::find(checkpointable.begin(), checkpointable.end(), i) != checkpointable.end();
    at[i] = h.Small(owner, ck);
    EXPECT_EQ(h.State(at[i]), JobState::kRunning);
    EXPECT_EQ(h.Alloc(at[i]).mig_start, i);
  }
  for (int i = 0; i < 7; ++i) {
    if (std::find(keep.begin(), keep.end(), i) == keep.end()) h.Finish(at[i]);
  }
  return at;
}

TEST(MigRecutTest, AWaiting3gReCutsAFragmentedGpuAndTheMovedTaskComesBack) {
  Harness h;
  const NodeIndex node = h.Node("A100-80GB", 1);
  const TenantId a = h.Tenant("a", 0, 1000);
  const TenantId b = h.Tenant("b", 0, 1000);
  const std::vector<JobId> at = Fragment(h, b, {1, 5}, {1, 5});
  // Slices 0, 2, 3, 4, 6, 7 are free; a 3g needs 0-3 or 4-7.
  const JobId big = h.ThreeG(a);
  ASSERT_EQ(h.State(big), JobState::kPending);
  // The re-cut: the task at slice 1 moves (one move; equal costs, lowest slice).
  const auto recuts = h.Events<MigRecutStarted>();
  ASSERT_EQ(recuts.size(), 1u);
  EXPECT_EQ(recuts[0].job, big);
  EXPECT_EQ(recuts[0].node, node);
  EXPECT_EQ(recuts[0].gpu, 0);
  EXPECT_EQ(recuts[0].profile, "3g.40gb");
  EXPECT_EQ(recuts[0].start, 0);
  EXPECT_EQ(recuts[0].moved, std::vector<JobId>{at[1]});
  const auto preempted = h.Events<PreemptionStarted>();
  ASSERT_EQ(preempted.size(), 1u);
  EXPECT_EQ(preempted[0].victim, at[1]);
  EXPECT_EQ(preempted[0].preemptor, big);
  EXPECT_EQ(preempted[0].reason, PreemptReason::kMigRecut);
  EXPECT_TRUE(preempted[0].checkpoint);
  EXPECT_EQ(h.State(at[1]), JobState::kCheckpointing);
  EXPECT_EQ(h.State(at[5]), JobState::kRunning);
  EXPECT_EQ(h.engine->state().cluster.node(node).reserved_for, big);
  // A Tick does not re-cut again while the move is in progress.
  h.now += 5s;
  h.engine->Tick(h.now, h.sink);
  EXPECT_EQ(h.Events<MigRecutStarted>().size(), 1u);
  // Checkpoint done: the 3g starts at slice 0, the moved task comes back
  // beside the one that stayed.
  h.CheckpointDone(at[1]);
  EXPECT_EQ(h.State(big), JobState::kRunning);
  EXPECT_EQ(h.Alloc(big).mig_start, 0);
  EXPECT_EQ(h.State(at[1]), JobState::kRunning);
  EXPECT_EQ(h.Alloc(at[1]).node, node);
  EXPECT_EQ(h.Alloc(at[1]).mig_start, 4);
  EXPECT_EQ(h.Alloc(at[5]).mig_start, 5);
  EXPECT_EQ(h.engine->state().cluster.node(node).reserved_for, -1);
  EXPECT_TRUE(h.engine->state().recut_moved.empty());
  EXPECT_EQ(h.engine->state().job(at[1]).preemptions, 1);
  EXPECT_EQ(h.Events<JobPreempted>().size(), 1u);
  // Tenant b's memory was zeroed before tenant a's instance started there.
  EXPECT_FALSE(h.Events<GpusScrubbed>().empty());
}

TEST(MigRecutTest, NonCheckpointableTasksAreNeverMoved) {
  Harness h;
  h.Node("A100-80GB", 1);
  const TenantId a = h.Tenant("a", 0, 1000);
  const TenantId b = h.Tenant("b", 0, 1000);
  Fragment(h, b, {1, 5}, {});
  const JobId big = h.ThreeG(a);
  h.now += 1min;
  h.engine->Tick(h.now, h.sink);
  EXPECT_EQ(h.State(big), JobState::kPending);
  EXPECT_TRUE(h.Events<MigRecutStarted>().empty());
  EXPECT_TRUE(h.Events<PreemptionStarted>().empty());
}

TEST(MigRecutTest, OnlyTheCheckpointableBlockerMoves) {
  Harness h;
  const NodeIndex node = h.Node("A100-80GB", 1);
  const TenantId a = h.Tenant("a", 0, 1000);
  const TenantId b = h.Tenant("b", 0, 1000);
  const std::vector<JobId> at = Fragment(h, b, {1, 5}, {5});
  const JobId big = h.ThreeG(a);
  const auto recuts = h.Events<MigRecutStarted>();
  ASSERT_EQ(recuts.size(), 1u);
  EXPECT_EQ(recuts[0].moved, std::vector<JobId>{at[5]});
  EXPECT_EQ(recuts[0].start, 4);
  h.CheckpointDone(at[5]);
  EXPECT_EQ(h.State(big), JobState::kRunning);
  EXPECT_EQ(h.Alloc(big).mig_start, 4);
  EXPECT_EQ(h.Alloc(at[5]).node, node);
  EXPECT_EQ(h.Alloc(at[5]).mig_start, 0);
  EXPECT_EQ(h.Alloc(at[1]).mig_start, 1);  // never moved
  EXPECT_EQ(h.engine->state().job(at[1]).preemptions, 0);
}

TEST(MigRecutTest, NoReCutWhenAnotherGpuHasRoom) {
  Harness h;
  h.Node("A100-80GB", 1);
  const TenantId a = h.Tenant("a", 0, 1000);
  const TenantId b = h.Tenant("b", 0, 1000);
  Fragment(h, b, {1, 5}, {1, 5});
  const NodeIndex roomy = h.Node("A100-80GB", 1);
  const JobId big = h.ThreeG(a);
  EXPECT_EQ(h.State(big), JobState::kRunning);
  EXPECT_EQ(h.Alloc(big).node, roomy);
  EXPECT_TRUE(h.Events<MigRecutStarted>().empty());
  EXPECT_TRUE(h.Events<PreemptionStarted>().empty());
}

TEST(MigRecutTest, AJobBeyondItsTenantsAdmissionDoesNotReCut) {
  Harness h;
  h.Node("A100-80GB", 1);
  h.Node("T4", 1);  // no MIG: a time-sliced share of tenant a runs here
  const TenantId a = h.Tenant("a", 0, 500);
  const TenantId b = h.Tenant("b", 0, 2000);
  Fragment(h, b, {1, 5}, {1, 5});
  JobSpec share;
  share.tenant = a;
  share.demand = Demand{1000, 4096, 1, 200, kAnyGpuModel};
  share.demand.mode = ShareMode::kTimeSlice;
  share.demand.gpu_memory_mib = 2000;
  const JobId running = *h.engine->Submit(share, h.now, h.sink);
  ASSERT_EQ(h.State(running), JobState::kRunning);
  // 200 + 400 > a's elastic limit of 500: the 3g is not admitted, so no
  // GPU is re-cut for it.
  const JobId big = h.ThreeG(a);
  EXPECT_EQ(h.State(big), JobState::kPending);
  EXPECT_TRUE(h.Events<MigRecutStarted>().empty());
  EXPECT_EQ(h.Events<QuotaExhausted>().size(), 1u);
  // Once a's share ends it is admitted, and the re-cut follows.
  h.Finish(running);
  EXPECT_EQ(h.Events<MigRecutStarted>().size(), 1u);
}

TEST(MigRecutTest, TwoTasksMoveForA4gAndWaitForItBeforeComingBack) {
  Harness h;
  const NodeIndex node = h.Node("A100-80GB", 1);
  const TenantId a = h.Tenant("a", 0, 1000);
  const TenantId b = h.Tenant("b", 0, 1000);
  const std::vector<JobId> at = Fragment(h, b, {1, 2, 5}, {1, 2, 5});
  // 4g.40gb starts only at 0: the tasks at 1 and 2 are in the way.
  const JobId big = h.Mig(a, 520, 30000, true);
  ASSERT_EQ(h.Events<MigRecutStarted>().size(), 1u);
  EXPECT_EQ(h.Events<MigRecutStarted>()[0].profile, "4g.40gb");
  EXPECT_EQ(h.Events<MigRecutStarted>()[0].moved, (std::vector<JobId>{at[1], at[2]}));
  EXPECT_EQ(h.engine->state().job(big).victims_pending, 2);
  // The first moved task is back in the queue; the node is held and it
  // waits (no second re-cut, no preemption) for the 4g to start.
  h.CheckpointDone(at[1]);
  EXPECT_EQ(h.State(at[1]), JobState::kPending);
  EXPECT_EQ(h.State(big), JobState::kPending);
  EXPECT_EQ(h.Events<MigRecutStarted>().size(), 1u);
  EXPECT_EQ(h.Events<PreemptionStarted>().size(), 2u);
  EXPECT_EQ(h.engine->state().recut_moved.at(at[1]), big);
  h.CheckpointDone(at[2]);
  EXPECT_EQ(h.State(big), JobState::kRunning);
  EXPECT_EQ(h.Alloc(big).mig_start, 0);
  for (JobId m : {at[1], at[2]}) {
    EXPECT_EQ(h.State(m), JobState::kRunning);
    EXPECT_EQ(h.Alloc(m).node, node);
  }
  EXPECT_EQ(h.Alloc(at[1]).mig_start, 4);
  EXPECT_EQ(h.Alloc(at[2]).mig_start, 6);
  EXPECT_TRUE(h.engine->state().recut_moved.empty());
}

// The same commands, twice: the same log, byte for byte. And a fresh engine
// fed the log halfway through the re-cut decides the same next events.
std::vector<std::string> RunReCut(Harness& h, JobId* moved) {
  h.Node("A100-80GB", 2);
  h.Node("A100-80GB", 1);
  const TenantId a = h.Tenant("a", 500, 2000);
  const TenantId b = h.Tenant("b", 500, 2000);
  // Whole GPUs fill the two-GPU node; the third GPU is fragmented by b.
  JobSpec whole;
  whole.tenant = a;
  whole.demand = testing::Whole(1, 1000);
  for (int i = 0; i < 2; ++i) (void)*h.engine->Submit(whole, h.now, h.sink);
  std::vector<JobId> small;
  for (int i = 0; i < 7; ++i) small.push_back(h.Small(b, true));
  for (int i : {0, 2, 3, 4, 6}) h.Finish(small[i]);
  h.now += 1min;
  h.ThreeG(b);
  *moved = small[1];
  return h.Lines();
}

TEST(MigRecutTest, TheSameCommandsGiveTheSameLogAndReplayDecidesTheSame) {
  Harness first, second;
  JobId moved_first = -1, moved_second = -1;
  const auto a = RunReCut(first, &moved_first);
  const auto b = RunReCut(second, &moved_second);
  EXPECT_EQ(a, b);
  ASSERT_EQ(first.Events<MigRecutStarted>().size(), 1u);
  EXPECT_EQ(first.Events<MigRecutStarted>()[0].moved, std::vector<JobId>{moved_first});
  // Replay into a fresh engine, then finish the checkpoint on both.
  EngineConfig config = first.engine->config();
  auto e = CreateEngine(config, AttributeTable{});
  ASSERT_TRUE(e.has_value());
  for (const Event& ev : first.log) (*e)->Replay(ev);
  EXPECT_EQ((*e)->state().recut_moved, first.engine->state().recut_moved);
  EXPECT_EQ((*e)->state().reservations, first.engine->state().reservations);
  std::vector<std::string> next_a, next_b;
  const Instant later = first.now + 20s;
  ASSERT_TRUE(first.engine->CheckpointDone(moved_first, later, [&](const Event& ev) { next_a.push_back(ToJsonLine(ev)); })
                  .has_value());
  ASSERT_TRUE((*e)->CheckpointDone(moved_first, later, [&](const Event& ev) { next_b.push_back(ToJsonLine(ev)); })
                  .has_value());
  EXPECT_EQ(next_a, next_b);
  EXPECT_GE(next_a.size(), 3u);  // preempted, hold released, placed (and the mover placed again)
}

// Random MIG churn on fragmented GPUs: re-cuts happen, layouts stay valid
// and invariants hold after every event (the harness checks both), every
// re-cut moves only checkpointable single-replica work, with a checkpoint,
// and no job needs more than one re-cut.
TEST(MigRecutTest, RandomChurnKeepsLayoutsValidAndReCutsBounded) {
  size_t total_recuts = 0;
  for (uint64_t seed = 1; seed <= 12; ++seed) {
    Harness h;
    for (int i = 0; i < 3; ++i) h.Node("A100-80GB", 2);
    const TenantId a = h.Tenant("a", 1000, 6000);
    const TenantId b = h.Tenant("b", 1000, 6000);
    Rng rng(seed);
    std::vector<JobId> live;
    const std::pair<int32_t, int32_t> sizes[] = {{100, 9000}, {100, 9000}, {100, 9000}, {280, 18000}, {400, 30000},
                                                 {520, 30000}};
    for (int step = 0; step < 300; ++step) {
      h.now += 10s;
      const uint64_t what = rng.Below(10);
      if (what < 5) {
        const auto [milli, mem] = sizes[rng.Below(6)];
        live.push_back(h.Mig(rng.Below(2) ? a : b, milli, mem, rng.Below(4) != 0, static_cast<int>(rng.Below(3))));
      } else if (what < 8 && !live.empty()) {
        const size_t i = rng.Below(live.size());
        const JobId id = live[i];
        if (h.State(id) == JobState::kRunning) {
          h.Finish(id);
          live.erase(live.begin() + static_cast<std::ptrdiff_t>(i));
        }
      } else {
        // Every checkpoint in progress completes.
        std::vector<JobId> saving;
        for (const auto& [id, j] : h.engine->state().running) {
          if (j->state == JobState::kCheckpointing) saving.push_back(id);
        }
        for (JobId id : saving) ASSERT_TRUE(h.engine->CheckpointDone(id, h.now, h.sink).has_value());
      }
      if (::testing::Test::HasFatalFailure()) return;
    }
    std::map<JobId, JobSpec> specs;
    for (const JobSubmitted& e : h.Events<JobSubmitted>()) specs[e.job] = e.spec;
    // A job is re-cut for at most once per wait: between two re-cuts for
    // it, it must have been placed (and preempted again later).
    std::map<JobId, bool> recut_waiting;
    for (const Event& ev : h.log) {
      if (const auto* r = std::get_if<MigRecutStarted>(&ev.body)) {
        EXPECT_FALSE(recut_waiting[r->job]) << "seed " << seed << " job " << r->job << " re-cut twice in one wait";
        recut_waiting[r->job] = true;
        for (JobId m : r->moved) {
          EXPECT_TRUE(specs.at(m).checkpointable) << "seed " << seed << " moved job " << m;
          EXPECT_EQ(specs.at(m).replicas, 1);
        }
      } else if (const auto* p = std::get_if<JobPlaced>(&ev.body)) {
        recut_waiting[p->job] = false;
      }
    }
    for (const PreemptionStarted& p : h.Events<PreemptionStarted>()) {
      if (p.reason == PreemptReason::kMigRecut) {
        EXPECT_TRUE(p.checkpoint) << "seed " << seed;
      }
    }
    total_recuts += h.Events<MigRecutStarted>().size();
  }
  EXPECT_GT(total_recuts, 12u);  // the churn does fragment GPUs (58 re-cuts over these seeds)
}

TEST(MigRecutTest, TheEventsCanonicalJson) {
  const Event recut{7, Instant(1500ms), MigRecutStarted{9, 2, 1, "3g.40gb", 4, {3, 5}}};
  EXPECT_EQ(ToJsonLine(recut),
            R"({"at":1500,"gpu":1,"job":9,"moved":[3,5],"node":2,"profile":"3g.40gb","seq":7,"start":4,"type":"MigRecutStarted"})");
  const Event preempt{8, Instant(1500ms), PreemptionStarted{3, 9, PreemptReason::kMigRecut, true}};
  EXPECT_EQ(ToJsonLine(preempt),
            R"({"at":1500,"checkpoint":true,"preemptor":9,"reason":"mig-recut","seq":8,"type":"PreemptionStarted","victim":3})");
}

}  // namespace
}  // namespace gpupool
