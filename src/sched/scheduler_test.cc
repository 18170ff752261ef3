#include "src/sched/scheduler.h"

#include <gtest/gtest.h>

#include <optional>
#include <set>
#include <string>
#include <vector>

#include "src/base/rng.h"
#include "src/model/gpu_catalog.h"
#include "src/sched/policy.h"
#include "src/sched/target_workload.h"
#include "src/sim/synthetic.h"
#include "tests/builders.h"

namespace gpupool {
namespace {

using testing::CpuOnly;
using testing::NodeOf;
using testing::Share;
using testing::TypicalOf;
using testing::Whole;


Policy Build(const std::string& name, const PluginDeps& deps = {}) {
  auto spec = FindPolicy(name);
  EXPECT_TRUE(spec.has_value()) << name;
  auto p = BuildPolicy(*spec, deps);
  EXPECT_TRUE(p.has_value()) << name << ": " << (p ? "" : p.error().message);
  return std::move(*p);
}

NodeIndex Add(Cluster& c, int gpus, int64_t cpu, int64_t memory = 1 << 20, GpuModelId model = 0) {
  auto i = c.AddNode(NodeSpec{"node-" + std::to_string(c.node_count()), cpu, memory, gpus,
                              gpus > 0 ? model : kNoGpuModel});
  EXPECT_TRUE(i.has_value());
  return *i;
}

TEST(SchedulerTest, TiesGoToTheLowestRank) {
  Cluster c;
  for (int i = 0; i < 4; ++i) Add(c, 8, 64000);
  const Policy policy = Build("GpuPacking");
  Rng rng(1);
  // Node 1 has rank 0, node 3 rank 1, node 0 rank 2, node 2 rank 3.
  Scheduler s(&c, &policy, {2, 0, 3, 1}, &rng);
  const Demand d = Whole(8, 1000);
  auto p = s.Schedule(d);
  ASSERT_TRUE(p.has_value());
  ASSERT_EQ(p->node, 1);
  EXPECT_EQ(p->score, 25);  // an idle 8-GPU node
  EXPECT_EQ(p->gpus, 0xff);
  c.Allocate(p->node, d, p->gpus);
  // Node 1 is full: the next rank.
  p = s.Schedule(d);
  ASSERT_TRUE(p.has_value());
  ASSERT_EQ(p->node, 3);
  c.Allocate(p->node, d, p->gpus);
  // Nodes 0 (rank 2) and 2 (rank 3) are idle. A higher score beats a lower
  // rank: with a share on node 2, another share scores 93 there (700 free:
  // r = 70 -> 100 - 7) against 25 on idle node 0.
  c.Allocate(2, Share(300), 0b1);
  p = s.Schedule(Share(200));
  ASSERT_TRUE(p.has_value());
  EXPECT_EQ(p->node, 2);
  EXPECT_EQ(p->gpus, 0b1);
  EXPECT_EQ(p->score, 93);
  // A CPU-only demand scores 0 everywhere: the lowest rank among nodes with
  // CPU, node 1.
  p = s.Schedule(Demand{1000, 0, 0, 0, kAnyGpuModel});
  ASSERT_TRUE(p.has_value());
  EXPECT_EQ(p->node, 1);
  EXPECT_EQ(p->gpus, 0);
}

TEST(SchedulerTest, NoFitAndExplain) {
  Cluster c;
  const Demand d{8000, 8000, 1, kMilliPerGpu, GpuModelMask{1} << 0};
  Add(c, 8, 64000, 1 << 20, 1);        // GPU model not allowed
  Add(c, 0, 64000);                    // no GPUs: also a model failure
  const NodeIndex busy = Add(c, 1, 64000);
  c.Allocate(busy, Whole(1), 0b1);     // not enough free GPU
  Add(c, 2, 4000);                     // not enough CPU
  Add(c, 2, 64000, 1000);              // not enough memory
  const Policy policy = Build("BestFit");
  Rng rng(1);
  Scheduler s(&c, &policy, {0, 1, 2, 3, 4}, &rng);
  EXPECT_FALSE(s.Schedule(d).has_value());
  const Rejection r = s.Explain(d);
  EXPECT_EQ(r.nodes_by_reason[static_cast<int>(FitFailure::kNone)], 0);
  EXPECT_EQ(r.nodes_by_reason[static_cast<int>(FitFailure::kGpuModel)], 2);
  EXPECT_EQ(r.nodes_by_reason[static_cast<int>(FitFailure::kGpuCapacity)], 1);
  EXPECT_EQ(r.nodes_by_reason[static_cast<int>(FitFailure::kCpu)], 1);
  EXPECT_EQ(r.nodes_by_reason[static_cast<int>(FitFailure::kMemory)], 1);
  EXPECT_EQ(r.Describe(),
            "no node fits: 2 nodes GPU model not allowed, 1 node not enough free GPU, "
            "1 node not enough free CPU, 1 node not enough free memory");

  // A node that fits is counted under kNone and left out of the text.
  Rejection fits;
  fits.nodes_by_reason[static_cast<int>(FitFailure::kNone)] = 3;
  fits.nodes_by_reason[static_cast<int>(FitFailure::kCpu)] = 13;
  EXPECT_EQ(fits.Describe(), "no node fits: 13 nodes not enough free CPU");
  EXPECT_EQ(Rejection{}.Describe(), "no node fits: the cluster has no nodes");

  Cluster empty;
  Scheduler none(&empty, &policy, {}, &rng);
  EXPECT_FALSE(none.Schedule(d).has_value());
  EXPECT_EQ(none.Explain(d).Describe(), "no node fits: the cluster has no nodes");
}

TEST(SchedulerTest, RandomPolicyPicksOnlyFeasibleNodesAndAllOfThem) {
  Cluster c;
  for (int i = 0; i < 6; ++i) Add(c, 2, 32000);
  c.Allocate(1, Whole(2), 0b11);           // no free GPU
  c.Allocate(4, Share(700), 0b01);         // GPU1 still free
  c.Allocate(4, Share(700), 0b10);         // now nothing fits a 500-share
  c.Allocate(5, Demand{32000, 0, 0, 0, kAnyGpuModel}, 0);  // no CPU left
  const std::set<NodeIndex> feasible = {0, 2, 3};
  const Policy policy = Build("Random");
  Rng rng(99);
  Scheduler s(&c, &policy, RandomRanks(c.node_count(), rng), &rng);
  const Demand d = Share(500, 1000);
  std::set<NodeIndex> seen;
  std::set<GpuMask> masks;
  for (int i = 0; i < 300; ++i) {
    auto p = s.Schedule(d);
    ASSERT_TRUE(p.has_value());
    ASSERT_TRUE(feasible.contains(p->node)) << p->node;
    ASSERT_TRUE(GpusSatisfy(c.node(p->node), d, p->gpus));
    seen.insert(p->node);
    masks.insert(p->gpus);
  }
  EXPECT_EQ(seen, feasible);
  EXPECT_EQ(masks, (std::set<GpuMask>{0b01, 0b10}));  // a uniformly random fitting GPU

  // Only one feasible node: always it.
  c.Allocate(0, Whole(2), 0b11);
  c.Allocate(2, Whole(2), 0b11);
  for (int i = 0; i < 20; ++i) {
    auto p = s.Schedule(d);
    ASSERT_TRUE(p.has_value());
    EXPECT_EQ(p->node, 3);
  }
  c.Allocate(3, Whole(2), 0b11);
  EXPECT_FALSE(s.Schedule(d).has_value());
}

// The brute-force reference: every node checked and scored, ties by rank.
std::optional<std::pair<NodeIndex, int64_t>> BruteForce(const Cluster& c, const Policy& policy,
                                                         const std::vector<int32_t>& rank, const Demand& d) {
  std::optional<std::pair<NodeIndex, int64_t>> best;
  for (NodeIndex i = 0; i < c.node_count(); ++i) {
    if (CheckFit(c.node(i), d) != FitFailure::kNone) continue;
    const int64_t s = policy.Score(c.node(i), d);
    if (!best || s > best->second || (s == best->second && rank[i] < rank[best->first])) best = {i, s};
  }
  return best;
}

TEST(SchedulerTest, IndexedChoiceEqualsBruteForceUnderChurn) {
  const std::vector<NodeSpec> specs = GenerateMixedCluster(60, 7, Catalog::Builtin());
  const std::vector<TracePod> pods = GeneratePods(400, 11);
  std::vector<Demand> demands;
  for (const TracePod& p : pods) demands.push_back(p.demand);
  int64_t cpu = 0, gpu = 0;
  for (const NodeSpec& s : specs) {
    cpu += s.cpu_milli;
    gpu += int64_t{s.gpu_count} * kMilliPerGpu;
  }
  auto target = TargetWorkloadOf(demands, cpu, gpu);
  ASSERT_TRUE(target.has_value()) << target.error().message;
  ASSERT_GT(target->cpu_reserve_per_gpu_milli, 0);

  for (const std::string name : {"BestFit", "FGD", "FGD+", "GpuPacking", "DotProd", "GpuClustering"}) {
    SCOPED_TRACE(name);
    const Policy policy = Build(name, target->deps());
    Cluster c;
    for (const NodeSpec& s : specs) ASSERT_TRUE(c.AddNode(s).has_value());
    Rng rng(2024);
    const std::vector<int32_t> ranks = RandomRanks(c.node_count(), rng);
    Scheduler sched(&c, &policy, ranks, &rng);
    Rng churn(5);
    Rng selector_rng(0);
    std::vector<AllocationId> live;
    int placed = 0, failed = 0, released = 0, ties = 0;
    for (int step = 0; step < 4000; ++step) {
      // Fill the cluster, then hover around 90% of its GPU milli (release
      // more often above it), so that some demands fit nowhere.
      const double used = static_cast<double>(c.gpu_milli_allocated()) / static_cast<double>(c.gpu_milli_total());
      const bool release = !live.empty() && churn.Uniform() < (used > 0.9 ? 0.7 : 0.3);
      if (release) {
        const size_t k = churn.Below(live.size());
        c.Release(live[k]);
        live[k] = live.back();
        live.pop_back();
        ++released;
        continue;
      }
      const Demand& d = demands[churn.Below(demands.size())];
      const auto expected = BruteForce(c, policy, ranks, d);
      const auto got = sched.Schedule(d);
      ASSERT_EQ(got.has_value(), expected.has_value()) << "step " << step;
      if (!got) {
        ++failed;
        continue;
      }
      ASSERT_EQ(got->node, expected->first) << "step " << step;
      ASSERT_EQ(got->score, expected->second) << "step " << step;
      // Ties with another node happen; count them to be sure the tie-break is exercised.
      for (NodeIndex i = 0; i < c.node_count(); ++i) {
        if (i != got->node && CheckFit(c.node(i), d) == FitFailure::kNone &&
            policy.Score(c.node(i), d) == got->score) {
          ++ties;
          break;
        }
      }
      const Node& n = c.node(got->node);
      ASSERT_TRUE(GpusSatisfy(n, d, got->gpus));
      if (d.gpu_count > 0) {
        ASSERT_EQ(got->gpus, policy.gpu_selector->Select(n, d, selector_rng));
      }
      live.push_back(c.Allocate(got->node, d, got->gpus));
      ++placed;
    }
    EXPECT_GT(placed, 1500);
    EXPECT_GT(released, 1000);
    EXPECT_GT(failed, 0);  // the cluster did fill up
    EXPECT_GT(ties, 100);
  }
}

}  // namespace
}  // namespace gpupool
