// Work-conserving compute shares (issue 15, "Capped time-sliced shares"):
// per GPU, whether more than one consumer is busy on it, published as a
// small file that the CUDA cap (tools/cuda_cap) reads to decide whether to
// hold a time-sliced task to its compute share. Uncontended, a 0.25 share
// may use the whole GPU; contended, it is paced to 0.25.
//
// The decision, per GPU and per agent sample (one heartbeat):
//  - consumers: each of the agent's running tasks on the GPU whose
//    utilization is at least busy_pct (a task not measured counts as busy),
//    plus one for "others" when NVML lists a process on the GPU that belongs
//    to none of the tasks and the GPU's own utilization exceeds the tasks'
//    sum by at least foreign_busy_pct (a GPU whose utilization is not
//    measured: the foreign process alone counts);
//  - two or more consumers: contended at once; fewer: uncontended after
//    release_samples such samples in a row (a GPU never sampled, or just
//    contended, stays contended until then: the safe side).
//
// The file, DIR/gpu-N/state, is one line "contended UNTIL_MS" or
// "uncontended UNTIL_MS" (UNTIL_MS: wall-clock Unix milliseconds until
// which it holds, at most 600,000 ahead), written to a temporary beside it
// and renamed over it, so that a reader sees the old or the new line, never
// a mix. A container gets DIR/gpu-N bound read-only (a directory, so that
// the rename is seen through the bind), not the other GPUs'. A missing,
// stale or malformed file means contended to the cap.
//
// Thread-safety: none; the agent calls it from its one thread.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "src/base/status.h"

namespace gpupool {

// Where a container finds its GPU's signal (DIR/gpu-N bound read-only).
inline constexpr const char* kContainerContentionDir = "/gpupool/contention";
inline constexpr const char* kContentionFileName = "state";
// The longest validity the cap accepts (CAP_CONTENTION_MAX_VALID_MS).
inline constexpr int64_t kMaxContentionValidMs = 600000;

// One GPU in one sample.
struct GpuLoad {
  int gpu = 0;
  std::vector<double> task_util_pct;  // each running task's on this GPU, 0..100; < 0: not measured
  double device_util_pct = -1;        // the GPU's own, 0..100; < 0: not measured
  bool foreign_process = false;       // NVML lists a process here that is none of the tasks'
};

struct GpuContentionOptions {
  std::string dir;              // files under DIR/gpu-N/
  double busy_pct = 5;          // a task at or above this is busy
  double foreign_busy_pct = 20;  // the GPU this far above its tasks' sum: others are busy
  int release_samples = 2;      // uncontended samples in a row before the share is let go
};

// The consumers busy on the GPU in this sample (the rule above).
int BusyConsumers(const GpuLoad& load, const GpuContentionOptions& options);

// The file's line: "contended 1712345678901\n".
std::string ContentionLine(bool contended, int64_t until_unix_ms);

class GpuContention {
 public:
  explicit GpuContention(GpuContentionOptions options);

  // Decides each GPU in `loads` from this sample and writes its file, valid
  // until now_unix_ms + valid_ms (valid_ms in [1, kMaxContentionValidMs]).
  // Every GPU is written even when one fails; the Error names the first
  // file that could not be written.
  Status Update(const std::vector<GpuLoad>& loads, int64_t now_unix_ms, int64_t valid_ms);

  // The current decision; true for a GPU not yet decided uncontended.
  bool contended(int gpu) const;
  std::string DirOf(int gpu) const;   // DIR/gpu-N
  std::string FileOf(int gpu) const;  // DIR/gpu-N/state

  // Removes the files written (the agent leaving): the cap then holds every
  // task to its share, as for a missing file.
  void Clear();

 private:
  struct GpuState {
    bool contended = true;
    int quiet_samples = 0;
  };
  Status Write(int gpu, bool contended, int64_t until_unix_ms) const;

  GpuContentionOptions options_;
  std::map<int, GpuState> gpus_;
};

}  // namespace gpupool
