// The pending jobs, per tenant, in queue order (QUOTA-2):
//   priority (high first), deadline (earliest first; none last), submit
//   time, job id
// Jobs with identical placement needs (demand, gang size, affinity) form a
// group; when one job of a group cannot be placed, no other job of the group
// can be placed in the same pass, so a pass skips the whole group. Each
// tenant keeps its groups ordered by their first job.
//
// All containers are ordered: iteration is deterministic.
#pragma once

#include <compare>
#include <cstdint>
#include <map>
#include <set>
#include <vector>

#include "src/model/job.h"

namespace gpupool {

struct QueueKey {
  int32_t neg_priority = 0;
  int64_t deadline_ms = INT64_MAX;
  int64_t submitted_ms = 0;
  JobId job = -1;
  friend auto operator<=>(const QueueKey&, const QueueKey&) = default;
};
QueueKey QueueKeyOf(const Job& j);

struct GroupKey {
  int64_t cpu_milli, memory_mib;
  int32_t gpu_count, gpu_milli;
  GpuModelMask models;
  uint64_t pools;
  uint16_t requirement;
  int32_t replicas;
  LabelMask affinity, anti_affinity;
  uint8_t mode;
  int32_t gpu_memory_mib;
  uint64_t stages;  // a fingerprint of a pipeline's stages; 0 for other jobs
  friend auto operator<=>(const GroupKey&, const GroupKey&) = default;
};
GroupKey GroupKeyOf(const JobSpec& s);

class JobQueue {
 public:
  struct Group {
    std::set<QueueKey> jobs;
    uint64_t blocked_epoch = UINT64_MAX;  // see Engine: skipped while the capacity epoch is unchanged
  };
  struct TenantQueue {
    std::map<GroupKey, Group> groups;
    std::set<std::pair<QueueKey, GroupKey>> heads;  // each group's first job
    size_t size = 0;
  };

  void Add(const Job& j);
  void Remove(const Job& j);
  size_t size() const { return size_; }
  // Tenants with at least one pending job, ascending.
  const std::set<TenantId>& tenants() const { return tenants_; }
  // Requires a tenant with pending jobs (one of tenants()).
  TenantQueue& tenant(TenantId t);
  const TenantQueue* find_tenant(TenantId t) const;

 private:
  std::map<TenantId, TenantQueue> by_tenant_;
  std::set<TenantId> tenants_;
  size_t size_ = 0;
};

}  // namespace gpupool
