// Extension points of the placement framework (DESIGN section 4).
//
// One scheduling cycle for a demand d:
//   Filter      CheckFit (src/model/cluster.h) on each node: capacity, GPU
//               model; the failures become the structured rejection.
//   PreScore    optional node pre-selection (the Random policy draws one
//               feasible node here).
//   Score       every ScorePlugin of the policy scores every feasible node;
//               the weighted sum decides; ties go to the node of lowest rank
//               (a fixed per-run node order).
//   SelectGpus  the policy's GpuSelector picks the GPU indexes on the chosen
//               node.
//   Reserve     the caller applies the placement to the Cluster
//               (Cluster::Allocate); Unreserve is Cluster::Release.
//
// Contracts for plugin authors:
// - Score and Select are pure functions of (node, demand) and the plugin's
//   fixed configuration. The framework caches scores per (node state, demand
//   shape), so a plugin whose score reads anything else must say so through
//   node_local() == false.
// - Score is called only for nodes where CheckFit(n, d) == kNone; Select only
//   for such nodes and demands with gpu_count > 0, and must return a mask
//   that satisfies GpusSatisfy(n, d, mask).
#pragma once

#include <cstdint>
#include <string_view>

#include "src/base/rng.h"
#include "src/model/cluster.h"
#include "src/model/demand.h"

namespace gpupool {

// A node-local hard constraint beyond CheckFit (e.g. ecosystem
// compatibility). Called only for nodes where CheckFit passed.
class FilterPlugin {
 public:
  virtual ~FilterPlugin() = default;
  virtual std::string_view name() const = 0;
  virtual bool Filter(const Node& n, const Demand& d) const = 0;
};

class ScorePlugin {
 public:
  virtual ~ScorePlugin() = default;
  virtual std::string_view name() const = 0;
  // Higher is better. Any int64 range; the framework only compares sums.
  virtual int64_t Score(const Node& n, const Demand& d) const = 0;
  virtual bool node_local() const { return true; }
};

class GpuSelector {
 public:
  virtual ~GpuSelector() = default;
  virtual std::string_view name() const = 0;
  virtual GpuMask Select(const Node& n, const Demand& d, Rng& rng) const = 0;
};

// The lowest-index fully free GPUs that are healthy and not in MIG mode,
// gpu_count of them. Requires at least that many (Node::gpus_fully_free).
GpuMask LowestFreeGpus(const Node& n, int gpu_count);

}  // namespace gpupool
