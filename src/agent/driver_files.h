// The NVIDIA driver's user-space files on a node (EXEC-3): what a task
// container from an image other than `host` needs bound read-only to use
// its GPUs (libcuda, NVML, the PTX JIT, nvidia-smi, the MPS control
// binaries), the way the NVIDIA container toolkit injects them.
//
// A node without the driver (the fake backend, CI) has none of them and
// binds nothing. `image: host` needs none: the node's /usr is bound whole.
#pragma once

#include <string>
#include <vector>

#include "src/agent/task_runtime.h"

namespace gpupool {

// At most this many files are bound (a driver installs about 40).
inline constexpr size_t kMaxDriverFiles = 256;

// The driver's libraries (libcuda.so*, libcudadebugger.so*, libnvidia-*.so*,
// libnvcuvid.so*, libnvoptix.so*) in the node's library directories and its
// binaries (nvidia-smi, nvidia-debugdump, nvidia-cuda-mps-control,
// nvidia-cuda-mps-server) in /usr/bin and /bin, as read-only binds at the
// same path. `root` prefixes every host path (tests; "" on a node). A
// directory reached twice (merged /usr: /lib -> /usr/lib) counts once.
std::vector<BindMount> FindDriverFiles(const std::string& root = "");

// Makes an empty file in `rootfs` at each bind's path (the container's root
// user cannot create mount points in an image owned by the node's root) and
// returns the binds that have one. A path whose parent resolves outside
// `rootfs` (an image with an absolute symlink such as /lib -> /usr/lib on
// the node) is left out rather than created on the node.
std::vector<BindMount> MakeFileMountPoints(const std::string& rootfs, const std::vector<BindMount>& binds);

// The same for directories (TaskLaunch::binds): an empty directory at each
// path, and the binds that have one; a link on the way is left alone.
std::vector<BindMount> MakeDirMountPoints(const std::string& rootfs, const std::vector<BindMount>& binds);

}  // namespace gpupool
