// The `oci` task runtime (EXEC-1..6): each replica runs as an OCI container
// through runc, supervised by gpupool-shim (tools/shim/gpupool_shim.cc).
//
// Per task attempt, WORK/containers/ID holds the bundle: config.json (built
// by BuildOciSpec, oci_spec.h), rootfs/ for `image: host`, meta.json (the
// task's key), and the shim's files (started, exit, error, runc.log). The
// container id ID is "gp-JOB-REPLICA-ATTEMPT"; runc keeps its state under
// WORK/runc; the container's cgroup is /gpupool/<hash of WORK>/ID, so that
// agents of several work directories on one machine (tests, dev) never
// share one.
//
// Start writes the bundle, starts the shim in a session of its own and
// waits (at most start_timeout) until the container runs or has failed.
// Signals go straight from the host: SIGKILL to the container's init
// (the kernel then kills its whole pid namespace), any other signal to the
// task's process group (the init's child), the checkpoint signal to the
// task's first process. A task is alive while its cgroup has a process.
// Remove runs `runc delete --force` and prunes the bundle.
//
// Recover (at agent start) re-adopts every bundle whose container started:
// running ones keep running (the agent reads their exit from the shim's
// file later), exited ones report their exit; bundles of containers that
// never started are deleted.
//
// The node's NVIDIA user-space files (driver_files.h) are found once, at
// construction, and bound read-only into containers of images other than
// `host`.
//
// Directories: the checkpoint directory is owned by the tenant's uid range
// (root of the container) with mode 0700, and one owned by anyone else (an
// earlier release wrote them as the agent's user) is chowned on first use;
// the scratch directory likewise, per attempt. The agent's directories on
// the path to them are mode 0711 so that the container's unprivileged user
// can reach its own directories without listing anything.
#pragma once

#include <chrono>
#include <string>

#include "src/agent/task_runtime.h"

namespace gpupool {

struct OciRuntimeOptions {
  std::string runc;       // the OCI runtime binary
  std::string shim;       // gpupool-shim
  std::string work_dir;   // the agent's work directory (absolute)
  std::chrono::milliseconds start_timeout{30000};
};

// Finds `runc` on PATH (empty when absent) and gpupool-shim beside the
// running executable (empty when absent).
std::string FindOnPath(const std::string& program);
std::string FindShim();

// Does `runc` run a trivial container on this machine? Runs one (a host
// image, `true`, in a user namespace at kProbeUid) under WORK/probe; the
// error says why not.
inline constexpr int64_t kProbeUid = 900'000;
Status ProbeOciRuntime(const OciRuntimeOptions& options);

// The image's root file system on the node: "host" (empty string returned,
// host_image set), a directory with rootfs/ (an unpacked bundle, e.g. by
// umoci), a directory that is a root file system (has bin/ or usr/), or an
// OCI image layout unpacked on first use into WORK/images. Errors name the
// field `image`.
struct ResolvedImage {
  bool host = false;
  std::string rootfs;
};
Result<ResolvedImage> ResolveImage(const std::string& image, const std::string& work_dir);

std::unique_ptr<TaskRuntime> MakeOciRuntime(OciRuntimeOptions options);

// The container id of a task attempt.
std::string ContainerId(JobId job, int32_t replica, int32_t attempt);

}  // namespace gpupool
