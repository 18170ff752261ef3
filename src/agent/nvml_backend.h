// The NVML device backend (OPS-1): the node's NVIDIA GPUs as the driver's
// management library (libnvidia-ml) reports them.
//
// The library is loaded at run time with dlopen and its C symbols resolved
// with dlsym, so neither the build nor a machine without a driver needs
// nvml.h or libnvidia-ml; only OpenNvmlBackend fails there, naming what it
// could not load. Tests load a scripted fake (tests/fake_nvml/) the same way.
//
// What each DeviceBackend call reads (see nvml_backend.cc for the details):
//  - Discover: per GPU its UUID, product name, memory, current MIG mode and
//    MIG devices (UUID, memory, profile from the MIG device's name, placement
//    start from its GPU instance), and NVLink peers. Reading MIG placements
//    requires a privileged user (root), as NVML's GPU-instance queries do.
//  - Sample: utilization, memory, temperature, processes; a GPU whose queries
//    fail (other than "not supported") is reported unhealthy with the failing
//    call and NVML's reason, and so is one with pending or failed row remaps,
//    or with a critical XID since the agent started (nvml_fields.h).
//  - ReadDcgmFields: the DCGM-named field set (nvml_fields.h says what each
//    field reads), through a reader that shares the library and its init.
//  - SampleTasks: per-process SM utilization since the previous call, summed
//    over each task's process group; device utilization where the driver
//    keeps no per-process samples (MIG mode, older GPUs).
//  - Scrub: runs the gpupool-scrub CUDA tool in a child process.
//  - CreateMigInstance / DestroyMigInstance / ListMigInstances: the MIG
//    lifecycle (src/agent/nvml_mig.h), on a GPU an operator put in MIG mode
//    (the mode is never changed here); root, as the driver requires.
//
// Thread-safety: none (see DeviceBackend). The agent must run in the host's
// PID namespace: NVML reports host PIDs and task membership is read from
// /proc/PID/stat.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "src/agent/device_backend.h"
#include "src/base/status.h"

namespace gpupool {

struct NvmlOptions {
  // What dlopen is given: a soname searched the usual way, or a path.
  std::string library = "libnvidia-ml.so.1";
  // The gpupool-scrub executable; empty = "gpupool-scrub" in the directory
  // of the running executable (/proc/self/exe).
  std::string scrub_tool;
  // A scrub that has not finished after this long is killed and fails.
  // Zeroing 141 GiB takes well under a second at HBM bandwidth; the rest is
  // CUDA context creation, so this bounds a hung tool, not a slow one.
  double scrub_timeout_s = 300;
  // Where the driver's device nodes are (/dev/nvidiaN, /dev/nvidiactl, ...).
  std::string dev_dir = "/dev";
  // Where the driver lists MIG capabilities and makes their nodes
  // (device_nodes.h, StatMigCapNodes).
  std::string mig_caps_proc_dir = "/proc/driver/nvidia/capabilities";
  std::string mig_caps_dev_dir = "/dev/nvidia-caps";
};

// Loads `options.library` (RTLD_NOW | RTLD_LOCAL), resolves the NVML symbols
// and calls nvmlInit_v2. Fails with "cannot load <library>: <dlerror>", with
// "<library> lacks <symbol>", or with "nvmlInit_v2: <nvmlErrorString>".
// The backend calls nvmlShutdown and dlcloses the library when destroyed.
Result<std::unique_ptr<DeviceBackend>> OpenNvmlBackend(const NvmlOptions& options);

// The catalog model (src/model/gpu_catalog.h, Catalog::Builtin()) that best
// matches an NVML product name, or "" when none does. Families sold in
// several memory sizes (A100, V100) are told apart by `memory_mib` (the
// device's total memory) or, when that is 0, by a "40GB"/"80GB" token in the
// name. Examples: "NVIDIA H100 80GB HBM3" -> "H100", "NVIDIA A100-SXM4-80GB"
// -> "A100-80GB", "Tesla V100-SXM2-16GB" -> "V100M16", "NVIDIA H200" ->
// "H200", "NVIDIA L40" -> "" (not in the catalog). Pure.
std::string CatalogModelForProduct(std::string_view product, int64_t memory_mib);

// The MIG profile in a MIG device's NVML name ("NVIDIA A100-SXM4-40GB MIG
// 3g.20gb" -> "3g.20gb", "... MIG 1c.3g.20gb" -> "1c.3g.20gb"), or "" when
// the name carries none. Pure.
std::string MigProfileFromDeviceName(std::string_view name);

}  // namespace gpupool
