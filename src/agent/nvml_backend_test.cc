#include "src/agent/nvml_backend.h"

#include "src/agent/device_nodes.h"

#include <gtest/gtest.h>
#include <signal.h>
#include <spawn.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

extern char** environ;

namespace gpupool {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

TEST(CatalogModelForProduct, MapsDriverNamesToCatalogModels) {
  EXPECT_EQ(CatalogModelForProduct("NVIDIA H100 80GB HBM3", 81559), "H100");
  EXPECT_EQ(CatalogModelForProduct("NVIDIA H100 PCIe", 81559), "H100");
  EXPECT_EQ(CatalogModelForProduct("NVIDIA H200", 143771), "H200");
  EXPECT_EQ(CatalogModelForProduct("NVIDIA A100-SXM4-80GB", 81920), "A100-80GB");
  EXPECT_EQ(CatalogModelForProduct("NVIDIA A100-SXM4-40GB", 40960), "A100-40GB");
  EXPECT_EQ(CatalogModelForProduct("NVIDIA A100 80GB PCIe", 81920), "A100-80GB");
  EXPECT_EQ(CatalogModelForProduct("Tesla V100-SXM2-16GB", 16160), "V100M16");
  EXPECT_EQ(CatalogModelForProduct("Tesla V100S-PCIE-32GB", 32510), "V100M32");
  EXPECT_EQ(CatalogModelForProduct("Tesla T4", 15360), "T4");
  EXPECT_EQ(CatalogModelForProduct("Tesla P100-PCIE-16GB", 16280), "P100");
  EXPECT_EQ(CatalogModelForProduct("NVIDIA A10", 23028), "A10");
  EXPECT_EQ(CatalogModelForProduct("NVIDIA A30", 24576), "A30");
  EXPECT_EQ(CatalogModelForProduct("NVIDIA L40S", 46068), "L40S");
}

TEST(CatalogModelForProduct, UsesTheNameWhenMemoryIsUnknown) {
  EXPECT_EQ(CatalogModelForProduct("NVIDIA A100-PCIE-40GB", 0), "A100-40GB");
  EXPECT_EQ(CatalogModelForProduct("NVIDIA A100-SXM4-80GB", 0), "A100-80GB");
  EXPECT_EQ(CatalogModelForProduct("NVIDIA A100-SXM4", 0), "");  // which one cannot be told
}

TEST(CatalogModelForProduct, NearMissesAreNotMatched) {
  EXPECT_EQ(CatalogModelForProduct("NVIDIA L40", 46068), "");
  EXPECT_EQ(CatalogModelForProduct("NVIDIA A10G", 23028), "");
  EXPECT_EQ(CatalogModelForProduct("NVIDIA H800", 81559), "");
  EXPECT_EQ(CatalogModelForProduct("NVIDIA GeForce RTX 4090", 24564), "");
  EXPECT_EQ(CatalogModelForProduct("", 0), "");
}

TEST(MigProfileFromDeviceName, TakesTheWordAfterMig) {
  EXPECT_EQ(MigProfileFromDeviceName("NVIDIA A100-SXM4-40GB MIG 3g.20gb"), "3g.20gb");
  EXPECT_EQ(MigProfileFromDeviceName("NVIDIA H100 80GB HBM3 MIG 1g.10gb+me"), "1g.10gb+me");
  EXPECT_EQ(MigProfileFromDeviceName("NVIDIA H100 80GB HBM3 MIG 1c.3g.40gb"), "1c.3g.40gb");
  EXPECT_EQ(MigProfileFromDeviceName("NVIDIA A100-SXM4-40GB"), "");
  EXPECT_EQ(MigProfileFromDeviceName("NVIDIA A100 MIG"), "");
}

// A node for most tests: two H100s joined by two NVLinks (and a link to GPU
// 2 that is down), an A100-80GB in MIG mode with two instances at MIG
// device indexes 0 and 3, and two H200s on an NVSwitch.
json Node() {
  return json::parse(R"({
    "devices": [
      {"uuid": "GPU-h100-0", "name": "NVIDIA H100 80GB HBM3", "memory_total_mib": 81559, "memory_used_mib": 2048,
       "utilization_pct": 37, "temperature_c": 41,
       "nvlinks": [{"peer": 1}, {"peer": 1}, {"peer": 2, "active": false}],
       "processes": [{"pid": 4242, "memory_mib": 1000}]},
      {"uuid": "GPU-h100-1", "name": "NVIDIA H100 80GB HBM3", "memory_total_mib": 81559,
       "utilization_pct": 5, "temperature_c": 35, "nvlinks": [{"peer": 0}, {"peer": 0}]},
      {"uuid": "GPU-a100-2", "name": "NVIDIA A100-SXM4-80GB", "memory_total_mib": 81920, "mig_mode": 1,
       "mig": [
         {"uuid": "MIG-big", "name": "NVIDIA A100-SXM4-80GB MIG 3g.40gb", "index": 0,
          "gpu_instance_id": 2, "start": 4, "size": 4, "memory_mib": 40448},
         {"uuid": "MIG-small", "name": "NVIDIA A100-SXM4-80GB MIG 1g.10gb", "index": 3,
          "gpu_instance_id": 9, "start": 0, "size": 1, "memory_mib": 9728}]},
      {"uuid": "GPU-h200-3", "name": "NVIDIA H200", "memory_total_mib": 143771, "mig_mode": 0,
       "nvlinks": [{"switch": true}, {"switch": true}]},
      {"uuid": "GPU-h200-4", "name": "NVIDIA H200", "memory_total_mib": 143771, "mig_mode": 0,
       "nvlinks": [{"switch": true}]}
    ]
  })");
}

class NvmlBackendTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string templ = (fs::temp_directory_path() / "gpupool-nvml-XXXXXX").string();
    ASSERT_NE(mkdtemp(templ.data()), nullptr);
    dir_ = templ;
  }
  void TearDown() override {
    unsetenv("GPUPOOL_FAKE_NVML_SCRIPT");
    fs::remove_all(dir_);
  }

  // Opens the real backend on the fake library, scripted by `script`.
  Result<std::unique_ptr<DeviceBackend>> Open(const json& script, NvmlOptions options = {}) {
    const std::string path = (fs::path(dir_) / "script.json").string();
    std::ofstream(path) << script.dump(2);
    setenv("GPUPOOL_FAKE_NVML_SCRIPT", path.c_str(), 1);
    options.library = GPUPOOL_FAKE_NVML_LIBRARY;
    return OpenNvmlBackend(options);
  }
  std::unique_ptr<DeviceBackend> MustOpen(const json& script, NvmlOptions options = {}) {
    auto b = Open(script, std::move(options));
    EXPECT_TRUE(b.has_value()) << b.error().message;
    return b ? std::move(*b) : nullptr;
  }
  // An executable shell script in the temporary directory.
  std::string WriteTool(const std::string& name, const std::string& body) {
    const std::string path = (fs::path(dir_) / name).string();
    std::ofstream(path) << "#!/bin/sh\n" << body;
    chmod(path.c_str(), 0755);
    return path;
  }
  std::string Read(const std::string& name) const {
    std::ifstream in(fs::path(dir_) / name);
    std::stringstream s;
    s << in.rdbuf();
    return s.str();
  }

  std::string dir_;
};

TEST_F(NvmlBackendTest, DiscoversGpusModelsMigAndNvlink) {
  auto backend = MustOpen(Node());
  ASSERT_TRUE(backend);
  EXPECT_EQ(backend->name(), "nvml");
  auto gpus = backend->Discover();
  ASSERT_TRUE(gpus.has_value()) << gpus.error().message;
  ASSERT_EQ(gpus->size(), 5u);
  const auto& g = *gpus;
  EXPECT_EQ(g[0].index, 0);
  EXPECT_EQ(g[0].uuid, "GPU-h100-0");
  EXPECT_EQ(g[0].product, "NVIDIA H100 80GB HBM3");
  EXPECT_EQ(g[0].model, "H100");
  EXPECT_EQ(g[0].memory_mib, 81559);
  EXPECT_FALSE(g[0].mig_enabled);  // "not supported" reads as disabled
  EXPECT_EQ(g[0].nvlink_peers, std::vector<int>{1});  // the link to GPU 2 is down
  EXPECT_EQ(g[1].nvlink_peers, std::vector<int>{0});

  EXPECT_EQ(g[2].model, "A100-80GB");
  EXPECT_TRUE(g[2].mig_enabled);
  EXPECT_TRUE(g[2].nvlink_peers.empty());
  ASSERT_EQ(g[2].mig.size(), 2u);  // by start
  EXPECT_EQ(g[2].mig[0].uuid, "MIG-small");
  EXPECT_EQ(g[2].mig[0].profile, "1g.10gb");
  EXPECT_EQ(g[2].mig[0].start, 0);
  EXPECT_EQ(g[2].mig[0].memory_mib, 9728);
  EXPECT_EQ(g[2].mig[1].uuid, "MIG-big");
  EXPECT_EQ(g[2].mig[1].profile, "3g.40gb");
  EXPECT_EQ(g[2].mig[1].start, 4);
  EXPECT_EQ(g[2].mig[1].memory_mib, 40448);

  EXPECT_EQ(g[3].model, "H200");
  EXPECT_FALSE(g[3].mig_enabled);
  EXPECT_EQ(g[3].nvlink_peers, std::vector<int>{4});  // both on the NVSwitch
  EXPECT_EQ(g[4].nvlink_peers, std::vector<int>{3});
}

// A task on a MIG instance gets its GPU's node under the driver's name and
// the instance's two capability nodes, found through the driver's
// capability listing.
TEST_F(NvmlBackendTest, AMigInstanceHasItsCapabilityNodes) {
  if (::geteuid() != 0) GTEST_SKIP() << "mknod needs root";
  json script = Node();
  script["devices"][2]["minor"] = 5;
  script["devices"][2]["mig"][0]["compute_instance_id"] = 1;
  NvmlOptions options;
  options.dev_dir = dir_ + "/dev";
  options.mig_caps_proc_dir = dir_ + "/proc-caps";
  options.mig_caps_dev_dir = dir_ + "/dev/nvidia-caps";
  ASSERT_TRUE(MakeFakeDeviceNodes(options.dev_dir, 6));
  auto backend = MustOpen(script, options);
  ASSERT_TRUE(backend);
  auto gpus = backend->Discover();
  ASSERT_TRUE(gpus.has_value()) << gpus.error().message;
  const MigInstance& big = (*gpus)[2].mig[1];
  ASSERT_EQ(big.uuid, "MIG-big");
  EXPECT_EQ(big.gi_id, 2);
  EXPECT_EQ(big.ci_id, 1);
  const std::vector<DeviceNode> gpu = backend->GpuDeviceNodes(2);
  ASSERT_EQ(gpu.size(), 1u);
  EXPECT_EQ(gpu[0].path, "/dev/nvidia5");  // the driver's name, not the index
  // Before the driver lists the capabilities: an error naming the file.
  auto missing = backend->MigDeviceNodes(2, big);
  ASSERT_FALSE(missing.has_value());
  EXPECT_NE(missing.error().message.find("gpu5/mig/gi2/access"), std::string::npos) << missing.error().message;
  ASSERT_TRUE(MakeFakeMigCapNodes(options.mig_caps_proc_dir, options.mig_caps_dev_dir, 5, 2, 1));
  auto caps = backend->MigDeviceNodes(2, big);
  ASSERT_TRUE(caps.has_value()) << caps.error().message;
  ASSERT_EQ(caps->size(), 2u);
  EXPECT_EQ((*caps)[0].major, kFakeCapsMajor);
  EXPECT_NE((*caps)[0].minor, (*caps)[1].minor);
  EXPECT_EQ((*caps)[0].path, "/dev/nvidia-caps/nvidia-cap" + std::to_string((*caps)[0].minor));
  EXPECT_EQ((*caps)[1].host_path, options.mig_caps_dev_dir + "/nvidia-cap" + std::to_string((*caps)[1].minor));
}

TEST_F(NvmlBackendTest, MigProfileFallsBackToTheTableWhenTheNameHasNone) {
  json script = Node();
  auto& mig = script["devices"][2]["mig"];
  mig = json::array({{{"uuid", "MIG-whole"}, {"name", "NVIDIA A100-SXM4-80GB"}, {"gpu_instance_id", 0},
                      {"start", 0}, {"size", 8}, {"memory_mib", 80896}}});
  {
    auto backend = MustOpen(script);
    ASSERT_TRUE(backend);
    auto gpus = backend->Discover();
    ASSERT_TRUE(gpus.has_value()) << gpus.error().message;
    ASSERT_EQ((*gpus)[2].mig.size(), 1u);
    EXPECT_EQ((*gpus)[2].mig[0].profile, "7g.80gb");  // the only 8-slice profile
  }
  // Four slices are 3g.40gb or 4g.40gb: refused rather than guessed.
  mig[0]["size"] = 4;
  auto backend = MustOpen(script);
  ASSERT_TRUE(backend);
  auto gpus = backend->Discover();
  ASSERT_FALSE(gpus.has_value());
  EXPECT_NE(gpus.error().message.find("cannot tell the MIG profile of MIG-whole"), std::string::npos)
      << gpus.error().message;
}

TEST_F(NvmlBackendTest, DiscoverFailsNamingTheCall) {
  json script = Node();
  script["devices"][1]["fail"] = {{"nvmlDeviceGetUUID", 999}};
  auto backend = MustOpen(script);
  ASSERT_TRUE(backend);
  auto gpus = backend->Discover();
  ASSERT_FALSE(gpus.has_value());
  EXPECT_EQ(gpus.error().message, "nvmlDeviceGetUUID (GPU 1): Unknown Error");

  script = Node();
  script["fail"] = {{"nvmlDeviceGetGpuInstanceById", 4}};
  backend.reset();  // NVML is process-wide: the fake reads its script when first initialised
  backend = MustOpen(script);
  ASSERT_TRUE(backend);
  gpus = backend->Discover();
  ASSERT_FALSE(gpus.has_value());
  EXPECT_NE(gpus.error().message.find("nvmlDeviceGetGpuInstanceById (GPU 2): Insufficient Permissions"),
            std::string::npos)
      << gpus.error().message;
}

TEST_F(NvmlBackendTest, SamplesUtilizationMemoryTemperatureAndProcesses) {
  auto backend = MustOpen(Node());
  ASSERT_TRUE(backend);
  auto samples = backend->Sample();
  ASSERT_TRUE(samples.has_value()) << samples.error().message;
  ASSERT_EQ(samples->size(), 5u);
  const GpuSample& s = (*samples)[0];
  EXPECT_EQ(s.index, 0);
  EXPECT_DOUBLE_EQ(s.util_pct, 37);
  EXPECT_EQ(s.memory_used_mib, 2048);
  EXPECT_EQ(s.memory_total_mib, 81559);
  EXPECT_EQ(s.temperature_c, 41);
  EXPECT_TRUE(s.healthy) << s.health_detail;
  ASSERT_EQ(s.processes.size(), 1u);
  EXPECT_EQ(s.processes[0].pid, 4242);
  EXPECT_EQ(s.processes[0].memory_mib, 1000);
  EXPECT_EQ((*samples)[1].temperature_c, 35);
  EXPECT_TRUE((*samples)[1].processes.empty());
  for (const auto& x : *samples) EXPECT_TRUE(x.healthy) << x.index << ": " << x.health_detail;
}

TEST_F(NvmlBackendTest, AGpuWhoseCallsFailIsUnhealthyWithTheReason) {
  json script = Node();
  script["devices"][1]["fail"] = {{"nvmlDeviceGetTemperature", 999}};
  script["devices"][3]["fail"] = {{"nvmlDeviceGetHandleByIndex_v2", 15}};
  script["devices"][4]["remapped_rows"] = {{"pending", true}};
  auto backend = MustOpen(script);
  ASSERT_TRUE(backend);
  auto samples = backend->Sample();
  ASSERT_TRUE(samples.has_value()) << samples.error().message;
  const auto& s = *samples;
  EXPECT_TRUE(s[0].healthy);
  EXPECT_FALSE(s[1].healthy);
  EXPECT_EQ(s[1].health_detail, "nvmlDeviceGetTemperature (GPU 1): Unknown Error");
  EXPECT_EQ(s[1].temperature_c, -1);
  EXPECT_DOUBLE_EQ(s[1].util_pct, 5);  // what could be read still is
  EXPECT_FALSE(s[3].healthy);
  EXPECT_EQ(s[3].health_detail, "nvmlDeviceGetHandleByIndex_v2 (GPU 3): GPU is lost");
  EXPECT_FALSE(s[4].healthy);
  EXPECT_NE(s[4].health_detail.find("row remapping pending"), std::string::npos) << s[4].health_detail;

  // A node-wide failure fails the whole sample.
  script["fail"] = {{"nvmlDeviceGetCount_v2", 999}};
  backend.reset();
  backend = MustOpen(script);
  ASSERT_TRUE(backend);
  samples = backend->Sample();
  ASSERT_FALSE(samples.has_value());
  EXPECT_EQ(samples.error().message, "nvmlDeviceGetCount_v2: Unknown Error");
}

TEST_F(NvmlBackendTest, OpenNamesAMissingLibraryOrSymbol) {
  NvmlOptions options;
  options.library = (fs::path(dir_) / "libnvidia-ml-missing.so.1").string();
  auto b = OpenNvmlBackend(options);
  ASSERT_FALSE(b.has_value());
  EXPECT_EQ(b.error().message.rfind("cannot load " + options.library + ": ", 0), 0u) << b.error().message;

  options.library = "libm.so.6";  // loads, but is not NVML
  b = OpenNvmlBackend(options);
  ASSERT_FALSE(b.has_value());
  EXPECT_EQ(b.error().message.rfind("libm.so.6 lacks nvmlInit_v2, nvmlShutdown", 0), 0u) << b.error().message;

  json script = Node();
  script["fail"] = {{"nvmlInit_v2", 9}};
  b = Open(script);
  ASSERT_FALSE(b.has_value());
  EXPECT_EQ(b.error().message, "nvmlInit_v2: Driver Not Loaded");
}

// Two real processes in their own process group (like a task the executor
// started), and the test process outside it.
class TaskProcesses {
 public:
  TaskProcesses() {
    leader_ = Spawn(0);
    member_ = Spawn(leader_);
  }
  ~TaskProcesses() {
    kill(-leader_, SIGKILL);
    int status = 0;
    waitpid(leader_, &status, 0);
    waitpid(member_, &status, 0);
  }
  int leader() const { return leader_; }
  int member() const { return member_; }

 private:
  static int Spawn(pid_t group) {
    posix_spawnattr_t attr;
    posix_spawnattr_init(&attr);
    posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETPGROUP);
    posix_spawnattr_setpgroup(&attr, group);  // 0: a new group led by the child
    char sleep[] = "sleep";
    char seconds[] = "60";
    char* argv[] = {sleep, seconds, nullptr};
    pid_t pid = -1;
    EXPECT_EQ(posix_spawnp(&pid, "sleep", nullptr, &attr, argv, environ), 0);
    posix_spawnattr_destroy(&attr);
    return pid;
  }
  int leader_ = -1, member_ = -1;
};

TEST_F(NvmlBackendTest, AttributesProcessUtilizationAndMemoryToTheTaskGroup) {
  TaskProcesses task;
  ASSERT_GT(task.leader(), 0);
  ASSERT_GT(task.member(), 0);
  json script = Node();
  script["devices"][0]["processes"] = json::array({
      {{"pid", task.leader()}, {"memory_mib", 1000}, {"sm_util", 40}},
      {{"pid", task.member()}, {"memory_mib", 200}, {"sm_util", 30}},
      {{"pid", getpid()}, {"memory_mib", 4000}, {"sm_util", 25}},  // another task's
  });
  script["devices"][1]["processes"] = json::array({{{"pid", task.member()}, {"memory_mib", 300}}});
  auto backend = MustOpen(script);
  ASSERT_TRUE(backend);

  const std::vector<TaskProbe> probes = {
      {"on-gpu0", task.leader(), {0}},
      {"on-gpu0-1", task.leader(), {0, 1}},
      {"elsewhere", getpid(), {1}},
      {"no-such-gpu", task.leader(), {7}},
  };
  auto usage = backend->SampleTasks(probes);
  ASSERT_EQ(usage.count("on-gpu0"), 1u);
  EXPECT_DOUBLE_EQ(usage["on-gpu0"].util_pct, 70);      // 40 + 30; the test process's 25 is not the task's
  EXPECT_EQ(usage["on-gpu0"].memory_mib, 1000 + 200 + 300);  // every GPU
  EXPECT_DOUBLE_EQ(usage["on-gpu0-1"].util_pct, 35);    // (70 + 0) / 2
  ASSERT_EQ(usage.count("elsewhere"), 1u);
  EXPECT_DOUBLE_EQ(usage["elsewhere"].util_pct, 0);
  EXPECT_EQ(usage.count("no-such-gpu"), 0u);  // nothing could be measured

  // Since the previous call: no newer samples, so idle; memory is still held.
  usage = backend->SampleTasks(probes);
  EXPECT_DOUBLE_EQ(usage["on-gpu0"].util_pct, 0);
  EXPECT_EQ(usage["on-gpu0"].memory_mib, 1500);
}

TEST_F(NvmlBackendTest, TaskUtilizationFallsBackToTheGpusUtilization) {
  TaskProcesses task;
  json script = Node();
  script["fail"] = {{"nvmlDeviceGetProcessUtilization", 3}};  // not supported (MIG mode, old GPUs)
  script["devices"][0]["utilization_pct"] = 55;
  script["devices"][0]["processes"] = json::array({{{"pid", task.leader()}, {"memory_mib", 700}, {"sm_util", 40}}});
  auto backend = MustOpen(script);
  ASSERT_TRUE(backend);
  auto usage = backend->SampleTasks({{"t", task.leader()}, {"t2", task.leader(), {0, 1}}});
  EXPECT_DOUBLE_EQ(usage["t"].util_pct, 0);  // no GPUs given
  EXPECT_EQ(usage["t"].memory_mib, 700);
  EXPECT_DOUBLE_EQ(usage["t2"].util_pct, (55 + 5) / 2.0);
}

TEST_F(NvmlBackendTest, ScrubRunsTheToolOnTheGpuOrMigInstance) {
  NvmlOptions options;
  options.scrub_tool = WriteTool("gpupool-scrub", "echo \"$CUDA_VISIBLE_DEVICES\" > " + dir_ +
                                                      "/visible\n"
                                                      "echo 'CUDA context ready' >&2\n"
                                                      "echo '{\"bytes\":1024,\"seconds\":0.01}'\n");
  auto backend = MustOpen(Node(), options);
  ASSERT_TRUE(backend);
  auto r = backend->Scrub(1, "");
  ASSERT_TRUE(r.has_value()) << r.error().message;
  EXPECT_EQ(r->bytes, 1024);
  EXPECT_DOUBLE_EQ(r->seconds, 0.01);
  EXPECT_EQ(Read("visible"), "GPU-h100-1\n");

  r = backend->Scrub(2, "MIG-small");
  ASSERT_TRUE(r.has_value()) << r.error().message;
  EXPECT_EQ(Read("visible"), "MIG-small\n");

  r = backend->Scrub(0, "MIG-small");  // not on GPU 0
  ASSERT_FALSE(r.has_value());
  EXPECT_EQ(r.error().message, "scrub: GPU 0 has no MIG device MIG-small");
  r = backend->Scrub(5, "");
  ASSERT_FALSE(r.has_value());
  EXPECT_EQ(r.error().message, "scrub: no GPU 5 (the node has 5)");
}

TEST_F(NvmlBackendTest, ScrubFailuresCarryTheToolsStderr) {
  NvmlOptions options;
  options.scrub_tool = WriteTool("fails", "echo 'gpupool-scrub: cudaMalloc: out of memory' >&2\nexit 3\n");
  auto backend = MustOpen(Node(), options);
  ASSERT_TRUE(backend);
  auto r = backend->Scrub(0, "");
  ASSERT_FALSE(r.has_value());
  EXPECT_EQ(r.error().message, "scrub of GPU 0 (GPU-h100-0) by " + options.scrub_tool +
                                   " failed (exit status 3): gpupool-scrub: cudaMalloc: out of memory");
  backend.reset();

  options.scrub_tool = WriteTool("garbles", "echo 'zeroed it all'\n");
  backend = MustOpen(Node(), options);
  r = backend->Scrub(0, "");
  ASSERT_FALSE(r.has_value());
  EXPECT_NE(r.error().message.find("expected one JSON line"), std::string::npos) << r.error().message;
  backend.reset();

  options.scrub_tool = WriteTool("hangs", "exec sleep 30\n");
  options.scrub_timeout_s = 0.3;
  backend = MustOpen(Node(), options);
  r = backend->Scrub(0, "");
  ASSERT_FALSE(r.has_value());
  EXPECT_NE(r.error().message.find("did not finish"), std::string::npos) << r.error().message;
  backend.reset();

  options.scrub_tool = (fs::path(dir_) / "absent").string();
  backend = MustOpen(Node(), options);
  r = backend->Scrub(0, "");
  ASSERT_FALSE(r.has_value());
  EXPECT_EQ(r.error().message.rfind("scrub tool " + options.scrub_tool + " is missing", 0), 0u)
      << r.error().message;
}

}  // namespace
}  // namespace gpupool
