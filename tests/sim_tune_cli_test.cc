// `gpupool sim tune` with the real binary on a scenario whose optimum is
// known by construction: one tenant, 32 GPUs, more one-GPU jobs than fit,
// so the jobs completed grow with the tenant's limit up to the pool's
// size. The search must come within 5% of the optimum, and say so
// deterministically for a seed. Bad input is named.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "tests/run_binary.h"

namespace gpupool::testing {
namespace {

using nlohmann::json;

std::string Scenario(int limit) {
  return "name: tune-known\nseed: 3\nhorizon: 24h\n"
         "cluster:\n  nodes:\n    - {count: 4, model: H100, gpus: 8, cpu_cores: 64, memory_gib: 512}\n"
         "pools:\n  - {name: gpu}\n"
         "tenants:\n  - name: team\n    quota: {gpu: {guaranteed_gpus: 0, limit_gpus: " + std::to_string(limit) +
         "}}\n"
         "workload:\n  - tenant: team\n    arrivals: {process: poisson, rate_per_hour: 40}\n"
         "    jobs:\n      - {name: one, kind: training, gpus: 1, cpu_cores: 1, memory_gib: 8,\n"
         "         duration: {lognormal: {median: 1h, sigma: 0.3}}}\n";
}

class SimTuneCliTest : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = MakeTempDir();
    std::ofstream(root_ + "/scenario.yaml") << Scenario(2);
    std::ofstream(root_ + "/space.yaml")
        << "parameters:\n  - {path: 'tenants[team].quota.gpu.limit_gpus', min: 1, max: 64, integer: true}\n"
           "  - {path: engine.policy, values: [best, GpuPacking]}\n";
  }
  void TearDown() override { std::filesystem::remove_all(root_); }
  BinaryRun Tune(const std::string& parallel) {
    return RunGpupool({"sim", "tune", "--from", root_ + "/scenario.yaml", "--space", root_ + "/space.yaml",
                       "--objective", "completed", "--front", "wait_p95_s", "--budget", "12", "--seed", "5",
                       "--parallel", parallel, "--json", "--best-config", root_ + "/best.yaml", "--report",
                       root_ + "/tune.html"});
  }
  std::string root_;
};

TEST_F(SimTuneCliTest, FindsTheKnownOptimumWithinFivePercentDeterministically) {
  std::ofstream(root_ + "/optimum.yaml") << Scenario(32);  // every GPU the pool has
  const BinaryRun opt = RunGpupool({"sim", "run", root_ + "/optimum.yaml", "--json"});
  ASSERT_EQ(opt.exit_code, 0) << opt.err;
  const double optimum = json::parse(opt.out)["jobs"]["completed"].get<double>();
  ASSERT_GT(optimum, 100);

  const BinaryRun r = Tune("2");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const json j = json::parse(r.out);
  const json& best = j["runs"][j["best"][0].get<size_t>()];
  EXPECT_GE(best["objective"].get<double>(), 0.95 * optimum) << best.dump();
  EXPECT_LT(j["runs"][0]["objective"].get<double>(), 0.5 * optimum) << "the baseline's limit of 2 is far off";
  EXPECT_FALSE(j["pareto"].empty());
  // The best configuration is a scenario that runs.
  const BinaryRun again = RunGpupool({"sim", "run", root_ + "/best.yaml", "--json"});
  ASSERT_EQ(again.exit_code, 0) << again.err;
  EXPECT_EQ(json::parse(again.out)["jobs"]["completed"].get<double>(), best["objective"].get<double>());
  EXPECT_NE(ReadTextFile(root_ + "/tune.html").find("Trade-off front"), std::string::npos);

  const BinaryRun serial = Tune("1");
  ASSERT_EQ(serial.exit_code, 0) << serial.err;
  EXPECT_EQ(json::parse(serial.out)["runs"], j["runs"]) << "the same seed, the same runs, in parallel or not";
}

TEST_F(SimTuneCliTest, BadInputIsNamed) {
  std::ofstream(root_ + "/bad-space.yaml") << "parameters:\n  - {path: engine.policy, values: []}\n";
  const BinaryRun space = RunGpupool({"sim", "tune", "--from", root_ + "/scenario.yaml", "--space",
                                      root_ + "/bad-space.yaml", "--objective", "completed"});
  EXPECT_EQ(space.exit_code, 2);
  EXPECT_NE(space.err.find(root_ + "/bad-space.yaml:2:"), std::string::npos) << space.err;
  const BinaryRun measure = RunGpupool({"sim", "tune", "--from", root_ + "/scenario.yaml", "--space",
                                        root_ + "/space.yaml", "--objective", "happiness"});
  EXPECT_EQ(measure.exit_code, 2);
  EXPECT_NE(measure.err.find("--objective: unknown measure 'happiness'"), std::string::npos) << measure.err;
  std::ofstream(root_ + "/nowhere.yaml") << "parameters:\n  - {path: 'tenants[ops].quota.gpu.limit_gpus', min: 1, "
                                            "max: 2}\n";
  const BinaryRun path = RunGpupool({"sim", "tune", "--from", root_ + "/scenario.yaml", "--space",
                                     root_ + "/nowhere.yaml", "--objective", "completed"});
  EXPECT_EQ(path.exit_code, 2);
  EXPECT_NE(path.err.find("tenants[ops] is not in the file"), std::string::npos) << path.err;
  const BinaryRun budget = RunGpupool({"sim", "tune", "--from", root_ + "/scenario.yaml", "--space",
                                       root_ + "/space.yaml", "--objective", "completed", "--budget", "0"});
  EXPECT_EQ(budget.exit_code, 2);
  EXPECT_NE(budget.err.find("--budget"), std::string::npos) << budget.err;
}

}  // namespace
}  // namespace gpupool::testing
