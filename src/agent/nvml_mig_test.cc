// The MIG lifecycle against the fake NVML library (tests/fake_nvml): first
// the fake's own semantics, called as the driver's C API (what a real driver
// accepts and refuses), then the NVML backend creating and destroying
// instances through it.
#include "src/agent/nvml_mig.h"

#include <dlfcn.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "src/agent/device_nodes.h"
#include "src/agent/nvml_backend.h"

namespace gpupool {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

// An H100 in MIG mode (minor 3) with one instance, an H100 that is not, and
// an A100-40GB in MIG mode.
json Script(const std::string& caps_dir) {
  json s = json::parse(R"({
    "devices": [
      {"uuid": "GPU-h100-0", "name": "NVIDIA H100 80GB HBM3", "memory_total_mib": 81559, "mig_mode": 1, "minor": 3,
       "mig": [{"uuid": "MIG-old", "name": "NVIDIA H100 80GB HBM3 MIG 1g.10gb", "gpu_instance_id": 7,
                "start": 6, "size": 1, "memory_mib": 9984}]},
      {"uuid": "GPU-h100-1", "name": "NVIDIA H100 80GB HBM3", "memory_total_mib": 81559, "mig_mode": 0},
      {"uuid": "GPU-a100-2", "name": "NVIDIA A100-SXM4-40GB", "memory_total_mib": 40960, "mig_mode": 1}
    ]
  })");
  if (!caps_dir.empty()) s["mig_caps"] = {{"proc_dir", caps_dir + "/proc"}, {"dev_dir", caps_dir + "/dev"}};
  return s;
}

class NvmlMigTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string templ = (fs::temp_directory_path() / "gpupool-nvml-mig-XXXXXX").string();
    ASSERT_NE(mkdtemp(templ.data()), nullptr);
    dir_ = templ;
  }
  void TearDown() override {
    unsetenv("GPUPOOL_FAKE_NVML_SCRIPT");
    fs::remove_all(dir_);
  }
  void WriteScript(const json& script) {
    const std::string path = dir_ + "/script.json";
    std::ofstream(path) << script.dump(2);
    setenv("GPUPOOL_FAKE_NVML_SCRIPT", path.c_str(), 1);
  }
  std::unique_ptr<DeviceBackend> Open(const json& script, NvmlOptions options = {}) {
    WriteScript(script);
    options.library = GPUPOOL_FAKE_NVML_LIBRARY;
    auto b = OpenNvmlBackend(options);
    EXPECT_TRUE(b.has_value()) << b.error().message;
    return b ? std::move(*b) : nullptr;
  }
  std::string dir_;
};

// The C API as the backend calls it.
struct PlacementAbi {
  unsigned int start, size;
};
struct GpuInstanceProfileInfoAbi {
  unsigned int id, isP2pSupported, sliceCount, instanceCount, multiprocessorCount, copyEngineCount, decoderCount,
      encoderCount, jpegCount, ofaCount;
  unsigned long long memorySizeMB;
};
struct ComputeInstanceProfileInfoAbi {
  unsigned int id, sliceCount, instanceCount, multiprocessorCount, sharedCopyEngineCount, sharedDecoderCount,
      sharedEncoderCount, sharedJpegCount, sharedOfaCount;
};
struct Fake {
  void* lib = nullptr;
  template <class F>
  F* Fn(const char* name) {
    return reinterpret_cast<F*>(dlsym(lib, name));
  }
};

TEST_F(NvmlMigTest, TheFakeRefusesWhatTheDriverRefuses) {
  WriteScript(Script(dir_ + "/caps"));
  Fake f{dlopen(GPUPOOL_FAKE_NVML_LIBRARY, RTLD_NOW | RTLD_LOCAL)};
  ASSERT_NE(f.lib, nullptr) << dlerror();
  ASSERT_EQ(f.Fn<int()>("nvmlInit_v2")(), 0);
  auto handle = f.Fn<int(unsigned, void**)>("nvmlDeviceGetHandleByIndex_v2");
  auto profile_info = f.Fn<int(void*, unsigned, GpuInstanceProfileInfoAbi*)>("nvmlDeviceGetGpuInstanceProfileInfo");
  auto create = f.Fn<int(void*, unsigned, const PlacementAbi*, void**)>("nvmlDeviceCreateGpuInstanceWithPlacement");
  auto ci_info = f.Fn<int(void*, unsigned, unsigned, ComputeInstanceProfileInfoAbi*)>(
      "nvmlGpuInstanceGetComputeInstanceProfileInfo");
  auto create_ci = f.Fn<int(void*, unsigned, void**)>("nvmlGpuInstanceCreateComputeInstance");
  auto destroy_ci = f.Fn<int(void*)>("nvmlComputeInstanceDestroy");
  auto destroy_gi = f.Fn<int(void*)>("nvmlGpuInstanceDestroy");
  auto by_index = f.Fn<int(void*, unsigned, void**)>("nvmlDeviceGetMigDeviceHandleByIndex");
  auto uuid_of = f.Fn<int(void*, char*, unsigned)>("nvmlDeviceGetUUID");
  auto placements = f.Fn<int(void*, unsigned, PlacementAbi*, unsigned*)>("nvmlDeviceGetGpuInstancePossiblePlacements_v2");
  for (void* fn : {(void*)handle, (void*)profile_info, (void*)create, (void*)ci_info, (void*)create_ci,
                   (void*)destroy_ci, (void*)destroy_gi, (void*)by_index, (void*)uuid_of, (void*)placements}) {
    ASSERT_NE(fn, nullptr);
  }
  void *h100 = nullptr, *off = nullptr, *a100 = nullptr;
  ASSERT_EQ(handle(0, &h100), 0);
  ASSERT_EQ(handle(1, &off), 0);
  ASSERT_EQ(handle(2, &a100), 0);

  // Profiles: the constant NVML_GPU_INSTANCE_PROFILE_3_SLICE (2) names the
  // device's 3g profile, whose id is the driver's own (9 on an H100).
  GpuInstanceProfileInfoAbi p3{};
  ASSERT_EQ(profile_info(h100, 0x2, &p3), 0);
  EXPECT_EQ(p3.id, 9u);
  EXPECT_EQ(p3.sliceCount, 3u);
  EXPECT_EQ(p3.memorySizeMB, 40448u);
  GpuInstanceProfileInfoAbi info{};
  EXPECT_EQ(profile_info(h100, 0x8, &info), 3);   // 2_SLICE_REV1 is the A30's: not supported
  EXPECT_EQ(profile_info(h100, 0x40, &info), 2);  // past NVML_GPU_INSTANCE_PROFILE_COUNT
  EXPECT_EQ(profile_info(off, 0x2, &info), 3);    // MIG mode off
  ASSERT_EQ(profile_info(a100, 0x2, &info), 0);
  EXPECT_EQ(info.memorySizeMB, 19968u);  // 3g.20gb
  unsigned int count = 0;
  ASSERT_EQ(placements(h100, p3.id, nullptr, &count), 0);
  EXPECT_EQ(count, 2u);

  // Placements: documented starts only, the profile's size, no overlap.
  void* gi = nullptr;
  PlacementAbi at2{2, 4}, wrong_size{4, 2}, at4{4, 4}, at0{0, 4};
  EXPECT_EQ(create(h100, p3.id, &at2, &gi), 2);         // 3g starts at 0 or 4
  EXPECT_EQ(create(h100, p3.id, &wrong_size, &gi), 2);  // a 3g holds 4 slices
  EXPECT_EQ(create(h100, 12345, &at4, &gi), 2);         // no such profile id
  EXPECT_EQ(create(off, p3.id, &at4, &gi), 3);          // MIG mode off
  EXPECT_EQ(create(h100, p3.id, &at4, &gi), 23);        // MIG-old sits at slice 6
  ASSERT_EQ(create(h100, p3.id, &at0, &gi), 0);
  void* overlapping = nullptr;
  EXPECT_EQ(create(h100, p3.id, &at0, &overlapping), 23);
  EXPECT_TRUE(fs::exists(dir_ + "/caps/proc/gpu3/mig/gi1/access"));

  // Its compute instance: a MIG device with a new UUID.
  ComputeInstanceProfileInfoAbi c3{};
  EXPECT_EQ(ci_info(gi, 0x4, 0, &c3), 3);  // 7 slices do not fit in a 3g
  EXPECT_EQ(ci_info(gi, 0x2, 1, &c3), 2);  // engine profile 1 does not exist
  ASSERT_EQ(ci_info(gi, 0x2, 0, &c3), 0);
  EXPECT_EQ(c3.sliceCount, 3u);
  void* ci = nullptr;
  ASSERT_EQ(create_ci(gi, c3.id, &ci), 0);
  void* second = nullptr;
  EXPECT_EQ(create_ci(gi, c3.id, &second), 23);  // the GPU instance is full
  std::string uuids;
  for (unsigned k = 0; k < 7; ++k) {
    void* m = nullptr;
    char buf[96];
    if (by_index(h100, k, &m) == 0 && uuid_of(m, buf, sizeof buf) == 0) uuids += std::string(buf) + " ";
  }
  EXPECT_NE(uuids.find("MIG-old "), std::string::npos) << uuids;
  EXPECT_EQ(uuids.find("MIG-"), 0u);
  EXPECT_NE(uuids.find("MIG-", 4), std::string::npos) << uuids;  // the new one
  EXPECT_TRUE(fs::exists(dir_ + "/caps/proc/gpu3/mig/gi1/ci0/access"));

  // Destroy: compute instance first; a destroyed handle is refused.
  EXPECT_EQ(destroy_gi(gi), 19);  // in use by its compute instance
  ASSERT_EQ(destroy_ci(ci), 0);
  EXPECT_EQ(destroy_ci(ci), 2);
  ASSERT_EQ(destroy_gi(gi), 0);
  EXPECT_EQ(destroy_gi(gi), 2);
  EXPECT_FALSE(fs::exists(dir_ + "/caps/proc/gpu3/mig/gi1"));
  ASSERT_EQ(create(h100, p3.id, &at0, &gi), 0);  // the slices are free again
  f.Fn<int()>("nvmlShutdown")();
  dlclose(f.lib);
}

TEST_F(NvmlMigTest, TheBackendCreatesAndDestroysInstances) {
  auto backend = Open(Script(""));
  ASSERT_TRUE(backend);
  auto made = backend->CreateMigInstance(0, "3g.40gb", 0);
  ASSERT_TRUE(made.has_value()) << made.error().message;
  EXPECT_EQ(made->uuid.rfind("MIG-", 0), 0u);
  EXPECT_EQ(made->profile, "3g.40gb");
  EXPECT_EQ(made->start, 0);
  EXPECT_EQ(made->memory_mib, 40448);
  EXPECT_EQ(made->gi_id, 1);
  EXPECT_EQ(made->ci_id, 0);
  auto listed = backend->ListMigInstances(0);
  ASSERT_TRUE(listed.has_value()) << listed.error().message;
  ASSERT_EQ(listed->size(), 2u);  // by start
  EXPECT_EQ((*listed)[0].uuid, made->uuid);
  EXPECT_EQ((*listed)[1].uuid, "MIG-old");
  EXPECT_TRUE(backend->ListMigInstances(1)->empty());  // not in MIG mode

  auto overlap = backend->CreateMigInstance(0, "4g.40gb", 0);
  ASSERT_FALSE(overlap.has_value());
  EXPECT_NE(overlap.error().message.find("nvmlDeviceCreateGpuInstanceWithPlacement on GPU 0: Insufficient Resources"),
            std::string::npos)
      << overlap.error().message;
  auto bad = backend->CreateMigInstance(0, "3g.40gb", 2);
  ASSERT_FALSE(bad.has_value());
  EXPECT_NE(bad.error().message.find("nvmlDeviceCreateGpuInstanceWithPlacement on GPU 0: Invalid Argument"),
            std::string::npos)
      << bad.error().message;
  EXPECT_NE(bad.error().message.find("memory slices 0, 4"), std::string::npos) << bad.error().message;
  auto off = backend->CreateMigInstance(1, "3g.40gb", 0);
  ASSERT_FALSE(off.has_value());
  EXPECT_NE(off.error().message.find("not in MIG mode"), std::string::npos) << off.error().message;
  auto foreign = backend->CreateMigInstance(2, "3g.40gb", 0);  // an A100-40GB's 3g is 3g.20gb
  ASSERT_FALSE(foreign.has_value());
  EXPECT_NE(foreign.error().message.find("no MIG profile '3g.40gb'"), std::string::npos) << foreign.error().message;
  auto a100 = backend->CreateMigInstance(2, "1g.10gb", 6);  // 1_SLICE_REV2: two memory slices
  ASSERT_TRUE(a100.has_value()) << a100.error().message;
  EXPECT_EQ(a100->memory_mib, 9856);

  ASSERT_TRUE(backend->DestroyMigInstance(0, *made).has_value());
  EXPECT_EQ(backend->DestroyMigInstance(0, *made).error().code, ErrorCode::kNotFound);
  ASSERT_EQ(backend->ListMigInstances(0)->size(), 1u);
  auto again = backend->CreateMigInstance(0, "4g.40gb", 0);
  ASSERT_TRUE(again.has_value()) << again.error().message;
  EXPECT_NE(again->uuid, made->uuid);
}

TEST_F(NvmlMigTest, AnInstanceInUseIsNotDestroyed) {
  json script = Script("");
  script["devices"][0]["mig"][0]["processes"] = json::array({{{"pid", 4242}}});
  auto backend = Open(script);
  ASSERT_TRUE(backend);
  auto gpus = backend->Discover();
  ASSERT_TRUE(gpus.has_value()) << gpus.error().message;
  auto busy = backend->DestroyMigInstance(0, (*gpus)[0].mig[0]);
  ASSERT_FALSE(busy.has_value());
  EXPECT_NE(busy.error().message.find("nvmlComputeInstanceDestroy on GPU 0: In use by another client"),
            std::string::npos)
      << busy.error().message;
  EXPECT_EQ(backend->ListMigInstances(0)->size(), 1u);
}

TEST_F(NvmlMigTest, ACreatedInstanceHasItsCapabilityNodes) {
  if (::geteuid() != 0) GTEST_SKIP() << "mknod needs root";
  NvmlOptions options;
  options.mig_caps_proc_dir = dir_ + "/caps/proc";
  options.mig_caps_dev_dir = dir_ + "/caps/dev";
  auto backend = Open(Script(dir_ + "/caps"), options);
  ASSERT_TRUE(backend);
  auto made = backend->CreateMigInstance(0, "2g.20gb", 2);
  ASSERT_TRUE(made.has_value()) << made.error().message;
  auto caps = backend->MigDeviceNodes(0, *made);
  ASSERT_TRUE(caps.has_value()) << caps.error().message;
  ASSERT_EQ(caps->size(), 2u);
  ASSERT_TRUE(backend->DestroyMigInstance(0, *made).has_value());
  for (const DeviceNode& n : *caps) EXPECT_FALSE(fs::exists(n.host_path)) << n.host_path;
  EXPECT_FALSE(backend->MigDeviceNodes(0, *made).has_value());
}

TEST(NvmlMigProfiles, MapTableProfilesToNvmlConstants) {
  const MigTable& h100 = *FindMigTable("H100");
  const MigTable& a30 = *FindMigTable("A30");
  auto of = [](const MigTable& t, const char* name) {
    for (int p = 0; p < static_cast<int>(t.profiles.size()); ++p) {
      if (t.profiles[p].name == name) return NvmlGpuInstanceProfileOf(t, p);
    }
    return -2;
  };
  EXPECT_EQ(of(h100, "1g.10gb"), 0x0);
  EXPECT_EQ(of(h100, "1g.10gb+me"), 0x7);
  EXPECT_EQ(of(h100, "1g.20gb"), 0x9);
  EXPECT_EQ(of(h100, "2g.20gb"), 0x1);
  EXPECT_EQ(of(h100, "3g.40gb"), 0x2);
  EXPECT_EQ(of(h100, "4g.40gb"), 0x3);
  EXPECT_EQ(of(h100, "7g.80gb"), 0x4);
  EXPECT_EQ(of(a30, "2g.12gb+me"), 0x8);
  EXPECT_EQ(of(a30, "4g.24gb"), 0x3);
  EXPECT_EQ(NvmlGpuInstanceProfileOf(h100, 99), -1);
  EXPECT_EQ(NvmlComputeInstanceProfileOf(7), 0x4);
  EXPECT_EQ(NvmlComputeInstanceProfileOf(5), -1);
}

}  // namespace
}  // namespace gpupool
