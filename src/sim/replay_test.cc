#include "src/sim/replay.h"

#include <gtest/gtest.h>

#include "src/sim/scenario.h"
#include "src/sim/scenario_runner.h"

namespace gpupool {
namespace {

// Two tenants held to their guarantees (no borrowing, so no preemption):
// jobs queue behind each other and the order matters.
constexpr const char* kScenario = R"(name: replay-history
seed: 5
horizon: 8h
engine: {policy: BestFit, tick: 30s, start_latency: 10s}
pools:
  - name: gpu
    models: [H100]
cluster:
  nodes:
    - {count: 2, name_prefix: a, model: H100, gpus: 4, cpu_cores: 64, memory_gib: 512}
tenants:
  - name: alpha
    quota: {gpu: {guaranteed_gpus: 4, limit_gpus: 4}}
  - name: beta
    quota: {gpu: {guaranteed_gpus: 4, limit_gpus: 4}}
workload:
  - tenant: alpha
    arrivals: {process: poisson, rate_per_hour: 12, stop: 6h}
    jobs:
      - {name: train, priority: normal, gpus: 1, replicas: [1, 2], duration: {lognormal: {median: 20m, sigma: 0.8}}}
  - tenant: beta
    arrivals: {process: poisson, rate_per_hour: 8, stop: 6h}
    jobs:
      - {name: tune, priority: high, gpus: 2, duration: {fixed: 25m}}
)";

struct Recorded {
  Scenario scenario;
  std::vector<Event> events;
};

Recorded RunAndRecord(const std::string& text) {
  auto s = ParseScenario(text, "replay.yaml", "");
  EXPECT_TRUE(s.has_value()) << (s ? "" : s.error().message);
  Recorded r{*s, {}};
  RunOptions o;
  o.on_event = [&](const Event& e) { r.events.push_back(e); };
  auto report = RunScenario(*s, o);
  EXPECT_TRUE(report.has_value()) << (report ? "" : report.error().message);
  return r;
}

TEST(ReplayTest, TheConfigurationInForceReproducesTheEnginesHistory) {
  const Recorded rec = RunAndRecord(kScenario);
  auto h = HistoryFromEvents(rec.events);
  ASSERT_TRUE(h.has_value()) << h.error().message;
  ASSERT_GT(h->jobs.size(), 50u);
  ASSERT_EQ(h->preemptions, 0);
  ReplayOptions o;
  o.tick = rec.scenario.tick;
  o.check_invariants = true;
  auto run = ReplayHistory(*h, rec.scenario, o);
  ASSERT_TRUE(run.has_value()) << run.error().message;
  const Fidelity f = CompareWithHistory(*h, *run);
  EXPECT_EQ(f.started_in_one_only, 0);
  EXPECT_GT(f.compared, 50);
  EXPECT_EQ(f.start_error_max_s, 0);
  EXPECT_EQ(f.placement_differs, 0);
  EXPECT_EQ(f.order_differs, 0);
}

TEST(ReplayTest, ATighterLimitUnderANewConfigurationRaisesTheWaits) {
  const Recorded rec = RunAndRecord(kScenario);
  auto h = HistoryFromEvents(rec.events);
  ASSERT_TRUE(h.has_value()) << h.error().message;
  ReplayOptions o;
  o.tick = rec.scenario.tick;
  auto base = ReplayHistory(*h, rec.scenario, o);
  ASSERT_TRUE(base.has_value()) << base.error().message;
  ClusterConfig tight = rec.scenario;
  tight.tenants[0].quota["gpu"].limit_gpus = 1;
  tight.tenants[0].quota["gpu"].guaranteed_gpus = 1;
  o.new_config = true;
  auto changed = ReplayHistory(*h, tight, o);
  ASSERT_TRUE(changed.has_value()) << changed.error().message;
  const double before = base->report.by_tenant.at("alpha").jobs.wait_s.mean;
  const double after = changed->report.by_tenant.at("alpha").jobs.wait_s.mean;
  EXPECT_GT(after, 2 * before + 60) << before << " s before, " << after << " s after";
}

TEST(ReplayTest, AConfigurationThatIsNotTheOneInForceIsRefusedNamingThePools) {
  const Recorded rec = RunAndRecord(kScenario);
  auto h = HistoryFromEvents(rec.events);
  ASSERT_TRUE(h.has_value());
  ClusterConfig other = rec.scenario;
  other.pools[0].name = "other";
  auto run = ReplayHistory(*h, other, ReplayOptions{});
  ASSERT_FALSE(run.has_value());
  EXPECT_EQ(run.error().code, ErrorCode::kFailedPrecondition);
  EXPECT_NE(run.error().message.find("pools [other] are not the journal's [gpu]"), std::string::npos)
      << run.error().message;
}

TEST(ReplayTest, AJobPlacedBeforeItWasSubmittedIsNamedBySeq) {
  std::vector<Event> events;
  events.push_back(Event{1, kTimeOrigin, PoolAdded{}});
  events.push_back(Event{2, kTimeOrigin + std::chrono::seconds(5), JobPlaced{.job = 3}});
  auto h = HistoryFromEvents(events);
  ASSERT_FALSE(h.has_value());
  EXPECT_EQ(h.error().message, "event 2 (JobPlaced): job 3 was never submitted");
}

}  // namespace
}  // namespace gpupool
