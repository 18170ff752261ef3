// FRAG-2 in the Engine: a planned migration checkpoints the job and places
// it on the planned GPUs, freeing a whole GPU.
#include <gtest/gtest.h>

#include "src/control/control_loops.h"
#include "src/engine/engine.h"
#include "src/control/defragmentation.h"
#include "tests/builders.h"
#include "tests/fake_engine_view.h"

namespace gpupool {
namespace {

using namespace std::chrono_literals;
using testing::Share;
using testing::Whole;

TEST(EngineDefragTest, TwoHalfUsedGpusBecomeOneFullAndOneFree) {
  for (bool enabled : {true, false}) {
    EngineConfig config;
    config.policy = "BestFit";
    config.lending.enabled = false;
    config.defrag = enabled;
    config.defrag_every = 1min;
    config.workload_learning.prior = {Whole(1, 1000), Share(500, 1000)};
    auto e = CreateEngine(config, AttributeTable{});
    ASSERT_TRUE(e.has_value()) << e.error().message;
    Engine& engine = **e;
    std::vector<Event> events;
    Instant now{};
    Engine::Sink sink = [&](const Event& ev) {
      events.push_back(ev);
      auto ok = CheckInvariants(engine.state());
      ASSERT_TRUE(ok.has_value()) << ok.error().message << " after " << ToJsonLine(ev);
    };
    const PoolId pool = *engine.AddPool("all", PoolSelector{}, {}, now, sink);
    const TenantId t = *engine.AddTenant("team", now, sink);
    ASSERT_TRUE(engine.SetQuota(t, pool, Quota{0, 8 * kMilliPerGpu, 1, false}, now, sink).has_value());
    auto add_node = [&](const std::string& name) {
      NodeSpec spec{name, 16000, 1 << 16, 1, *Catalog::Builtin().Find("A100-80GB"), 0, 0};
      return *engine.AddNode(spec, "r", "z", "rack", now, sink);
    };
    auto submit = [&] {
      JobSpec s;
      s.tenant = t;
      s.demand = Share(500, 1000);
      s.checkpointable = true;
      s.checkpoint_duration = 10s;
      return *engine.Submit(s, now, sink);
    };
    const NodeIndex n0 = add_node("n0");
    const JobId a = submit(), b = submit();  // n0's GPU full
    const NodeIndex n1 = add_node("n1");
    const JobId c = submit();  // half of n1's GPU
    ASSERT_EQ(engine.state().job(c).placements[0].node, n1);
    ASSERT_TRUE(engine.Finish(b, true, now, sink).has_value());  // two half-used GPUs
    now += 2min;
    engine.Tick(now, sink);
    std::vector<MigrationStarted> moves;
    for (const Event& ev : events) {
      if (const auto* m = std::get_if<MigrationStarted>(&ev.body)) moves.push_back(*m);
    }
    if (!enabled) {
      EXPECT_TRUE(moves.empty());
      continue;
    }
    ASSERT_EQ(moves.size(), 1u);
    const JobId moved = moves[0].job;
    ASSERT_TRUE(moved == a || moved == c);
    EXPECT_EQ(engine.state().job(moved).state, JobState::kCheckpointing);
    EXPECT_GT(moves[0].frag_pct, 10);
    ASSERT_TRUE(engine.CheckpointDone(moved, now + 10s, sink).has_value());
    const Job& j = engine.state().job(moved);
    ASSERT_EQ(j.state, JobState::kRunning);
    EXPECT_EQ(j.placements[0].node, moves[0].node);
    EXPECT_EQ(j.placements[0].gpus, moves[0].gpus);
    // Both halves share one GPU now; the other node's GPU is free.
    const NodeIndex freed = moves[0].node == n0 ? n1 : n0;
    EXPECT_EQ(engine.state().cluster.node(freed).gpus_fully_free, 1);
  }
}

// The loop on its own, through a fake Engine: two half-used GPUs on two
// nodes, one job planned to move beside the other.
class DefragmentationTest : public ::testing::Test {
 protected:
  DefragmentationTest() : loop(true, 1min, DefragConfig{}) {
    f.observer = &loop;
    JobSpec half;
    half.checkpointable = true;
    half.checkpoint_duration = 30s;
    half.demand = Share(500, 1000);
    f.Run(f.Node("n0", 1), 0b1, half);  // a move goes to another node
    f.Run(f.Node("n1", 1), 0b1, half);
    loop.Tick(f, f);
  }
  JobId Migrating() const { return f.Of<MigrationStarted>().at(0).job; }

  testing::FakeEngineView f;
  Defragmentation loop;
};

TEST_F(DefragmentationTest, APlannedMoveCheckpointsTheJobAndPlacesItAtItsDestination) {
  ASSERT_EQ(f.Of<MigrationStarted>().size(), 1u);
  ASSERT_EQ(f.Of<PreemptionStarted>().size(), 1u);
  EXPECT_EQ(f.Of<PreemptionStarted>()[0].reason, PreemptReason::kDefrag);
  EXPECT_TRUE(f.Of<PreemptionStarted>()[0].checkpoint);
  const JobId job = Migrating();
  EXPECT_TRUE(loop.migrating(job));
  f.Apply(JobPreempted{job, Duration(0)});  // its checkpoint is done
  ASSERT_TRUE(loop.Checkpointed(job, f, f));
  ASSERT_EQ(f.Of<JobPlaced>().size(), 1u);
  EXPECT_EQ(f.Of<JobPlaced>()[0].replicas.at(0).gpus, f.Of<MigrationStarted>()[0].gpus);
  EXPECT_FALSE(loop.migrating(job));
  // Planned again only after `every`.
  loop.Tick(f, f);
  EXPECT_EQ(f.Of<MigrationStarted>().size(), 1u);
}

TEST_F(DefragmentationTest, AMigrationEndsWithItsJob) {
  const JobId job = Migrating();
  f.Emit(JobCancelled{job});
  EXPECT_FALSE(loop.migrating(job));
  EXPECT_FALSE(loop.Checkpointed(job, f, f));
}

TEST_F(DefragmentationTest, AMigrationEndsWithItsNode) {
  const JobId job = Migrating();
  f.Emit(JobInterrupted{job, 0, Duration(0)});
  EXPECT_FALSE(loop.migrating(job));
  EXPECT_FALSE(loop.Checkpointed(job, f, f));  // it queues like any interrupted job
  EXPECT_TRUE(f.Of<JobPlaced>().empty());
}

}  // namespace
}  // namespace gpupool
