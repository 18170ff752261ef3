#include "src/sim/fgd_protocol.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "src/model/gpu_catalog.h"
#include "src/sched/policy.h"
#include "src/sched/target_workload.h"
#include "src/sim/synthetic.h"

namespace gpupool {
namespace {

struct ProtocolSetup {
  std::vector<NodeSpec> nodes;
  std::vector<TracePod> pods;
  TargetWorkload target;
  int64_t gpu_milli = 0;
};

ProtocolSetup MakeSetup() {
  std::vector<NodeSpec> nodes = GenerateMixedCluster(12, 3, Catalog::Builtin());
  std::vector<TracePod> pods = GeneratePods(40, 4);
  std::vector<Demand> demands;
  for (const TracePod& p : pods) demands.push_back(p.demand);
  int64_t cpu = 0, gpu = 0;
  for (const NodeSpec& s : nodes) {
    cpu += s.cpu_milli;
    gpu += int64_t{s.gpu_count} * kMilliPerGpu;
  }
  auto target = TargetWorkloadOf(demands, cpu, gpu);
  EXPECT_TRUE(target.has_value());
  return ProtocolSetup{std::move(nodes), std::move(pods), std::move(*target), gpu};
}

FgdRunResult RunPolicy(const ProtocolSetup& s, const std::string& policy, uint64_t seed, int64_t* last_arrived = nullptr) {
  FgdRunOptions opt;
  opt.seed = seed;
  if (last_arrived) {
    opt.on_pod = [last_arrived](const Demand&, bool, int64_t arrived, const Cluster&) { *last_arrived = arrived; };
  }
  auto spec = FindPolicy(policy);
  EXPECT_TRUE(spec.has_value());
  auto r = RunFgdProtocol(s.nodes, s.pods, s.target, *spec, opt);
  EXPECT_TRUE(r.has_value()) << (r ? "" : r.error().message);
  return std::move(*r);
}

bool SameBytes(const std::array<double, kFgdBins>& a, const std::array<double, kFgdBins>& b) {
  return std::memcmp(a.data(), b.data(), sizeof(double) * kFgdBins) == 0;
}

TEST(FgdProtocolTest, SameSeedSameRunDifferentSeedDifferentRun) {
  const ProtocolSetup s = MakeSetup();
  for (const std::string policy : {"FGD", "FGD+", "Random"}) {
    SCOPED_TRACE(policy);
    const FgdRunResult a = RunPolicy(s, policy, 42);
    const FgdRunResult b = RunPolicy(s, policy, 42);
    EXPECT_EQ(a.policy, policy);
    EXPECT_EQ(a.seed, 42u);
    ASSERT_FALSE(a.placements.empty());
    EXPECT_EQ(a.placements, b.placements);
    EXPECT_TRUE(SameBytes(a.allocated_pct, b.allocated_pct));
    EXPECT_TRUE(SameBytes(a.frag_pct, b.frag_pct));
    EXPECT_TRUE(SameBytes(a.frag_ratio_pct, b.frag_ratio_pct));
    EXPECT_EQ(a.pods_submitted, b.pods_submitted);
    EXPECT_EQ(a.pods_failed, b.pods_failed);
    EXPECT_EQ(a.pods_submitted, static_cast<int64_t>(a.placements.size()));
    EXPECT_EQ(a.pods_failed, std::count(a.placements.begin(), a.placements.end(), std::pair<int32_t, uint16_t>{-1, 0}));

    const FgdRunResult c = RunPolicy(s, policy, 43);
    EXPECT_NE(a.placements, c.placements);
  }
}

TEST(FgdProtocolTest, InflatesToTheTargetAndAllocationNeverFalls) {
  const ProtocolSetup s = MakeSetup();
  int64_t original = 0;
  for (const TracePod& p : s.pods) original += p.demand.total_gpu_milli();
  const double target = 1.3 * static_cast<double>(s.gpu_milli);
  ASSERT_LT(static_cast<double>(original), target);  // the run must inflate

  for (uint64_t seed : {1, 2, 3}) {
    int64_t arrived = -1;
    const FgdRunResult r = RunPolicy(s, "FGD", seed, &arrived);
    // The loop stops at the first draw whose per-GPU milli (<= 1000) would
    // pass the target; a multi-GPU pod may overshoot by up to 7 GPUs.
    EXPECT_GT(static_cast<double>(arrived), target - kMilliPerGpu) << seed;
    EXPECT_LE(static_cast<double>(arrived), target + 7 * kMilliPerGpu) << seed;
    EXPECT_GT(r.pods_submitted, static_cast<int64_t>(s.pods.size()));

    double previous = -1;
    int defined = 0;
    for (int k = 0; k < kFgdBins; ++k) {
      const double v = r.allocated_pct[k];
      if (std::isnan(v)) continue;
      ++defined;
      EXPECT_GE(v, previous) << "bin " << k;
      EXPECT_LE(v, 100.0);
      EXPECT_LE(v, k + 1.5) << "allocation cannot run ahead of arrivals, bin " << k;
      previous = v;
    }
    EXPECT_GT(defined, 100);
    EXPECT_FALSE(std::isnan(r.allocated_pct[100]));
  }
}

TEST(FgdProtocolTest, TrimsAWorkloadAboveTheTarget) {
  ProtocolSetup s = MakeSetup();
  s.pods = GeneratePods(400, 4);
  int64_t original = 0;
  for (const TracePod& p : s.pods) original += p.demand.total_gpu_milli();
  const double target = 1.3 * static_cast<double>(s.gpu_milli);
  ASSERT_GT(static_cast<double>(original), target);
  int64_t arrived = -1;
  const FgdRunResult r = RunPolicy(s, "BestFit", 5, &arrived);
  EXPECT_LE(static_cast<double>(arrived), target);
  EXPECT_LT(r.pods_submitted, 400);
}

TEST(FgdProtocolTest, RejectsAWorkloadWithoutGpus) {
  const ProtocolSetup s = MakeSetup();
  std::vector<TracePod> cpu_only;
  for (const TracePod& p : s.pods) {
    if (p.demand.gpu_count == 0) cpu_only.push_back(p);
  }
  ASSERT_FALSE(cpu_only.empty());
  auto r = RunFgdProtocol(s.nodes, cpu_only, s.target, *FindPolicy("FGD"), FgdRunOptions{});
  ASSERT_FALSE(r.has_value());
  EXPECT_EQ(r.error().code, ErrorCode::kInvalidArgument);
}

FgdRunResult Hand(uint64_t seed, double alloc100, double frag100, double ratio100, int64_t failed, double wall) {
  FgdRunResult r;
  r.policy = "P";
  r.seed = seed;
  r.allocated_pct[100] = alloc100;
  r.allocated_pct[5] = static_cast<double>(seed);
  r.frag_pct[100] = frag100;
  r.frag_ratio_pct[100] = ratio100;
  r.pods_failed = failed;
  r.wall_seconds = wall;
  return r;
}

TEST(SummarizeFgdRunsTest, MeansAndSampleStandardDeviation) {
  const std::vector<FgdRunResult> runs = {Hand(1, 90, 1, 10, 1, 0.5), Hand(2, 92, 2, 20, 2, 1.0),
                                          Hand(6, 97, 3, 30, 6, 1.5)};
  const FgdPolicySummary s = SummarizeFgdRuns(runs);
  EXPECT_EQ(s.policy, "P");
  EXPECT_EQ(s.seeds, (std::vector<uint64_t>{1, 2, 6}));
  // Unallocated: 10, 8, 3 -> mean 7; deviations 3, 1, -4 -> 26 / (3 - 1) = 13.
  EXPECT_DOUBLE_EQ(s.unallocated_pct_at_100, 7.0);
  EXPECT_DOUBLE_EQ(s.unallocated_pct_sd_at_100, std::sqrt(13.0));
  EXPECT_DOUBLE_EQ(s.allocated_pct[100], 93.0);
  EXPECT_DOUBLE_EQ(s.allocated_pct[5], 3.0);  // (1 + 2 + 6) / 3
  EXPECT_DOUBLE_EQ(s.allocated_pct[0], 0.0);
  EXPECT_DOUBLE_EQ(s.fragmentation_pct_at_100, 2.0);
  EXPECT_DOUBLE_EQ(s.fragmentation_ratio_pct_at_100, 20.0);
  EXPECT_DOUBLE_EQ(s.pods_failed_mean, 3.0);
  EXPECT_DOUBLE_EQ(s.wall_seconds, 3.0);

  // One run: its values, and a standard deviation of 0.
  const FgdPolicySummary one = SummarizeFgdRuns({runs[1]});
  EXPECT_DOUBLE_EQ(one.unallocated_pct_at_100, 8.0);
  EXPECT_DOUBLE_EQ(one.unallocated_pct_sd_at_100, 0.0);
}

// --target learned: the policy's target is learned from the pods as they
// arrive (the daemon's learner), the run is as reproducible as the paper's
// setup, and it differs from it (the learner starts from its prior).
TEST(FgdProtocolTest, ALearnedTargetIsReproducibleAndNeedsNoPodList) {
  const ProtocolSetup s = MakeSetup();
  auto spec = FindPolicy("FGD");
  ASSERT_TRUE(spec.has_value());
  FgdRunOptions opt;
  opt.seed = 7;
  auto a = RunFgdProtocolLearning(s.nodes, s.pods, s.target.frag, *spec, {}, opt);
  auto b = RunFgdProtocolLearning(s.nodes, s.pods, s.target.frag, *spec, {}, opt);
  ASSERT_TRUE(a.has_value() && b.has_value()) << (a ? "" : a.error().message);
  EXPECT_EQ(a->placements, b->placements);
  EXPECT_TRUE(SameBytes(a->allocated_pct, b->allocated_pct));
  const FgdRunResult oracle = RunPolicy(s, "FGD", 7);
  EXPECT_EQ(a->pods_submitted, oracle.pods_submitted);  // the same arrivals
  EXPECT_NE(a->placements, oracle.placements);
  WorkloadLearningConfig bad;
  bad.half_life = Duration(0);
  auto refused = RunFgdProtocolLearning(s.nodes, s.pods, s.target.frag, *spec, bad, opt);
  ASSERT_FALSE(refused.has_value());
  EXPECT_NE(refused.error().message.find("half_life"), std::string::npos);
}

}  // namespace
}  // namespace gpupool
