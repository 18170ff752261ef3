// `gpupool agent --print-devices`: what the device check (scripts/device-check.sh)
// runs on a real GPU to see the NVML backend's registration, here against
// the fake NVML library.
#include <gtest/gtest.h>
#include <stdlib.h>

#include <filesystem>
#include <fstream>

#include <nlohmann/json.hpp>

#include "tests/run_binary.h"

namespace gpupool {
namespace {

using nlohmann::json;

class AgentDevicesCliTest : public ::testing::Test {
 protected:
  void TearDown() override {
    unsetenv("GPUPOOL_FAKE_NVML_SCRIPT");
    std::filesystem::remove_all(dir_);
  }
  // The fake NVML scripted with `devices`, for the child's nvmlInit_v2.
  void Script(const json& devices) {
    const std::string path = dir_ + "/script.json";
    std::ofstream(path) << json{{"devices", devices}}.dump();
    setenv("GPUPOOL_FAKE_NVML_SCRIPT", path.c_str(), 1);
  }
  std::string dir_ = testing::MakeTempDir();
};

TEST_F(AgentDevicesCliTest, PrintsTheNvmlGpusAsRegistrationSendsThemWithoutAServer) {
  Script(json::array({json{{"uuid", "GPU-5e1c"}, {"name", "NVIDIA H100 80GB HBM3"}, {"memory_total_mib", 81559}},
                      json{{"uuid", "GPU-77aa"}, {"name", "NVIDIA A100-SXM4-40GB"}, {"memory_total_mib", 40960}}}));
  const auto run = testing::RunGpupool({"agent", "--print-devices", "--nvml-library", GPUPOOL_FAKE_NVML_LIBRARY});
  ASSERT_EQ(run.exit_code, 0) << run.err;
  const json out = json::parse(run.out, nullptr, false);
  ASSERT_TRUE(out.is_object()) << run.out;
  EXPECT_EQ(out["backend"], "nvml");
  ASSERT_EQ(out["gpus"].size(), 2u) << run.out;
  EXPECT_EQ(out["gpus"][0]["uuid"], "GPU-5e1c");
  EXPECT_EQ(out["gpus"][0]["product"], "NVIDIA H100 80GB HBM3");
  EXPECT_EQ(out["gpus"][0]["model"], "H100");
  EXPECT_EQ(out["gpus"][0]["memory_mib"], 81559);
  EXPECT_EQ(out["gpus"][1]["index"], 1);
  EXPECT_EQ(out["gpus"][1]["model"], "A100-40GB");
}

TEST_F(AgentDevicesCliTest, ADriverThatFailsIsAnErrorNamingTheCall) {
  Script(json::array({json{{"uuid", "GPU-1"}, {"name", "NVIDIA H100 80GB HBM3"}, {"memory_total_mib", 81559},
                           {"fail", {{"nvmlDeviceGetUUID", 999}}}}}));
  const auto run = testing::RunGpupool({"agent", "--print-devices", "--nvml-library", GPUPOOL_FAKE_NVML_LIBRARY});
  EXPECT_EQ(run.exit_code, 1);
  EXPECT_NE(run.err.find("nvmlDeviceGetUUID (GPU 0)"), std::string::npos) << run.err;
  const auto missing = testing::RunGpupool({"agent", "--print-devices", "--nvml-library", dir_ + "/no-such.so"});
  EXPECT_EQ(missing.exit_code, 1);
  EXPECT_NE(missing.err.find("no-such.so"), std::string::npos) << missing.err;
}

TEST_F(AgentDevicesCliTest, FakeGpusPrintTooAndTheAgentStillNeedsItsFlags) {
  const auto fake = testing::RunGpupool({"agent", "--print-devices", "--fake-gpus", "2xH100"});
  ASSERT_EQ(fake.exit_code, 0) << fake.err;
  const json out = json::parse(fake.out, nullptr, false);
  EXPECT_EQ(out["backend"], "fake");
  EXPECT_EQ(out["gpus"].size(), 2u);
  const auto bare = testing::RunGpupool({"agent", "--node", "n"});
  EXPECT_EQ(bare.exit_code, 2);
  EXPECT_NE(bare.err.find("--server is required"), std::string::npos) << bare.err;
}

}  // namespace
}  // namespace gpupool
