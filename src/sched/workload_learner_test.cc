#include "src/sched/workload_learner.h"

#include <gtest/gtest.h>

#include <cmath>
#include <vector>

namespace gpupool {
namespace {

using namespace std::chrono_literals;

Demand Whole(int32_t gpus) { return Demand{8000 * gpus, 65536LL * gpus, gpus, kMilliPerGpu}; }
Demand Share(int32_t milli) { return Demand{2000, 8192, 1, milli}; }

Instant At(Duration d) { return kTimeOrigin + d; }

// The popularity the built target gives `d`'s shape (0 when not typical).
double Popularity(const TargetWorkload& t, const Demand& d) {
  for (const TypicalDemand& typical : t.frag.typical()) {
    if (ShapeOf(typical.demand) == ShapeOf(d)) return typical.popularity;
  }
  return 0;
}

// `times` arrivals of `d`, `step` apart from `start`.
void Arrive(WorkloadLearner& l, const Demand& d, Instant start, int times = 1, Duration step = 1ms) {
  for (int i = 0; i < times; ++i) l.Observe(std::span<const Demand>(&d, 1), start + step * i, 96000, 8000);
}

// A learner that rebuilds at every arrival (1 ms apart) and decays with
// `half_life`: what it learned is what BuildTarget shows.
WorkloadLearner Eager(Duration half_life) {
  WorkloadLearningConfig c;
  c.half_life = half_life;
  c.refresh_every = 1ms;
  WorkloadLearner l;
  l.Configure(c);
  return l;
}

TEST(WorkloadLearnerTest, BeforeAnyArrivalTheTargetIsThePrior) {
  WorkloadLearner l;
  const std::vector<Demand> prior = DefaultWorkloadPrior();
  auto learned = l.BuildTarget(prior, 50);
  auto direct = TargetWorkloadOf(prior, 0, 0);
  ASSERT_TRUE(learned.has_value() && direct.has_value());
  ASSERT_EQ(learned->frag.typical().size(), direct->frag.typical().size());
  for (size_t i = 0; i < direct->frag.typical().size(); ++i) {
    EXPECT_EQ(learned->frag.typical()[i].demand, direct->frag.typical()[i].demand);
    EXPECT_DOUBLE_EQ(learned->frag.typical()[i].popularity, direct->frag.typical()[i].popularity);
  }
}

// What arrives replaces the prior: after many quarter-GPU shares the
// target is mostly those, and the prior's shapes fade to its weight.
TEST(WorkloadLearnerTest, ArrivalsOutweighThePrior) {
  WorkloadLearner l = Eager(100'000h);  // no decay to speak of
  const Demand quarter = Share(250);
  Arrive(l, quarter, At(1min), 950);
  const std::vector<Demand> prior = {Whole(8)};
  auto t = l.BuildTarget(prior, 50);
  ASSERT_TRUE(t.has_value());
  EXPECT_NEAR(Popularity(*t, quarter), 0.95, 1e-6);  // 950 arrivals beside a prior worth 50
  EXPECT_NEAR(Popularity(*t, Whole(8)), 0.05, 1e-6);
  EXPECT_GT(t->packing.Price(250), 0);  // the share stream now prices quarter shares
}

// A shape seen one half-life ago counts half; the mix follows the recent
// arrivals, not the whole history.
TEST(WorkloadLearnerTest, OldArrivalsDecayWithTheHalfLife) {
  WorkloadLearner l = Eager(1h);
  Arrive(l, Whole(1), At(0min), 200);
  Arrive(l, Whole(2), At(60min), 100);  // one half-life later: 200 old count as 100
  auto t = l.BuildTarget(std::vector<Demand>{Whole(4)}, 1e-9);
  ASSERT_TRUE(t.has_value());
  EXPECT_NEAR(Popularity(*t, Whole(1)), 0.5, 1e-3);
  EXPECT_NEAR(Popularity(*t, Whole(2)), 0.5, 1e-3);
  Arrive(l, Whole(2), At(600min), 1);  // ten half-lives on: the old ones are 1/1024
  t = l.BuildTarget(std::vector<Demand>{Whole(4)}, 1e-9);
  ASSERT_TRUE(t.has_value());
  EXPECT_LT(Popularity(*t, Whole(1)), 0.3);
  EXPECT_GT(Popularity(*t, Whole(2)), 0.7);
}

// Rebuilds at arrivals 1, 2, 4, ... up to the warm-up, then once per
// refresh_every at most, whatever the arrival rate.
TEST(WorkloadLearnerTest, RebuildsFastAtFirstThenByTime) {
  WorkloadLearningConfig c;
  c.warmup_arrivals = 8;
  c.refresh_every = 5min;
  WorkloadLearner l;
  l.Configure(c);
  std::vector<int64_t> rebuilt_at;
  for (int i = 1; i <= 20; ++i) {
    const Demand d = Whole(1);
    if (l.Observe(std::span<const Demand>(&d, 1), At(1s * i), 1, 1)) rebuilt_at.push_back(i);
  }
  EXPECT_EQ(rebuilt_at, (std::vector<int64_t>{1, 2, 4, 8}));
  EXPECT_EQ(l.builds(), 4u);
  const Demand d = Whole(2);
  EXPECT_FALSE(l.Observe(std::span<const Demand>(&d, 1), At(8s + 5min - 1ms), 1, 1));
  EXPECT_TRUE(l.Observe(std::span<const Demand>(&d, 1), At(8s + 5min), 1, 1));
  EXPECT_EQ(l.image().arrivals, 22);
  EXPECT_EQ(l.image().arrivals_since_build, 0);
}

// The target is the last rebuild's, not what arrived after it (so that an
// engine restored from a snapshot places as the one that wrote it).
TEST(WorkloadLearnerTest, TheTargetIsFrozenBetweenRebuilds) {
  WorkloadLearner l;
  Arrive(l, Whole(1), At(0s), 64);  // the warm-up's last rebuild is at arrival 64
  const auto before = l.BuiltWorkload(DefaultWorkloadPrior(), 50);
  Arrive(l, Whole(8), At(10s), 10);  // within refresh_every: no rebuild
  const auto after = l.BuiltWorkload(DefaultWorkloadPrior(), 50);
  ASSERT_EQ(before.size(), after.size());
  for (size_t i = 0; i < before.size(); ++i) EXPECT_EQ(before[i].weight, after[i].weight) << i;
}

// Weights stay finite over years of arrivals (the reference moves).
TEST(WorkloadLearnerTest, AReferenceFarInThePastIsMovedForward) {
  WorkloadLearner l;
  Arrive(l, Whole(1), At(0s), 1);
  Arrive(l, Whole(2), At(24h * 365), 1);  // 1,460 half-lives later
  for (const auto& [shape, weight] : l.image().weights) EXPECT_TRUE(std::isfinite(weight));
  auto t = l.BuildTarget(std::vector<Demand>{Whole(4)}, 1e-9);
  ASSERT_TRUE(t.has_value());
  EXPECT_NEAR(Popularity(*t, Whole(2)), 1.0, 1e-6);
}

TEST(WorkloadLearnerTest, TheTableOfShapesIsBounded) {
  WorkloadLearner l;
  for (int i = 0; i < kMaxLearnedShapes + 50; ++i) {
    Arrive(l, Demand{1000 + i, 1024, 1, kMilliPerGpu}, At(1s * i));
  }
  EXPECT_EQ(l.image().weights.size(), static_cast<size_t>(kMaxLearnedShapes));
  // The oldest (lightest) were forgotten, the newest kept.
  EXPECT_EQ(l.image().weights.count(ShapeOf(Demand{1000, 1024, 1, kMilliPerGpu})), 0u);
  EXPECT_EQ(l.image().weights.count(ShapeOf(Demand{1000 + kMaxLearnedShapes + 49, 1024, 1, kMilliPerGpu})), 1u);
}

TEST(WorkloadLearnerTest, AnImageThatCannotBeTrueIsRefusedNamingTheField) {
  WorkloadLearnerImage bad;
  bad.weights[ShapeOf(Whole(1))] = std::nan("");
  auto r = WorkloadLearner::FromImage(bad);
  ASSERT_FALSE(r.has_value());
  EXPECT_NE(r.error().message.find("weights"), std::string::npos) << r.error().message;
  WorkloadLearnerImage odd;
  odd.built[LearnedShape{1000, 500, 2, kAnyGpuModel}] = 1;  // a share of two GPUs
  r = WorkloadLearner::FromImage(odd);
  ASSERT_FALSE(r.has_value());
  EXPECT_NE(r.error().message.find("built"), std::string::npos) << r.error().message;
  WorkloadLearnerImage counts;
  counts.arrivals = 1;
  counts.arrivals_since_build = 2;
  EXPECT_FALSE(WorkloadLearner::FromImage(counts).has_value());
}

TEST(WorkloadLearnerTest, TheConfigurationIsCheckedNamingTheField) {
  auto field = [](WorkloadLearningConfig c) {
    auto ok = CheckWorkloadLearningConfig(c);
    return ok ? std::string() : ok.error().message.substr(0, ok.error().message.find(':'));
  };
  EXPECT_EQ(field({}), "");
  WorkloadLearningConfig c;
  c.half_life = 0s;
  EXPECT_EQ(field(c), "half_life");
  c = {};
  c.prior_weight = -1;
  EXPECT_EQ(field(c), "prior_weight");
  c = {};
  c.warmup_arrivals = 0;
  EXPECT_EQ(field(c), "warmup_arrivals");
  c = {};
  c.refresh_every = 0s;
  EXPECT_EQ(field(c), "refresh_every");
  c = {};
  c.prior = {Demand{1000, 1024, 0, 0}};
  EXPECT_EQ(field(c), "prior");
  c.prior = {Demand{1000, 1024, 2, 500}};
  EXPECT_EQ(field(c).substr(0, 8), "prior[0]");
}

}  // namespace
}  // namespace gpupool
