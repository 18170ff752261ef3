#include "src/model/cluster.h"

#include <algorithm>
#include <bit>

#include "src/base/check.h"

namespace gpupool {

const char* FitFailureName(FitFailure f) {
  switch (f) {
    case FitFailure::kNone: return "fits";
    case FitFailure::kUnavailable: return "node not ready";
    case FitFailure::kPool: return "pool not allowed";
    case FitFailure::kReserved: return "reserved for another job";
    case FitFailure::kGpuModel: return "GPU model not allowed";
    case FitFailure::kGpuCapacity: return "not enough free GPU";
    case FitFailure::kCpu: return "not enough free CPU";
    case FitFailure::kMemory: return "not enough free memory";
    case FitFailure::kFiltered: return "does not meet the job's requirements";
  }
  return "unknown";
}

FitFailure CheckFit(const Node& n, const Demand& d) {
  if (n.condition != NodeCondition::kReady) return FitFailure::kUnavailable;
  if (!(d.allowed_pools >> n.pool & 1)) return FitFailure::kPool;
  if (n.reserved_for >= 0 && n.reserved_for != d.reservation) return FitFailure::kReserved;
  if (d.gpu_count > 0) {
    if (n.gpu_model == kNoGpuModel || !(d.allowed_models >> n.gpu_model & 1)) return FitFailure::kGpuModel;
    if (d.gpu_milli < kMilliPerGpu) {
      if (n.max_gpu_free_milli < d.gpu_milli) return FitFailure::kGpuCapacity;
    } else if (n.gpus_fully_free < d.gpu_count) {
      return FitFailure::kGpuCapacity;
    }
  }
  if (n.cpu_milli_free < d.cpu_milli) return FitFailure::kCpu;
  if (n.memory_mib_free < d.memory_mib) return FitFailure::kMemory;
  return FitFailure::kNone;
}

bool GpusSatisfy(const Node& n, const Demand& d, GpuMask gpus) {
  if (gpus >> n.gpu_count) return false;  // a GPU the node does not have
  if (std::popcount(gpus) != d.gpu_count) return false;
  for (int g = 0; g < n.gpu_count; ++g) {
    if ((gpus >> g & 1) && n.gpu_free_milli[g] < d.gpu_milli) return false;
  }
  return true;
}

Result<NodeIndex> Cluster::AddNode(NodeSpec spec) {
  const std::string where = "node '" + spec.name + "': ";
  if (spec.name.empty()) return InvalidArgument("node name is empty");
  if (spec.cpu_milli < 0) return InvalidArgument(where + "cpu_milli must not be negative");
  if (spec.memory_mib < 0) return InvalidArgument(where + "memory_mib must not be negative");
  if (spec.gpu_count < 0 || spec.gpu_count > kMaxGpusPerNode) {
    return InvalidArgument(where + "gpu count must be between 0 and " + std::to_string(kMaxGpusPerNode));
  }
  if ((spec.gpu_count > 0) != (spec.gpu_model != kNoGpuModel)) {
    return InvalidArgument(where + "a node has a GPU model if and only if it has GPUs");
  }
  if (spec.pool >= kMaxPools) return InvalidArgument(where + "pool id must be below " + std::to_string(kMaxPools));
  Node n;
  n.cpu_milli_total = n.cpu_milli_free = spec.cpu_milli;
  n.memory_mib_total = n.memory_mib_free = spec.memory_mib;
  n.gpu_model = spec.gpu_model;
  n.gpu_count = static_cast<uint8_t>(spec.gpu_count);
  n.pool = spec.pool;
  n.attr_class = spec.attr_class;
  for (int g = 0; g < spec.gpu_count; ++g) n.gpu_free_milli[g] = kMilliPerGpu;
  RecomputeGpuTotals(n);
  nodes_.push_back(n);
  names_.push_back(std::move(spec.name));
  last_change_.push_back(0);
  gpu_milli_total_ += n.gpu_milli_total();
  return static_cast<NodeIndex>(nodes_.size() - 1);
}

void Cluster::CountKind(Node& n, const Demand& d, int delta) {
  const int kind = GpuKindOf(d);
  if (kind < 0) {
    n.cpu_only_residents += delta;
    return;
  }
  int32_t& count = n.gpu_kind_count[kind];
  if (count == 0 && delta > 0) ++n.gpu_kinds_present;
  count += delta;
  if (count == 0 && delta < 0) --n.gpu_kinds_present;
}

void RecomputeGpuTotals(Node& n) {
  int32_t total = 0;
  int16_t max_free = 0;
  uint8_t fully = 0;
  for (int g = 0; g < n.gpu_count; ++g) {
    const int16_t f = n.gpu_free_milli[g];
    total += f;
    max_free = std::max(max_free, f);
    fully += f == kMilliPerGpu;
  }
  n.gpu_milli_free_total = total;
  n.max_gpu_free_milli = max_free;
  n.gpus_fully_free = fully;
}

AllocationId Cluster::Allocate(NodeIndex i, const Demand& d, GpuMask gpus) {
  GP_CHECK(i >= 0 && i < node_count()) << "node index " << i;
  Node& n = nodes_[i];
  GP_CHECK(CheckFit(n, d) == FitFailure::kNone) << "demand does not fit node " << names_[i];
  GP_CHECK(GpusSatisfy(n, d, gpus)) << "GPU mask " << gpus << " does not satisfy the demand on " << names_[i];
  n.cpu_milli_free -= d.cpu_milli;
  n.memory_mib_free -= d.memory_mib;
  for (int g = 0; g < n.gpu_count; ++g) {
    if (gpus >> g & 1) n.gpu_free_milli[g] = static_cast<int16_t>(n.gpu_free_milli[g] - d.gpu_milli);
  }
  RecomputeGpuTotals(n);
  CountKind(n, d, +1);
  gpu_milli_allocated_ += d.total_gpu_milli();

  AllocationId id;
  if (!free_allocation_ids_.empty()) {
    id = free_allocation_ids_.back();
    free_allocation_ids_.pop_back();
    allocations_[id] = Allocation{i, gpus, d};
  } else {
    id = static_cast<AllocationId>(allocations_.size());
    allocations_.push_back(Allocation{i, gpus, d});
  }
  ++live_allocations_;
  NoteChange(i);
  return id;
}

void Cluster::Release(AllocationId id) {
  GP_CHECK(id >= 0 && id < static_cast<AllocationId>(allocations_.size()) && allocations_[id].node >= 0)
      << "allocation " << id << " is not live";
  Allocation& a = allocations_[id];
  Node& n = nodes_[a.node];
  n.cpu_milli_free += a.demand.cpu_milli;
  n.memory_mib_free += a.demand.memory_mib;
  for (int g = 0; g < n.gpu_count; ++g) {
    if (a.gpus >> g & 1) n.gpu_free_milli[g] = static_cast<int16_t>(n.gpu_free_milli[g] + a.demand.gpu_milli);
  }
  RecomputeGpuTotals(n);
  CountKind(n, a.demand, -1);
  gpu_milli_allocated_ -= a.demand.total_gpu_milli();
  NoteChange(a.node);
  a.node = -1;
  free_allocation_ids_.push_back(id);
  --live_allocations_;
}

void Cluster::SetCondition(NodeIndex i, NodeCondition c) {
  GP_CHECK(i >= 0 && i < node_count()) << "node index " << i;
  nodes_[i].condition = c;
  NoteChange(i);
}

void Cluster::SetReservation(NodeIndex i, int64_t job) {
  GP_CHECK(i >= 0 && i < node_count()) << "node index " << i;
  nodes_[i].reserved_for = job;
  NoteChange(i);
}

void Cluster::NoteChange(NodeIndex i) {
  const size_t keep = std::max<size_t>(4096, 4 * nodes_.size());
  if (change_log_.size() >= 2 * keep) {
    const size_t drop = change_log_.size() - keep;
    change_log_.erase(change_log_.begin(), change_log_.begin() + static_cast<std::ptrdiff_t>(drop));
    log_base_ += drop;
  }
  last_change_[i] = log_base_ + change_log_.size();
  change_log_.push_back(i);
}

}  // namespace gpupool
