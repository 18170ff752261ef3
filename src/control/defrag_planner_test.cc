// The defragmentation planner (FRAG-2): hand-built clusters where the right
// moves are known, the trigger, the budget, the gain-versus-cost rule, that
// planning leaves the cluster as it was, determinism, and a property test
// that every plan replays on the real Cluster (Allocate checks each move's
// fit) to the fragmentation it announced.
#include "src/control/defrag_planner.h"

#include <gtest/gtest.h>

#include <set>
#include <string>
#include <vector>

#include "src/base/rng.h"
#include "tests/builders.h"

namespace gpupool {
namespace {

using namespace std::chrono_literals;
using testing::Share;
using testing::TypicalOf;
using testing::Whole;

// A cluster of `nodes` nodes with `gpus` GPUs each (model 0), plenty of CPU
// and memory.
Cluster Uniform(int nodes, int gpus) {
  Cluster c;
  for (int i = 0; i < nodes; ++i) {
    auto n = c.AddNode({"n" + std::to_string(i), 64000, 1 << 20, gpus, 0});
    EXPECT_TRUE(n.has_value());
  }
  return c;
}

// Half of the typical demands want a whole GPU, half a 0.6 share: a GPU with
// 500 free milli is wasted for both.
FragmentationModel WholeAndShare() { return TypicalOf({{Whole(1), 0.5}, {Share(600), 0.5}}); }

DefragConfig Config() {
  DefragConfig c;
  c.trigger_frag_pct = 10;
  c.max_migrations_per_hour = 12;
  return c;
}

// Applies a plan to a copy of the cluster the way the Engine would: release
// each task's allocation, allocate at the destination (Allocate checks the
// fit and the GPUs).
Cluster Replay(const Cluster& c, const DefragPlan& plan) {
  Cluster copy = c;
  for (const DefragStep& s : plan.steps) {
    for (const Migration& m : s.moves) {
      const Demand d = copy.allocation(m.allocation).demand;
      copy.Release(m.allocation);
      copy.Allocate(m.to, d, m.to_gpus);
    }
  }
  return copy;
}

std::string Describe(const DefragPlan& p) {
  std::string out = std::to_string(p.triggered) + " " + std::to_string(p.frag_pct_before) + " " +
                    std::to_string(p.frag_pct_after) + "\n";
  for (const DefragStep& s : p.steps) {
    out += "step node " + std::to_string(s.node) + " freed " + std::to_string(s.freed_gpus) + " removed " +
           std::to_string(s.frag_milli_removed) + " gain " + std::to_string(s.gain_gpu_hours) + " cost " +
           std::to_string(s.cost_gpu_hours) + "\n";
    for (const Migration& m : s.moves) {
      out += "  job " + std::to_string(m.job) + " alloc " + std::to_string(m.allocation) + " " +
             std::to_string(m.from) + ":" + std::to_string(m.from_gpus) + " -> " + std::to_string(m.to) + ":" +
             std::to_string(m.to_gpus) + "\n";
    }
  }
  return out;
}

TEST(DefragTest, MovingOneHalfShareFreesAWholeGpu) {
  Cluster c = Uniform(2, 2);
  const AllocationId a = c.Allocate(0, Share(500), 0b01);
  const AllocationId b = c.Allocate(1, Share(500), 0b01);
  const FragmentationModel model = WholeAndShare();
  // Each node: 500 wasted milli for both typical demands, of 3000 free.
  EXPECT_NEAR(FragmentationPct(c, model), 100.0 / 3, 1e-9);
  const std::vector<MovableTask> movable = {{10, a, 60s}, {11, b, 60s}};

  const DefragPlan plan = PlanDefrag(c, model, movable, Config(), 12);
  EXPECT_TRUE(plan.triggered);
  ASSERT_EQ(plan.steps.size(), 1u) << Describe(plan);
  const DefragStep& s = plan.steps[0];
  // Equal steps either way: the lower source node moves, onto the other
  // half-used GPU (filling it), which frees GPU 0 of node 0.
  ASSERT_EQ(s.moves.size(), 1u);
  EXPECT_EQ(s.moves[0].job, 10);
  EXPECT_EQ(s.moves[0].allocation, a);
  EXPECT_EQ(s.moves[0].from, 0);
  EXPECT_EQ(s.moves[0].from_gpus, 0b01);
  EXPECT_EQ(s.moves[0].to, 1);
  EXPECT_EQ(s.moves[0].to_gpus, 0b01);
  EXPECT_EQ(s.node, 0);
  EXPECT_EQ(s.freed_gpus, 0b01);
  EXPECT_DOUBLE_EQ(s.frag_milli_removed, 1000);
  EXPECT_DOUBLE_EQ(s.gain_gpu_hours, 1.0);                  // one GPU for the 1 h horizon
  EXPECT_DOUBLE_EQ(s.cost_gpu_hours, 0.5 * 90.0 / 3600.0);  // half a GPU for 60 s + 30 s
  EXPECT_DOUBLE_EQ(plan.frag_pct_after, 0);
  EXPECT_EQ(plan.move_count(), 1);
  EXPECT_DOUBLE_EQ(FragmentationPct(Replay(c, plan), model), plan.frag_pct_after);
}

TEST(DefragTest, NoPlanBelowTheTrigger) {
  Cluster c = Uniform(2, 2);
  const AllocationId a = c.Allocate(0, Share(500), 0b01);
  const AllocationId b = c.Allocate(1, Share(500), 0b01);
  DefragConfig cfg = Config();
  cfg.trigger_frag_pct = 40;  // the rate is 33.3%
  const DefragPlan plan = PlanDefrag(c, WholeAndShare(), std::vector<MovableTask>{{10, a, 60s}, {11, b, 60s}}, cfg, 12);
  EXPECT_FALSE(plan.triggered);
  EXPECT_TRUE(plan.steps.empty());
  EXPECT_DOUBLE_EQ(plan.frag_pct_after, plan.frag_pct_before);
}

TEST(DefragTest, StopsOnceTheRateIsBelowTheTrigger) {
  // Four half-used nodes: two moves bring the rate to 0, but after the
  // first it is 1000 / 6000 = 16.7%, below a trigger of 20.
  Cluster c = Uniform(4, 2);
  std::vector<MovableTask> movable;
  for (NodeIndex n = 0; n < 4; ++n) movable.push_back({n, c.Allocate(n, Share(500), 0b01), 60s});
  DefragConfig cfg = Config();
  cfg.trigger_frag_pct = 20;
  const DefragPlan plan = PlanDefrag(c, WholeAndShare(), movable, cfg, 12);
  EXPECT_EQ(plan.move_count(), 1);
  EXPECT_NEAR(plan.frag_pct_after, 100.0 / 6, 1e-9);
}

TEST(DefragTest, TheBudgetBoundsTheMoves) {
  Cluster c = Uniform(4, 2);
  std::vector<MovableTask> movable;
  for (NodeIndex n = 0; n < 4; ++n) movable.push_back({n, c.Allocate(n, Share(500), 0b01), 60s});
  const FragmentationModel model = WholeAndShare();

  const DefragPlan all = PlanDefrag(c, model, movable, Config(), 12);
  EXPECT_EQ(all.move_count(), 2) << Describe(all);
  EXPECT_DOUBLE_EQ(all.frag_pct_after, 0);

  const DefragPlan one = PlanDefrag(c, model, movable, Config(), 1);
  EXPECT_EQ(one.move_count(), 1);
  EXPECT_GT(one.frag_pct_after, 0);

  const DefragPlan none = PlanDefrag(c, model, movable, Config(), 0);
  EXPECT_TRUE(none.triggered);
  EXPECT_EQ(none.move_count(), 0);

  // The hourly limit of the configuration caps the budget too.
  DefragConfig capped = Config();
  capped.max_migrations_per_hour = 1;
  EXPECT_EQ(PlanDefrag(c, model, movable, capped, 12).move_count(), 1);
}

TEST(DefragTest, AStepCostingMoreThanItGainsIsRefused) {
  Cluster c = Uniform(2, 2);
  const AllocationId a = c.Allocate(0, Share(500), 0b01);
  const AllocationId b = c.Allocate(1, Share(500), 0b01);
  const FragmentationModel model = WholeAndShare();
  // Half a GPU for 10 h is 5 GPU-hours lost to gain 1.
  const std::vector<MovableTask> slow = {{10, a, 10h}, {11, b, 10h}};
  EXPECT_TRUE(PlanDefrag(c, model, slow, Config(), 12).steps.empty());
  // A longer horizon makes the same move worth it.
  DefragConfig patient = Config();
  patient.horizon = 12h;
  EXPECT_EQ(PlanDefrag(c, model, slow, patient, 12).move_count(), 1);
  // And a cheap task moves while a costly one stays.
  const std::vector<MovableTask> mixed = {{10, a, 10h}, {11, b, 60s}};
  const DefragPlan plan = PlanDefrag(c, model, mixed, Config(), 12);
  ASSERT_EQ(plan.move_count(), 1);
  EXPECT_EQ(plan.steps[0].moves[0].job, 11);
  EXPECT_EQ(plan.steps[0].moves[0].to, 0);
}

TEST(DefragTest, PlanningLeavesTheClusterAsItWas) {
  Cluster c = Uniform(4, 2);
  std::vector<MovableTask> movable;
  for (NodeIndex n = 0; n < 4; ++n) movable.push_back({n, c.Allocate(n, Share(500), 0b01), 60s});
  const AllocationId gone = c.Allocate(0, Share(200), 0b10);
  c.Release(gone);  // a free slot in the free list
  const std::vector<Node> nodes = c.nodes();
  const auto slots = c.allocation_slots().size();
  const auto free_ids = c.free_allocation_ids();
  const auto log_end = c.change_log_end();

  const DefragPlan plan = PlanDefrag(c, WholeAndShare(), movable, Config(), 12);
  ASSERT_EQ(plan.move_count(), 2);
  EXPECT_EQ(c.nodes(), nodes);
  EXPECT_EQ(c.allocation_slots().size(), slots);
  EXPECT_EQ(c.free_allocation_ids(), free_ids);
  EXPECT_EQ(c.change_log_end(), log_end);
}

TEST(DefragTest, TheSameInputsGiveTheSamePlan) {
  Cluster c = Uniform(6, 4);
  Rng rng(7);
  std::vector<MovableTask> movable;
  for (int k = 0; k < 10; ++k) {
    const NodeIndex n = static_cast<NodeIndex>(rng.Below(6));
    const Demand d = Share(100 * static_cast<int32_t>(1 + rng.Below(5)));
    for (int g = 0; g < 4; ++g) {
      if (GpuFits(c.node(n), g, d)) {
        movable.push_back({k, c.Allocate(n, d, static_cast<GpuMask>(1u << g)), 30s});
        break;
      }
    }
  }
  const FragmentationModel model = WholeAndShare();
  const DefragPlan first = PlanDefrag(c, model, movable, Config(), 12);
  EXPECT_GT(first.move_count(), 0);
  EXPECT_EQ(Describe(PlanDefrag(c, model, movable, Config(), 12)), Describe(first));
}

TEST(DefragTest, AGpuWithAResidentThatCannotMoveIsNeverFreed) {
  Cluster c = Uniform(2, 2);
  const AllocationId a = c.Allocate(0, Share(300), 0b01);
  c.Allocate(0, Share(200), 0b01);  // not movable
  const AllocationId b = c.Allocate(1, Share(500), 0b01);
  const FragmentationModel model = WholeAndShare();
  // Only node 1's GPU can be emptied: its share goes to node 0's GPU 0.
  const DefragPlan plan = PlanDefrag(c, model, std::vector<MovableTask>{{10, a, 60s}, {11, b, 60s}}, Config(), 12);
  ASSERT_EQ(plan.move_count(), 1) << Describe(plan);
  EXPECT_EQ(plan.steps[0].moves[0].job, 11);
  EXPECT_EQ(plan.steps[0].node, 1);
  EXPECT_DOUBLE_EQ(plan.frag_pct_after, 0);
}

TEST(DefragTest, EveryShareOfAGpuMovesTogether) {
  // Node 0's GPU 0 holds two 250 shares; node 1's GPU 0 has 500 free. Moving
  // one share alone frees nothing; moving both frees the GPU.
  Cluster c = Uniform(2, 2);
  const AllocationId a1 = c.Allocate(0, Share(250), 0b01);
  const AllocationId a2 = c.Allocate(0, Share(250), 0b01);
  const AllocationId b = c.Allocate(1, Share(500), 0b01);
  const FragmentationModel model = WholeAndShare();
  const std::vector<MovableTask> movable = {{10, a1, 60s}, {11, a2, 60s}, {12, b, 10h}};
  const DefragPlan plan = PlanDefrag(c, model, movable, Config(), 12);
  ASSERT_EQ(plan.steps.size(), 1u) << Describe(plan);
  EXPECT_EQ(plan.steps[0].node, 0);
  EXPECT_EQ(plan.steps[0].freed_gpus, 0b01);
  ASSERT_EQ(plan.steps[0].moves.size(), 2u);
  EXPECT_EQ(plan.steps[0].moves[0].to, 1);
  EXPECT_EQ(plan.steps[0].moves[1].to, 1);
  EXPECT_DOUBLE_EQ(plan.frag_pct_after, 0);
  // With a budget of one move the step does not fit.
  EXPECT_EQ(PlanDefrag(c, model, movable, Config(), 1).move_count(), 0);
}

TEST(DefragTest, AWholeNodeIsFreedWhenOnlyThatHelps) {
  // Typical demands want two whole GPUs: a node with any used GPU is all
  // fragment. Emptying one GPU of node 0 helps nothing; emptying node 0
  // (both its shares onto node 1's half-free GPUs) frees a 2-GPU node.
  Cluster c = Uniform(2, 2);
  std::vector<MovableTask> movable;
  movable.push_back({10, c.Allocate(0, Share(500), 0b01), 60s});
  movable.push_back({11, c.Allocate(0, Share(500), 0b10), 60s});
  c.Allocate(1, Share(500), 0b01);  // node 1's shares stay
  c.Allocate(1, Share(500), 0b10);
  const FragmentationModel model = TypicalOf({{Whole(2), 1.0}});
  EXPECT_DOUBLE_EQ(FragmentationPct(c, model), 100);
  const DefragPlan plan = PlanDefrag(c, model, movable, Config(), 12);
  ASSERT_EQ(plan.steps.size(), 1u) << Describe(plan);
  EXPECT_EQ(plan.steps[0].node, 0);
  EXPECT_EQ(plan.steps[0].freed_gpus, 0b11);
  EXPECT_EQ(plan.steps[0].moves.size(), 2u);
  EXPECT_DOUBLE_EQ(plan.steps[0].frag_milli_removed, 2000);
  EXPECT_DOUBLE_EQ(plan.frag_pct_after, 0);
  EXPECT_DOUBLE_EQ(FragmentationPct(Replay(c, plan), model), 0);
}

TEST(DefragTest, WholeGpuTasksConsolidateToFreeANode) {
  // Node 0 runs one 1-GPU task on its 4 GPUs; node 1 has one GPU free. The
  // typical demand is 4 whole GPUs.
  Cluster c = Uniform(2, 4);
  const AllocationId a = c.Allocate(0, Whole(1), 0b0100);
  c.Allocate(1, Whole(3), 0b0111);
  const FragmentationModel model = TypicalOf({{Whole(4), 1.0}});
  const DefragPlan plan = PlanDefrag(c, model, std::vector<MovableTask>{{10, a, 5min}}, Config(), 12);
  ASSERT_EQ(plan.move_count(), 1) << Describe(plan);
  EXPECT_EQ(plan.steps[0].moves[0].to, 1);
  EXPECT_EQ(plan.steps[0].moves[0].to_gpus, 0b1000);
  EXPECT_EQ(plan.steps[0].freed_gpus, 0b0100);
  EXPECT_DOUBLE_EQ(plan.frag_pct_after, 0);
}

TEST(DefragTest, TheFilterDecidesWhereTasksMayGo) {
  Cluster c = Uniform(3, 2);
  const AllocationId a = c.Allocate(0, Share(500), 0b01);
  const AllocationId b = c.Allocate(1, Share(500), 0b01);
  const AllocationId x = c.Allocate(2, Share(500), 0b01);
  const FragmentationModel model = WholeAndShare();
  const std::vector<MovableTask> movable = {{10, a, 60s}, {11, b, 60s}, {12, x, 60s}};
  // Nothing may land on node 1, and job 12 may go nowhere.
  const DefragFilter filter = [](const MovableTask& t, NodeIndex to, const Node&) { return to != 1 && t.job != 12; };
  const DefragPlan plan = PlanDefrag(c, model, movable, Config(), 12, filter);
  ASSERT_GE(plan.move_count(), 1) << Describe(plan);
  for (const DefragStep& s : plan.steps) {
    for (const Migration& m : s.moves) {
      EXPECT_NE(m.to, 1);
      EXPECT_NE(m.job, 12);
    }
  }
}

TEST(DefragTest, NodesThatAreNotReadyAreNeitherSourcesNorDestinations) {
  Cluster c = Uniform(3, 2);
  const AllocationId a = c.Allocate(0, Share(500), 0b01);
  const AllocationId b = c.Allocate(1, Share(500), 0b01);
  const AllocationId x = c.Allocate(2, Share(500), 0b01);
  c.SetCondition(2, NodeCondition::kCordoned);
  const std::vector<MovableTask> movable = {{10, a, 60s}, {11, b, 60s}, {12, x, 60s}};
  const DefragPlan plan = PlanDefrag(c, WholeAndShare(), movable, Config(), 12);
  ASSERT_EQ(plan.move_count(), 1) << Describe(plan);
  EXPECT_EQ(plan.steps[0].moves[0].from, 0);
  EXPECT_EQ(plan.steps[0].moves[0].to, 1);
}

TEST(DefragTest, SharesMoveOnlyToGpusInTheirMode) {
  // A100s: a MIG instance on node 0 may join node 2's MIG GPU, not node 1's
  // MPS GPU, although both have room in compute milli.
  const GpuModelId a100 = *Catalog::Builtin().Find("A100-80GB");
  Cluster c;
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(c.AddNode({"n" + std::to_string(i), 64000, 1 << 20, 2, a100}).has_value());
  Demand mig = Share(300);
  mig.mode = ShareMode::kMig;
  mig.gpu_memory_mib = 20000;
  Demand mps = mig;
  mps.mode = ShareMode::kMps;
  const AllocationId a = c.Allocate(0, mig, 0b01);
  c.Allocate(1, mps, 0b01);
  c.Allocate(2, mig, 0b01);
  const FragmentationModel model = TypicalOf({{Whole(1), 1.0}});
  const DefragPlan plan = PlanDefrag(c, model, std::vector<MovableTask>{{10, a, 60s}}, Config(), 12);
  ASSERT_EQ(plan.move_count(), 1) << Describe(plan);
  EXPECT_EQ(plan.steps[0].moves[0].to, 2);
  EXPECT_EQ(plan.steps[0].moves[0].to_gpus, 0b01);
  const Cluster after = Replay(c, plan);  // Allocate finds a MIG placement beside the other instance
  EXPECT_EQ(after.node(2).gpu_residents[0], 2);
  EXPECT_DOUBLE_EQ(FragmentationPct(after, model), plan.frag_pct_after);
}

// Random clusters: every plan replays on the real Cluster (Allocate checks
// each fit), reaches the rate it announced, stays in budget, moves each task
// at most once and never to its own node, and never raises the rate.
TEST(DefragTest, RandomPlansReplayAndNeverOvercommit) {
  const FragmentationModel model = TypicalOf({{Whole(1), 0.4}, {Share(500), 0.3}, {Share(250), 0.2}, {Whole(2), 0.1}});
  int32_t total_moves = 0;
  for (uint64_t seed = 1; seed <= 30; ++seed) {
    Rng rng(seed);
    Cluster c;
    const int nodes = 3 + static_cast<int>(rng.Below(6));
    for (int i = 0; i < nodes; ++i) {
      ASSERT_TRUE(c.AddNode({"n" + std::to_string(i), 16000, 1 << 16, 1 + static_cast<int>(rng.Below(4)), 0}));
    }
    std::vector<MovableTask> movable;
    for (int k = 0; k < 4 * nodes; ++k) {
      const NodeIndex n = static_cast<NodeIndex>(rng.Below(nodes));
      const Demand d = rng.Below(4) == 0 ? Whole(1, 1000) : Share(50 * static_cast<int32_t>(1 + rng.Below(19)), 1000);
      if (CheckFit(c.node(n), d) != FitFailure::kNone) continue;
      GpuMask gpus = 0;
      for (int g = 0; g < c.node(n).gpu_count && !gpus; ++g) {
        if (GpuFits(c.node(n), g, d)) gpus = static_cast<GpuMask>(1u << g);
      }
      const AllocationId id = c.Allocate(n, d, gpus);
      if (rng.Below(5) != 0) movable.push_back({k, id, std::chrono::seconds(rng.Below(600))});
    }
    DefragConfig cfg = Config();
    cfg.trigger_frag_pct = 0;
    const int32_t budget = 1 + static_cast<int32_t>(rng.Below(8));
    const std::vector<Node> before = c.nodes();
    const DefragPlan plan = PlanDefrag(c, model, movable, cfg, budget);
    EXPECT_EQ(c.nodes(), before);
    EXPECT_LE(plan.move_count(), budget);
    total_moves += plan.move_count();
    EXPECT_LE(plan.frag_pct_after, plan.frag_pct_before + 1e-9);
    std::set<AllocationId> moved;
    for (const DefragStep& s : plan.steps) {
      EXPECT_GT(s.gain_gpu_hours, 0);
      EXPECT_GE(s.gain_gpu_hours, cfg.min_gain_per_cost * s.cost_gpu_hours);
      EXPECT_NE(s.freed_gpus, 0);
      for (const Migration& m : s.moves) {
        EXPECT_NE(m.to, m.from);
        EXPECT_TRUE(moved.insert(m.allocation).second);
      }
    }
    const Cluster after = Replay(c, plan);  // aborts on an overcommitted move
    EXPECT_NEAR(FragmentationPct(after, model), plan.frag_pct_after, 1e-9) << "seed " << seed;
  }
  EXPECT_GT(total_moves, 30);  // the property was exercised
}

TEST(DefragTest, MigrationsLeftCountsTheLastHour) {
  DefragConfig cfg;
  cfg.max_migrations_per_hour = 3;
  const Instant now = kTimeOrigin + 5h;
  const std::vector<Instant> started = {now - 2h, now - 1h, now - 59min, now - 1min};
  EXPECT_EQ(MigrationsLeft(started, now, cfg), 1);  // exactly an hour ago no longer counts
  const std::vector<Instant> many = {now - 3min, now - 2min, now - 1min, now};
  EXPECT_EQ(MigrationsLeft(many, now, cfg), 0);
  EXPECT_EQ(MigrationsLeft({}, now, cfg), 3);
}

TEST(DefragTest, ConfigValidationNamesTheField) {
  EXPECT_TRUE(ValidateDefragConfig(DefragConfig{}).has_value());
  DefragConfig c;
  c.trigger_frag_pct = 120;
  EXPECT_EQ(ValidateDefragConfig(c).error().message.rfind("trigger_frag_pct:", 0), 0u);
  c = {};
  c.max_migrations_per_hour = -1;
  EXPECT_EQ(ValidateDefragConfig(c).error().message.rfind("max_migrations_per_hour:", 0), 0u);
  c = {};
  c.min_gain_per_cost = -0.5;
  EXPECT_EQ(ValidateDefragConfig(c).error().message.rfind("min_gain_per_cost:", 0), 0u);
  c = {};
  c.horizon = Duration(0);
  EXPECT_EQ(ValidateDefragConfig(c).error().message.rfind("horizon:", 0), 0u);
  c = {};
  c.restart_cost = -1s;
  EXPECT_EQ(ValidateDefragConfig(c).error().message.rfind("restart_cost:", 0), 0u);
}

}  // namespace
}  // namespace gpupool
