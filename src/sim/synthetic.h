// Generated clusters and workloads, for when no trace is at hand (a fresh
// machine without ../shared) and for scale benchmarks.
//
// The shapes are modelled on a production GPU cluster that serves both
// inference and training (the mix the Alibaba 2023 trace describes): most
// demands are whole single GPUs or fractions of one GPU, about one in eight
// asks for CPU only, and a few percent are multi-GPU training replicas. The
// exact proportions are the constants in synthetic.cc; every draw comes from
// the seeded Rng, so a seed gives the same cluster and workload everywhere.
#pragma once

#include <cstdint>
#include <vector>

#include "src/model/cluster.h"
#include "src/model/gpu_catalog.h"
#include "src/config/alibaba_gpu_trace.h"

namespace gpupool {

// A mixed cluster: 8-GPU training servers and 1-, 2- and 4-GPU inference
// servers of several models. Node names are "gen-node-00000", ...
std::vector<NodeSpec> GenerateMixedCluster(int node_count, uint64_t seed, const Catalog& catalog);

// node_count identical-layout 8-GPU servers of a few models (for scale
// benchmarks: node_count x 8 GPUs).
std::vector<NodeSpec> GenerateEightGpuCluster(int node_count, uint64_t seed, const Catalog& catalog);

// `count` pods named "gen-pod-0000000", ... with no GPU model constraint.
std::vector<TracePod> GeneratePods(int count, uint64_t seed);

}  // namespace gpupool
