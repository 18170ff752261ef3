#include "src/agent/cuda_cap_env.h"

#include <gtest/gtest.h>

#include <map>
#include <string>

namespace gpupool {
namespace {

std::map<std::string, std::string> AsMap(const EnvList& env) { return {env.begin(), env.end()}; }

TEST(CudaCapEnvTest, ATimeSlicedShareGetsItsMemoryAndComputeCapped) {
  const auto env = AsMap(CudaCapEnv({"time-slice", 250, 20480}, "/lib/cap.so", "/scratch", {}));
  EXPECT_EQ(env.at("GPUPOOL_CUDA_MEMORY_LIMIT_MIB"), "20480");
  EXPECT_EQ(env.at("GPUPOOL_CUDA_COMPUTE_SHARE"), "0.250");
  EXPECT_EQ(env.at("GPUPOOL_CUDA_CAP_STATE"), "/scratch/.gpupool-cuda-cap");
  EXPECT_EQ(env.at("LD_PRELOAD"), "/lib/cap.so");
}

TEST(CudaCapEnvTest, AComputeShareGetsTheContentionSignalAndNothingElseDoes) {
  const auto paced = AsMap(CudaCapEnv({"time-slice", 250, 0}, "/lib/cap.so", "/s", {}, "/gpupool/contention/state"));
  EXPECT_EQ(paced.at("GPUPOOL_CUDA_CONTENTION_FILE"), "/gpupool/contention/state");
  EXPECT_EQ(AsMap(CudaCapEnv({"time-slice", 250, 0}, "/lib/cap.so", "/s", {})).count("GPUPOOL_CUDA_CONTENTION_FILE"),
            0u);
  for (const CudaCapShare& unpaced : {CudaCapShare{"mps", 300, 8192}, CudaCapShare{"time-slice", 1000, 4096}}) {
    const auto env = AsMap(CudaCapEnv(unpaced, "/lib/cap.so", "/s", {}, "/c/state"));
    EXPECT_EQ(env.count("GPUPOOL_CUDA_CONTENTION_FILE"), 0u) << unpaced.gpu_mode;
  }
}

TEST(CudaCapEnvTest, AnMpsShareGetsItsMemoryCappedAndMpsCapsItsCompute) {
  const auto env = AsMap(CudaCapEnv({"mps", 300, 8192}, "/lib/cap.so", "/scratch", {}));
  EXPECT_EQ(env.at("GPUPOOL_CUDA_MEMORY_LIMIT_MIB"), "8192");
  EXPECT_EQ(env.count("GPUPOOL_CUDA_COMPUTE_SHARE"), 0u);
  EXPECT_EQ(env.at("LD_PRELOAD"), "/lib/cap.so");
}

TEST(CudaCapEnvTest, WholeGpusMigAndCpuTasksAndANodeWithoutTheLibraryGetNothing) {
  for (const char* mode : {"whole", "mig", "none"}) {
    EXPECT_TRUE(CudaCapEnv({mode, 500, 4096}, "/lib/cap.so", "/s", {}).empty()) << mode;
  }
  EXPECT_TRUE(CudaCapEnv({"time-slice", 500, 4096}, "", "/s", {}).empty());
  EXPECT_TRUE(CudaCapEnv({"time-slice", 1000, 0}, "/lib/cap.so", "/s", {}).empty());  // nothing to cap
  const auto memory_only = AsMap(CudaCapEnv({"time-slice", 1000, 4096}, "/lib/cap.so", "/s", {}));
  EXPECT_EQ(memory_only.count("GPUPOOL_CUDA_COMPUTE_SHARE"), 0u);
  EXPECT_EQ(memory_only.at("GPUPOOL_CUDA_MEMORY_LIMIT_MIB"), "4096");
}

TEST(CudaCapEnvTest, AJobsOwnPreloadIsKeptAfterOurs) {
  const auto env = AsMap(CudaCapEnv({"time-slice", 500, 4096}, "/lib/cap.so", "/s", {{"LD_PRELOAD", "/opt/x.so"}}));
  EXPECT_EQ(env.at("LD_PRELOAD"), "/lib/cap.so:/opt/x.so");
}

}  // namespace
}  // namespace gpupool
