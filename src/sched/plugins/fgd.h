// Fragmentation Gradient Descent (FGD, ATC'23): place a demand where the
// node's expected fragmentation F_n (src/sched/fragmentation.h) grows least.
//
//   delta = F_n(before) - F_n(after placing d)      (GPU milli; > 0 is good)
//   score = floor(100 * sigmoid(delta / 1000))
//
// "After" subtracts d's CPU and, for a share, its milli from one GPU: every
// GPU with enough free milli is tried and the best (first on equal integer
// score) kept; whole GPUs take the lowest-index fully free ones.
#pragma once

#include <cstdint>

#include "src/model/cluster.h"
#include "src/sched/fragmentation.h"

namespace gpupool {

struct FgdChoice {
  int64_t score = 0;
  GpuMask gpus = 0;
};

// Requires CheckFit(n, d) == kNone.
FgdChoice FgdBestChoice(const FragmentationModel& frag, const Node& n, const Demand& d);

// The node as it would be after placing d on `gpus` (CPU, memory and GPU
// milli subtracted; derived fields recomputed).
Node NodeAfter(const Node& n, const Demand& d, GpuMask gpus);

}  // namespace gpupool
