// TOPO-1: gang jobs kept together by topology (one NVLink domain, then one
// node, then one rack), against the topology-blind placement of each replica.
#include <gtest/gtest.h>

#include <set>

#include "src/control/control_loops.h"
#include "src/engine/engine.h"
#include "tests/builders.h"

namespace gpupool {
namespace {

using testing::Whole;

class TopologyHarness {
 public:
  explicit TopologyHarness(bool aware) {
    EngineConfig config;
    config.policy = "BestFit";
    config.topology_aware = aware;
    config.lending.enabled = false;
    config.workload_learning.prior = {Whole(1, 1000)};
    auto e = CreateEngine(config, AttributeTable{});
    EXPECT_TRUE(e.has_value()) << (e ? "" : e.error().message);
    engine = std::move(*e);
    sink = [this](const Event& ev) {
      if (const auto* p = std::get_if<JobPlaced>(&ev.body)) placed[p->job] = p->replicas;
      auto ok = CheckInvariants(engine->state());
      ASSERT_TRUE(ok.has_value()) << ok.error().message << " after " << ToJsonLine(ev);
    };
    EXPECT_TRUE(engine->AddPool("all", PoolSelector{}, {}, now, sink).has_value());
    auto t = engine->AddTenant("team", now, sink);
    tenant = *t;
    EXPECT_TRUE(engine->SetQuota(tenant, 0, Quota{0, 1000 * kMilliPerGpu, 1, false}, now, sink)
                    .has_value());
  }
  // Adds a node, then a job of `busy` GPUs that only it can take (added
  // nodes are filled before the next one comes).
  NodeIndex Node(const std::string& rack, int busy, const std::string& model = "H100") {
    NodeSpec spec{"n" + std::to_string(nodes_), 96000, 1 << 20, 8, *Catalog::Builtin().Find(model), 0, 0};
    auto n = engine->AddNode(spec, "region-1", "zone-1", rack, now, sink);
    EXPECT_TRUE(n.has_value());
    ++nodes_;
    if (busy > 0) {
      const JobId filler = Submit(Whole(busy, 1000), 1);
      EXPECT_EQ(placed.at(filler).front().node, *n);
    }
    return *n;
  }
  JobId Submit(Demand d, int replicas) {
    JobSpec s;
    s.tenant = tenant;
    s.demand = d;
    s.replicas = replicas;
    auto id = engine->Submit(s, now, sink);
    EXPECT_TRUE(id.has_value()) << (id ? "" : id.error().message);
    return *id;
  }
  std::set<NodeIndex> NodesOf(JobId job) const {
    std::set<NodeIndex> out;
    for (const PlacedReplica& r : placed.at(job)) out.insert(r.node);
    return out;
  }
  std::set<std::string> RacksOf(JobId job) const {
    std::set<std::string> out;
    for (NodeIndex n : NodesOf(job)) out.insert(engine->state().node_places[n].rack);
    return out;
  }

  std::unique_ptr<Engine> engine;
  Engine::Sink sink;
  Instant now{};
  TenantId tenant = -1;
  std::map<JobId, std::vector<PlacedReplica>> placed;

 private:
  int nodes_ = 0;
};

TEST(TopologyTest, AGangGoesToOneNodeThatTakesItWhole) {
  for (bool aware : {true, false}) {
    TopologyHarness h(aware);
    h.Node("rack-a", 6);
    const NodeIndex empty = h.Node("rack-a", 0);
    const JobId gang = h.Submit(Whole(1, 1000), 4);
    if (aware) {
      EXPECT_EQ(h.NodesOf(gang), std::set<NodeIndex>{empty});
    } else {
      // Best fit puts each replica on the fullest node that takes it.
      EXPECT_EQ(h.NodesOf(gang).size(), 2u);
    }
  }
}

TEST(TopologyTest, AGangThatNoNodeTakesStaysInOneRack) {
  for (bool aware : {true, false}) {
    TopologyHarness h(aware);
    h.Node("rack-a", 7);  // one GPU free
    h.Node("rack-a", 8);
    h.Node("rack-b", 5);  // three free
    h.Node("rack-b", 5);  // three free
    const JobId gang = h.Submit(Whole(1, 1000), 4);
    if (aware) {
      EXPECT_EQ(h.RacksOf(gang), std::set<std::string>{"rack-b"});
      EXPECT_EQ(h.NodesOf(gang).size(), 2u);
    } else {
      EXPECT_EQ(h.RacksOf(gang).size(), 2u);
    }
  }
}

TEST(TopologyTest, NvlinkNodesComeFirst) {
  TopologyHarness h(true);
  h.Node("rack-a", 0, "L40S");  // PCIe
  const NodeIndex nvlink = h.Node("rack-a", 0, "H100");
  const JobId gang = h.Submit(Whole(2, 1000), 2);
  EXPECT_EQ(h.NodesOf(gang), std::set<NodeIndex>{nvlink});
}

TEST(TopologyTest, AGangTooBigForAnyRackStillRuns) {
  TopologyHarness h(true);
  h.Node("rack-a", 5);
  h.Node("rack-b", 5);
  const JobId gang = h.Submit(Whole(3, 1000), 2);
  EXPECT_EQ(h.RacksOf(gang).size(), 2u);
  EXPECT_EQ(h.engine->state().job(gang).state, JobState::kRunning);
}

}  // namespace
}  // namespace gpupool
