#include "src/agent/oci_spec.h"

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>

#include "src/agent/cuda_cap_env.h"

namespace gpupool {
namespace {

using nlohmann::json;

constexpr int64_t kCpuPeriodUs = 100'000;

json Mount(const std::string& dest, const std::string& type, const std::string& source,
           std::vector<std::string> options) {
  return json{{"destination", dest}, {"type", type}, {"source", source}, {"options", std::move(options)}};
}

json Bind(const std::string& host, const std::string& dest, bool read_only) {
  std::vector<std::string> opts = {"rbind", "nosuid", "nodev"};
  opts.push_back(read_only ? "ro" : "rw");
  return Mount(dest, "bind", host, std::move(opts));
}

json DeviceRule(bool allow, const DeviceNode& d) {
  return json{{"allow", allow}, {"type", "c"}, {"major", d.major}, {"minor", d.minor}, {"access", "rwm"}};
}

json Process(const TaskLaunch& l) {
  std::vector<std::string> args = {kContainerInit, "init", "--"};
  args.insert(args.end(), l.argv.begin(), l.argv.end());
  std::vector<std::string> env = {std::string("PATH=") + kContainerPath, std::string("HOME=") + kContainerScratchDir};
  for (const auto& [k, v] : l.env) {
    std::erase_if(env, [&](const std::string& e) { return e.rfind(k + "=", 0) == 0; });
    env.push_back(k + "=" + v);
  }
  json p{{"terminal", false},
         {"user", json{{"uid", 0}, {"gid", 0}}},
         {"args", args},
         {"env", env},
         {"cwd", l.working_dir.empty() ? kContainerScratchDir : l.working_dir},
         {"noNewPrivileges", true}};  // no rlimits: the node's (a user namespace cannot raise them)
  // The default capabilities of a container runtime (Docker's set without
  // NET_RAW): root inside may own its files, nothing more.
  const std::vector<std::string> caps = {"CAP_CHOWN",  "CAP_DAC_OVERRIDE", "CAP_FSETID", "CAP_FOWNER",
                                         "CAP_MKNOD",  "CAP_SETGID",       "CAP_SETUID", "CAP_SETFCAP",
                                         "CAP_SETPCAP", "CAP_NET_BIND_SERVICE", "CAP_SYS_CHROOT", "CAP_KILL",
                                         "CAP_AUDIT_WRITE"};
  p["capabilities"] = json{{"bounding", caps}, {"effective", caps}, {"permitted", caps}};
  return p;
}

json Mounts(const TaskLaunch& l, const OciSpecInputs& in) {
  json m = json::array();
  m.push_back(Mount("/proc", "proc", "proc", {"nosuid", "noexec", "nodev"}));
  m.push_back(Mount("/dev", "tmpfs", "tmpfs", {"nosuid", "strictatime", "mode=755", "size=65536k"}));
  m.push_back(Mount("/dev/pts", "devpts", "devpts",
                    {"nosuid", "noexec", "newinstance", "ptmxmode=0666", "mode=0620"}));
  if (l.host_shm) {
    m.push_back(Mount("/dev/shm", "bind", "/dev/shm", {"rbind", "nosuid", "noexec", "nodev", "rw"}));
  } else {
    m.push_back(Mount("/dev/shm", "tmpfs", "shm",
                      {"nosuid", "noexec", "nodev", "mode=1777", "size=" + std::to_string(l.shm_mib) + "m"}));
  }
  m.push_back(Mount("/dev/mqueue", "mqueue", "mqueue", {"nosuid", "noexec", "nodev"}));
  // sysfs can be mounted only in a network namespace of the container's
  // own; with the host's network the node's /sys is bound read-only.
  if (l.network_isolated) {
    m.push_back(Mount("/sys", "sysfs", "sysfs", {"nosuid", "noexec", "nodev", "ro"}));
  } else {
    m.push_back(Bind("/sys", "/sys", true));
  }
  m.push_back(Mount("/tmp", "tmpfs", "tmpfs", {"nosuid", "nodev", "mode=1777"}));
  if (in.host_image) {
    m.push_back(Bind("/usr", "/usr", true));
    m.push_back(Bind("/etc", "/etc", true));
    for (const HostRootEntry& e : in.host_root) {
      if (e.target.empty()) m.push_back(Bind("/" + e.name, "/" + e.name, true));
    }
  }
  for (const BindMount& b : in.driver_files) m.push_back(Bind(b.host_path, b.path, true));
  m.push_back(Bind(in.init_binary, kContainerInit, true));
  if (!in.cuda_cap_library.empty()) m.push_back(Bind(in.cuda_cap_library, kContainerCudaCap, true));
  m.push_back(Bind(l.checkpoint_dir, kContainerCheckpointDir, false));
  m.push_back(Bind(l.scratch_dir, kContainerScratchDir, false));
  m.push_back(Bind(l.task_dir, kContainerTaskDir, true));
  for (const BindMount& b : l.binds) m.push_back(Bind(b.host_path, b.path, b.read_only));
  // Device nodes: binds without nodev (what lets the container open them;
  // the devices cgroup says which it may).
  for (const DeviceNode& d : l.devices) m.push_back(Mount(d.path, "bind", d.host_path, {"bind", "nosuid", "rw"}));
  for (const DeviceNode& d : l.visible_denied) {
    m.push_back(Mount(d.path, "bind", d.host_path, {"bind", "nosuid", "rw"}));
  }
  return m;
}

json Resources(const TaskLaunch& l) {
  json devices = json::array({json{{"allow", false}, {"access", "rwm"}}});
  for (const DeviceNode& d : l.devices) devices.push_back(DeviceRule(true, d));
  json r{{"devices", devices}};
  if (l.memory_mib > 0) {
    const int64_t bytes = l.memory_mib << 20;
    r["memory"] = json{{"limit", bytes}, {"swap", bytes}};
  }
  if (l.cpu_milli > 0) r["cpu"] = json{{"quota", l.cpu_milli * kCpuPeriodUs / 1000}, {"period", kCpuPeriodUs}};
  if (l.pids_limit > 0) r["pids"] = json{{"limit", l.pids_limit}};
  return r;
}

json Linux(const TaskLaunch& l, const OciSpecInputs& in) {
  json ns = json::array();
  for (const char* t : {"pid", "ipc", "uts", "mount"}) ns.push_back(json{{"type", t}});
  if (l.network_isolated) ns.push_back(json{{"type", "network"}});
  json linux{{"namespaces", ns},
             {"resources", Resources(l)},
             {"cgroupsPath", in.cgroups_path},
             {"maskedPaths", {"/proc/acpi", "/proc/asound", "/proc/kcore", "/proc/keys", "/proc/latency_stats",
                              "/proc/timer_list", "/proc/timer_stats", "/proc/sched_debug", "/proc/scsi",
                              "/sys/firmware", "/etc/gpupool"}},
             {"readonlyPaths", {"/proc/bus", "/proc/fs", "/proc/irq", "/proc/sys", "/proc/sysrq-trigger"}}};
  if (l.uid_count > 0) {
    linux["namespaces"].push_back(json{{"type", "user"}});
    const json map = json::array({json{{"containerID", 0}, {"hostID", l.uid}, {"size", l.uid_count}}});
    linux["uidMappings"] = map;
    linux["gidMappings"] = map;
  }
  return linux;
}

}  // namespace

json BuildOciSpec(const TaskLaunch& l, const OciSpecInputs& in) {
  return json{{"ociVersion", "1.0.2"},
              {"process", Process(l)},
              {"root", json{{"path", in.rootfs}, {"readonly", true}}},
              {"hostname", "gp-" + std::to_string(l.job) + "-" + std::to_string(l.replica)},
              {"mounts", Mounts(l, in)},
              {"linux", Linux(l, in)}};
}

std::vector<HostRootEntry> ReadHostRoot() {
  std::vector<HostRootEntry> out;
  for (const char* name : {"bin", "sbin", "lib", "lib32", "lib64", "libx32"}) {
    const std::string path = std::string("/") + name;
    struct stat st {};
    if (::lstat(path.c_str(), &st) != 0) continue;
    HostRootEntry e;
    e.name = name;
    if (S_ISLNK(st.st_mode)) {
      std::error_code ec;
      e.target = std::filesystem::read_symlink(path, ec).string();
      if (ec || e.target.empty()) continue;
    } else if (!S_ISDIR(st.st_mode)) {
      continue;
    }
    out.push_back(std::move(e));
  }
  return out;
}

}  // namespace gpupool
