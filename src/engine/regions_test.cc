// TOPO-2: batch work to the cheapest region with room, online work to the
// nearest region within its latency budget, or it waits.
#include <gtest/gtest.h>

#include <algorithm>

#include "src/control/control_loops.h"
#include "src/engine/engine.h"
#include "src/engine/snapshot.h"
#include "tests/builders.h"

namespace gpupool {
namespace {

using testing::Whole;

struct RegionWorld {
  explicit RegionWorld(RegionPolicy::Kind kind) {
    EngineConfig config;
    config.policy = "BestFit";
    config.lending.enabled = false;
    config.regions.kind = kind;
    config.regions.regions = {{"east", 2.5, {{"shanghai", 5}}}, {"north", 2.1, {{"shanghai", 28}}},
                              {"west", 1.4, {{"shanghai", 42}}}};
    config.regions.users = {{"shop", "shanghai", 30}, {"research", "shanghai", 0}};
    config.workload_learning.prior = {Whole(1, 1000)};
    engine = std::move(*CreateEngine(config, AttributeTable{}));
    sink = [this](const Event& e) {
      events.push_back(e);
      if (const auto* p = std::get_if<JobPlaced>(&e.body)) placed[p->job] = p->pool;
    };
    for (const char* region : {"east", "north", "west"}) {
      const PoolId p = *engine->AddPool(region, PoolSelector{kAnyGpuModel, {region}}, {}, now, sink);
      NodeSpec spec{std::string(region) + "-0", 64000, 1 << 19, 2, *Catalog::Builtin().Find("H100"), 0, 0};
      EXPECT_TRUE(engine->AddNode(spec, region, "z", "rack", now, sink).has_value());
      pools.push_back(p);
    }
    for (const char* name : {"shop", "research"}) {
      const TenantId t = *engine->AddTenant(name, now, sink);
      for (PoolId p : pools) EXPECT_TRUE(engine->SetQuota(t, p, Quota{0, 64 * kMilliPerGpu, 1, false}, now, sink).has_value());
      tenants.push_back(t);
    }
  }
  JobId Submit(TenantId t, JobKind kind, int gpus) {
    JobSpec s;
    s.tenant = t;
    s.kind = kind;
    s.demand = Whole(gpus, 1000);
    return *engine->Submit(s, now, sink);
  }
  std::unique_ptr<Engine> engine;
  Engine::Sink sink;
  Instant now{};
  std::vector<PoolId> pools;  // east, north, west
  std::vector<TenantId> tenants;
  std::map<JobId, PoolId> placed;
  std::vector<Event> events;
};

TEST(RegionsTest, BatchGoesToTheCheapestRegionWithRoomOnlineToTheNearestWithinBudget) {
  RegionWorld w(RegionPolicy::Kind::kCostAware);
  const TenantId shop = w.tenants[0], research = w.tenants[1];
  const JobId train = w.Submit(research, JobKind::kTraining, 2);
  EXPECT_EQ(w.placed.at(train), w.pools[2]);  // west, the cheapest
  const JobId spill = w.Submit(research, JobKind::kBatchInference, 2);
  EXPECT_EQ(w.placed.at(spill), w.pools[1]);  // west is full: north is next cheapest
  const JobId serve = w.Submit(shop, JobKind::kOnlineInference, 2);
  EXPECT_EQ(w.placed.at(serve), w.pools[0]);  // east, 5 ms
  // East and north are full; west is 42 ms away, over the 30 ms budget: it waits.
  const JobId late = w.Submit(shop, JobKind::kOnlineInference, 1);
  EXPECT_FALSE(w.placed.contains(late));
  EXPECT_EQ(w.engine->state().job(late).state, JobState::kPending);
}

TEST(RegionsTest, NearestOnlyPutsEverythingNearTheUsers) {
  RegionWorld w(RegionPolicy::Kind::kNearest);
  const JobId train = w.Submit(w.tenants[1], JobKind::kTraining, 2);
  EXPECT_EQ(w.placed.at(train), w.pools[0]);  // east, nearest to Shanghai
  const JobId next = w.Submit(w.tenants[1], JobKind::kTraining, 2);
  EXPECT_EQ(w.placed.at(next), w.pools[1]);
}

TEST(RegionsTest, ATableSetAtRuntimeReplacesTheConfigurationsAndIsJournaled) {
  RegionWorld w(RegionPolicy::Kind::kCostAware);
  RegionPolicy cheaper_east = w.engine->regions();
  cheaper_east.regions[0].price_per_gpu_hour = 0.9;  // east now the cheapest
  ASSERT_TRUE(w.engine->SetRegions(cheaper_east, w.now, w.sink).has_value());
  EXPECT_EQ(w.engine->regions(), cheaper_east);
  const JobId train = w.Submit(w.tenants[1], JobKind::kTraining, 2);
  EXPECT_EQ(w.placed.at(train), w.pools[0]);
  // The event carries the whole table: a replay, its JSON and a snapshot keep it.
  auto it = std::find_if(w.events.begin(), w.events.end(),
                         [](const Event& e) { return std::holds_alternative<RegionsSet>(e.body); });
  ASSERT_NE(it, w.events.end());
  const Event& set = *it;
  auto back = EventFromJson(ToJsonLine(set));
  ASSERT_TRUE(back.has_value()) << back.error().message;
  EXPECT_EQ(std::get<RegionsSet>(back->body).policy, cheaper_east);
  auto restored = DecodeSnapshot(EncodeSnapshot(w.engine->state()), w.engine->config().lending);
  ASSERT_TRUE(restored.has_value()) << restored.error().message;
  ASSERT_TRUE(restored->regions.has_value());
  EXPECT_EQ(*restored->regions, cheaper_east);
  // A bad table is refused, naming the field, and changes nothing.
  RegionPolicy bad = cheaper_east;
  bad.regions[1].name = "east";
  auto refused = w.engine->SetRegions(bad, w.now, w.sink);
  ASSERT_FALSE(refused.has_value());
  EXPECT_NE(refused.error().message.find("regions[1].name"), std::string::npos) << refused.error().message;
  EXPECT_EQ(w.engine->regions(), cheaper_east);
}

}  // namespace
}  // namespace gpupool
