// End to end: `gpupool sim run|fgd --report FILE.html` as an operator runs them.
#include <gtest/gtest.h>

#include <filesystem>

#include "tests/run_binary.h"

namespace gpupool {
namespace {

using testing::RunGpupool;

TEST(SimReportCliTest, RunWritesOneSelfContainedPageAndPrintsTheSameTextReport) {
  const std::string dir = testing::MakeTempDir();
  const std::string scenario = GPUPOOL_SOURCE_DIR "/scenarios/sharing.yaml";
  auto plain = RunGpupool({"sim", "run", scenario});
  auto with = RunGpupool({"sim", "run", scenario, "--report", dir + "/r.html"});
  ASSERT_EQ(with.exit_code, 0) << with.err;
  EXPECT_EQ(with.out, plain.out);  // the report adds a file, nothing to stdout
  EXPECT_EQ(with.err, "");         // no progress line: stderr is not a terminal
  const std::string html = testing::ReadTextFile(dir + "/r.html");
  EXPECT_NE(html.find("gpupool simulation: sharing"), std::string::npos);
  size_t charts = 0;
  for (size_t at = html.find("<svg"); at != std::string::npos; at = html.find("<svg", at + 1)) ++charts;
  EXPECT_GE(charts, 4u);
  EXPECT_EQ(html.find("http"), std::string::npos);
  EXPECT_FALSE(std::filesystem::exists(dir + "/r.html.tmp"));
  std::filesystem::remove_all(dir);
}

TEST(SimReportCliTest, AReportThatCannotBeWrittenFailsNamingTheFlag) {
  auto run = RunGpupool(
      {"sim", "run", GPUPOOL_SOURCE_DIR "/scenarios/sharing.yaml", "--report", "/nonexistent-dir/r.html"});
  EXPECT_EQ(run.exit_code, 2);
  EXPECT_NE(run.err.find("--report: /nonexistent-dir/r.html: cannot write the report"), std::string::npos) << run.err;
}

TEST(SimReportCliTest, FgdWritesTheCurvesOfEachPolicy) {
  const std::string dir = testing::MakeTempDir();
  auto run = RunGpupool({"sim", "fgd", "--generate", "--generate-nodes", "25", "--generate-pods", "200", "--policy",
                         "FGD,BestFit", "--seeds", "1", "--threads", "1", "--report", dir + "/f.html"});
  ASSERT_EQ(run.exit_code, 0) << run.err;
  const std::string html = testing::ReadTextFile(dir + "/f.html");
  EXPECT_NE(html.find("GPU allocation against the arrived workload"), std::string::npos);
  EXPECT_NE(html.find(">FGD<"), std::string::npos);
  EXPECT_NE(html.find(">BestFit<"), std::string::npos);
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace gpupool
