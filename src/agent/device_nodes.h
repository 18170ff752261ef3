// Device nodes of GPUs (EXEC-3): reading the real ones, making fake ones.
//
// The NVIDIA driver's nodes: /dev/nvidiaN (major 195, minor N) per GPU,
// /dev/nvidiactl (195:255), and /dev/nvidia-uvm and /dev/nvidia-uvm-tools
// (a major the driver picks at load). A task container gets its GPUs' nodes
// and the control nodes, bound from the host, and the devices cgroup allows
// exactly those.
//
// Fake nodes (the fake backend, for machines without GPUs) are real
// character devices with the NVIDIA major and distinct minors, made with
// mknod under a directory of the agent's: opening an allowed one fails with
// ENXIO (no driver behind it), a denied one with EPERM (the devices
// cgroup), which is what the isolation tests tell apart.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "src/agent/device_backend.h"
#include "src/base/status.h"

namespace gpupool {

inline constexpr uint32_t kNvidiaMajor = 195;
inline constexpr uint32_t kNvidiaCtlMinor = 255;
inline constexpr uint32_t kFakeUvmMajor = 511;  // stands for the driver's dynamic one
inline constexpr uint32_t kFakeCapsMajor = 510;  // stands for nvidia-caps' dynamic one

// Where the driver lists MIG capabilities and makes their nodes.
inline constexpr const char* kMigCapsProcDir = "/proc/driver/nvidia/capabilities";
inline constexpr const char* kMigCapsDevDir = "/dev/nvidia-caps";

// `host_path` as a node a task sees at `path`; nullopt when it is not a
// character device.
std::optional<DeviceNode> StatDeviceNode(const std::string& host_path, const std::string& path);

// nvidiactl, nvidia-uvm and nvidia-uvm-tools under `dir`, those present.
std::vector<DeviceNode> StatControlNodes(const std::string& dir);

// The capability nodes a task on one MIG instance needs besides its GPU's
// /dev/nvidiaM: the driver lists the device minor N of the GPU instance's
// capability in PROC/gpuM/mig/giG/access and of its compute instance's in
// PROC/gpuM/mig/giG/ciC/access (a line "DeviceFileMinor: N"); the nodes
// are DEV/nvidia-capN, seen in the container at /dev/nvidia-caps/. An
// Error names the file that is missing or unreadable.
Result<std::vector<DeviceNode>> StatMigCapNodes(const std::string& proc_dir, const std::string& dev_dir,
                                                int gpu_minor, int gi, int ci);

// The fake driver's side of StatMigCapNodes: writes the two access files
// under `proc_dir` and makes the nodes (major kFakeCapsMajor, minors
// distinct per GPU, GPU instance and compute instance) under `dev_dir`.
Status MakeFakeMigCapNodes(const std::string& proc_dir, const std::string& dev_dir, int gpu_minor, int gi,
                           int ci);
// One of them: the GPU instance's when `ci` < 0, else the compute
// instance's. Existing ones are kept.
Status MakeFakeMigCapNode(const std::string& proc_dir, const std::string& dev_dir, int gpu_minor, int gi, int ci);
// Undoes MakeFakeMigCapNode, as the driver does when the instance is
// destroyed: removes the access file (and, for a GPU instance, its
// directory) and the node. Missing ones are no error.
Status RemoveFakeMigCapNode(const std::string& proc_dir, const std::string& dev_dir, int gpu_minor, int gi, int ci);

// Makes nvidia0..nvidia{count-1}, nvidiactl, nvidia-uvm and nvidia-uvm-tools
// in `dir` (mode 0666; existing ones are kept). Needs CAP_MKNOD.
Status MakeFakeDeviceNodes(const std::string& dir, int count);

}  // namespace gpupool
