#include "src/model/cluster.h"

#include <algorithm>
#include <array>
#include <bit>
#include <cmath>

#include "src/base/check.h"
#include "src/model/mig.h"

namespace gpupool {

const char* GpuModeName(GpuMode m) {
  switch (m) {
    case GpuMode::kIdle: return "idle";
    case GpuMode::kWhole: return "whole";
    case GpuMode::kTimeSlice: return "time-slice";
    case GpuMode::kMps: return "mps";
    case GpuMode::kMig: return "mig";
  }
  return "unknown";
}

namespace {

const MigTable* TableOf(const Node& n) { return n.mig_table == 0 ? nullptr : &MigTables()[n.mig_table - 1]; }

// The GPU mode a demand puts a GPU in.
GpuMode ModeFor(const Demand& d) {
  if (d.kind() != DemandKind::kGpuShare) return GpuMode::kWhole;
  switch (d.mode) {
    case ShareMode::kAny:
    case ShareMode::kTimeSlice: return GpuMode::kTimeSlice;
    case ShareMode::kMps: return GpuMode::kMps;
    case ShareMode::kMig: return GpuMode::kMig;
  }
  return GpuMode::kTimeSlice;
}

}  // namespace

int MigProfileFor(const Node& n, const Demand& d) {
  const MigTable* t = TableOf(n);
  if (!t) return -1;
  return SmallestProfile(*t, ComputeSlicesFor(d.gpu_milli, t->compute_slices), d.gpu_memory_mib);
}

bool GpuFits(const Node& n, int g, const Demand& d) {
  if (n.gpu_unhealthy >> g & 1) return false;
  const GpuMode want = ModeFor(d);
  if ((n.mig_reported >> g & 1) && (want == GpuMode::kMig) != static_cast<bool>(n.mig_enabled >> g & 1)) return false;
  if (d.kind() != DemandKind::kGpuShare) return n.gpu_residents[g] == 0;
  if (n.gpu_mode[g] != GpuMode::kIdle && n.gpu_mode[g] != want) return false;
  if (want == GpuMode::kMps && n.gpu_mode[g] == GpuMode::kMps &&
      (n.mps_tenant[g] != d.mps_tenant || n.mps_tenant[g] == kMpsTenants)) {
    return false;
  }
  if (want == GpuMode::kMig) {
    const int p = MigProfileFor(n, d);
    return p >= 0 && FindPlacementAmong(*TableOf(n), p, n.mig_used_slices[g], n.mig_me[g], n.mig_existing[g]).has_value();
  }
  return n.gpu_free_milli[g] >= d.gpu_milli && n.gpu_memory_free_mib[g] >= d.gpu_memory_mib;
}

Node EmptyLike(const Node& n) {
  Node e = n;
  e.cpu_milli_free = e.cpu_milli_total;
  e.memory_mib_free = e.memory_mib_total;
  for (int g = 0; g < e.gpu_count; ++g) {
    e.gpu_free_milli[g] = kMilliPerGpu;
    e.gpu_mode[g] = GpuMode::kIdle;
    e.gpu_memory_free_mib[g] = e.gpu_memory_mib;
    e.gpu_residents[g] = 0;
    e.mig_used_slices[g] = 0;
    e.mig_me[g] = 0;
    e.dirty_owner[g] = kClean;
    e.mps_tenant[g] = -1;
  }
  e.gpu_kind_count = {};
  e.gpu_kinds_present = 0;
  e.cpu_only_residents = 0;
  e.condition = NodeCondition::kReady;
  e.reserved_for = -1;
  // Health and the reported MIG mode and instances are not its spec: an
  // operator can change them (a repair, a GPU reset).
  e.gpu_unhealthy = 0;
  e.mig_reported = 0;
  e.mig_enabled = 0;
  e.mig_existing = {};
  RecomputeGpuTotals(e);
  return e;
}

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
      // The common case (FGD trace, time-slice shares without memory) needs
      // no look at each GPU; other modes and memory limits do.
      if (d.mode != ShareMode::kAny || d.gpu_memory_mib > 0 || n.special_gpus > 0) {
        bool any = false;
        for (int g = 0; g < n.gpu_count && !any; ++g) any = GpuFits(n, g, d);
        if (!any) return FitFailure::kGpuCapacity;
      }
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
    if ((gpus >> g & 1) && !GpuFits(n, g, d)) return false;
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
  if (spec.gpu_model != kNoGpuModel) {
    const GpuModel& model = Catalog::Builtin().Get(spec.gpu_model);
    n.gpu_memory_mib = static_cast<int32_t>(model.memory_mib);
    if (const MigTable* t = FindMigTable(model.name)) n.mig_table = static_cast<uint8_t>(1 + (t - MigTables().data()));
  }
  n = EmptyLike(n);
  nodes_.push_back(n);
  names_.push_back(std::move(spec.name));
  last_change_.push_back(0);
  gpu_milli_total_ += n.gpu_milli_total();
  return static_cast<NodeIndex>(nodes_.size() - 1);
}

GpuMask FirstFittingGpus(const Node& n, const Demand& d) {
  GpuMask gpus = 0;
  int taken = 0;
  for (int g = 0; g < n.gpu_count && taken < d.gpu_count; ++g) {
    if (GpuFits(n, g, d)) {
      gpus |= static_cast<GpuMask>(1u << g);
      ++taken;
    }
  }
  return gpus;
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
  uint8_t fully = 0, special = 0;
  for (int g = 0; g < n.gpu_count; ++g) {
    const int16_t f = n.gpu_free_milli[g];
    total += f;
    // A GPU in MIG mode by the node's report takes MIG shares only: shares
    // must look at it one by one, and it is never a free whole GPU.
    const bool mig_mode = n.mig_enabled >> g & 1;
    special += n.gpu_mode[g] == GpuMode::kMps || n.gpu_mode[g] == GpuMode::kMig || mig_mode;
    if (n.gpu_unhealthy >> g & 1) continue;  // takes no new work
    max_free = std::max(max_free, f);
    fully += f == kMilliPerGpu && n.gpu_residents[g] == 0 && !mig_mode;
  }
  n.gpu_milli_free_total = total;
  n.max_gpu_free_milli = max_free;
  n.gpus_fully_free = fully;
  n.special_gpus = special;
}

AllocationId Cluster::Allocate(NodeIndex i, const Demand& d, GpuMask gpus, int32_t owner) {
  GP_CHECK(i >= 0 && i < node_count()) << "node index " << i;
  Node& n = nodes_[i];
  GP_CHECK(CheckFit(n, d) == FitFailure::kNone) << "demand does not fit node " << names_[i];
  GP_CHECK(GpusSatisfy(n, d, gpus)) << "GPU mask " << gpus << " does not satisfy the demand on " << names_[i];
  GP_CHECK(owner < 0 || !(d.kind() == DemandKind::kGpuShare && d.mode == ShareMode::kMps) || d.mps_tenant == owner)
      << "an MPS share's mps_tenant " << d.mps_tenant << " is not its owner " << owner;
  GP_CHECK(NeedsScrub(i, gpus, owner) == 0) << "GPUs " << NeedsScrub(i, gpus, owner) << " of " << names_[i]
                                            << " hold another tenant's memory: scrub them first";
  Allocation a{i, gpus, d, owner, -1, 0};
  OccupyGpus(n, d, gpus, &a);
  CountKind(n, d, +1);
  gpu_milli_allocated_ += d.total_gpu_milli();

  AllocationId id;
  if (!free_allocation_ids_.empty()) {
    id = free_allocation_ids_.back();
    free_allocation_ids_.pop_back();
    allocations_[id] = a;
  } else {
    id = static_cast<AllocationId>(allocations_.size());
    allocations_.push_back(a);
  }
  ++live_allocations_;
  NoteChange(i);
  return id;
}

void OccupyGpus(Node& n, const Demand& d, GpuMask gpus, Allocation* a) {
  n.cpu_milli_free -= d.cpu_milli;
  n.memory_mib_free -= d.memory_mib;
  const GpuMode mode = ModeFor(d);
  for (int g = 0; g < n.gpu_count; ++g) {
    if (!(gpus >> g & 1)) continue;
    if (mode == GpuMode::kMig) {
      const MigTable& t = *TableOf(n);
      const int p = MigProfileFor(n, d);
      const uint8_t start = *FindPlacementAmong(t, p, n.mig_used_slices[g], n.mig_me[g], n.mig_existing[g]);
      if (a) {
        a->mig_profile = static_cast<int8_t>(p);
        a->mig_start = start;
      }
      n.mig_used_slices[g] |= SliceMask(t, p, start);
      n.mig_me[g] += t.profiles[p].media_extensions ? 1 : 0;
      n.gpu_memory_free_mib[g] -= t.profiles[p].memory_mib;
    } else {
      n.gpu_memory_free_mib[g] -= mode == GpuMode::kWhole ? n.gpu_memory_free_mib[g] : d.gpu_memory_mib;
    }
    n.gpu_free_milli[g] = static_cast<int16_t>(n.gpu_free_milli[g] - d.gpu_milli);
    n.gpu_mode[g] = mode;
    if (mode == GpuMode::kMps) n.mps_tenant[g] = d.mps_tenant;
    ++n.gpu_residents[g];
  }
  RecomputeGpuTotals(n);
}

void VacateGpus(Node& n, const Allocation& a) {
  n.cpu_milli_free += a.demand.cpu_milli;
  n.memory_mib_free += a.demand.memory_mib;
  for (int g = 0; g < n.gpu_count; ++g) {
    if (!(a.gpus >> g & 1)) continue;
    n.gpu_free_milli[g] = static_cast<int16_t>(n.gpu_free_milli[g] + a.demand.gpu_milli);
    if (a.mig_profile >= 0) {
      const MigTable& t = *TableOf(n);
      n.mig_used_slices[g] &= static_cast<uint8_t>(~SliceMask(t, a.mig_profile, a.mig_start));
      n.mig_me[g] -= t.profiles[a.mig_profile].media_extensions ? 1 : 0;
      n.gpu_memory_free_mib[g] += t.profiles[a.mig_profile].memory_mib;
    } else if (n.gpu_mode[g] == GpuMode::kWhole) {
      n.gpu_memory_free_mib[g] = n.gpu_memory_mib;
    } else {
      n.gpu_memory_free_mib[g] += a.demand.gpu_memory_mib + a.observed_extra_mib;
    }
    if (--n.gpu_residents[g] == 0) {
      n.gpu_mode[g] = GpuMode::kIdle;
      n.gpu_free_milli[g] = kMilliPerGpu;
      n.gpu_memory_free_mib[g] = n.gpu_memory_mib;
      n.mps_tenant[g] = -1;
    }
    // Its memory holds the owner's data until a scrub.
    if (a.owner >= 0) {
      n.dirty_owner[g] = n.dirty_owner[g] == kClean || n.dirty_owner[g] == a.owner ? a.owner : kDirtyByMany;
    }
  }
  RecomputeGpuTotals(n);
}

GpuMask Cluster::NeedsScrub(NodeIndex i, GpuMask gpus, int32_t owner) const {
  if (owner < 0) return 0;
  const Node& n = nodes_[i];
  GpuMask dirty = 0;
  for (int g = 0; g < n.gpu_count; ++g) {
    if ((gpus >> g & 1) && n.dirty_owner[g] != kClean && n.dirty_owner[g] != owner) {
      dirty |= static_cast<GpuMask>(1u << g);
    }
  }
  return dirty;
}

void Cluster::Scrub(NodeIndex i, GpuMask gpus) {
  GP_CHECK(i >= 0 && i < node_count()) << "node index " << i;
  for (int g = 0; g < nodes_[i].gpu_count; ++g) {
    if (gpus >> g & 1) nodes_[i].dirty_owner[g] = kClean;
  }
  NoteChange(i);
}

void Cluster::Release(AllocationId id) {
  GP_CHECK(id >= 0 && id < static_cast<AllocationId>(allocations_.size()) && allocations_[id].node >= 0)
      << "allocation " << id << " is not live";
  Allocation& a = allocations_[id];
  Node& n = nodes_[a.node];
  VacateGpus(n, a);
  CountKind(n, a.demand, -1);
  for (int g = 0; g < n.gpu_count; ++g) {
    if ((a.gpus >> g & 1) && n.mps_tenant[g] == kMpsTenants) RederiveMpsTenant(a.node, g, id);
  }
  gpu_milli_allocated_ -= a.demand.total_gpu_milli();
  NoteChange(a.node);
  a.node = -1;
  free_allocation_ids_.push_back(id);
  --live_allocations_;
}

bool Cluster::ChargeObservedMemory(AllocationId id, int64_t used_mib) {
  GP_CHECK(id >= 0 && id < static_cast<AllocationId>(allocations_.size()) && allocations_[id].node >= 0)
      << "allocation " << id << " is not live";
  Allocation& a = allocations_[id];
  Node& n = nodes_[a.node];
  if (a.demand.kind() != DemandKind::kGpuShare || a.mig_profile >= 0) return false;
  int64_t grow = used_mib - a.demand.gpu_memory_mib - a.observed_extra_mib;
  for (int g = 0; g < n.gpu_count; ++g) {
    if (a.gpus >> g & 1) grow = std::min<int64_t>(grow, n.gpu_memory_free_mib[g]);
  }
  if (grow <= 0) return false;
  a.observed_extra_mib += static_cast<int32_t>(grow);
  for (int g = 0; g < n.gpu_count; ++g) {
    if (a.gpus >> g & 1) n.gpu_memory_free_mib[g] -= static_cast<int32_t>(grow);
  }
  NoteChange(a.node);
  return true;
}

// A GPU shared by several tenants' MPS shares (a state from an older
// release) serves one tenant again once only that tenant's are left: the
// same that Cluster::FromImage derives, so that a restart changes nothing.
// Scans the allocations, which only such a GPU's releases pay for.
void Cluster::RederiveMpsTenant(NodeIndex i, int g, AllocationId leaving) {
  int32_t served = -1;
  for (size_t id = 0; id < allocations_.size(); ++id) {
    const Allocation& o = allocations_[id];
    if (static_cast<AllocationId>(id) == leaving || o.node != i || !(o.gpus >> g & 1)) continue;
    served = served == -1 || served == o.owner ? o.owner : kMpsTenants;
  }
  nodes_[i].mps_tenant[g] = nodes_[i].gpu_residents[g] == 0 ? -1 : served;
}

void Cluster::SetCondition(NodeIndex i, NodeCondition c) {
  GP_CHECK(i >= 0 && i < node_count()) << "node index " << i;
  nodes_[i].condition = c;
  NoteChange(i);
}

void Cluster::SetPool(NodeIndex i, uint8_t pool) {
  GP_CHECK(i >= 0 && i < node_count()) << "node index " << i;
  nodes_[i].pool = pool;
  NoteChange(i);
}

void Cluster::SetGpuHealth(NodeIndex i, GpuMask unhealthy) {
  GP_CHECK(i >= 0 && i < node_count()) << "node index " << i;
  Node& n = nodes_[i];
  n.gpu_unhealthy = static_cast<GpuMask>(unhealthy & ((1u << n.gpu_count) - 1));
  RecomputeGpuTotals(n);
  NoteChange(i);
}

void Cluster::SetMigLayout(NodeIndex i, int g, bool enabled, uint64_t existing) {
  GP_CHECK(i >= 0 && i < node_count() && g >= 0 && g < nodes_[i].gpu_count) << "node " << i << " GPU " << g;
  Node& n = nodes_[i];
  const GpuMask bit = static_cast<GpuMask>(1u << g);
  n.mig_reported |= bit;
  n.mig_enabled = enabled ? static_cast<GpuMask>(n.mig_enabled | bit) : static_cast<GpuMask>(n.mig_enabled & ~bit);
  n.mig_existing[g] = enabled ? existing : 0;
  RecomputeGpuTotals(n);
  NoteChange(i);
}

void Cluster::SetReservation(NodeIndex i, int64_t job) {
  GP_CHECK(i >= 0 && i < node_count()) << "node index " << i;
  nodes_[i].reserved_for = job;
  NoteChange(i);
}

Result<Cluster> Cluster::FromImage(Image image) {
  const size_t node_count = image.nodes.size();
  if (image.names.size() != node_count) {
    return InvalidArgument("cluster: " + std::to_string(node_count) + " nodes but " +
                           std::to_string(image.names.size()) + " names");
  }
  auto node_error = [&](size_t i, const std::string& why) {
    return InvalidArgument("cluster: node " + std::to_string(i) + " ('" + image.names[i] + "'): " + why);
  };
  const Catalog& catalog = Catalog::Builtin();
  for (size_t i = 0; i < node_count; ++i) {
    const Node& n = image.nodes[i];
    if (image.names[i].empty()) return InvalidArgument("cluster: node " + std::to_string(i) + " has no name");
    if (n.gpu_count > kMaxGpusPerNode) return node_error(i, "more than " + std::to_string(kMaxGpusPerNode) + " GPUs");
    if ((n.gpu_count > 0) != (n.gpu_model != kNoGpuModel)) return node_error(i, "GPU count and model disagree");
    int32_t memory = 0;
    uint8_t mig_table = 0;
    if (n.gpu_model != kNoGpuModel) {
      if (n.gpu_model >= catalog.size()) return node_error(i, "unknown GPU model " + std::to_string(n.gpu_model));
      const GpuModel& model = catalog.Get(n.gpu_model);
      memory = static_cast<int32_t>(model.memory_mib);
      if (const MigTable* t = FindMigTable(model.name)) mig_table = static_cast<uint8_t>(1 + (t - MigTables().data()));
    }
    if (n.gpu_memory_mib != memory || n.mig_table != mig_table) {
      return node_error(i, "GPU memory or MIG table does not match its GPU model");
    }
    if (n.pool >= kMaxPools) return node_error(i, "pool id " + std::to_string(n.pool) + " out of range");
    if (n.condition > NodeCondition::kRemoved) return node_error(i, "unknown condition");
    if (n.gpu_unhealthy >> n.gpu_count) return node_error(i, "an unhealthy GPU it does not have");
    if ((n.mig_reported >> n.gpu_count) || (n.mig_enabled & ~n.mig_reported) || (n.mig_enabled && !n.mig_table)) {
      return node_error(i, "a MIG mode it cannot have");
    }
    for (int g = 0; g < n.gpu_count; ++g) {
      if (n.mig_existing[g] == 0) continue;
      if (!(n.mig_enabled >> g & 1)) return node_error(i, "MIG instances on GPU " + std::to_string(g) + " without MIG mode");
      const MigTable& t = *TableOf(n);
      std::vector<std::pair<int, uint8_t>> layout;
      for (int s = 0; s < 8; ++s) {
        const int p = ExistingProfileAt(n.mig_existing[g], s);
        if (p >= static_cast<int>(t.profiles.size()) || (p >= 0 && s >= t.memory_slices)) {
          return node_error(i, "an unknown MIG instance on GPU " + std::to_string(g));
        }
        if (p >= 0) layout.emplace_back(p, static_cast<uint8_t>(s));
      }
      if (!IsValidLayout(t, layout)) return node_error(i, "an invalid MIG layout on GPU " + std::to_string(g));
    }
    for (int g = 0; g < n.gpu_count; ++g) {
      if (n.gpu_mode[g] > GpuMode::kMig) return node_error(i, "GPU " + std::to_string(g) + " in an unknown mode");
      if (n.dirty_owner[g] < kDirtyByMany) return node_error(i, "GPU " + std::to_string(g) + " has a bad scrub state");
      if ((n.gpu_mode[g] == GpuMode::kIdle) != (n.gpu_residents[g] == 0)) {
        return node_error(i, "GPU " + std::to_string(g) + " mode does not match its residents");
      }
    }
    Node derived = n;
    RecomputeGpuTotals(derived);
    int32_t kinds = 0;
    for (int32_t c : n.gpu_kind_count) kinds += c != 0;
    if (derived != n || kinds != n.gpu_kinds_present) return node_error(i, "derived GPU fields do not match its GPUs");
  }

  // Per node, what its live allocations add up to.
  struct Sums {
    int64_t cpu = 0, memory = 0;
    int32_t cpu_only = 0;
    std::array<int32_t, kMaxGpusPerNode + 1> kinds{};
    std::array<int32_t, kMaxGpusPerNode> residents{}, milli{};
    std::array<uint8_t, kMaxGpusPerNode> mig_slices{};
  };
  std::vector<Sums> sums(node_count);
  size_t free_slots = 0;
  int64_t allocated = 0;
  // Derived, not in the image: the tenant of each MPS GPU (from its
  // allocations' owners, which Allocate requires to be their mps_tenant).
  for (Node& n : image.nodes) {
    for (int g = 0; g < n.gpu_count; ++g) n.mps_tenant[g] = -1;
  }
  for (size_t id = 0; id < image.allocations.size(); ++id) {
    Allocation& a = image.allocations[id];
    const std::string where = "cluster: allocation " + std::to_string(id) + ": ";
    if (a.node == -1) {
      ++free_slots;
      continue;
    }
    if (a.node < 0 || static_cast<size_t>(a.node) >= node_count) {
      return InvalidArgument(where + "unknown node " + std::to_string(a.node));
    }
    const Node& n = image.nodes[a.node];
    const Demand& d = a.demand;
    if (d.gpu_count < 0 || d.gpu_count > n.gpu_count || d.mode > ShareMode::kMig ||
        (a.gpus >> n.gpu_count) != 0 || std::popcount(a.gpus) != d.gpu_count ||
        d.gpu_milli < 0 || d.gpu_milli > kMilliPerGpu) {
      return InvalidArgument(where + "its GPUs do not match its demand or node");
    }
    if (a.observed_extra_mib < 0 || (a.observed_extra_mib > 0 && (d.kind() != DemandKind::kGpuShare || a.mig_profile != -1))) {
      return InvalidArgument(where + "observed memory on an allocation that cannot have it");
    }
    if (a.mig_profile != -1) {
      if (n.mig_table == 0 || a.mig_profile < 0 ||
          static_cast<size_t>(a.mig_profile) >= MigTables()[n.mig_table - 1].profiles.size() ||
          a.mig_start >= MigTables()[n.mig_table - 1].memory_slices || d.gpu_count != 1) {
        return InvalidArgument(where + "bad MIG instance");
      }
    }
    if (d.kind() == DemandKind::kGpuShare && d.mode == ShareMode::kMps) {
      a.demand.mps_tenant = a.owner;
      for (int g = 0; g < n.gpu_count; ++g) {
        if (!(a.gpus >> g & 1)) continue;
        int32_t& served = image.nodes[a.node].mps_tenant[g];
        served = served == -1 || served == a.owner ? a.owner : kMpsTenants;  // several: from an older release
      }
    }
    Sums& sum = sums[a.node];
    sum.cpu += d.cpu_milli;
    sum.memory += d.memory_mib;
    const int kind = GpuKindOf(d);
    if (kind < 0) {
      ++sum.cpu_only;
    } else {
      ++sum.kinds[kind];
    }
    for (int g = 0; g < n.gpu_count; ++g) {
      if (!(a.gpus >> g & 1)) continue;
      ++sum.residents[g];
      sum.milli[g] += d.gpu_milli;
      if (a.mig_profile >= 0) {
        sum.mig_slices[g] |= SliceMask(MigTables()[n.mig_table - 1], a.mig_profile, a.mig_start);
      }
    }
    allocated += d.total_gpu_milli();
  }
  for (size_t i = 0; i < node_count; ++i) {
    const Node& n = image.nodes[i];
    const Sums& sum = sums[i];
    if (n.cpu_milli_free != n.cpu_milli_total - sum.cpu || n.memory_mib_free != n.memory_mib_total - sum.memory ||
        n.cpu_only_residents != sum.cpu_only || n.gpu_kind_count != sum.kinds) {
      return node_error(i, "free resources do not match its allocations");
    }
    for (int g = 0; g < n.gpu_count; ++g) {
      if (n.gpu_residents[g] != sum.residents[g] || n.gpu_free_milli[g] != kMilliPerGpu - sum.milli[g] ||
          n.mig_used_slices[g] != sum.mig_slices[g]) {
        return node_error(i, "GPU " + std::to_string(g) + " does not match its allocations");
      }
    }
  }
  if (image.free_allocation_ids.size() != free_slots) {
    return InvalidArgument("cluster: " + std::to_string(free_slots) + " free allocation slots but " +
                           std::to_string(image.free_allocation_ids.size()) + " listed free");
  }
  std::vector<bool> listed(image.allocations.size(), false);
  for (AllocationId id : image.free_allocation_ids) {
    if (id < 0 || static_cast<size_t>(id) >= image.allocations.size() || image.allocations[id].node != -1 ||
        listed[id]) {
      return InvalidArgument("cluster: free allocation id " + std::to_string(id) + " is not a free slot, or listed twice");
    }
    listed[id] = true;
  }

  Cluster c;
  c.nodes_ = std::move(image.nodes);
  c.names_ = std::move(image.names);
  c.allocations_ = std::move(image.allocations);
  c.free_allocation_ids_ = std::move(image.free_allocation_ids);
  c.live_allocations_ = static_cast<int>(c.allocations_.size() - free_slots);
  for (const Node& n : c.nodes_) c.gpu_milli_total_ += n.gpu_milli_total();
  c.gpu_milli_allocated_ = allocated;
  c.last_change_.assign(node_count, 0);
  return c;
}

void Cluster::TrimFreeSlots(size_t slot_count) {
  if (allocations_.size() <= slot_count) return;
  const size_t dropped = allocations_.size() - slot_count;
  for (size_t id = slot_count; id < allocations_.size(); ++id) {
    GP_CHECK(allocations_[id].node < 0) << "allocation " << id << " is live";
  }
  GP_CHECK(free_allocation_ids_.size() >= dropped) << "free list shorter than the free slots";
  for (size_t k = 0; k < dropped; ++k) {
    GP_CHECK(static_cast<size_t>(free_allocation_ids_[k]) >= slot_count) << "slot " << free_allocation_ids_[k];
  }
  free_allocation_ids_.erase(free_allocation_ids_.begin(),
                             free_allocation_ids_.begin() + static_cast<std::ptrdiff_t>(dropped));
  allocations_.resize(slot_count);
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
