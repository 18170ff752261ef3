#include "src/sim/serving_trace.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>

#include "src/config/traces_dir.h"

namespace gpupool {
namespace {

TEST(DlrmTraceTest, MalformedFilesNameLineAndColumn) {
  const std::string dir = ::testing::TempDir();
  const std::string path = dir + "/dlrm.csv";
  FILE* f = std::fopen(path.c_str(), "w");
  std::fputs("instance_sn,role,gpu_request,creation_time,deletion_time\n"
             "i0,HN,1,10.5,100.0\n"
             "i1,HN,1,,\n"
             "i2,XX,1,,\n",
             f);
  std::fclose(f);
  auto bad = LoadDlrmTrace(path);
  ASSERT_FALSE(bad.has_value());
  EXPECT_NE(bad.error().message.find(path + ":4:2"), std::string::npos) << bad.error().message;
  f = std::fopen(path.c_str(), "w");
  std::fputs("instance_sn,role,gpu_request,creation_time,deletion_time\ni0,HN,1,10.5,100.0\ni1,HN,2,,250\n"
             "i2,CN,0,0,\n",
             f);
  std::fclose(f);
  auto ok = LoadDlrmTrace(path);
  ASSERT_TRUE(ok.has_value()) << ok.error().message;
  // 100-second bins: at 0 only i1 (2 GPUs), at 100 i0 has left at 100, at 200 i1 still lives.
  EXPECT_EQ(LiveGpuSeries(*ok, 100), (std::vector<double>{2, 2, 2}));
  EXPECT_EQ(LiveGpuSeries(*ok, 50), (std::vector<double>{2, 3, 2, 2, 2, 0}));  // i1 leaves at 250
}

TEST(DlrmTraceTest, ReadsTheRealTrace) {
  const std::string path = TraceFile(kDlrmTraceFile);
  if (path.empty()) GTEST_SKIP() << "the DLRM serving trace is not here (../shared/traces); skipping";
  auto trace = LoadDlrmTrace(path);
  ASSERT_TRUE(trace.has_value()) << trace.error().message;
  EXPECT_EQ(trace->size(), 23871u);
  size_t gpu = 0;
  for (const DlrmInstance& d : *trace) gpu += d.gpu;
  EXPECT_EQ(gpu, 7386u);
  const std::vector<double> live = LiveGpuSeries(*trace, 300);
  EXPECT_GT(live.size(), 288u * 30);  // about 31 days of 5-minute bins
  // The GPUs held by live instances stay within a narrow band (long-lived
  // serving instances, about 3,100 to 3,400 GPUs): the trace's own count has
  // no strong daily cycle, so a diurnal workload is built from its
  // lifetimes, not replayed as is.
  const auto [lo, hi] = std::minmax_element(live.begin(), live.end());
  EXPECT_GT(*lo, 0);
  EXPECT_LT(*hi / *lo, 1.5);
}

}  // namespace
}  // namespace gpupool
