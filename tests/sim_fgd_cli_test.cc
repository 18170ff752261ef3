// End to end: `gpupool sim fgd` as an operator runs it.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include <nlohmann/json.hpp>

#include "tests/run_binary.h"

namespace gpupool {
namespace {

using testing::RunGpupool;

TEST(SimFgdCliTest, JsonHasOneObjectPerPolicyWithTheProtocolKeys) {
  auto run = RunGpupool({"sim", "fgd", "--generate", "--generate-nodes", "150", "--generate-pods", "1500", "--policy",
                         "FGD,BestFit,best", "--seeds", "1-3", "--json", "--threads", "1"});
  ASSERT_EQ(run.exit_code, 0) << run.err;
  const auto j = nlohmann::json::parse(run.out);
  ASSERT_TRUE(j.is_array());
  ASSERT_EQ(j.size(), 3u);
  EXPECT_EQ(j[0]["policy"], "FGD");
  EXPECT_EQ(j[1]["policy"], "BestFit");
  EXPECT_EQ(j[2]["policy"], "best");
  for (const auto& p : j) {
    EXPECT_EQ(p["seeds"], nlohmann::json({1, 2, 3}));
    ASSERT_EQ(p["allocated_pct_at"].size(), 131u);
    EXPECT_TRUE(p["allocated_pct_at"].contains("0"));
    EXPECT_TRUE(p["allocated_pct_at"].contains("130"));
    const double alloc100 = p["allocated_pct_at"]["100"];
    EXPECT_NEAR(p["unallocated_pct_at_100"].get<double>(), 100.0 - alloc100, 1e-9);
    EXPECT_GE(p["unallocated_pct_sd_at_100"].get<double>(), 0.0);
    EXPECT_GE(p["fragmentation_pct_at_100"].get<double>(), 0.0);
    EXPECT_GT(p["wall_seconds"].get<double>(), 0.0);
  }
}

TEST(SimFgdCliTest, SameSeedsGiveIdenticalOutput) {
  const std::vector<std::string> args = {"sim",  "fgd",      "--generate", "--generate-nodes", "25", "--generate-pods",
                                         "200",  "--policy", "FGD+",       "--seeds",          "7",  "--json"};
  auto a = RunGpupool(args), b = RunGpupool(args);
  ASSERT_EQ(a.exit_code, 0) << a.err;
  auto ja = nlohmann::json::parse(a.out), jb = nlohmann::json::parse(b.out);
  ja[0].erase("wall_seconds");
  jb[0].erase("wall_seconds");
  EXPECT_EQ(ja.dump(), jb.dump());
}

TEST(SimFgdCliTest, MalformedPodFileIsRejectedWithItsLocationAndNothingRuns) {
  const std::string dir = testing::MakeTempDir();
  const std::string nodes = dir + "/nodes.csv", pods = dir + "/pods.csv";
  std::ofstream(nodes) << "sn,cpu_milli,memory_mib,gpu,model\nn1,32000,65536,2,T4\n";
  std::ofstream(pods) << "name,cpu_milli,memory_mib,num_gpu,gpu_milli\np1,1000,1024,1,500\np2,1000,lots,1,500\n";
  auto run = RunGpupool({"sim", "fgd", "--nodes", nodes, "--pods", pods, "--policy", "FGD"});
  EXPECT_EQ(run.exit_code, 2);
  EXPECT_EQ(run.out, "");
  EXPECT_NE(run.err.find(pods + ":3:3 (memory_mib): expected an integer, got 'lots'"), std::string::npos) << run.err;
  std::filesystem::remove_all(dir);
}

TEST(SimFgdCliTest, BadFlagsAreNamed) {
  auto unknown = RunGpupool({"sim", "fgd", "--generate", "--policy", "Nope"});
  EXPECT_EQ(unknown.exit_code, 2);
  EXPECT_NE(unknown.err.find("--policy: unknown policy 'Nope'"), std::string::npos) << unknown.err;
  auto seeds = RunGpupool({"sim", "fgd", "--generate", "--seeds", "9-3"});
  EXPECT_EQ(seeds.exit_code, 2);
  EXPECT_NE(seeds.err.find("--seeds: range '9-3' runs backwards"), std::string::npos) << seeds.err;
  auto missing = RunGpupool({"sim", "fgd", "--pods", "x.csv"});
  EXPECT_EQ(missing.exit_code, 2);
  EXPECT_NE(missing.err.find("--nodes and --pods are required"), std::string::npos) << missing.err;
}

}  // namespace
}  // namespace gpupool
