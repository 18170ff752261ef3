// The DCGM field set and XID health through the real NVML backend, on the
// scripted fake libnvidia-ml (tests/fake_nvml/).
#include "src/agent/nvml_fields.h"

#include <gtest/gtest.h>
#include <stdlib.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "src/agent/nvml_backend.h"

namespace gpupool {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using F = DcgmField;

// GPU 0: every field scripted. GPU 1: only what every GPU answers (the
// rest "not supported"). GPU 2: an A100 in MIG mode with two instances.
json Node() {
  return json::parse(R"({
    "devices": [
      {"uuid": "GPU-full", "name": "NVIDIA H100 80GB HBM3", "memory_total_mib": 81559, "memory_used_mib": 2048,
       "utilization_pct": 37, "memory_util_pct": 12, "temperature_c": 41, "minor": 3,
       "power_mw": 312500, "energy_mj": 123456789, "sm_clock_mhz": 1980, "mem_clock_mhz": 2619,
       "ecc": {"sbe_volatile": 3, "dbe_volatile": 1},
       "pcie_tx_kbps": 1000, "pcie_rx_kbps": 2000, "pcie_replay": 4,
       "encoder_util_pct": 5, "decoder_util_pct": 6, "clocks_event_reasons": 4, "fan_pct": 30,
       "memory_temp_c": 45, "nvlinks": [{"peer": 1}, {"peer": 1}], "nvlink_tx_kib": 100, "nvlink_rx_kib": 200,
       "sm_active_pct": 55, "remapped_rows": {"correctable": 2, "uncorrectable": 1}},
      {"uuid": "GPU-bare", "name": "NVIDIA H100 80GB HBM3", "memory_total_mib": 81559, "temperature_c": 35},
      {"uuid": "GPU-mig", "name": "NVIDIA A100-SXM4-80GB", "memory_total_mib": 81920, "mig_mode": 1,
       "power_mw": 90000,
       "mig": [
         {"uuid": "MIG-big", "name": "NVIDIA A100-SXM4-80GB MIG 3g.40gb", "index": 0,
          "gpu_instance_id": 2, "start": 4, "size": 4, "memory_mib": 40448, "sm_active_pct": 80},
         {"uuid": "MIG-small", "name": "NVIDIA A100-SXM4-80GB MIG 1g.10gb", "index": 3,
          "gpu_instance_id": 9, "start": 0, "size": 1, "memory_mib": 9728}]}
    ]
  })");
}

class NvmlFieldsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string templ = (fs::temp_directory_path() / "gpupool-nvml-fields-XXXXXX").string();
    ASSERT_NE(mkdtemp(templ.data()), nullptr);
    dir_ = templ;
  }
  void TearDown() override {
    unsetenv("GPUPOOL_FAKE_NVML_SCRIPT");
    fs::remove_all(dir_);
  }
  std::unique_ptr<DeviceBackend> Open(const json& script) {
    const std::string path = dir_ + "/script.json";
    std::ofstream(path) << script.dump(2);
    setenv("GPUPOOL_FAKE_NVML_SCRIPT", path.c_str(), 1);
    NvmlOptions options;
    options.library = GPUPOOL_FAKE_NVML_LIBRARY;
    auto b = OpenNvmlBackend(options);
    EXPECT_TRUE(b.has_value()) << b.error().message;
    return b ? std::move(*b) : nullptr;
  }
  std::string dir_;
};

const DcgmEntity* Find(const std::vector<DcgmEntity>& es, int gpu, int gi = -1) {
  for (const DcgmEntity& e : es) {
    if (e.gpu == gpu && e.gpu_instance_id == gi) return &e;
  }
  return nullptr;
}

TEST_F(NvmlFieldsTest, EveryFieldHasItsScriptedValue) {
  auto backend = Open(Node());
  ASSERT_TRUE(backend);
  auto first = backend->ReadDcgmFields();
  ASSERT_TRUE(first.has_value()) << first.error().message;
  const DcgmEntity* g = Find(*first, 0);
  ASSERT_NE(g, nullptr);
  EXPECT_FALSE(g->Get(F::kSmActive).has_value());  // GPM needs two samples
  auto second = backend->ReadDcgmFields();
  ASSERT_TRUE(second.has_value());
  g = Find(*second, 0);
  ASSERT_NE(g, nullptr);
  EXPECT_EQ(g->uuid, "GPU-full");
  EXPECT_EQ(g->model_name, "NVIDIA H100 80GB HBM3");
  EXPECT_EQ(g->device_minor, 3);
  const std::map<F, double> want = {
      {F::kGpuUtil, 37},         {F::kMemCopyUtil, 12},
      {F::kSmActive, 0.55},      {F::kFbUsed, 2048},
      {F::kFbFree, 81559 - 2048}, {F::kFbTotal, 81559},
      {F::kGpuTemp, 41},         {F::kMemoryTemp, 45},
      {F::kPowerUsage, 312.5},   {F::kTotalEnergyConsumption, 123456789},
      {F::kSmClock, 1980},       {F::kMemClock, 2619},
      {F::kEccSbeVolTotal, 3},   {F::kEccDbeVolTotal, 1},
      {F::kXidErrors, 0},        {F::kPcieTxBytes, 1000 * 1024.0},
      {F::kPcieRxBytes, 2000 * 1024.0}, {F::kPcieReplayCounter, 4},
      {F::kNvlinkBandwidthTotal, 300}, {F::kEncUtil, 5},
      {F::kDecUtil, 6},          {F::kClockThrottleReasons, 4},
      {F::kFanSpeed, 30},        {F::kCorrectableRemappedRows, 2},
      {F::kUncorrectableRemappedRows, 1}, {F::kRowRemapFailure, 0},
  };
  ASSERT_EQ(want.size(), static_cast<size_t>(kDcgmFieldCount));  // every field of the table
  for (const auto& [field, value] : want) {
    ASSERT_TRUE(g->Get(field).has_value()) << DcgmFieldInfoOf(field).name;
    EXPECT_DOUBLE_EQ(*g->Get(field), value) << DcgmFieldInfoOf(field).name;
  }
}

TEST_F(NvmlFieldsTest, NotSupportedFieldsAreAbsent) {
  auto backend = Open(Node());
  ASSERT_TRUE(backend);
  (void)backend->ReadDcgmFields();
  auto r = backend->ReadDcgmFields();
  ASSERT_TRUE(r.has_value());
  const DcgmEntity* g = Find(*r, 1);
  ASSERT_NE(g, nullptr);
  // What the bare GPU answers: utilization, memory, temperature, XIDs, remapped rows.
  const std::set<F> present = {F::kGpuUtil, F::kMemCopyUtil, F::kFbUsed, F::kFbFree, F::kFbTotal, F::kGpuTemp,
                               F::kXidErrors, F::kCorrectableRemappedRows, F::kUncorrectableRemappedRows,
                               F::kRowRemapFailure};
  for (const DcgmFieldInfo& f : DcgmFieldTable()) {
    EXPECT_EQ(g->Get(f.field).has_value(), present.contains(f.field)) << f.name;
  }
  EXPECT_EQ(*g->Get(F::kGpuTemp), 35);
}

TEST_F(NvmlFieldsTest, MigInstancesHaveTheirOwnMemoryAndSmActivity) {
  auto backend = Open(Node());
  ASSERT_TRUE(backend);
  (void)backend->ReadDcgmFields();
  auto r = backend->ReadDcgmFields();
  ASSERT_TRUE(r.has_value());
  ASSERT_EQ(r->size(), 5u);  // three GPUs, two instances
  const DcgmEntity* gpu = Find(*r, 2);
  ASSERT_NE(gpu, nullptr);
  EXPECT_DOUBLE_EQ(*gpu->Get(F::kPowerUsage), 90);
  EXPECT_FALSE(gpu->Get(F::kSmActive).has_value());  // per instance on a GPU in MIG mode
  const DcgmEntity* big = Find(*r, 2, 2);
  ASSERT_NE(big, nullptr);
  EXPECT_EQ(big->uuid, "GPU-mig");  // as the exporter: the GPU's UUID, the instance in GPU_I_ID
  EXPECT_EQ(big->gpu_instance_profile, "3g.40gb");
  EXPECT_EQ(big->mig_start, 4);
  EXPECT_DOUBLE_EQ(*big->Get(F::kFbTotal), 40448);
  EXPECT_DOUBLE_EQ(*big->Get(F::kSmActive), 0.8);
  EXPECT_FALSE(big->Get(F::kPowerUsage).has_value());  // device-wide: the GPU's
  const DcgmEntity* small = Find(*r, 2, 9);
  ASSERT_NE(small, nullptr);
  EXPECT_EQ(small->gpu_instance_profile, "1g.10gb");
  EXPECT_DOUBLE_EQ(*small->Get(F::kFbTotal), 9728);
  EXPECT_FALSE(small->Get(F::kSmActive).has_value());  // not scripted: GPM "not supported" there
}

TEST_F(NvmlFieldsTest, ACriticalXidMakesTheGpuUnhealthyUntilTheAgentRestarts) {
  json script = Node();
  script["devices"][0]["xids"] = json::array({json{{"xid", 31}}, json{{"xid", 79}, {"after_waits", 5}}});
  auto backend = Open(script);
  ASSERT_TRUE(backend);
  // The first polls see XID 31 only: an application's fault, not the GPU's.
  auto s = backend->Sample();
  ASSERT_TRUE(s.has_value()) << s.error().message;
  EXPECT_TRUE((*s)[0].healthy) << (*s)[0].health_detail;
  auto fields = backend->ReadDcgmFields();
  ASSERT_TRUE(fields.has_value());
  EXPECT_EQ(*Find(*fields, 0)->Get(F::kXidErrors), 31);
  // Then XID 79: unhealthy, with the XID named, and it stays so.
  for (int i = 0; i < 3; ++i) {
    s = backend->Sample();
    ASSERT_TRUE(s.has_value());
  }
  EXPECT_FALSE((*s)[0].healthy);
  EXPECT_NE((*s)[0].health_detail.find("XID 79 (GPU has fallen off the bus)"), std::string::npos)
      << (*s)[0].health_detail;
  EXPECT_NE((*s)[0].health_detail.find("restart the agent"), std::string::npos) << (*s)[0].health_detail;
  EXPECT_TRUE((*s)[1].healthy);  // the other GPUs are not touched
  fields = backend->ReadDcgmFields();
  ASSERT_TRUE(fields.has_value());
  EXPECT_EQ(*Find(*fields, 0)->Get(F::kXidErrors), 79);
  s = backend->Sample();
  ASSERT_TRUE(s.has_value());
  EXPECT_FALSE((*s)[0].healthy);
  backend.reset();
  // A new agent (a new backend) starts healthy: the operator reset the GPU.
  script["devices"][0].erase("xids");
  backend = Open(script);
  ASSERT_TRUE(backend);
  s = backend->Sample();
  ASSERT_TRUE(s.has_value());
  EXPECT_TRUE((*s)[0].healthy) << (*s)[0].health_detail;
}

TEST_F(NvmlFieldsTest, WithoutXidEventsTheFieldIsAbsent) {
  json script = Node();
  script["devices"][1]["xid_events"] = false;
  auto backend = Open(script);
  ASSERT_TRUE(backend);
  auto r = backend->ReadDcgmFields();
  ASSERT_TRUE(r.has_value());
  EXPECT_TRUE(Find(*r, 0)->Get(F::kXidErrors).has_value());
  EXPECT_FALSE(Find(*r, 1)->Get(F::kXidErrors).has_value());
}

TEST_F(NvmlFieldsTest, AFailedFieldCallLeavesTheFieldOut) {
  json script = Node();
  script["devices"][0]["fail"] = {{"nvmlDeviceGetPowerUsage", 999}};
  auto backend = Open(script);
  ASSERT_TRUE(backend);
  auto r = backend->ReadDcgmFields();
  ASSERT_TRUE(r.has_value());
  EXPECT_FALSE(Find(*r, 0)->Get(F::kPowerUsage).has_value());
  EXPECT_TRUE(Find(*r, 0)->Get(F::kSmClock).has_value());
}

TEST_F(NvmlFieldsTest, TheReadingRendersUnderTheExportersNames) {
  auto backend = Open(Node());
  ASSERT_TRUE(backend);
  auto r = backend->ReadDcgmFields();
  ASSERT_TRUE(r.has_value());
  const std::string text = RenderDcgmMetrics(*r, DcgmNodeLabels{"node-1", "gpu", {{0, -1, "team-a", "7"}}});
  EXPECT_NE(text.find("DCGM_FI_DEV_POWER_USAGE{gpu=\"0\",UUID=\"GPU-full\",device=\"nvidia3\",modelName=\"NVIDIA H100 "
                      "80GB HBM3\",Hostname=\"node-1\",pool=\"gpu\",tenant=\"team-a\",job=\"7\"} 312.5"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("DCGM_FI_DEV_FB_USED{gpu=\"2\",UUID=\"GPU-mig\",device=\"nvidia2\",modelName=\"NVIDIA "
                      "A100-SXM4-80GB\",Hostname=\"node-1\",GPU_I_PROFILE=\"3g.40gb\",GPU_I_ID=\"2\",pool=\"gpu\"} 0"),
            std::string::npos)
      << text;
}

}  // namespace
}  // namespace gpupool
