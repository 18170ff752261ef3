#include "src/agent/dcgm_fields.h"

#include <gtest/gtest.h>

#include <fstream>
#include <map>
#include <set>
#include <sstream>

namespace gpupool {
namespace {

DcgmEntity Gpu(int index) {
  DcgmEntity e;
  e.gpu = index;
  e.uuid = "GPU-" + std::to_string(index);
  e.model_name = "NVIDIA H100 80GB HBM3";
  e.device_minor = index + 4;
  e.Set(DcgmField::kGpuUtil, 37);
  e.Set(DcgmField::kFbUsed, 1024);
  e.Set(DcgmField::kTotalEnergyConsumption, 5000);
  return e;
}

std::vector<std::string> Lines(const std::string& text, const std::string& prefix) {
  std::vector<std::string> out;
  std::istringstream in(text);
  for (std::string l; std::getline(in, l);) {
    if (l.starts_with(prefix)) out.push_back(l);
  }
  return out;
}

TEST(DcgmFieldTable, NamesAreTheExportersAndUnique) {
  // tests/fixtures/dcgm_exporter_fields.csv: the DCGM exporter's names and types.
  std::ifstream in(std::string(GPUPOOL_SOURCE_DIR) + "/tests/fixtures/dcgm_exporter_fields.csv");
  ASSERT_TRUE(in) << "tests/fixtures/dcgm_exporter_fields.csv";
  std::map<std::string, std::string> known;
  for (std::string line; std::getline(in, line);) {
    if (line.empty() || line[0] == '#') continue;
    const size_t comma = line.find(',');
    ASSERT_NE(comma, std::string::npos) << line;
    std::string type = line.substr(comma + 1);
    type.erase(0, type.find_first_not_of(' '));
    known[line.substr(0, comma)] = type.substr(0, type.find(','));
  }
  std::set<std::string> names;
  for (const DcgmFieldInfo& f : DcgmFieldTable()) {
    EXPECT_TRUE(names.insert(f.name).second) << f.name;
    ASSERT_TRUE(known.contains(f.name)) << f.name << " is not a DCGM exporter name";
    EXPECT_EQ(known[f.name], f.counter ? "counter" : "gauge") << f.name;
  }
  EXPECT_EQ(names.size(), static_cast<size_t>(kDcgmFieldCount));
}

TEST(RenderDcgmMetrics, WritesPresentFieldsWithTheExportersLabels) {
  DcgmNodeLabels labels{"node-7", "gpu", {}};
  const std::string text = RenderDcgmMetrics({Gpu(0)}, labels);
  EXPECT_NE(text.find("# TYPE DCGM_FI_DEV_GPU_UTIL gauge"), std::string::npos) << text;
  EXPECT_NE(text.find("# TYPE DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION counter"), std::string::npos) << text;
  EXPECT_NE(text.find("# HELP DCGM_FI_DEV_FB_USED Framebuffer memory used (in MiB)."), std::string::npos) << text;
  EXPECT_NE(text.find("DCGM_FI_DEV_FB_USED{gpu=\"0\",UUID=\"GPU-0\",device=\"nvidia4\",modelName=\"NVIDIA H100 80GB "
                      "HBM3\",Hostname=\"node-7\",pool=\"gpu\"} 1024"),
            std::string::npos)
      << text;
  // Absent fields have no family at all.
  EXPECT_EQ(text.find("DCGM_FI_DEV_FAN_SPEED"), std::string::npos) << text;
  EXPECT_EQ(text.find("DCGM_FI_DEV_POWER_USAGE"), std::string::npos) << text;
  // No pool yet: no pool label.
  EXPECT_EQ(RenderDcgmMetrics({Gpu(0)}, DcgmNodeLabels{"node-7", "", {}}).find("pool="), std::string::npos);
}

TEST(RenderDcgmMetrics, ASharedGpuHasOneSeriesPerTask) {
  DcgmNodeLabels labels{"n", "", {{0, -1, "team-a", "12"}, {0, -1, "team-b", "13"}, {1, -1, "team-c", "14"}}};
  const std::string text = RenderDcgmMetrics({Gpu(0), Gpu(1), Gpu(2)}, labels);
  const auto util = Lines(text, "DCGM_FI_DEV_GPU_UTIL{");
  ASSERT_EQ(util.size(), 4u) << text;  // two tasks on GPU 0, one on GPU 1, none on GPU 2
  EXPECT_NE(util[0].find("gpu=\"0\""), std::string::npos);
  EXPECT_NE(util[0].find("tenant=\"team-a\",job=\"12\""), std::string::npos) << util[0];
  EXPECT_NE(util[1].find("tenant=\"team-b\",job=\"13\""), std::string::npos) << util[1];
  EXPECT_NE(util[2].find("tenant=\"team-c\",job=\"14\""), std::string::npos) << util[2];
  EXPECT_EQ(util[3].find("tenant="), std::string::npos) << util[3];
}

TEST(RenderDcgmMetrics, MigInstancesCarryMemoryAndTheirTasks) {
  DcgmEntity gpu = Gpu(0);
  gpu.Set(DcgmField::kGpuTemp, 41);
  DcgmEntity mig;
  mig.gpu = 0;
  mig.uuid = gpu.uuid;
  mig.model_name = gpu.model_name;
  mig.gpu_instance_id = 2;
  mig.gpu_instance_profile = "3g.40gb";
  mig.mig_start = 4;
  mig.Set(DcgmField::kFbUsed, 300);
  DcgmNodeLabels labels{"n", "", {{0, 4, "team-a", "12"}, {0, 0, "team-b", "13"}}};
  const std::string text = RenderDcgmMetrics({gpu, mig}, labels);
  const auto fb = Lines(text, "DCGM_FI_DEV_FB_USED{");
  ASSERT_EQ(fb.size(), 1u) << text;  // the GPU's own reading is left out: the instances hold its memory
  EXPECT_NE(fb[0].find("GPU_I_PROFILE=\"3g.40gb\",GPU_I_ID=\"2\""), std::string::npos) << fb[0];
  EXPECT_NE(fb[0].find("tenant=\"team-a\",job=\"12\"} 300"), std::string::npos) << fb[0];
  const auto temp = Lines(text, "DCGM_FI_DEV_GPU_TEMP{");
  ASSERT_EQ(temp.size(), 1u) << text;
  EXPECT_EQ(temp[0].find("GPU_I_ID"), std::string::npos) << temp[0];  // device-wide: the GPU's series
  EXPECT_EQ(temp[0].find("tenant"), std::string::npos) << temp[0];
}

TEST(Xid, ApplicationXidsAreTheDevicePluginsList) {
  for (uint64_t x : {13, 31, 43, 45, 68, 109}) EXPECT_TRUE(IsApplicationXid(x)) << x;
  for (uint64_t x : {48, 63, 64, 74, 79, 92, 94, 95, 119, 999}) EXPECT_FALSE(IsApplicationXid(x)) << x;
  EXPECT_EQ(XidText(79), "XID 79 (GPU has fallen off the bus)");
  EXPECT_EQ(XidText(1234), "XID 1234");
}

}  // namespace
}  // namespace gpupool
