#include "src/agent/oci_spec.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "src/agent/cuda_cap_env.h"

namespace gpupool {
namespace {

using nlohmann::json;

TaskLaunch BaseLaunch() {
  TaskLaunch l;
  l.job = 12;
  l.replica = 1;
  l.attempt = 2;
  l.argv = {"python3", "train.py"};
  l.env = {{"CUDA_VISIBLE_DEVICES", "0"}, {"PATH", "/opt/bin:/usr/bin"}};
  l.checkpoint_dir = "/w/checkpoints/12/1";
  l.scratch_dir = "/w/scratch/gp-12-1-2";
  l.task_dir = "/w/tasks/12-1";
  return l;
}

OciSpecInputs BaseInputs() {
  OciSpecInputs in;
  in.rootfs = "/w/containers/gp-12-1-2/rootfs";
  in.host_image = true;
  in.host_root = {{"bin", "usr/bin"}, {"lib64", ""}};
  in.init_binary = "/opt/gpupool/gpupool-shim";
  in.cgroups_path = "/gpupool/abc/gp-12-1-2";
  return in;
}

std::vector<std::string> Namespaces(const json& spec) {
  std::vector<std::string> out;
  for (const json& n : spec["linux"]["namespaces"]) out.push_back(n["type"].get<std::string>());
  std::sort(out.begin(), out.end());
  return out;
}

const json* MountAt(const json& spec, const std::string& dest) {
  for (const json& m : spec["mounts"]) {
    if (m["destination"] == dest) return &m;
  }
  return nullptr;
}

bool HasOption(const json& mount, const std::string& option) {
  for (const json& o : mount["options"]) {
    if (o == option) return true;
  }
  return false;
}

TEST(OciSpecTest, AlwaysPidMountIpcUtsAndTheHostNetworkByDefault) {
  const json spec = BuildOciSpec(BaseLaunch(), BaseInputs());
  EXPECT_EQ(Namespaces(spec), (std::vector<std::string>{"ipc", "mount", "pid", "uts"}));
  EXPECT_FALSE(spec["linux"].contains("uidMappings"));
  // The host network: /sys is the node's, bound read-only (sysfs needs a
  // network namespace of its own).
  const json* sys = MountAt(spec, "/sys");
  ASSERT_NE(sys, nullptr);
  EXPECT_EQ((*sys)["type"], "bind");
  EXPECT_TRUE(HasOption(*sys, "ro"));
}

TEST(OciSpecTest, ATenantRangeMapsTheContainersRootToAnUnprivilegedUid) {
  TaskLaunch l = BaseLaunch();
  l.uid = 1'065'536;
  l.uid_count = 65'536;
  const json spec = BuildOciSpec(l, BaseInputs());
  EXPECT_EQ(Namespaces(spec), (std::vector<std::string>{"ipc", "mount", "pid", "user", "uts"}));
  for (const char* key : {"uidMappings", "gidMappings"}) {
    ASSERT_EQ(spec["linux"][key].size(), 1u);
    EXPECT_EQ(spec["linux"][key][0]["containerID"], 0);
    EXPECT_EQ(spec["linux"][key][0]["hostID"], 1'065'536);
    EXPECT_EQ(spec["linux"][key][0]["size"], 65'536);
  }
}

TEST(OciSpecTest, AnIsolatedNetworkGetsItsOwnNamespaceAndSysfs) {
  TaskLaunch l = BaseLaunch();
  l.network_isolated = true;
  const json spec = BuildOciSpec(l, BaseInputs());
  EXPECT_EQ(Namespaces(spec), (std::vector<std::string>{"ipc", "mount", "network", "pid", "uts"}));
  EXPECT_EQ((*MountAt(spec, "/sys"))["type"], "sysfs");
}

TEST(OciSpecTest, LimitsComeFromTheRequest) {
  TaskLaunch l = BaseLaunch();
  l.memory_mib = 1536;
  l.cpu_milli = 2500;
  l.pids_limit = 4096;
  l.shm_mib = 2048;
  const json spec = BuildOciSpec(l, BaseInputs());
  const json& r = spec["linux"]["resources"];
  EXPECT_EQ(r["memory"]["limit"], int64_t{1536} << 20);
  EXPECT_EQ(r["memory"]["swap"], int64_t{1536} << 20);  // no swap beyond the limit
  EXPECT_EQ(r["cpu"]["quota"], 250'000);
  EXPECT_EQ(r["cpu"]["period"], 100'000);
  EXPECT_EQ(r["pids"]["limit"], 4096);
  EXPECT_TRUE(HasOption(*MountAt(spec, "/dev/shm"), "size=2048m"));
  EXPECT_EQ(spec["linux"]["cgroupsPath"], "/gpupool/abc/gp-12-1-2");
}

TEST(OciSpecTest, NoLimitWhenTheRequestGivesNone) {
  const json spec = BuildOciSpec(BaseLaunch(), BaseInputs());
  const json& r = spec["linux"]["resources"];
  EXPECT_FALSE(r.contains("memory"));
  EXPECT_FALSE(r.contains("cpu"));
  EXPECT_FALSE(r.contains("pids"));
}

TEST(OciSpecTest, TheDevicesCgroupAllowsOnlyThePlacedGpusNodes) {
  TaskLaunch l = BaseLaunch();
  l.devices = {{"/dev/nvidia1", "/dev/nvidia1", 195, 1}, {"/dev/nvidiactl", "/dev/nvidiactl", 195, 255}};
  l.visible_denied = {{"/dev/nvidia0", "/dev/nvidia0", 195, 0}};
  const json spec = BuildOciSpec(l, BaseInputs());
  const json& rules = spec["linux"]["resources"]["devices"];
  ASSERT_EQ(rules.size(), 3u);
  EXPECT_EQ(rules[0]["allow"], false);  // everything denied first
  EXPECT_FALSE(rules[0].contains("major"));
  EXPECT_EQ(rules[1]["allow"], true);
  EXPECT_EQ(rules[1]["major"], 195);
  EXPECT_EQ(rules[1]["minor"], 1);
  EXPECT_EQ(rules[2]["minor"], 255);
  // The allowed nodes are bound; a visible-but-denied one is bound too (the
  // test option) but has no rule.
  EXPECT_NE(MountAt(spec, "/dev/nvidia1"), nullptr);
  EXPECT_NE(MountAt(spec, "/dev/nvidia0"), nullptr);
  for (const json& rule : rules) EXPECT_NE(rule.value("minor", -1), 0);
}

TEST(OciSpecTest, TheTaskRunsUnderTheInitWithItsEnvironment) {
  const json spec = BuildOciSpec(BaseLaunch(), BaseInputs());
  EXPECT_EQ(spec["process"]["args"],
            (std::vector<std::string>{kContainerInit, "init", "--", "python3", "train.py"}));
  const std::vector<std::string> env = spec["process"]["env"];
  EXPECT_EQ(std::count(env.begin(), env.end(), "PATH=/opt/bin:/usr/bin"), 1);  // the job's PATH replaces ours
  EXPECT_EQ(std::count_if(env.begin(), env.end(), [](const std::string& e) { return e.rfind("PATH=", 0) == 0; }), 1);
  EXPECT_EQ(std::count(env.begin(), env.end(), "CUDA_VISIBLE_DEVICES=0"), 1);
  EXPECT_EQ(spec["process"]["cwd"], kContainerScratchDir);
  EXPECT_EQ(spec["process"]["noNewPrivileges"], true);
  const std::vector<std::string> caps = spec["process"]["capabilities"]["bounding"];
  EXPECT_EQ(std::count(caps.begin(), caps.end(), "CAP_SYS_ADMIN"), 0);
  EXPECT_EQ(std::count(caps.begin(), caps.end(), "CAP_NET_RAW"), 0);
}

TEST(OciSpecTest, MountsAreTheTasksOwnDirectoriesAndTheHostsSystemReadOnly) {
  const json spec = BuildOciSpec(BaseLaunch(), BaseInputs());
  EXPECT_EQ(spec["root"]["readonly"], true);
  const json* ckpt = MountAt(spec, kContainerCheckpointDir);
  ASSERT_NE(ckpt, nullptr);
  EXPECT_EQ((*ckpt)["source"], "/w/checkpoints/12/1");
  EXPECT_TRUE(HasOption(*ckpt, "rw"));
  EXPECT_EQ((*MountAt(spec, kContainerScratchDir))["source"], "/w/scratch/gp-12-1-2");
  EXPECT_TRUE(HasOption(*MountAt(spec, kContainerTaskDir), "ro"));
  EXPECT_EQ((*MountAt(spec, kContainerInit))["source"], "/opt/gpupool/gpupool-shim");
  for (const char* d : {"/usr", "/etc", "/lib64"}) {
    const json* m = MountAt(spec, d);
    ASSERT_NE(m, nullptr) << d;
    EXPECT_TRUE(HasOption(*m, "ro")) << d;
  }
  EXPECT_EQ(MountAt(spec, "/bin"), nullptr);  // a symlink into /usr on this node: made in the rootfs, not bound
  const std::vector<std::string> masked = spec["linux"]["maskedPaths"];
  EXPECT_EQ(std::count(masked.begin(), masked.end(), "/etc/gpupool"), 1);
  // Every bind's source is one of the task's directories, a device node or
  // a system directory: nothing else of the node's (no work directory).
  for (const json& m : spec["mounts"]) {
    if (m["type"] != "bind") continue;
    const std::string src = m["source"];
    const bool system = src == "/usr" || src == "/etc" || src == "/lib64" || src == "/sys";
    const bool own = src.rfind("/w/checkpoints/12/1", 0) == 0 || src.rfind("/w/scratch/gp-12-1-2", 0) == 0 ||
                     src.rfind("/w/tasks/12-1", 0) == 0 || src == "/opt/gpupool/gpupool-shim";
    EXPECT_TRUE(system || own) << src;
  }
}

TEST(OciSpecTest, AnImageOfItsOwnBindsNothingOfTheHostsSystem) {
  OciSpecInputs in = BaseInputs();
  in.host_image = false;
  in.rootfs = "/images/pytorch/rootfs";
  const json spec = BuildOciSpec(BaseLaunch(), in);
  EXPECT_EQ(spec["root"]["path"], "/images/pytorch/rootfs");
  EXPECT_EQ(MountAt(spec, "/usr"), nullptr);
  EXPECT_EQ(MountAt(spec, "/etc"), nullptr);
  EXPECT_EQ(MountAt(spec, "/lib64"), nullptr);
}

TEST(OciSpecTest, TheDriversUserSpaceFilesAreBoundReadOnly) {
  OciSpecInputs in = BaseInputs();
  in.host_image = false;
  in.driver_files = {{"/usr/lib/x86_64-linux-gnu/libcuda.so.1", "/usr/lib/x86_64-linux-gnu/libcuda.so.1", true}};
  const json spec = BuildOciSpec(BaseLaunch(), in);
  const json* lib = MountAt(spec, "/usr/lib/x86_64-linux-gnu/libcuda.so.1");
  ASSERT_NE(lib, nullptr);
  EXPECT_EQ((*lib)["source"], "/usr/lib/x86_64-linux-gnu/libcuda.so.1");
  EXPECT_TRUE(HasOption(*lib, "ro"));
  EXPECT_TRUE(HasOption(*lib, "nodev"));
}

TEST(OciSpecTest, TheCudaCapLibraryIsBoundReadOnlyWhenTheNodeHasIt) {
  EXPECT_EQ(MountAt(BuildOciSpec(BaseLaunch(), BaseInputs()), kContainerCudaCap), nullptr);
  OciSpecInputs in = BaseInputs();
  in.cuda_cap_library = "/opt/gpupool/libgpupool-cuda-cap.so";
  const json spec = BuildOciSpec(BaseLaunch(), in);
  const json* lib = MountAt(spec, kContainerCudaCap);
  ASSERT_NE(lib, nullptr);
  EXPECT_EQ((*lib)["source"], "/opt/gpupool/libgpupool-cuda-cap.so");
  EXPECT_TRUE(HasOption(*lib, "ro"));
  EXPECT_FALSE(HasOption(*lib, "noexec"));  // the loader maps it executable
}

}  // namespace
}  // namespace gpupool

namespace gpupool {
namespace {

// MPS shares (mps_daemons.h): the GPU's daemon directories bound at their
// node paths, the pipe read-write, and the node's /dev/shm instead of a
// private tmpfs; other tasks keep the tmpfs of their shm size.
TEST(OciSpecTest, MpsSharesGetTheDaemonsDirectoriesAndTheNodesShm) {
  TaskLaunch l = BaseLaunch();
  const json plain = BuildOciSpec(l, BaseInputs());
  ASSERT_NE(MountAt(plain, "/dev/shm"), nullptr);
  EXPECT_EQ((*MountAt(plain, "/dev/shm"))["type"], "tmpfs");
  EXPECT_TRUE(HasOption(*MountAt(plain, "/dev/shm"), "size=1024m"));
  l.binds = {{"/w/mps/gpu0/pipe", "/w/mps/gpu0/pipe", false}, {"/w/mps/gpu0/log", "/w/mps/gpu0/log", true}};
  l.host_shm = true;
  const json spec = BuildOciSpec(l, BaseInputs());
  const json* shm = MountAt(spec, "/dev/shm");
  ASSERT_NE(shm, nullptr);
  EXPECT_EQ((*shm)["type"], "bind");
  EXPECT_EQ((*shm)["source"], "/dev/shm");
  EXPECT_TRUE(HasOption(*shm, "rw"));
  EXPECT_TRUE(HasOption(*shm, "nodev"));
  const json* pipe = MountAt(spec, "/w/mps/gpu0/pipe");
  ASSERT_NE(pipe, nullptr);
  EXPECT_EQ((*pipe)["source"], "/w/mps/gpu0/pipe");
  EXPECT_TRUE(HasOption(*pipe, "rw"));
  const json* log = MountAt(spec, "/w/mps/gpu0/log");
  ASSERT_NE(log, nullptr);
  EXPECT_TRUE(HasOption(*log, "ro"));
}

}  // namespace
}  // namespace gpupool
