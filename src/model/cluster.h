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
  kRemoved,   // scaled in: left its pool for good (its index stays)
};

// How a GPU is being used right now. An empty GPU is kIdle; the first
// allocation puts it in its mode and the last release returns it to kIdle.
enum class GpuMode : uint8_t { kIdle, kWhole, kTimeSlice, kMps, kMig };
const char* GpuModeName(GpuMode m);

// Scrub state of a GPU: memory freed by a tenant and not yet zeroed.
inline constexpr int32_t kClean = -1;
inline constexpr int32_t kDirtyByMany = -2;
// Node::mps_tenant of a GPU whose MPS shares are several tenants': a state
// written before the one-tenant rule (snapshots up to version 6). It takes
// no new MPS share until it empties.
inline constexpr int32_t kMpsTenants = -2;

struct NodeSpec {
  std::string name;
  int64_t cpu_milli = 0;
  int64_t memory_mib = 0;
  int gpu_count = 0;
  GpuModelId gpu_model = kNoGpuModel;  // kNoGpuModel iff gpu_count == 0
  uint8_t pool = 0;                    // < kMaxPools
  uint16_t attr_class = 0;             // index into the engine's node attribute table
};

// Node::mps_tenant with no GPU in MPS use.
constexpr std::array<int32_t, kMaxGpusPerNode> NoMpsTenants() {
  std::array<int32_t, kMaxGpusPerNode> a{};
  a.fill(-1);
  return a;
}

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
  // Per GPU, for sharing modes (PART-1..3) and scrubbing (RECLAIM-4).
  int32_t gpu_memory_mib = 0;   // memory of one GPU of this model
  uint8_t mig_table = 0;        // 1 + index into MigTables(), 0 = no MIG
  uint8_t special_gpus = 0;     // GPUs in MPS or MIG use, or in MIG mode by the node's report (derived)
  // EXEC-11: GPUs the node's agent reports unhealthy (a critical XID, a
  // failed device query). They take no new work (GpuFits) and count neither
  // in gpus_fully_free nor in max_gpu_free_milli; what runs there stays
  // until it ends or moves. Set by Cluster::SetGpuHealth.
  GpuMask gpu_unhealthy = 0;
  // EXEC-7: the MIG mode and instances the node's agent reported (facts of
  // the hardware, never overwritten; Cluster::SetMigLayout). For a GPU in
  // mig_reported, MIG shares need MIG mode (mig_enabled) and everything
  // else needs it off (the mode changes only with a GPU reset: an operator
  // action). A node that reported nothing (the simulator's) is free of
  // both rules. mig_existing: the instances that exist (MigLayoutBytes,
  // src/model/mig.h); placements prefer them and never cut into them.
  GpuMask mig_reported = 0;
  GpuMask mig_enabled = 0;
  std::array<uint64_t, kMaxGpusPerNode> mig_existing{};
  std::array<GpuMode, kMaxGpusPerNode> gpu_mode{};
  std::array<int32_t, kMaxGpusPerNode> gpu_memory_free_mib{};
  std::array<uint8_t, kMaxGpusPerNode> gpu_residents{};    // allocations on the GPU
  std::array<uint8_t, kMaxGpusPerNode> mig_used_slices{};  // memory slices of MIG instances
  std::array<uint8_t, kMaxGpusPerNode> mig_me{};           // +me instances (0 or 1)
  std::array<int32_t, kMaxGpusPerNode> dirty_owner{};      // kClean, a tenant, or kDirtyByMany
  // kMps GPUs: the tenant whose shares it serves (Demand::mps_tenant of its
  // residents, all equal), or kMpsTenants; -1 otherwise. Derived from the
  // allocations.
  std::array<int32_t, kMaxGpusPerNode> mps_tenant = NoMpsTenants();

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
// max_gpu_free_milli, gpus_fully_free, special_gpus) from the per-GPU
// arrays, for code that edits a copy of a node to ask "what if".
void RecomputeGpuTotals(Node& n);

// The node as it is with nothing on it (its spec): free, clean, ready,
// unreserved, every GPU healthy and no MIG mode or instances reported.
Node EmptyLike(const Node& n);

// Can GPU g of n take (one GPU of) demand d right now, ignoring CPU and
// memory of the node? Whole GPUs need an empty GPU; a share needs a GPU idle
// or in its mode with enough free compute and memory (an MPS share also a
// GPU whose MPS shares are its tenant's: Demand::mps_tenant); a MIG share
// needs a profile of the model and a free placement for it.
bool GpuFits(const Node& n, int g, const Demand& d);

// The first d.gpu_count GPUs of n (lowest index first) that GpuFits, or
// fewer when fewer fit.
GpuMask FirstFittingGpus(const Node& n, const Demand& d);

// For a kMig demand on GPU g: the profile index in the node's MIG table, or
// -1 when the model has no profile big enough.
int MigProfileFor(const Node& n, const Demand& d);

// Does `d` fit on `n` right now? Pure; O(1) thanks to the derived fields.
FitFailure CheckFit(const Node& n, const Demand& d);

// A GPU choice that CheckFit accepted: for a share, one GPU with enough free
// milli; for whole GPUs, gpu_count fully free GPUs; for CPU-only, none.
bool GpusSatisfy(const Node& n, const Demand& d, GpuMask gpus);

struct Allocation;

// What Allocate and Release do to one node, for "what if" copies: take the
// demand's CPU, memory and GPUs (recording a MIG placement in *a when given),
// or give an allocation's back.
void OccupyGpus(Node& n, const Demand& d, GpuMask gpus, Allocation* a);
void VacateGpus(Node& n, const Allocation& a);

struct Allocation {
  NodeIndex node = -1;
  GpuMask gpus = 0;
  Demand demand;
  int32_t owner = -1;      // tenant (for scrubbing); -1 = none
  int8_t mig_profile = -1; // MIG only
  uint8_t mig_start = 0;   // MIG only: first memory slice
  // Time-sliced and MPS shares: GPU memory its task was seen using beyond
  // demand.gpu_memory_mib (the peak, per GPU), charged against its GPU's
  // free memory like the booking (REQUIREMENTS' lessons: a task that uses
  // more GPU memory than it asked for). See Cluster::ChargeObservedMemory.
  int32_t observed_extra_mib = 0;
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

  // Places `d` on `node` using `gpus`, for tenant `owner` (-1: nobody in
  // particular). Requires CheckFit(node, d) == kNone, GpusSatisfy(node, d,
  // gpus), for an owned MPS share d.mps_tenant == owner, and, for an owner, that
  // no chosen GPU holds another tenant's unscrubbed memory (checked: a
  // violation is a bug, not bad input).
  // A MIG share gets the first free documented placement of its profile.
  AllocationId Allocate(NodeIndex node, const Demand& d, GpuMask gpus, int32_t owner = -1);
  // Zeroes the free memory of `gpus` on `node`: they are clean again.
  void Scrub(NodeIndex node, GpuMask gpus);
  // The GPUs of `gpus` that `owner` may not use before a scrub.
  GpuMask NeedsScrub(NodeIndex node, GpuMask gpus, int32_t owner) const;
  // Returns an allocation's resources to its node. Requires a live id.
  void Release(AllocationId id);
  // A share's task was seen using `used_mib` of GPU memory (per GPU): its
  // GPU's free memory is charged max(booked, used) from now on, the peak
  // (charging never shrinks while it runs) and never past the GPU's free
  // memory (a GPU is never booked below zero). Whole GPUs and MIG
  // instances are unaffected: their memory is theirs already. Returns
  // whether the charge grew. Requires a live id.
  bool ChargeObservedMemory(AllocationId id, int64_t used_mib);
  // Node lifecycle and reservations; each is a logged change.
  void SetCondition(NodeIndex i, NodeCondition c);
  // Moves an empty node to another pool (POOL-3 borrowing between pools).
  void SetPool(NodeIndex i, uint8_t pool);
  void SetReservation(NodeIndex i, int64_t job);  // -1 clears
  // EXEC-11: the node's unhealthy GPUs from now on (bits past its GPU count
  // are ignored).
  void SetGpuHealth(NodeIndex i, GpuMask unhealthy);
  // EXEC-7: GPU g of node i reported its MIG mode and existing instances
  // (Node::mig_existing). Requires a MIG-capable model when enabled and a
  // valid layout (checked by the caller: Engine::ReportMigLayout).
  void SetMigLayout(NodeIndex i, int g, bool enabled, uint64_t existing);
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

  // --- snapshots (src/engine/snapshot.h) ------------------------------------
  // Everything a Cluster holds but its change log, as plain data.
  struct Image {
    std::vector<Node> nodes;
    std::vector<std::string> names;  // per node
    // Every allocation slot by id; a free slot has node == -1 (its other
    // fields mean nothing).
    std::vector<Allocation> allocations;
    // The free slots, in reuse order (Allocate takes the back first).
    std::vector<AllocationId> free_allocation_ids;
  };
  // Read access for writing an Image without copying the cluster.
  const std::vector<std::string>& names() const { return names_; }
  const std::vector<Allocation>& allocation_slots() const { return allocations_; }
  const std::vector<AllocationId>& free_allocation_ids() const { return free_allocation_ids_; }
  // Rebuilds the cluster an Image describes: the same nodes, allocations
  // (same ids) and future allocation ids. Validates the image, since it may
  // come from a damaged file: node shapes (GPU count, model and its MIG
  // table and memory, enums in range), derived fields equal to what the
  // per-GPU arrays imply, every live allocation on an existing node's GPUs
  // with a valid MIG profile and start, per-node CPU, memory, residents and
  // allocation kinds equal to the sums over its allocations, and the free
  // list naming each free slot once. The error names the node or slot.
  // The change log starts empty, as for a new cluster: a reader of the old
  // cluster's log has nothing to resume (a fresh score index reads every
  // node anyway).
  static Result<Cluster> FromImage(Image image);

  // For tentative placements (Allocate, then Release in reverse order):
  // drops the slots with ids >= `slot_count`, which must all be free, and
  // their free-list entries, so that the slot table and free list are as
  // before the allocations that appended them (Allocate appends only when
  // no slot is free, so those entries are the bottom of the free list) and
  // trying leaves no trace but change-log entries.
  void TrimFreeSlots(size_t slot_count);

  // Counts `d` in (delta +1) or out of (-1) the node's per-kind allocation
  // counts (gpu_kind_count, gpu_kinds_present, cpu_only_residents), as
  // Allocate and Release do; for copies of nodes that play placements.
  static void CountKind(Node& n, const Demand& d, int delta);

 private:
  void NoteChange(NodeIndex i);
  void RederiveMpsTenant(NodeIndex i, int g, AllocationId leaving);

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
