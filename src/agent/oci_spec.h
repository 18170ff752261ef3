// The OCI runtime configuration (config.json, runtime-spec 1.0) of one task
// container: a pure function of the launch and the node's settings, so the
// mapping from a job request to what the kernel enforces is read and tested
// in one place (docs/agent.md, "Tenant isolation").
//
// What the container gets:
//  - namespaces pid, mount, ipc, uts always; user when launch.uid_count > 0
//    (container root = host launch.uid, an unprivileged per-tenant range);
//    network only when launch.network_isolated (else the host's: NCCL and
//    serving ports);
//  - the process: launch.argv run by the container init (kContainerInit, a
//    bind of gpupool-shim) so that the task is not pid 1 and gets ordinary
//    signal handling, with the environment given and cwd launch.working_dir
//    (default the scratch directory);
//  - cgroup limits: memory (hard, no swap beyond it), CPU quota over a
//    100 ms period, pids, and a devices list that denies everything but
//    the standard nodes and launch.devices;
//  - mounts: proc, a private /dev, /dev/pts, /dev/shm (launch.shm_mib),
//    /dev/mqueue, /sys read-only, /tmp (tmpfs); the rootfs read-only; the
//    checkpoint and scratch directories read-write and the task directory
//    read-only under /gpupool; device nodes bound from the host; for
//    `image: host` the node's /usr, /etc and /bin, /sbin, /lib* (bound, or
//    the same symlinks for a merged /usr), read-only, with /etc/gpupool
//    masked; for other images the node's NVIDIA user-space files
//    (driver_files.h) read-only at their paths; the CUDA cap library
//    (cuda_cap_env.h) read-only at /gpupool/lib when the node has it;
//    launch.binds at their paths; for MPS shares (launch.host_shm) the
//    node's /dev/shm instead of the private tmpfs; nothing else of the node.
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "src/agent/task_runtime.h"

namespace gpupool {

// Where the container init (gpupool-shim in init mode) is bound.
inline constexpr const char* kContainerInit = "/gpupool/init";
inline constexpr const char* kContainerPath = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";

struct HostRootEntry {
  std::string name;    // "bin", "lib64", ...
  std::string target;  // non-empty: a symlink to this (e.g. "usr/bin")
};

struct OciSpecInputs {
  std::string rootfs;                // absolute host path
  bool host_image = false;           // bind the node's system directories
  std::vector<HostRootEntry> host_root;  // for host_image: what /bin, /lib... are on the node
  std::string init_binary;           // host path of gpupool-shim
  std::string cgroups_path;          // e.g. /gpupool/gp-12-0-1
  std::vector<BindMount> driver_files;  // the NVIDIA user-space files (driver_files.h), bound read-only
  std::string cuda_cap_library;      // host path of libgpupool-cuda-cap.so, bound read-only at
                                     // kContainerCudaCap (cuda_cap_env.h); empty: none on the node
};

// The config.json of `launch`.
nlohmann::json BuildOciSpec(const TaskLaunch& launch, const OciSpecInputs& in);

// The node's /bin, /sbin, /lib, /lib32, /lib64, /libx32 as they are (absent
// ones left out).
std::vector<HostRootEntry> ReadHostRoot();

}  // namespace gpupool
