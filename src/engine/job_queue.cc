#include "src/engine/job_queue.h"

#include "src/base/check.h"

namespace gpupool {

QueueKey QueueKeyOf(const Job& j) {
  return QueueKey{-j.spec.priority, j.spec.deadline ? ToMillis(*j.spec.deadline) : INT64_MAX, ToMillis(j.submitted),
                  j.id};
}

GroupKey GroupKeyOf(const JobSpec& s) {
  const Demand& d = s.demand;
  uint64_t stages = 0;
  for (const Demand& st : s.stages) {
    for (uint64_t v : {static_cast<uint64_t>(st.cpu_milli), static_cast<uint64_t>(st.memory_mib),
                       static_cast<uint64_t>(st.gpu_count) << 32 | static_cast<uint32_t>(st.gpu_milli),
                       static_cast<uint64_t>(st.mode) << 32 | static_cast<uint32_t>(st.gpu_memory_mib)}) {
      stages = (stages ^ v) * 0x100000001b3ULL + 1;
    }
  }
  return GroupKey{d.cpu_milli,   d.memory_mib, d.gpu_count,  d.gpu_milli,     d.allowed_models,
                  d.allowed_pools, d.requirement, s.replicas, s.affinity,     s.anti_affinity,
                  static_cast<uint8_t>(d.mode), d.gpu_memory_mib, stages};
}

void JobQueue::Add(const Job& j) {
  const QueueKey key = QueueKeyOf(j);
  const GroupKey gk = GroupKeyOf(j.spec);
  TenantQueue& tq = by_tenant_[j.spec.tenant];
  Group& g = tq.groups[gk];
  // A new member may be able to preempt for itself: look at the group again.
  g.blocked_epoch = UINT64_MAX;
  if (!g.jobs.empty()) {
    if (key < *g.jobs.begin()) {
      tq.heads.erase({*g.jobs.begin(), gk});
      tq.heads.insert({key, gk});
    }
  } else {
    tq.heads.insert({key, gk});
  }
  GP_CHECK(g.jobs.insert(key).second) << "job " << j.id << " queued twice";
  ++tq.size;
  ++size_;
  tenants_.insert(j.spec.tenant);
}

void JobQueue::Remove(const Job& j) {
  const QueueKey key = QueueKeyOf(j);
  const GroupKey gk = GroupKeyOf(j.spec);
  auto tit = by_tenant_.find(j.spec.tenant);
  GP_CHECK(tit != by_tenant_.end()) << "job " << j.id << " not queued";
  TenantQueue& tq = tit->second;
  auto git = tq.groups.find(gk);
  GP_CHECK(git != tq.groups.end()) << "job " << j.id << " not queued";
  Group& g = git->second;
  const bool was_head = *g.jobs.begin() == key;
  GP_CHECK(g.jobs.erase(key) == 1) << "job " << j.id << " not queued";
  if (was_head) {
    tq.heads.erase({key, gk});
    if (!g.jobs.empty()) tq.heads.insert({*g.jobs.begin(), gk});
  }
  if (g.jobs.empty()) tq.groups.erase(git);
  --tq.size;
  --size_;
  if (tq.size == 0) {
    by_tenant_.erase(tit);
    tenants_.erase(j.spec.tenant);
  }
}

JobQueue::TenantQueue& JobQueue::tenant(TenantId t) {
  auto it = by_tenant_.find(t);
  GP_CHECK(it != by_tenant_.end()) << "tenant " << t << " has no pending jobs";
  return it->second;
}

const JobQueue::TenantQueue* JobQueue::find_tenant(TenantId t) const {
  auto it = by_tenant_.find(t);
  return it == by_tenant_.end() ? nullptr : &it->second;
}

}  // namespace gpupool
