// FGD+: our placement policy. FGD (fgd.h) decides where whole GPUs and
// CPU-only demands go; GPU shares are packed by the cutting-stock prices of
// src/sched/share_packing.h first and by FGD only among equals.
//
// For a share of s milli, each GPU g of the node with free milli f_g >= s is
// a candidate, ranked lexicographically by
//   1. the packing loss  Loss(f_g, s) (share_packing.h), in steps of 0.001
//      GPU, lowest first: keep every GPU on the path of an optimal packing
//      of the share stream;
//   2. an already used GPU (f_g < 1000) before a fresh one: fewer GPUs are
//      left half-filled at any moment;
//   3. the FGD score of the placement, highest first;
// then, as in the framework, nodes tie-break by rank. The node's score is its
// best candidate's; the GPU selector returns that candidate (the first on a
// tie, by index).
//
// Why it beats FGD: FGD scores a GPU hole by how likely the *next* typical
// demand is to fit it, so it cannot tell a hole that the stream will fill
// exactly (a 530 beside a 470) from one that mostly strands milli. The LP
// prices see the whole stream, including which sizes are too rare to fill
// the holes the common ones leave.
#pragma once

#include <cstdint>

#include "src/model/cluster.h"
#include "src/sched/fragmentation.h"
#include "src/sched/share_packing.h"

namespace gpupool {

struct FgdPlusChoice {
  int64_t score = 0;
  GpuMask gpus = 0;
};

// Requires CheckFit(n, d) == kNone.
FgdPlusChoice FgdPlusBestChoice(const FragmentationModel& frag, const SharePackingModel& packing, const Node& n,
                                const Demand& d);

}  // namespace gpupool
