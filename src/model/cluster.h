// The cluster's nodes, their free capacity, and the allocations on them.
//
// Cluster is plain data plus the only functions that change it (Allocate,
// Release). Every change is recorded in a change log (a list of node indexes)
// so that caches keyed by node state (the scheduler's score index) can refresh
// exactly the nodes that changed; see ChangeLog below.
//
// Units: cpu_milli (thousandths of a core), memory_mib, gpu_milli (thousandths
// of one GPU). A node holds at most kMaxGpusPerNode GPUs of one model.
//
// Thread-safety: none; one owner (the engine or one simulation run).
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "src/base/status.h"
#include "src/model/demand.h"
#include "src/model/gpu_catalog.h"

namespace gpupool {

using NodeIndex = int32_t;
using GpuMask = uint16_t;  // bit i = GPU index i on the node
static_assert(kMaxGpusPerNode <= 16, "GpuMask must hold every GPU of a node");

inline constexpr GpuModelId kNoGpuModel = 0xff;  // a node without GPUs
inline constexpr int kMaxPools = 64;               // pool ids fit a uint64_t mask

// Whether a node takes new work.
enum class NodeCondition : uint8_t {
  kReady,     // takes new work
  kCordoned,  // runs what it has, takes nothing new (draining)
  kDown,      // lost: nothing runs or starts here
};

struct NodeSpec {
  std::string name;
  int64_t cpu_milli = 0;
  int64_t memory_mib = 0;
  int gpu_count = 0;
  GpuModelId gpu_model = kNoGpuModel;  // kNoGpuModel iff gpu_count == 0
  uint8_t pool = 0;                    // < kMaxPools
  uint16_t attr_class = 0;             // index into the engine's node attribute table
};

// Hot, per-node state. Derived fields (gpu_milli_free_total, gpus_fully_free,
// max_gpu_free_milli) are kept equal to what gpu_free_milli implies.
struct Node {
  int64_t cpu_milli_total = 0;
  int64_t memory_mib_total = 0;
  int64_t cpu_milli_free = 0;
  int64_t memory_mib_free = 0;
  int32_t gpu_milli_free_total = 0;
  GpuModelId gpu_model = kNoGpuModel;
  uint8_t gpu_count = 0;
  uint8_t gpus_fully_free = 0;
  int16_t max_gpu_free_milli = 0;
  uint8_t pool = 0;
  NodeCondition condition = NodeCondition::kReady;
  uint16_t attr_class = 0;
  int64_t reserved_for = -1;  // a job id: only that job may start here; -1 = none
  // Allocations on the node by GPU kind (see GpuKindOf): index 0 counts
  // shares, index k counts k-whole-GPU allocations. CPU-only allocations are
  // counted in cpu_only_residents.
  std::array<int32_t, kMaxGpusPerNode + 1> gpu_kind_count{};
  int32_t gpu_kinds_present = 0;  // how many entries of gpu_kind_count are non-zero
  int32_t cpu_only_residents = 0;
  std::array<int16_t, kMaxGpusPerNode> gpu_free_milli{};

  int32_t gpu_milli_total() const { return int32_t{gpu_count} * kMilliPerGpu; }

  friend bool operator==(const Node&, const Node&) = default;
};

// The GPU "kind" of a demand: 0 for a share of one GPU, k for k whole GPUs,
// -1 for CPU-only. Placement policies that cluster like with like use it.
inline int GpuKindOf(const Demand& d) {
  if (d.gpu_count == 0) return -1;
  return d.gpu_milli < kMilliPerGpu ? 0 : d.gpu_count;
}

// Why a demand does not fit a node, in the order the checks run.
enum class FitFailure : uint8_t {
  kNone,
  kUnavailable,  // the node is cordoned or down
  kPool,         // the node's pool is not allowed
  kReserved,     // the node is reserved for another job
  kGpuModel,     // the node's GPU model is not allowed (or the node has no GPUs)
  kGpuCapacity,  // not enough fully free GPUs, or no GPU with enough free milli
  kCpu,
  kMemory,
  kFiltered,     // a policy filter refused it (e.g. ecosystem); never from CheckFit
};
inline constexpr int kFitFailureCount = 9;
const char* FitFailureName(FitFailure f);

// Recomputes a node's derived GPU fields (gpu_milli_free_total,
// max_gpu_free_milli, gpus_fully_free) from gpu_free_milli, for code that
// edits a copy of a node to ask "what if".
void RecomputeGpuTotals(Node& n);

// Does `d` fit on `n` right now? Pure; O(1) thanks to the derived fields.
FitFailure CheckFit(const Node& n, const Demand& d);

// A GPU choice that CheckFit accepted: for a share, one GPU with enough free
// milli; for whole GPUs, gpu_count fully free GPUs; for CPU-only, none.
bool GpusSatisfy(const Node& n, const Demand& d, GpuMask gpus);

struct Allocation {
  NodeIndex node = -1;
  GpuMask gpus = 0;
  Demand demand;
};
using AllocationId = int32_t;

class Cluster {
 public:
  // Fails on an impossible spec (negative sizes, too many GPUs, a GPU count
  // without a model), naming the field.
  Result<NodeIndex> AddNode(NodeSpec spec);

  int node_count() const { return static_cast<int>(nodes_.size()); }
  const Node& node(NodeIndex i) const { return nodes_[i]; }
  const std::string& node_name(NodeIndex i) const { return names_[i]; }
  const std::vector<Node>& nodes() const { return nodes_; }

  int64_t gpu_milli_total() const { return gpu_milli_total_; }
  int64_t gpu_milli_allocated() const { return gpu_milli_allocated_; }
  int gpu_count_total() const { return static_cast<int>(gpu_milli_total_ / kMilliPerGpu); }

  // Places `d` on `node` using `gpus`. Requires CheckFit(node, d) == kNone and
  // GpusSatisfy(node, d, gpus) (checked: a violation is a bug, not bad input).
  AllocationId Allocate(NodeIndex node, const Demand& d, GpuMask gpus);
  // Returns an allocation's resources to its node. Requires a live id.
  void Release(AllocationId id);
  // Node lifecycle and reservations; each is a logged change.
  void SetCondition(NodeIndex i, NodeCondition c);
  void SetReservation(NodeIndex i, int64_t job);  // -1 clears
  const Allocation& allocation(AllocationId id) const { return allocations_[id]; }
  int live_allocations() const { return live_allocations_; }

  // Change log: the index of every node changed by Allocate/Release, in
  // order, numbered from 0. Only the latest entries are kept (at least
  // 4 x node_count); a reader whose position is below change_log_base() has
  // missed changes and must re-read every node.
  uint64_t change_log_end() const { return log_base_ + change_log_.size(); }
  uint64_t change_log_base() const { return log_base_; }
  NodeIndex changed_node(uint64_t seq) const { return change_log_[seq - log_base_]; }
  // The log position of node i's latest change (0 if it never changed). A
  // reader of a window of the log can refresh each node once, at the entry
  // where last_change_seq(i) == seq.
  uint64_t last_change_seq(NodeIndex i) const { return last_change_[i]; }

 private:
  static void CountKind(Node& n, const Demand& d, int delta);
  void NoteChange(NodeIndex i);

  std::vector<Node> nodes_;
  std::vector<std::string> names_;
  std::vector<Allocation> allocations_;
  std::vector<AllocationId> free_allocation_ids_;
  int live_allocations_ = 0;
  int64_t gpu_milli_total_ = 0;
  int64_t gpu_milli_allocated_ = 0;
  std::vector<NodeIndex> change_log_;
  std::vector<uint64_t> last_change_;  // per node
  uint64_t log_base_ = 0;
};

}  // namespace gpupool
