// Elastic growth (SCALE-7) on its own, through a fake Engine: growth near
// the job's racks first, within what the quota admits, not where queued
// work may run, and not again within the resize interval.
#include "src/control/elastic_growth.h"

#include <gtest/gtest.h>

#include "tests/fake_engine_view.h"

namespace gpupool {
namespace {

using namespace std::chrono_literals;
using testing::FakeEngineView;
using testing::Whole;

JobSpec Elastic(int min, int max) {
  JobSpec s;
  s.demand = Whole(8, 1000);
  s.replicas = s.min_replicas = min;
  s.max_replicas = max;
  s.checkpoint_duration = 30s;
  return s;
}

TEST(ElasticGrowthTest, AJobGrowsOntoFreeNodesInItsOwnRackFirst) {
  FakeEngineView f;
  f.any_elastic = true;
  ElasticGrowth loop(5min);
  const NodeIndex home = f.Node("home", 8, "rack-a");
  const NodeIndex far = f.Node("far", 8, "rack-b");
  const NodeIndex near = f.Node("near", 8, "rack-a");
  const JobId job = f.Run(home, 0xff, Elastic(1, 2));
  loop.Tick(f, f);
  ASSERT_EQ(f.Of<JobResized>().size(), 1u);
  const JobResized grew = f.Of<JobResized>()[0];
  EXPECT_EQ(grew.job, job);
  ASSERT_EQ(grew.added.size(), 1u);
  EXPECT_EQ(grew.added[0].node, near);
  EXPECT_NE(grew.added[0].node, far);
  EXPECT_TRUE(grew.removed.empty());
  EXPECT_EQ(grew.reshard, Duration(30s));
}

TEST(ElasticGrowthTest, GrowthStopsAtTheQuotaAndWaitsOutTheResizeInterval) {
  FakeEngineView f;
  f.any_elastic = true;
  ElasticGrowth loop(5min);
  for (int i = 0; i < 4; ++i) f.Node("n" + std::to_string(i));
  f.Apply(QuotaSet{0, 0, Quota{0, 24000, 1, false}});  // three 8-GPU replicas at most
  f.Run(0, 0xff, Elastic(1, 4));
  loop.Tick(f, f);
  ASSERT_EQ(f.Of<JobResized>().size(), 1u);
  EXPECT_EQ(f.Of<JobResized>()[0].added.size(), 2u);
  EXPECT_TRUE(f.Of<JobResized>()[0].borrowed);  // beyond its (zero) guarantee
  f.Apply(QuotaSet{0, 0, Quota{0, 32000, 1, false}});
  f.clock += 1min;
  loop.Tick(f, f);
  EXPECT_EQ(f.Of<JobResized>().size(), 1u);  // resized a minute ago
}

TEST(ElasticGrowthTest, NoGrowthWhereQueuedWorkMayRunOrBeforeAnyElasticJob) {
  FakeEngineView f;
  ElasticGrowth loop(5min);
  f.Node("a");
  f.Node("b");
  f.Run(0, 0xff, Elastic(1, 2));
  loop.Tick(f, f);
  EXPECT_TRUE(f.events.empty());  // the engine has seen no elastic job
  f.any_elastic = true;
  f.Queue();
  loop.Tick(f, f);
  EXPECT_TRUE(f.events.empty());  // the queue may use the pool
}

}  // namespace
}  // namespace gpupool
