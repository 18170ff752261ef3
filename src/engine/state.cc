#include "src/engine/state.h"

#include <algorithm>
#include <bit>
#include <map>
#include <string>
#include <vector>

#include "src/base/check.h"
#include "src/model/mig.h"

namespace gpupool {

Job& EngineState::job(JobId id) {
  auto it = jobs.find(id);
  GP_CHECK(it != jobs.end()) << "job " << id << " is not live";
  return it->second;
}

const Job& EngineState::job(JobId id) const {
  auto it = jobs.find(id);
  GP_CHECK(it != jobs.end()) << "job " << id << " is not live";
  return it->second;
}

const Job* EngineState::find_job(JobId id) const {
  auto it = jobs.find(id);
  return it == jobs.end() ? nullptr : &it->second;
}

int64_t EngineState::pool_ready_gpu_milli(PoolId p) const {
  return pool_totals[p].gpu_milli - pool_totals[p].unavailable_gpu_milli;
}

int64_t EngineState::idle_guarantees(PoolId p, TenantId except) const {
  int64_t idle = 0;
  for (const Tenant& t : tenants) {
    if (t.id != except) idle += t.pools[p].idle_guarantee_milli();
  }
  return idle;
}

PoolCapacity EngineState::Capacity(PoolId p) const {
  PoolCapacity c;
  int64_t reserved_nodes_free = 0, fragmented = 0;
  for (const Node& n : cluster.nodes()) {
    if (n.pool != p) continue;
    if (n.condition == NodeCondition::kRemoved) continue;
    c.total_milli += n.gpu_milli_total();
    if (n.condition != NodeCondition::kReady) continue;
    c.allocated_milli += n.gpu_milli_total() - n.gpu_milli_free_total;
    if (n.reserved_for >= 0) {
      reserved_nodes_free += n.gpu_milli_free_total;
      continue;
    }
    // Slivers of partly used GPUs, and free GPUs on a node left without CPU
    // or memory, cannot take a whole-GPU demand.
    if (n.cpu_milli_free <= 0 || n.memory_mib_free <= 0) {
      fragmented += n.gpu_milli_free_total;
    } else {
      fragmented += n.gpu_milli_free_total - int64_t{n.gpus_fully_free} * kMilliPerGpu;
    }
  }
  c.reserved_milli = reserved_nodes_free + idle_guarantees(p, -1);
  c.fragmented_milli = fragmented;
  int64_t ready_total = 0;
  for (const Node& n : cluster.nodes()) {
    if (n.pool == p && n.condition == NodeCondition::kReady) ready_total += n.gpu_milli_total();
  }
  c.available_milli = std::max<int64_t>(0, ready_total - c.allocated_milli - c.reserved_milli - c.fragmented_milli);
  return c;
}

void EngineState::UsageChanged(TenantPool& tp) {
  const double low = lending.threshold * static_cast<double>(tp.quota.guaranteed_milli);
  if (static_cast<double>(tp.usage.gpu_milli) < low) {
    if (!tp.usage.below_threshold_since) tp.usage.below_threshold_since = now;
  } else {
    tp.usage.below_threshold_since.reset();
  }
}

void EngineState::LabelNode(NodeIndex n, LabelMask labels, int delta) {
  if (labels == 0) return;
  auto& counts = node_label_counts[n];
  if (counts.empty()) counts.assign(64, 0);
  for (int b = 0; b < 64; ++b) {
    if (labels >> b & 1) counts[b] += delta;
  }
}

void EngineState::ForgetRecut(JobId job) {
  if (recut_moved.empty()) return;
  recut_moved.erase(job);
  std::erase_if(recut_moved, [job](const auto& entry) { return entry.second == job; });
}

void EngineState::Occupy(Job& j, const JobPlaced& e) {
  GP_CHECK(static_cast<int>(e.replicas.size()) == j.spec.replicas) << "job " << j.id;
  j.placements.clear();
  for (size_t i = 0; i < e.replicas.size(); ++i) {
    const PlacedReplica& r = e.replicas[i];
    Demand d = j.spec.replica_demand(static_cast<int>(i));
    d.reservation = j.id;
    d.allowed_pools = uint64_t{1} << e.pool;
    const AllocationId a = cluster.Allocate(r.node, d, r.gpus, j.spec.tenant);
    j.placements.push_back(ReplicaPlacement{r.node, r.gpus, a, static_cast<int32_t>(i)});
    LabelNode(r.node, j.spec.labels, +1);
  }
  j.next_replica_id = static_cast<int32_t>(e.replicas.size());
  TenantPool& tp = tenant_pool(j.spec.tenant, e.pool);
  tp.usage.gpu_milli += j.spec.total_gpu_milli();
  tp.usage.cpu_milli += j.spec.total_cpu_milli();
  tp.usage.memory_mib += j.spec.total_memory_mib();
  UsageChanged(tp);
  j.pool = e.pool;
  j.borrowed = e.borrowed;
  j.state = JobState::kRunning;
  j.started = now;
  if (!j.first_started) j.first_started = now;
  running[j.id] = &j;
  running_by_tenant_pool[{j.spec.tenant, j.pool}].insert({j.spec.priority, j.id});
  if (j.spec.deadline) running_deadlines.insert({ToMillis(*j.spec.deadline), j.id});
  j.idle_suspected = false;
  j.stopping = Job::Stop::kNone;
  j.resizes = 0;
  j.resharding_until = Instant{};
}

void EngineState::Release(Job& j) {
  for (const ReplicaPlacement& r : j.placements) {
    cluster.Release(r.allocation);
    LabelNode(r.node, j.spec.labels, -1);
  }
  j.placements.clear();
  TenantPool& tp = tenant_pool(j.spec.tenant, j.pool);
  tp.usage.gpu_milli -= j.spec.total_gpu_milli();
  tp.usage.cpu_milli -= j.spec.total_cpu_milli();
  tp.usage.memory_mib -= j.spec.total_memory_mib();
  tp.usage.exhausted_alerted = false;
  tp.usage.over_limit_milli =
      std::max<int64_t>(0, std::min(tp.usage.over_limit_milli, tp.usage.gpu_milli - tp.quota.elastic_limit_milli));
  UsageChanged(tp);
  running.erase(j.id);
  if (j.spec.deadline) running_deadlines.erase({ToMillis(*j.spec.deadline), j.id});
  auto it = running_by_tenant_pool.find({j.spec.tenant, j.pool});
  it->second.erase({j.spec.priority, j.id});
  if (it->second.empty()) running_by_tenant_pool.erase(it);
  ++capacity_epoch;
}

namespace {

struct ApplyVisitor {
  EngineState& s;

  void operator()(const PoolAdded& e) {
    GP_CHECK(e.pool.id == s.pools.size() && s.pools.size() < static_cast<size_t>(kMaxPools)) << "pool " << e.pool.id;
    s.pools.push_back(e.pool);
    s.pool_totals.emplace_back();
    s.pool_scaling.emplace_back();
    for (Tenant& t : s.tenants) t.pools.resize(s.pools.size());
  }
  void operator()(const NodeAdded& e) {
    auto added = s.cluster.AddNode(e.spec);
    GP_CHECK(added.has_value()) << (added ? "" : added.error().message);
    GP_CHECK(e.spec.pool < s.pools.size()) << "node " << e.spec.name << " in unknown pool";
    s.node_label_counts.emplace_back();
    s.node_places.push_back({e.region, e.zone, e.rack});
    auto& totals = s.pool_totals[e.spec.pool];
    totals.gpu_milli += int64_t{e.spec.gpu_count} * kMilliPerGpu;
    totals.cpu_milli += e.spec.cpu_milli;
    totals.memory_mib += e.spec.memory_mib;
    if (e.provisioned) {
      int32_t& requested = s.pool_scaling[e.spec.pool].requested_nodes;
      requested = std::max(0, requested - 1);
    }
    ++s.capacity_epoch;
  }
  void operator()(const TenantAdded& e) {
    GP_CHECK(e.tenant == static_cast<TenantId>(s.tenants.size())) << "tenant " << e.tenant;
    Tenant t;
    t.id = e.tenant;
    t.name = e.name;
    t.pools.resize(s.pools.size());
    s.tenants.push_back(std::move(t));
  }
  void operator()(const QuotaSet& e) {
    TenantPool& tp = s.tenant_pool(e.tenant, e.pool);
    tp.quota = e.quota;
    tp.usage.over_limit_milli = std::max<int64_t>(0, tp.usage.gpu_milli - tp.quota.elastic_limit_milli);
    if (tp.usage.lent_milli > tp.quota.guaranteed_milli || tp.quota.reserved) tp.usage.lent_milli = 0;
    tp.usage.exhausted_alerted = false;
    s.UsageChanged(tp);  // the lend threshold moved with the guarantee
    ++s.capacity_epoch;
  }
  void operator()(const JobSubmitted& e) {
    Job j;
    j.id = e.job;
    j.spec = e.spec;
    ScopeMpsShares(j.spec);  // derived: logs written before it existed replay the same
    j.submitted = s.now;
    j.queued_since = s.now;
    auto [it, inserted] = s.jobs.emplace(e.job, std::move(j));
    GP_CHECK(inserted) << "job " << e.job << " submitted twice";
    s.queue.Add(it->second);
    s.next_job_id = std::max(s.next_job_id, e.job + 1);
    Learn(it->second.spec);
  }
  // The learner sees every submitted job's replica demands, with the
  // cluster's totals for a rebuild of the target.
  void Learn(const JobSpec& spec) {
    Demand replicas[kLearnedReplicasPerJob];
    const int n = std::min(spec.replicas, kLearnedReplicasPerJob);
    for (int r = 0; r < n; ++r) replicas[r] = spec.replica_demand(r);
    int64_t cpu = 0, gpu = 0;
    for (const EngineState::PoolTotals& t : s.pool_totals) {
      cpu += t.cpu_milli;
      gpu += t.gpu_milli;
    }
    s.workload.Observe(std::span<const Demand>(replicas, static_cast<size_t>(std::max(n, 0))), s.now, cpu, gpu);
  }
  void operator()(const JobRejected& e) { s.next_job_id = std::max(s.next_job_id, e.job + 1); }
  void operator()(const JobPlaced& e) {
    Job& j = s.job(e.job);
    GP_CHECK(j.state == JobState::kPending) << "job " << e.job << " placed while " << JobStateName(j.state);
    s.queue.Remove(j);
    s.nominated.erase(QueueKeyOf(j));
    s.ForgetRecut(e.job);
    s.Occupy(j, e);
  }
  void operator()(const JobFinished& e) {
    Job& j = s.job(e.job);
    GP_CHECK(j.state == JobState::kRunning || j.state == JobState::kCheckpointing) << "job " << e.job;
    Detach(j);
    s.Release(j);
    s.ForgetRecut(e.job);
    s.jobs.erase(e.job);
  }
  void operator()(const JobCancelled& e) {
    Job& j = s.job(e.job);
    if (j.state == JobState::kPending) {
      s.queue.Remove(j);
      s.nominated.erase(QueueKeyOf(j));
    } else {
      Detach(j);
      s.Release(j);
    }
    s.ForgetRecut(e.job);
    s.jobs.erase(e.job);
  }
  void operator()(const PreemptionStarted& e) {
    Job& v = s.job(e.victim);
    GP_CHECK(v.state == JobState::kRunning) << "victim " << e.victim << " is " << JobStateName(v.state);
    v.preempted_by = e.preemptor;
    v.stopping = Job::Stop::kPreempt;
    if (Job* p = Find(e.preemptor)) s.nominated.insert(QueueKeyOf(*p));
    if (e.checkpoint) {
      v.state = JobState::kCheckpointing;
      if (Job* p = Find(e.preemptor)) ++p->victims_pending;
    }
  }
  // A running (or checkpointing) job stops and queues again.
  void Requeue(Job& v) {
    GP_CHECK(v.state == JobState::kRunning || v.state == JobState::kCheckpointing) << "job " << v.id;
    Detach(v);
    s.Release(v);
    v.state = JobState::kPending;
    v.queued_since = s.now;
    v.preempted_by = -1;
    v.stopping = Job::Stop::kNone;
    if (v.spec.elastic()) v.spec.replicas = v.spec.min_replicas;  // starts again as its smallest gang
    s.queue.Add(v);
  }
  void operator()(const JobPreempted& e) {
    Job& v = s.job(e.victim);
    Requeue(v);
    ++v.preemptions;
  }
  void operator()(const JobIdleSuspected& e) {
    Job& j = s.job(e.job);
    j.idle_suspected = true;
    j.idle_since = s.now;
  }
  void operator()(const JobIdleRecovered& e) { s.job(e.job).idle_suspected = false; }
  void operator()(const ReclaimStarted& e) {
    Job& j = s.job(e.job);
    GP_CHECK(j.state == JobState::kRunning) << "job " << e.job << " reclaimed while " << JobStateName(j.state);
    j.stopping = e.reason == ReclaimReason::kIdle ? Job::Stop::kReclaimIdle : Job::Stop::kEvictDeadline;
    if (e.checkpoint) j.state = JobState::kCheckpointing;
  }
  void operator()(const JobReclaimed& e) {
    Job& j = s.job(e.job);
    GP_CHECK(j.stopping == Job::Stop::kReclaimIdle || j.stopping == Job::Stop::kEvictDeadline) << "job " << e.job;
    Detach(j);
    s.Release(j);
    s.ForgetRecut(e.job);
    s.jobs.erase(e.job);
  }
  void operator()(const NodeDown& e) {
    s.hot_nodes.erase(e.node);  // judged afresh from its reports when it is back
    const Node& n = s.cluster.node(e.node);
    GP_CHECK(n.condition != NodeCondition::kDown) << "node " << e.node << " is down already";
    GP_CHECK(n.condition != NodeCondition::kRemoved) << "node " << e.node << " was removed";
    if (n.condition == NodeCondition::kReady) s.pool_totals[n.pool].unavailable_gpu_milli += n.gpu_milli_total();
    s.cluster.SetCondition(e.node, NodeCondition::kDown);
    ++s.capacity_epoch;
  }
  void operator()(const JobInterrupted& e) {
    Job& v = s.job(e.job);
    Requeue(v);
    ++v.interruptions;
  }
  void operator()(const NodeUp& e) {
    const Node& n = s.cluster.node(e.node);
    GP_CHECK(n.condition == NodeCondition::kDown) << "node " << e.node << " is not down";
    s.cluster.Scrub(e.node, static_cast<GpuMask>((1u << n.gpu_count) - 1));
    if (s.draining.contains(e.node) || s.cordons.contains(e.node)) {  // back, and still leaving or cordoned
      s.cluster.SetCondition(e.node, NodeCondition::kCordoned);
      return;
    }
    s.pool_totals[n.pool].unavailable_gpu_milli -= n.gpu_milli_total();
    s.cluster.SetCondition(e.node, NodeCondition::kReady);
    ++s.capacity_epoch;
  }
  void operator()(const ScaleOutRequested& e) {
    GP_CHECK(e.pool < s.pools.size() && e.nodes > 0) << "scale-out of pool " << int{e.pool};
    s.pool_scaling[e.pool].requested_nodes += e.nodes;
  }
  void operator()(const ScaleOutFailed& e) {
    GP_CHECK(e.pool < s.pools.size()) << "scale-out of pool " << int{e.pool};
    int32_t& requested = s.pool_scaling[e.pool].requested_nodes;
    requested = std::max(0, requested - e.nodes);
  }
  void operator()(const NodeDrainStarted& e) {
    const Node& n = s.cluster.node(e.node);
    const bool hot = s.hot_nodes.erase(e.node) > 0;  // the drain keeps the hotspot's cordon
    GP_CHECK(n.condition == NodeCondition::kReady || n.condition == NodeCondition::kDown ||
             ((hot || s.cordons.contains(e.node)) && n.condition == NodeCondition::kCordoned))
        << "node " << e.node << " drained while cordoned or removed";
    GP_CHECK(n.reserved_for < 0) << "node " << e.node << " drained while held for job " << n.reserved_for;
    if (n.condition == NodeCondition::kReady) {
      s.pool_totals[n.pool].unavailable_gpu_milli += n.gpu_milli_total();
      s.cluster.SetCondition(e.node, NodeCondition::kCordoned);
    }
    s.draining.insert(e.node);
  }
  void operator()(const NodeRemoved& e) {
    const Node& n = s.cluster.node(e.node);
    GP_CHECK(s.draining.contains(e.node) || s.cordons.contains(e.node))
        << "node " << e.node << " removed without a drain or an operator's cordon";
    GP_CHECK(n.gpu_milli_free_total == n.gpu_milli_total() && n.cpu_milli_free == n.cpu_milli_total &&
             n.gpu_kinds_present == 0 && n.cpu_only_residents == 0)
        << "node " << e.node << " removed while running work";
    auto& totals = s.pool_totals[n.pool];
    totals.gpu_milli -= n.gpu_milli_total();
    totals.unavailable_gpu_milli -= n.gpu_milli_total();
    totals.cpu_milli -= n.cpu_milli_total;
    totals.memory_mib -= n.memory_mib_total;
    s.draining.erase(e.node);
    s.cordons.erase(e.node);
    s.hot_nodes.erase(e.node);
    s.lent_nodes.erase(e.node);  // an operator's removal of a borrowed node: it leaves from where it is
    s.cluster.SetCondition(e.node, NodeCondition::kRemoved);
    ++s.removed_nodes;
  }
  void operator()(const JobResized& e) {
    Job& j = s.job(e.job);
    GP_CHECK(j.state == JobState::kRunning && j.spec.elastic()) << "job " << e.job << " resized while "
                                                                << JobStateName(j.state);
    TenantPool& tp = s.tenant_pool(j.spec.tenant, j.pool);
    tp.usage.gpu_milli -= j.spec.total_gpu_milli();
    tp.usage.cpu_milli -= j.spec.total_cpu_milli();
    tp.usage.memory_mib -= j.spec.total_memory_mib();
    std::vector<ReplicaPlacement> kept;
    size_t next_removed = 0;
    for (size_t i = 0; i < j.placements.size(); ++i) {
      const ReplicaPlacement& r = j.placements[i];
      if (next_removed < e.removed.size() && e.removed[next_removed] == static_cast<int32_t>(i)) {
        ++next_removed;
        s.cluster.Release(r.allocation);
        s.LabelNode(r.node, j.spec.labels, -1);
      } else {
        kept.push_back(r);
      }
    }
    GP_CHECK(next_removed == e.removed.size()) << "job " << e.job << " resize removes unknown replicas";
    for (const PlacedReplica& r : e.added) {
      Demand d = j.spec.demand;
      d.reservation = j.id;
      d.allowed_pools = uint64_t{1} << j.pool;
      const AllocationId a = s.cluster.Allocate(r.node, d, r.gpus, j.spec.tenant);
      kept.push_back(ReplicaPlacement{r.node, r.gpus, a, j.next_replica_id++});
      s.LabelNode(r.node, j.spec.labels, +1);
    }
    j.placements = std::move(kept);
    j.spec.replicas = static_cast<int32_t>(j.placements.size());
    GP_CHECK(j.spec.replicas >= j.spec.min_replicas && j.spec.replicas <= j.spec.max_replicas)
        << "job " << e.job << " resized to " << j.spec.replicas;
    tp.usage.gpu_milli += j.spec.total_gpu_milli();
    tp.usage.cpu_milli += j.spec.total_cpu_milli();
    tp.usage.memory_mib += j.spec.total_memory_mib();
    if (!e.removed.empty()) {
      tp.usage.exhausted_alerted = false;
      tp.usage.over_limit_milli = std::max<int64_t>(
          0, std::min(tp.usage.over_limit_milli, tp.usage.gpu_milli - tp.quota.elastic_limit_milli));
      ++s.capacity_epoch;
    }
    s.UsageChanged(tp);
    j.borrowed = e.borrowed;
    ++j.resizes;
    j.resharding_until = s.now + e.reshard;
  }
  void operator()(const HotspotDetected& e) {
    const Node& n = s.cluster.node(e.node);
    GP_CHECK(n.condition == NodeCondition::kReady && !s.hot_nodes.contains(e.node))
        << "node " << e.node << " found hot while not ready or hot already";
    s.pool_totals[n.pool].unavailable_gpu_milli += n.gpu_milli_total();
    s.cluster.SetCondition(e.node, NodeCondition::kCordoned);
    s.hot_nodes.insert(e.node);
  }
  void operator()(const GpuHealthChanged& e) {
    s.cluster.SetGpuHealth(e.node, e.unhealthy);
    ++s.capacity_epoch;  // a GPU back may unblock waiting jobs
  }
  void operator()(const MigLayoutReported& e) {
    const Node& n = s.cluster.node(e.node);
    uint64_t existing = 0;
    for (const MigSlot& m : e.instances) {
      GP_CHECK(n.mig_table > 0) << "MIG instances on node " << e.node << " without MIG";
      const int p = FindProfile(MigTables()[n.mig_table - 1], m.profile);
      GP_CHECK(p >= 0 && m.start >= 0 && m.start < 8) << "MIG instance " << m.profile << "@" << m.start;
      existing |= uint64_t(p + 1) << (8 * m.start);
    }
    s.cluster.SetMigLayout(e.node, e.gpu, e.mig_enabled, existing);
    ++s.capacity_epoch;  // what the GPU takes changed
  }
  void operator()(const MigLayoutMismatch&) {}  // a fact for operators; the state keeps the plan
  // Issue 19: an operator's cordon; see EngineState::cordons.
  EngineState::OperatorCordon& Cordon(NodeIndex node, const std::string& actor, const std::string& reason) {
    const Node& n = s.cluster.node(node);
    GP_CHECK(n.condition != NodeCondition::kRemoved) << "node " << node << " cordoned after its removal";
    GP_CHECK(n.reserved_for < 0) << "node " << node << " cordoned while held for job " << n.reserved_for;
    auto [it, fresh] = s.cordons.try_emplace(node);
    if (fresh) {
      it->second.since = s.now;
      if (n.condition == NodeCondition::kReady) {
        s.pool_totals[n.pool].unavailable_gpu_milli += n.gpu_milli_total();
        s.cluster.SetCondition(node, NodeCondition::kCordoned);
      }
    }
    it->second.actor = actor;
    it->second.reason = reason;
    return it->second;
  }
  void operator()(const NodeCordoned& e) {
    GP_CHECK(!s.cordons.contains(e.node)) << "node " << e.node << " cordoned twice";
    Cordon(e.node, e.actor, e.reason);
  }
  void operator()(const NodeUncordoned& e) {
    GP_CHECK(s.cordons.erase(e.node) > 0) << "node " << e.node << " uncordoned while not cordoned";
    const Node& n = s.cluster.node(e.node);
    // A hotspot's or a scale-in's cordon stays until its own end.
    if (n.condition != NodeCondition::kCordoned || s.hot_nodes.contains(e.node) || s.draining.contains(e.node)) return;
    s.pool_totals[n.pool].unavailable_gpu_milli -= n.gpu_milli_total();
    s.cluster.SetCondition(e.node, NodeCondition::kReady);
    ++s.capacity_epoch;
  }
  void operator()(const NodeDrainRequested& e) {
    GP_CHECK(e.timeout >= Duration(0)) << "node " << e.node << " drained with a negative timeout";
    EngineState::OperatorCordon& c = Cordon(e.node, e.actor, e.reason);
    GP_CHECK(!c.draining) << "node " << e.node << " drained twice";
    c.draining = true;
    c.drain_deadline = s.now + e.timeout;
  }
  void operator()(const NodeDrained& e) {
    auto it = s.cordons.find(e.node);
    GP_CHECK(it != s.cordons.end() && it->second.draining) << "node " << e.node << " drained without a drain";
    it->second.draining = false;
  }
  void operator()(const NodeRemovalRequested& e) { Cordon(e.node, e.actor, e.reason); }
  void operator()(const TaskMemoryObserved& e) {
    const Job& j = s.job(e.job);
    GP_CHECK(e.replica >= 0 && e.replica < static_cast<int32_t>(j.placements.size())) << "job " << e.job;
    s.cluster.ChargeObservedMemory(j.placements[e.replica].allocation, e.used_mib);
  }
  void operator()(const HotspotCleared& e) {
    GP_CHECK(s.hot_nodes.erase(e.node) > 0) << "node " << e.node << " is not hot";
    const Node& n = s.cluster.node(e.node);
    GP_CHECK(n.condition == NodeCondition::kCordoned) << "hot node " << e.node << " is not cordoned";
    if (s.cordons.contains(e.node)) return;  // the operator's cordon stays
    s.pool_totals[n.pool].unavailable_gpu_milli -= n.gpu_milli_total();
    s.cluster.SetCondition(e.node, NodeCondition::kReady);
    ++s.capacity_epoch;
  }
  void MoveTotals(const Node& n, PoolId from, PoolId to, bool unavailable) {
    auto& a = s.pool_totals[from];
    auto& b = s.pool_totals[to];
    a.gpu_milli -= n.gpu_milli_total();
    a.cpu_milli -= n.cpu_milli_total;
    a.memory_mib -= n.memory_mib_total;
    b.gpu_milli += n.gpu_milli_total();
    b.cpu_milli += n.cpu_milli_total;
    b.memory_mib += n.memory_mib_total;
    if (unavailable) a.unavailable_gpu_milli -= n.gpu_milli_total();
  }
  void operator()(const NodeLent& e) {
    const Node& n = s.cluster.node(e.node);
    GP_CHECK(e.to < s.pools.size() && e.to != n.pool) << "node " << e.node << " lent to pool " << int{e.to};
    GP_CHECK(n.condition == NodeCondition::kReady && n.reserved_for < 0 && !s.lent_nodes.contains(e.node) &&
             n.gpu_milli_free_total == n.gpu_milli_total() && n.cpu_milli_free == n.cpu_milli_total &&
             n.gpu_kinds_present == 0 && n.cpu_only_residents == 0)
        << "node " << e.node << " lent while not ready, held, lent or busy";
    s.lent_nodes[e.node] = n.pool;
    MoveTotals(n, n.pool, e.to, false);
    s.cluster.SetPool(e.node, static_cast<uint8_t>(e.to));
    ++s.capacity_epoch;
  }
  void operator()(const NodeReturned& e) {
    auto it = s.lent_nodes.find(e.node);
    GP_CHECK(it != s.lent_nodes.end() && s.draining.contains(e.node)) << "node " << e.node << " returned unlent";
    const Node& n = s.cluster.node(e.node);
    GP_CHECK(n.gpu_milli_free_total == n.gpu_milli_total() && n.cpu_milli_free == n.cpu_milli_total &&
             n.gpu_kinds_present == 0 && n.cpu_only_residents == 0)
        << "node " << e.node << " returned while running work";
    const PoolId home = it->second;
    const bool down = n.condition == NodeCondition::kDown;
    const bool cordoned = s.cordons.contains(e.node);  // home, and still cordoned by an operator
    MoveTotals(n, n.pool, home, true);
    if (down || cordoned) s.pool_totals[home].unavailable_gpu_milli += n.gpu_milli_total();
    s.lent_nodes.erase(it);
    s.draining.erase(e.node);
    s.cluster.SetPool(e.node, static_cast<uint8_t>(home));
    if (!down && !cordoned) s.cluster.SetCondition(e.node, NodeCondition::kReady);
    ++s.capacity_epoch;
  }
  void operator()(const RegionsSet& e) {
    s.regions = e.policy;
    ++s.capacity_epoch;  // waiting work may now go elsewhere
  }
  void operator()(const MigrationStarted& e) {
    GP_CHECK(s.job(e.job).state == JobState::kRunning) << "job " << e.job << " migrates while not running";
  }
  void operator()(const WarmPoolSized& e) {
    GP_CHECK(e.pool < s.pools.size() && e.nodes >= 0) << "warm pool of pool " << int{e.pool};
    s.pool_scaling[e.pool].warm_nodes = e.nodes;
  }
  void operator()(const QuotaLent& e) {
    TenantPool& tp = s.tenant_pool(e.tenant, e.pool);
    tp.usage.lent_milli += e.milli;
    GP_CHECK(tp.usage.lent_milli <= tp.quota.guaranteed_milli);
    ++s.capacity_epoch;
  }
  void operator()(const QuotaRecalled& e) {
    TenantPool& tp = s.tenant_pool(e.tenant, e.pool);
    tp.usage.lent_milli -= e.milli;
    GP_CHECK(tp.usage.lent_milli >= 0);
    // The window starts again: lending needs another full window of low use.
    if (tp.usage.below_threshold_since) tp.usage.below_threshold_since = s.now;
    ++s.capacity_epoch;
  }
  void operator()(const QuotaExhausted& e) { s.tenant_pool(e.tenant, e.pool).usage.exhausted_alerted = true; }
  void operator()(const NodesReserved& e) {
    GP_CHECK(!s.reservations.contains(e.job)) << "job " << e.job << " already holds a reservation";
    for (NodeIndex n : e.nodes) {
      GP_CHECK(s.cluster.node(n).reserved_for < 0) << "node " << n << " reserved twice";
      s.cluster.SetReservation(n, e.job);
    }
    s.reservations[e.job] = e.nodes;
  }
  void operator()(const GpusScrubbed& e) { s.cluster.Scrub(e.node, e.gpus); }
  void operator()(const MigRecutStarted& e) {
    const Job& j = s.job(e.job);
    GP_CHECK(j.state == JobState::kPending) << "re-cut for job " << e.job << " while " << JobStateName(j.state);
    GP_CHECK(!e.moved.empty()) << "re-cut for job " << e.job << " moves nothing";
    for (JobId m : e.moved) {
      GP_CHECK(s.job(m).state == JobState::kRunning) << "re-cut moves job " << m << " while "
                                                      << JobStateName(s.job(m).state);
      s.recut_moved[m] = e.job;
    }
  }
  void operator()(const ReservationReleased& e) {
    auto it = s.reservations.find(e.job);
    GP_CHECK(it != s.reservations.end()) << "job " << e.job << " holds no reservation";
    for (NodeIndex n : it->second) s.cluster.SetReservation(n, -1);
    s.reservations.erase(it);
    ++s.capacity_epoch;
  }

  Job* Find(JobId id) {
    auto it = s.jobs.find(id);
    return it == s.jobs.end() ? nullptr : &it->second;
  }
  // A checkpointing victim that leaves (finishes, is cancelled or
  // preempted) no longer holds up its preemptor.
  void Detach(Job& v) {
    if (v.state == JobState::kCheckpointing && v.preempted_by >= 0) {
      if (Job* p = Find(v.preempted_by)) --p->victims_pending;
    }
  }
};

}  // namespace

void EngineState::Apply(const Event& e) {
  GP_CHECK(e.seq == last_seq + 1) << "event " << e.seq << " after " << last_seq;
  GP_CHECK(e.at >= now) << "event " << e.seq << " goes back in time";
  last_seq = e.seq;
  now = e.at;
  std::visit(ApplyVisitor{*this}, e.body);
}

namespace {

Status Broken(const std::string& what) { return FailedPrecondition("invariant broken: " + what); }

// GPU milli per tenant and pool, as the running jobs hold it.
using UsageTable = std::vector<std::vector<int64_t>>;

// Pending jobs hold nothing; running ones are placed whole, in the running
// set, on their allocations; the queue, the running set and the cluster
// agree with them. Fills `gpu` from the running jobs.
Status CheckJobs(const EngineState& s, UsageTable& gpu) {
  int64_t allocated = 0;
  size_t pending = 0;
  for (const auto& [id, j] : s.jobs) {
    if (j.state == JobState::kPending) {
      ++pending;
      if (!j.placements.empty()) return Broken("pending job " + std::to_string(id) + " holds resources");
      continue;
    }
    if (static_cast<int>(j.placements.size()) != j.spec.replicas) {
      return Broken("running job " + std::to_string(id) + " has " + std::to_string(j.placements.size()) +
                    " replicas placed of " + std::to_string(j.spec.replicas));
    }
    if (!s.running.contains(id)) return Broken("running job " + std::to_string(id) + " missing from the running set");
    for (const ReplicaPlacement& r : j.placements) {
      const Allocation& a = s.cluster.allocation(r.allocation);
      if (a.node != r.node || a.gpus != r.gpus) return Broken("job " + std::to_string(id) + " allocation mismatch");
    }
    gpu[j.spec.tenant][j.pool] += j.spec.total_gpu_milli();
    allocated += j.spec.total_gpu_milli();
  }
  if (pending != s.queue.size()) {
    return Broken(std::to_string(pending) + " pending jobs but " + std::to_string(s.queue.size()) + " queued");
  }
  if (s.running.size() + pending != s.jobs.size()) return Broken("live jobs neither pending nor running");
  if (allocated != s.cluster.gpu_milli_allocated()) {
    return Broken("jobs hold " + std::to_string(allocated) + " GPU milli, the cluster " +
                  std::to_string(s.cluster.gpu_milli_allocated()));
  }
  return {};
}

// Each tenant's usage is what its jobs hold, within its elastic limit, and
// it lends no more than its guarantee.
Status CheckTenantUsage(const EngineState& s, const UsageTable& gpu) {
  for (const Tenant& t : s.tenants) {
    for (size_t p = 0; p < s.pools.size(); ++p) {
      const TenantPool& tp = t.pools[p];
      if (tp.usage.gpu_milli != gpu[t.id][p]) {
        return Broken("tenant " + t.name + " usage " + std::to_string(tp.usage.gpu_milli) + " in pool " +
                      std::to_string(p) + " but its jobs hold " + std::to_string(gpu[t.id][p]));
      }
      if (tp.usage.gpu_milli > tp.quota.elastic_limit_milli + tp.usage.over_limit_milli) {
        return Broken("tenant " + t.name + " uses " + std::to_string(tp.usage.gpu_milli) +
                      " above its elastic limit " + std::to_string(tp.quota.elastic_limit_milli) + " in pool " +
                      std::to_string(p));
      }
      if (tp.usage.lent_milli < 0 || tp.usage.lent_milli > tp.quota.guaranteed_milli) {
        return Broken("tenant " + t.name + " lends " + std::to_string(tp.usage.lent_milli));
      }
    }
  }
  return {};
}

// A re-cut entry names a live moved job and a pending beneficiary.
Status CheckRecutEntries(const EngineState& s) {
  for (const auto& [moved, beneficiary] : s.recut_moved) {
    const Job* m = s.find_job(moved);
    const Job* b = s.find_job(beneficiary);
    if (!m || !b || b->state != JobState::kPending) {
      return Broken("re-cut entry " + std::to_string(moved) + " -> " + std::to_string(beneficiary) + " is stale");
    }
  }
  return {};
}

// No GPU, CPU or memory over-allocated; a held node belongs to its hold.
Status CheckNodeCapacity(const EngineState& s) {
  for (NodeIndex i = 0; i < s.cluster.node_count(); ++i) {
    const Node& n = s.cluster.node(i);
    for (int g = 0; g < n.gpu_count; ++g) {
      if (n.gpu_free_milli[g] < 0 || n.gpu_free_milli[g] > kMilliPerGpu) {
        return Broken("node " + s.cluster.node_name(i) + " GPU " + std::to_string(g) + " over-allocated");
      }
    }
    if (n.cpu_milli_free < 0 || n.memory_mib_free < 0) return Broken("node " + s.cluster.node_name(i) + " overcommitted");
    if (n.reserved_for >= 0) {
      auto it = s.reservations.find(n.reserved_for);
      if (it == s.reservations.end() || std::find(it->second.begin(), it->second.end(), i) == it->second.end()) {
        return Broken("node " + s.cluster.node_name(i) + " reserved for an unknown hold");
      }
    }
  }
  return {};
}

// The MIG instances of running jobs, by (node, GPU).
using MigLayouts = std::map<std::pair<NodeIndex, int>, std::vector<std::pair<int, uint8_t>>>;

// EXEC-8: an MPS GPU serves the shares of one tenant, the one the node
// records. Collects the running jobs' MIG instances into `layouts`.
Status CheckMpsTenants(const EngineState& s, MigLayouts& layouts) {
  for (const auto& [id, j] : s.running) {
    for (const ReplicaPlacement& r : j->placements) {
      const Allocation& a = s.cluster.allocation(r.allocation);
      if (a.demand.kind() == DemandKind::kGpuShare && a.demand.mode == ShareMode::kMps) {
        const int g = std::countr_zero(static_cast<unsigned>(a.gpus));
        const int32_t served = s.cluster.node(a.node).mps_tenant[g];
        if (served != j->spec.tenant && served != kMpsTenants) {
          return Broken("node " + s.cluster.node_name(a.node) + " GPU " + std::to_string(g) +
                        " serves MPS shares of more than one tenant");
        }
      }
      if (a.mig_profile >= 0) {
        layouts[{a.node, std::countr_zero(static_cast<unsigned>(a.gpus))}].emplace_back(a.mig_profile, a.mig_start);
      }
    }
  }
  return {};
}

// No GPU memory overcommitted. PART-2: every GPU's MIG instances form a
// layout the hardware accepts and match the node's used slices.
Status CheckGpuMemoryAndMig(const EngineState& s, const MigLayouts& layouts) {
  const std::vector<std::pair<int, uint8_t>> none;
  for (NodeIndex i = 0; i < s.cluster.node_count(); ++i) {
    const Node& n = s.cluster.node(i);
    auto gpu_of = [&](int g) { return "node " + s.cluster.node_name(i) + " GPU " + std::to_string(g); };
    for (int g = 0; g < n.gpu_count; ++g) {
      if (n.gpu_memory_free_mib[g] < 0) return Broken(gpu_of(g) + " memory overcommitted");
    }
    if (n.mig_table == 0) continue;
    const MigTable& t = MigTables()[n.mig_table - 1];
    for (int g = 0; g < n.gpu_count; ++g) {
      auto it = layouts.find({i, g});
      const auto& layout = it == layouts.end() ? none : it->second;
      uint8_t used = 0;
      for (const auto& [p, start] : layout) used |= SliceMask(t, p, start);
      if (!IsValidLayout(t, layout)) return Broken(gpu_of(g) + " has an invalid MIG layout");
      if (used != n.mig_used_slices[g]) {
        return Broken(gpu_of(g) + " MIG slices do not match its instances");
      }
    }
  }
  return {};
}

}  // namespace

Status CheckInvariants(const EngineState& s) {
  UsageTable gpu(s.tenants.size(), std::vector<int64_t>(s.pools.size(), 0));
  GP_TRY(CheckJobs(s, gpu));
  GP_TRY(CheckTenantUsage(s, gpu));
  GP_TRY(CheckRecutEntries(s));
  GP_TRY(CheckNodeCapacity(s));
  MigLayouts layouts;
  GP_TRY(CheckMpsTenants(s, layouts));
  return CheckGpuMemoryAndMig(s, layouts);
}

Status CheckPlacedOnScrubbedGpus(const EngineState& s, const JobPlaced& e) {
  const Job* j = s.find_job(e.job);
  if (!j) return FailedPrecondition("invariant broken: placed job " + std::to_string(e.job) + " is unknown");
  for (const PlacedReplica& r : e.replicas) {
    const Node& n = s.cluster.node(r.node);
    for (GpuMask m = r.gpus; m != 0; m &= m - 1) {
      const int g = std::countr_zero(m);
      const int32_t dirty = n.dirty_owner[g];
      if (dirty != kClean && dirty != j->spec.tenant) {
        return FailedPrecondition(
            "invariant broken: job " + std::to_string(e.job) + " of tenant " + std::to_string(j->spec.tenant) +
            " handed node " + s.cluster.node_name(r.node) + " GPU " + std::to_string(g) + " left unscrubbed by " +
            (dirty == kDirtyByMany ? std::string("several tenants") : "tenant " + std::to_string(dirty)));
      }
    }
  }
  return {};
}

}  // namespace gpupool
