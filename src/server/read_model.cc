#include "src/server/read_model.h"

#include <xxhash.h>

#include <cstring>

#include "src/base/bytes.h"
#include "src/model/gpu_catalog.h"

namespace gpupool {
namespace {

constexpr uint32_t kMagic = 0x47505252;  // "GPRR"
// 2: jobs carry their task; 3: the region table set at runtime, the
// nodes' hotspots, elastic jobs' bounds and lent nodes' home pools, after
// the jobs (a version 2 snapshot still loads: it has none of them); 4: the
// container fields of tasks that have any away from their defaults, at the
// end (a version 3 snapshot loads with the defaults); 5: why each job last
// stopped; 6: the same sections sealed by a checksum, the XXH3-64 of every
// byte before it in the last 8 bytes (versions 2 to 5 load unchecked); 7:
// GPU usage accounting (src/server/usage.h) and each job's usage, before the
// checksum (a version 2 to 6 snapshot loads with none: SeedUsage); 8: the
// nodes' cordons, an operator's and a scale-in's (issue 19), after the
// accounting (an earlier snapshot loads with none).
constexpr uint32_t kVersion = 8;
constexpr uint32_t kFirstChecksummedVersion = 6;
constexpr size_t kChecksumBytes = 8;

uint64_t Checksum(std::string_view bytes) { return XXH3_64bits(bytes.data(), bytes.size()); }

void PutDemand(ByteWriter& w, const Demand& d) {
  w.Put(d.cpu_milli);
  w.Put(d.memory_mib);
  w.Put(d.gpu_count);
  w.Put(d.gpu_milli);
  w.Put(d.allowed_models);
  w.Put(d.allowed_pools);
  w.Put(d.requirement);
  w.Put(d.reservation);
  w.Put(d.mode);
  w.Put(d.gpu_memory_mib);
}

Demand GetDemand(ByteReader& r) {
  Demand d;
  d.cpu_milli = r.Get<int64_t>();
  d.memory_mib = r.Get<int64_t>();
  d.gpu_count = r.Get<int32_t>();
  d.gpu_milli = r.Get<int32_t>();
  d.allowed_models = r.Get<GpuModelMask>();
  d.allowed_pools = r.Get<uint64_t>();
  d.requirement = r.Get<uint16_t>();
  d.reservation = r.Get<int64_t>();
  d.mode = r.Get<ShareMode>();
  d.gpu_memory_mib = r.Get<int32_t>();
  return d;
}

void PutSpec(ByteWriter& w, const JobSpec& s) {
  w.PutString(s.name);
  w.Put(s.tenant);
  w.Put(s.kind);
  w.Put(s.priority);
  w.Put<uint8_t>(s.deadline.has_value());
  w.Put<int64_t>(s.deadline ? ToMillis(*s.deadline) : 0);
  w.Put(s.replicas);
  PutDemand(w, s.demand);
  w.Put<uint64_t>(s.stages.size());
  for (const Demand& d : s.stages) PutDemand(w, d);
  w.Put<uint64_t>(s.pools.size());
  for (PoolId p : s.pools) w.Put(p);
  w.Put<uint8_t>(s.auto_sharing);
  w.Put<uint8_t>(s.expected_duration.has_value());
  w.Put<int64_t>(s.expected_duration ? ToMillis(*s.expected_duration) : 0);
  w.Put<uint8_t>(s.checkpointable);
  w.Put<int64_t>(ToMillis(s.checkpoint_interval));
  w.Put<int64_t>(ToMillis(s.checkpoint_duration));
  w.Put(s.labels);
  w.Put(s.affinity);
  w.Put(s.anti_affinity);
  w.Put<uint64_t>(s.task.command.size());
  for (const std::string& a : s.task.command) w.PutString(a);
  w.Put<uint64_t>(s.task.env.size());
  for (const auto& [k, v] : s.task.env) {
    w.PutString(k);
    w.PutString(v);
  }
  w.PutString(s.task.working_dir);
  w.Put(s.task.checkpoint_signal);
  w.Put<int64_t>(ToMillis(s.task.checkpoint_timeout));
  w.Put<int64_t>(ToMillis(s.task.stop_grace));
}

JobSpec GetSpec(ByteReader& r) {
  JobSpec s;
  s.name = r.GetString();
  s.tenant = r.Get<TenantId>();
  s.kind = r.Get<JobKind>();
  s.priority = r.Get<int32_t>();
  const bool has_deadline = r.Get<uint8_t>();
  const int64_t deadline = r.Get<int64_t>();
  if (has_deadline) s.deadline = InstantFromMillis(deadline);
  s.replicas = r.Get<int32_t>();
  s.demand = GetDemand(r);
  const uint64_t stages = r.GetCount(8);
  for (uint64_t i = 0; i < stages && !r.failed(); ++i) s.stages.push_back(GetDemand(r));
  const uint64_t pools = r.GetCount(1);
  for (uint64_t i = 0; i < pools && !r.failed(); ++i) s.pools.push_back(r.Get<PoolId>());
  s.auto_sharing = r.Get<uint8_t>();
  const bool has_expected = r.Get<uint8_t>();
  const int64_t expected = r.Get<int64_t>();
  if (has_expected) s.expected_duration = Duration(expected);
  s.checkpointable = r.Get<uint8_t>();
  s.checkpoint_interval = Duration(r.Get<int64_t>());
  s.checkpoint_duration = Duration(r.Get<int64_t>());
  s.labels = r.Get<LabelMask>();
  s.affinity = r.Get<LabelMask>();
  s.anti_affinity = r.Get<LabelMask>();
  const uint64_t args = r.GetCount(8);
  for (uint64_t i = 0; i < args && !r.failed(); ++i) s.task.command.push_back(r.GetString());
  const uint64_t env = r.GetCount(16);
  for (uint64_t i = 0; i < env && !r.failed(); ++i) {
    std::string k = r.GetString();
    s.task.env.emplace_back(std::move(k), r.GetString());
  }
  s.task.working_dir = r.GetString();
  s.task.checkpoint_signal = r.Get<int32_t>();
  s.task.checkpoint_timeout = Duration(r.Get<int64_t>());
  s.task.stop_grace = Duration(r.Get<int64_t>());
  return s;
}

}  // namespace

const JobRecord* ReadModel::job(JobId id) const {
  if (id < 1 || id > static_cast<JobId>(jobs_.size())) return nullptr;
  const JobRecord& j = jobs_[id - 1];
  return j.id == id ? &j : nullptr;
}

JobRecord* ReadModel::mutable_job(JobId id) { return const_cast<JobRecord*>(job(id)); }

std::optional<TenantId> ReadModel::tenant_id(const std::string& name) const {
  auto it = tenant_ids_.find(name);
  if (it == tenant_ids_.end()) return std::nullopt;
  return it->second;
}

std::optional<NodeIndex> ReadModel::node_id(const std::string& name) const {
  auto it = node_ids_.find(name);
  if (it == node_ids_.end()) return std::nullopt;
  return it->second;
}

void ReadModel::Apply(const Event& e) {
  last_seq_ = e.seq;
  if (usage_seeded_) {
    usage_.StartSeeded(e.at);
    usage_seeded_ = false;
  }
  std::visit([&](const auto& body) { On(body, e.at); }, e.body);
}

JobRecord& ReadModel::NewJob(JobId id, const JobSpec& spec, Instant at) {
  if (static_cast<size_t>(id) > jobs_.size()) jobs_.resize(static_cast<size_t>(id));
  JobRecord& j = jobs_[id - 1];
  j = JobRecord{};
  j.id = id;
  j.spec = spec;
  j.submitted = at;
  jobs_by_tenant_[spec.tenant].push_back(id);
  return j;
}

void ReadModel::End(JobId id, JobState s, Instant at) {
  if (JobRecord* j = mutable_job(id)) {
    j->state = s;
    j->ended = at;
    j->has_ended = true;
  }
}

JobRecord* ReadModel::Requeue(JobId id) {
  JobRecord* j = mutable_job(id);
  if (j) {
    j->state = JobState::kPending;
    j->placements.clear();
    if (j->spec.elastic()) j->spec.replicas = j->spec.min_replicas;  // as the engine requeues it
  }
  return j;
}

int64_t ReadModel::HeldMemoryMib(const JobRecord& j) const {
  int64_t sum = 0;
  for (size_t i = 0; i < j.placements.size(); ++i) {
    const NodeIndex n = j.placements[i].node;
    if (n < 0 || static_cast<size_t>(n) >= nodes_.size()) continue;
    const GpuModelId model = nodes_[n].spec.gpu_model;
    const int64_t gpu_mib = model < Catalog::Builtin().size() ? Catalog::Builtin().Get(model).memory_mib : 0;
    const Demand d = i < j.spec.stages.size() || j.spec.stages.empty() ? j.spec.replica_demand(static_cast<int>(i))
                                                                       : j.spec.demand;
    switch (d.kind()) {
      case DemandKind::kCpuOnly: break;
      case DemandKind::kWholeGpus: sum += int64_t{d.gpu_count} * gpu_mib; break;
      case DemandKind::kGpuShare:
        sum += d.gpu_memory_mib > 0 ? d.gpu_memory_mib : gpu_mib * d.gpu_milli / kMilliPerGpu;
        break;
    }
  }
  return sum;
}

void ReadModel::HoldGpus(JobRecord& j, Instant at) {
  JobUsage& u = j.usage;
  const int64_t milli = j.spec.total_gpu_milli(), memory = HeldMemoryMib(j);
  u.milli_ms = u.MilliMsAt(at);
  u.memory_mib_ms = u.MemoryMibMsAt(at);
  u.since = at;
  usage_.Hold(j.spec.tenant, j.pool, milli - u.held_milli, memory - u.held_memory_mib, at);
  u.held_milli = milli;
  u.held_memory_mib = memory;
}

void ReadModel::ReleaseGpus(JobId id, Instant at) {
  JobRecord* j = mutable_job(id);
  if (!j || (j->usage.held_milli == 0 && j->usage.held_memory_mib == 0)) return;
  JobUsage& u = j->usage;
  u.milli_ms = u.MilliMsAt(at);
  u.memory_mib_ms = u.MemoryMibMsAt(at);
  u.since = at;
  usage_.Hold(j->spec.tenant, j->pool, -u.held_milli, -u.held_memory_mib, at);
  u.held_milli = 0;
  u.held_memory_mib = 0;
}

NodeRecord* ReadModel::mutable_node(NodeIndex n) {
  return n >= 0 && static_cast<size_t>(n) < nodes_.size() ? &nodes_[n] : nullptr;
}

void ReadModel::On(const PoolAdded& b, Instant) {
  pools_.push_back(b.pool);
  for (auto& q : quotas_) q.resize(pools_.size());
  usage_.Resize(tenant_names_.size(), pools_.size());
}

void ReadModel::On(const NodeAdded& b, Instant) {
  node_ids_[b.spec.name] = static_cast<NodeIndex>(nodes_.size());
  nodes_.push_back(NodeRecord{b.spec, b.region, b.zone, b.rack});
}

void ReadModel::On(const TenantAdded& b, Instant) {
  tenant_ids_[b.name] = b.tenant;
  if (static_cast<size_t>(b.tenant) >= tenant_names_.size()) tenant_names_.resize(b.tenant + 1);
  tenant_names_[b.tenant] = b.name;
  quotas_.resize(tenant_names_.size());
  quotas_[b.tenant].resize(pools_.size());
  usage_.Resize(tenant_names_.size(), pools_.size());
}

void ReadModel::On(const QuotaSet& b, Instant at) {
  if (static_cast<size_t>(b.tenant) < quotas_.size() && b.pool < quotas_[b.tenant].size()) {
    quotas_[b.tenant][b.pool] = b.quota;
  }
  usage_.SetQuota(b.tenant, b.pool, b.quota, at);
}

void ReadModel::On(const QuotaLent& b, Instant at) { usage_.Lend(b.tenant, b.pool, b.milli, at); }
void ReadModel::On(const QuotaRecalled& b, Instant at) { usage_.Lend(b.tenant, b.pool, -b.milli, at); }

void ReadModel::On(const JobSubmitted& b, Instant at) { NewJob(b.job, b.spec, at); }

void ReadModel::On(const JobRejected& b, Instant at) {
  JobRecord& j = NewJob(b.job, b.spec, at);
  j.state = JobState::kRejected;
  j.reason = b.reason;
  j.ended = at;
  j.has_ended = true;
}

void ReadModel::On(const JobPlaced& b, Instant at) {
  if (JobRecord* j = mutable_job(b.job)) {
    if (!j->has_started) usage_.CountStart(j->spec.tenant, b.pool, at);
    j->state = JobState::kRunning;
    j->started = at;
    j->has_started = true;
    j->pool = b.pool;
    j->borrowed = b.borrowed;
    j->placements = b.replicas;
    HoldGpus(*j, at);
  }
}

void ReadModel::On(const JobFinished& b, Instant at) {
  ReleaseGpus(b.job, at);
  End(b.job, b.succeeded ? JobState::kSucceeded : JobState::kFailed, at);
  if (JobRecord* j = mutable_job(b.job); j && !b.reason.empty()) j->reason = b.reason;
}

void ReadModel::On(const JobCancelled& b, Instant at) {
  ReleaseGpus(b.job, at);
  End(b.job, JobState::kCancelled, at);
}

void ReadModel::On(const PreemptionStarted& b, Instant at) {
  JobRecord* j = mutable_job(b.victim);
  if (!j) return;
  if (b.checkpoint) j->state = JobState::kCheckpointing;
  j->last_stop = JobStop{JobStopCause::kPreempted, PreemptReasonName(b.reason), at, b.preemptor};
}

void ReadModel::On(const JobPreempted& b, Instant at) {
  ReleaseGpus(b.victim, at);
  if (JobRecord* j = Requeue(b.victim)) ++j->preemptions;
}

void ReadModel::On(const ReclaimStarted& b, Instant at) {
  JobRecord* j = mutable_job(b.job);
  if (!j) return;
  if (b.checkpoint) j->state = JobState::kCheckpointing;
  j->last_stop = JobStop{JobStopCause::kReclaimed, ReclaimReasonName(b.reason), at, -1};
}

void ReadModel::On(const JobReclaimed& b, Instant at) {
  ReleaseGpus(b.job, at);
  End(b.job, JobState::kEvicted, at);
}

void ReadModel::On(const JobInterrupted& b, Instant at) {
  ReleaseGpus(b.job, at);
  JobRecord* j = Requeue(b.job);
  if (!j) return;
  ++j->interruptions;
  const std::string node =
      b.node >= 0 && static_cast<size_t>(b.node) < nodes_.size() ? nodes_[b.node].spec.name : std::to_string(b.node);
  const bool removing = b.node >= 0 && static_cast<size_t>(b.node) < nodes_.size() && nodes_[b.node].cordon &&
                        nodes_[b.node].cordon->removing;
  j->last_stop = JobStop{JobStopCause::kInterrupted, "node " + node + (removing ? " removed" : " down"), at, -1};
}

void ReadModel::On(const JobResized& b, Instant at) {
  JobRecord* j = mutable_job(b.job);
  if (!j) return;
  // SCALE-7: as EngineState applies it.
  for (auto it = b.removed.rbegin(); it != b.removed.rend(); ++it) {
    if (*it >= 0 && static_cast<size_t>(*it) < j->placements.size()) j->placements.erase(j->placements.begin() + *it);
  }
  j->placements.insert(j->placements.end(), b.added.begin(), b.added.end());
  j->spec.replicas = static_cast<int32_t>(j->placements.size());
  j->borrowed = b.borrowed;
  HoldGpus(*j, at);
}

void ReadModel::On(const NodeLent& b, Instant) {
  if (NodeRecord* n = mutable_node(b.node)) {
    n->home_pool = n->spec.pool;  // POOL-3: shown in the borrower's pool until returned
    n->spec.pool = static_cast<uint8_t>(b.to);
  }
}

void ReadModel::On(const NodeReturned& b, Instant) {
  if (NodeRecord* n = mutable_node(b.node)) {
    n->spec.pool = static_cast<uint8_t>(n->home_pool);
    n->home_pool = -1;
    n->scale_in.reset();
  }
}

void ReadModel::On(const HotspotDetected& b, Instant at) {
  if (NodeRecord* n = mutable_node(b.node)) {
    n->hot = true;
    n->hot_gpus = b.gpus;
    n->hot_reason = b.reason;
    n->hot_since = at;
  }
}

void ReadModel::On(const HotspotCleared& b, Instant) {
  if (NodeRecord* n = mutable_node(b.node)) {
    n->hot = false;
    n->hot_gpus = 0;
    n->hot_reason.clear();
    n->hot_since = Instant{};
  }
}

void ReadModel::On(const RegionsSet& b, Instant) { set_regions_ = b.policy; }

NodeRecord::OperatorCordon* ReadModel::CordonOf(NodeIndex node, const std::string& actor, const std::string& reason,
                                                Instant at) {
  NodeRecord* n = mutable_node(node);
  if (!n) return nullptr;
  if (!n->cordon) n->cordon = NodeRecord::OperatorCordon{.since = at};
  n->cordon->actor = actor;
  n->cordon->reason = reason;
  return &*n->cordon;
}

void ReadModel::On(const NodeCordoned& b, Instant at) { CordonOf(b.node, b.actor, b.reason, at); }

void ReadModel::On(const NodeUncordoned& b, Instant) {
  if (NodeRecord* n = mutable_node(b.node)) n->cordon.reset();
}

void ReadModel::On(const NodeDrainRequested& b, Instant at) {
  if (NodeRecord::OperatorCordon* c = CordonOf(b.node, b.actor, b.reason, at)) {
    c->drain = NodeRecord::OperatorCordon::Drain::kDraining;
    c->drain_deadline = at + b.timeout;
  }
}

void ReadModel::On(const NodeDrained& b, Instant) {
  NodeRecord* n = mutable_node(b.node);
  if (n && n->cordon) n->cordon->drain = NodeRecord::OperatorCordon::Drain::kDrained;
}

void ReadModel::On(const NodeRemovalRequested& b, Instant at) {
  if (NodeRecord::OperatorCordon* c = CordonOf(b.node, b.actor, b.reason, at)) c->removing = true;
}

void ReadModel::On(const NodeDrainStarted& b, Instant at) {
  if (NodeRecord* n = mutable_node(b.node)) n->scale_in = std::pair{b.reason, at};
}

void ReadModel::On(const NodeRemoved& b, Instant) {
  if (NodeRecord* n = mutable_node(b.node)) {
    n->scale_in.reset();
    n->home_pool = -1;  // a borrowed node removed: no longer lent (as the Engine's lent_nodes)
    n->hot = false;     // as the Engine forgets it
    n->hot_gpus = 0;
    n->hot_reason.clear();
  }
}

std::string ReadModel::Encode() const {
  ByteWriter w;
  w.Put(kMagic);
  w.Put(kVersion);
  w.Put(last_seq_);
  EncodeV2(w);
  EncodeV3(w);
  EncodeV4(w);
  EncodeV5(w);
  EncodeV7(w);
  EncodeV8(w);
  w.Put<uint64_t>(Checksum(w.bytes()));
  return std::move(w.bytes());
}

// Version 2: pools, tenants and quotas, nodes, jobs.
void ReadModel::EncodeV2(ByteWriter& w) const {
  w.Put<uint64_t>(pools_.size());
  for (const Pool& p : pools_) {
    w.Put(p.id);
    w.PutString(p.name);
    w.Put(p.selector.models);
    w.Put<uint64_t>(p.selector.regions.size());
    for (const std::string& r : p.selector.regions) w.PutString(r);
    w.Put<uint64_t>(p.dedicated_to.size());
    for (TenantId t : p.dedicated_to) w.Put(t);
  }
  w.Put<uint64_t>(tenant_names_.size());
  for (size_t t = 0; t < tenant_names_.size(); ++t) {
    w.PutString(tenant_names_[t]);
    w.Put<uint64_t>(quotas_[t].size());
    for (const Quota& q : quotas_[t]) {
      w.Put(q.guaranteed_milli);
      w.Put(q.elastic_limit_milli);
      w.Put(q.weight);
      w.Put<uint8_t>(q.reserved);
    }
  }
  w.Put<uint64_t>(nodes_.size());
  for (const NodeRecord& n : nodes_) {
    w.PutString(n.spec.name);
    w.Put(n.spec.cpu_milli);
    w.Put(n.spec.memory_mib);
    w.Put<int32_t>(n.spec.gpu_count);
    w.Put(n.spec.gpu_model);
    w.Put(n.spec.pool);
    w.Put(n.spec.attr_class);
    w.PutString(n.region);
    w.PutString(n.zone);
    w.PutString(n.rack);
  }
  w.Put<uint64_t>(jobs_.size());
  for (const JobRecord& j : jobs_) {
    w.Put(j.id);
    if (j.id < 0) continue;
    PutSpec(w, j.spec);
    w.Put(j.state);
    w.Put<int64_t>(ToMillis(j.submitted));
    w.Put<int64_t>(ToMillis(j.started));
    w.Put<int64_t>(ToMillis(j.ended));
    w.Put<uint8_t>(j.has_started);
    w.Put<uint8_t>(j.has_ended);
    w.Put(j.pool);
    w.Put<uint8_t>(j.borrowed);
    w.Put<uint64_t>(j.placements.size());
    for (const PlacedReplica& p : j.placements) {
      w.Put(p.node);
      w.Put(p.gpus);
    }
    w.Put(j.preemptions);
    w.Put(j.interruptions);
    w.PutString(j.reason);
  }
}

// Version 3: the region table set at runtime, hotspots, elastic bounds, lent nodes.
void ReadModel::EncodeV3(ByteWriter& w) const {
  w.Put<uint8_t>(set_regions_.has_value());
  if (set_regions_) {
    w.Put(static_cast<uint8_t>(set_regions_->kind));
    w.Put<uint64_t>(set_regions_->regions.size());
    for (const RegionInfo& info : set_regions_->regions) {
      w.PutString(info.name);
      w.Put(info.price_per_gpu_hour);
      w.Put<uint64_t>(info.latency_ms.size());
      for (const auto& [location, ms] : info.latency_ms) {
        w.PutString(location);
        w.Put(ms);
      }
    }
    w.Put<uint64_t>(set_regions_->users.size());
    for (const TenantUsers& u : set_regions_->users) {
      w.PutString(u.tenant);
      w.PutString(u.location);
      w.Put(u.latency_budget_ms);
    }
  }
  uint64_t hot = 0;
  for (const NodeRecord& n : nodes_) hot += n.hot;
  w.Put(hot);
  for (size_t i = 0; i < nodes_.size(); ++i) {
    const NodeRecord& n = nodes_[i];
    if (!n.hot) continue;
    w.Put(static_cast<NodeIndex>(i));
    w.Put(n.hot_gpus);
    w.PutString(n.hot_reason);
    w.Put<int64_t>(ToMillis(n.hot_since));
  }
  // Elastic jobs' bounds (SCALE-7) and lent nodes' home pools (POOL-3).
  uint64_t elastic = 0, lent = 0;
  for (const JobRecord& j : jobs_) elastic += j.id >= 0 && j.spec.elastic();
  for (const NodeRecord& n : nodes_) lent += n.home_pool >= 0;
  w.Put(elastic);
  for (const JobRecord& j : jobs_) {
    if (j.id < 0 || !j.spec.elastic()) continue;
    w.Put(j.id);
    w.Put(j.spec.min_replicas);
    w.Put(j.spec.max_replicas);
  }
  w.Put(lent);
  for (size_t i = 0; i < nodes_.size(); ++i) {
    if (nodes_[i].home_pool < 0) continue;
    w.Put(static_cast<NodeIndex>(i));
    w.Put(nodes_[i].home_pool);
  }
}

// Version 4: tasks' container fields (EXEC-1..6).
void ReadModel::EncodeV4(ByteWriter& w) const {
  auto has_container = [](const JobRecord& j) {
    const TaskSpec& t = j.spec.task;
    return j.id >= 0 && (!t.image.empty() || t.shm_mib != TaskSpec{}.shm_mib || t.network_isolated);
  };
  w.Put<uint64_t>(std::count_if(jobs_.begin(), jobs_.end(), has_container));
  for (const JobRecord& j : jobs_) {
    if (!has_container(j)) continue;
    w.Put(j.id);
    w.PutString(j.spec.task.image);
    w.Put(j.spec.task.shm_mib);
    w.Put<uint8_t>(j.spec.task.network_isolated);
  }
}

Status ReadModel::Decode(std::string_view bytes) {
  ByteReader header(bytes);
  if (header.Get<uint32_t>() != kMagic) {
    return DataLoss("read-model snapshot: " + std::to_string(bytes.size()) +
                    " bytes, not a read-model snapshot (bad magic at byte offset 0)");
  }
  const uint32_t version = header.Get<uint32_t>();
  if (header.failed()) return DataLoss("read-model snapshot: truncated at byte offset " + std::to_string(bytes.size()));
  if (version < 2 || version > kVersion) {
    return FailedPrecondition("read-model snapshot: version " + std::to_string(version) + " (expected 2 to " +
                              std::to_string(kVersion) + ")");
  }
  if (version >= kFirstChecksummedVersion) {
    if (bytes.size() < 8 + kChecksumBytes) {
      return DataLoss("read-model snapshot: truncated at byte offset " + std::to_string(bytes.size()));
    }
    const std::string_view sealed = bytes.substr(0, bytes.size() - kChecksumBytes);
    uint64_t stored = 0;
    std::memcpy(&stored, bytes.data() + sealed.size(), kChecksumBytes);
    if (stored != Checksum(sealed)) {
      return DataLoss("read-model snapshot: checksum mismatch (the checksum at byte offset " +
                      std::to_string(sealed.size()) + " does not match bytes 0 to " +
                      std::to_string(sealed.size() - 1) + "): damaged");
    }
    bytes = sealed;
  }
  ByteReader r(bytes);
  r.Get<uint32_t>();
  r.Get<uint32_t>();
  ReadModel m;
  m.last_seq_ = r.Get<int64_t>();
  DecodeV2(r, m);
  if (version >= 3 && !r.failed()) DecodeV3(r, m);
  if (version >= 4 && !r.failed()) DecodeV4(r, m);
  if (version >= 5 && !r.failed()) DecodeV5(r, m);
  if (version >= 7 && !r.failed()) DecodeV7(r, m);
  if (version < 7 && !r.failed()) m.SeedUsage();
  if (version >= 8 && !r.failed()) DecodeV8(r, m);
  if (r.failed()) {
    return DataLoss("read-model snapshot: truncated or corrupt: a read failed at byte offset " +
                    std::to_string(r.position()) + " of " + std::to_string(bytes.size()));
  }
  if (r.remaining() != 0) {
    return DataLoss("read-model snapshot: " + std::to_string(r.remaining()) + " bytes left over at byte offset " +
                    std::to_string(r.position()));
  }
  last_seq_ = m.last_seq_;
  jobs_ = std::move(m.jobs_);
  jobs_by_tenant_ = std::move(m.jobs_by_tenant_);
  pools_ = std::move(m.pools_);
  tenant_names_ = std::move(m.tenant_names_);
  tenant_ids_ = std::move(m.tenant_ids_);
  quotas_ = std::move(m.quotas_);
  nodes_ = std::move(m.nodes_);
  node_ids_ = std::move(m.node_ids_);
  set_regions_ = std::move(m.set_regions_);
  usage_ = std::move(m.usage_);
  usage_seeded_ = true;
  return {};
}

namespace {

// The version 2 section's items (DecodeV2).
Pool DecodePool(ByteReader& r) {
  Pool p;
  p.id = r.Get<PoolId>();
  p.name = r.GetString();
  p.selector.models = r.Get<GpuModelMask>();
  const uint64_t regions = r.GetCount(8);
  for (uint64_t k = 0; k < regions && !r.failed(); ++k) p.selector.regions.push_back(r.GetString());
  const uint64_t dedicated = r.GetCount(4);
  for (uint64_t k = 0; k < dedicated && !r.failed(); ++k) p.dedicated_to.push_back(r.Get<TenantId>());
  return p;
}

std::vector<Quota> DecodeQuotas(ByteReader& r) {
  std::vector<Quota> qs(r.GetCount(25));
  for (Quota& q : qs) {
    q.guaranteed_milli = r.Get<int64_t>();
    q.elastic_limit_milli = r.Get<int64_t>();
    q.weight = r.Get<double>();
    q.reserved = r.Get<uint8_t>();
  }
  return qs;
}

NodeRecord DecodeNode(ByteReader& r) {
  NodeRecord n;
  n.spec.name = r.GetString();
  n.spec.cpu_milli = r.Get<int64_t>();
  n.spec.memory_mib = r.Get<int64_t>();
  n.spec.gpu_count = r.Get<int32_t>();
  n.spec.gpu_model = r.Get<GpuModelId>();
  n.spec.pool = r.Get<uint8_t>();
  n.spec.attr_class = r.Get<uint16_t>();
  n.region = r.GetString();
  n.zone = r.GetString();
  n.rack = r.GetString();
  return n;
}

}  // namespace

// Each stops at the first malformed field (the ByteReader remembers it).
void ReadModel::DecodeV2(ByteReader& r, ReadModel& m) {
  const uint64_t pools = r.GetCount(8);
  for (uint64_t i = 0; i < pools && !r.failed(); ++i) m.pools_.push_back(DecodePool(r));
  const uint64_t tenants = r.GetCount(16);
  for (uint64_t t = 0; t < tenants && !r.failed(); ++t) {
    m.tenant_names_.push_back(r.GetString());
    m.tenant_ids_[m.tenant_names_.back()] = static_cast<TenantId>(t);
    m.quotas_.push_back(DecodeQuotas(r));
  }
  const uint64_t nodes = r.GetCount(40);
  for (uint64_t i = 0; i < nodes && !r.failed(); ++i) {
    NodeRecord n = DecodeNode(r);
    m.node_ids_[n.spec.name] = static_cast<NodeIndex>(m.nodes_.size());
    m.nodes_.push_back(std::move(n));
  }
  const uint64_t jobs = r.GetCount(8);
  m.jobs_.resize(r.failed() ? 0 : jobs);
  for (uint64_t i = 0; i < jobs && !r.failed(); ++i) {
    JobRecord& j = m.jobs_[i];
    j.id = r.Get<JobId>();
    if (j.id < 0) continue;
    if (j.id != static_cast<JobId>(i + 1)) {
      r.Fail();
      break;
    }
    j.spec = GetSpec(r);
    j.state = r.Get<JobState>();
    j.submitted = InstantFromMillis(r.Get<int64_t>());
    j.started = InstantFromMillis(r.Get<int64_t>());
    j.ended = InstantFromMillis(r.Get<int64_t>());
    j.has_started = r.Get<uint8_t>();
    j.has_ended = r.Get<uint8_t>();
    j.pool = r.Get<PoolId>();
    j.borrowed = r.Get<uint8_t>();
    const uint64_t placements = r.GetCount(6);
    for (uint64_t k = 0; k < placements && !r.failed(); ++k) {
      PlacedReplica p;
      p.node = r.Get<NodeIndex>();
      p.gpus = r.Get<GpuMask>();
      j.placements.push_back(p);
    }
    j.preemptions = r.Get<int32_t>();
    j.interruptions = r.Get<int32_t>();
    j.reason = r.GetString();
    m.jobs_by_tenant_[j.spec.tenant].push_back(j.id);
  }
}

void ReadModel::DecodeV3(ByteReader& r, ReadModel& m) {
  if (r.Get<uint8_t>()) {
    RegionPolicy p;
    const uint8_t kind = r.Get<uint8_t>();
    if (kind > static_cast<uint8_t>(RegionPolicy::Kind::kNearest)) r.Fail();
    p.kind = static_cast<RegionPolicy::Kind>(kind);
    const uint64_t regions = r.GetCount(16);
    for (uint64_t i = 0; i < regions && !r.failed(); ++i) {
      RegionInfo info;
      info.name = r.GetString();
      info.price_per_gpu_hour = r.Get<double>();
      const uint64_t latencies = r.GetCount(16);
      for (uint64_t k = 0; k < latencies && !r.failed(); ++k) {
        std::string location = r.GetString();
        info.latency_ms[std::move(location)] = r.Get<double>();
      }
      p.regions.push_back(std::move(info));
    }
    const uint64_t users = r.GetCount(24);
    for (uint64_t i = 0; i < users && !r.failed(); ++i) {
      TenantUsers u;
      u.tenant = r.GetString();
      u.location = r.GetString();
      u.latency_budget_ms = r.Get<double>();
      p.users.push_back(std::move(u));
    }
    m.set_regions_ = std::move(p);
  }
  const uint64_t hot = r.GetCount(22);
  for (uint64_t i = 0; i < hot && !r.failed(); ++i) {
    const NodeIndex node = r.Get<NodeIndex>();
    const GpuMask gpus = r.Get<GpuMask>();
    std::string reason = r.GetString();
    const int64_t since = r.Get<int64_t>();
    if (node < 0 || static_cast<size_t>(node) >= m.nodes_.size()) {
      r.Fail();
      break;
    }
    NodeRecord& n = m.nodes_[node];
    n.hot = true;
    n.hot_gpus = gpus;
    n.hot_reason = std::move(reason);
    n.hot_since = InstantFromMillis(since);
  }
  const uint64_t elastic = r.GetCount(16);
  for (uint64_t i = 0; i < elastic && !r.failed(); ++i) {
    const JobId id = r.Get<JobId>();
    const int32_t min = r.Get<int32_t>(), max = r.Get<int32_t>();
    if (id < 1 || static_cast<size_t>(id) > m.jobs_.size() || min < 1 || max < min) {
      r.Fail();
      break;
    }
    m.jobs_[id - 1].spec.min_replicas = min;
    m.jobs_[id - 1].spec.max_replicas = max;
  }
  const uint64_t lent = r.GetCount(12);
  for (uint64_t i = 0; i < lent && !r.failed(); ++i) {
    const NodeIndex node = r.Get<NodeIndex>();
    const int32_t home = r.Get<int32_t>();
    if (node < 0 || static_cast<size_t>(node) >= m.nodes_.size() || home < 0 ||
        static_cast<size_t>(home) >= m.pools_.size()) {
      r.Fail();
      break;
    }
    m.nodes_[node].home_pool = home;
  }
}

void ReadModel::DecodeV4(ByteReader& r, ReadModel& m) {
  const uint64_t containers = r.GetCount(22);
  for (uint64_t i = 0; i < containers && !r.failed(); ++i) {
    const JobId id = r.Get<JobId>();
    std::string image = r.GetString();
    const int64_t shm_mib = r.Get<int64_t>();
    const bool isolated = r.Get<uint8_t>();
    if (id < 1 || static_cast<size_t>(id) > m.jobs_.size() || m.jobs_[id - 1].id != id) {
      r.Fail();
      break;
    }
    TaskSpec& t = m.jobs_[id - 1].spec.task;
    t.image = std::move(image);
    t.shm_mib = shm_mib;
    t.network_isolated = isolated;
  }
}

const char* JobStopCauseName(JobStopCause c) {
  switch (c) {
    case JobStopCause::kPreempted: return "preempted";
    case JobStopCause::kReclaimed: return "reclaimed";
    case JobStopCause::kInterrupted: return "interrupted";
  }
  return "unknown";
}

// Version 5: why each job last stopped (JobRecord::last_stop).
void ReadModel::EncodeV5(ByteWriter& w) const {
  auto stopped = [](const JobRecord& j) { return j.id >= 0 && j.last_stop.has_value(); };
  w.Put<uint64_t>(std::count_if(jobs_.begin(), jobs_.end(), stopped));
  for (const JobRecord& j : jobs_) {
    if (!stopped(j)) continue;
    w.Put(j.id);
    w.Put(static_cast<uint8_t>(j.last_stop->cause));
    w.PutString(j.last_stop->reason);
    w.Put<int64_t>(ToMillis(j.last_stop->at));
    w.Put(j.last_stop->by_job);
  }
}

// Version 8: the nodes' cordons (issue 19): per node with one, its index,
// whether it has an operator's cordon (then actor, reason, since, drain,
// deadline, removing) and a scale-in's (then reason, since).
void ReadModel::EncodeV8(ByteWriter& w) const {
  auto marked = [](const NodeRecord& n) { return n.cordon.has_value() || n.scale_in.has_value(); };
  w.Put<uint64_t>(std::count_if(nodes_.begin(), nodes_.end(), marked));
  for (size_t i = 0; i < nodes_.size(); ++i) {
    const NodeRecord& n = nodes_[i];
    if (!marked(n)) continue;
    w.Put(static_cast<NodeIndex>(i));
    w.Put<uint8_t>(n.cordon.has_value());
    if (n.cordon) {
      w.PutString(n.cordon->actor);
      w.PutString(n.cordon->reason);
      w.Put<int64_t>(ToMillis(n.cordon->since));
      w.Put(static_cast<uint8_t>(n.cordon->drain));
      w.Put<int64_t>(ToMillis(n.cordon->drain_deadline));
      w.Put<uint8_t>(n.cordon->removing);
    }
    w.Put<uint8_t>(n.scale_in.has_value());
    if (n.scale_in) {
      w.PutString(n.scale_in->first);
      w.Put<int64_t>(ToMillis(n.scale_in->second));
    }
  }
}

void ReadModel::DecodeV8(ByteReader& r, ReadModel& m) {
  const uint64_t marked = r.GetCount(4 + 1 + 1);
  for (uint64_t i = 0; i < marked && !r.failed(); ++i) {
    const NodeIndex node = r.Get<NodeIndex>();
    if (node < 0 || static_cast<size_t>(node) >= m.nodes_.size()) {
      r.Fail();
      break;
    }
    NodeRecord& n = m.nodes_[node];
    if (r.Get<uint8_t>()) {
      NodeRecord::OperatorCordon c;
      c.actor = r.GetString();
      c.reason = r.GetString();
      c.since = InstantFromMillis(r.Get<int64_t>());
      const uint8_t drain = r.Get<uint8_t>();
      if (drain > static_cast<uint8_t>(NodeRecord::OperatorCordon::Drain::kDrained)) r.Fail();
      c.drain = static_cast<NodeRecord::OperatorCordon::Drain>(drain);
      c.drain_deadline = InstantFromMillis(r.Get<int64_t>());
      c.removing = r.Get<uint8_t>() != 0;
      n.cordon = std::move(c);
    }
    if (r.Get<uint8_t>()) {
      std::string reason = r.GetString();
      n.scale_in = std::pair{std::move(reason), InstantFromMillis(r.Get<int64_t>())};
    }
  }
}

void ReadModel::DecodeV5(ByteReader& r, ReadModel& m) {
  constexpr size_t kMinBytes = 8 + 1 + 8 + 8 + 8;
  const uint64_t stops = r.GetCount(kMinBytes);
  for (uint64_t i = 0; i < stops && !r.failed(); ++i) {
    const JobId id = r.Get<JobId>();
    const uint8_t cause = r.Get<uint8_t>();
    std::string reason = r.GetString();
    const int64_t at_ms = r.Get<int64_t>();
    const JobId by_job = r.Get<JobId>();
    if (id < 1 || static_cast<size_t>(id) > m.jobs_.size() || m.jobs_[id - 1].id != id ||
        cause > static_cast<uint8_t>(JobStopCause::kInterrupted)) {
      r.Fail();
      break;
    }
    m.jobs_[id - 1].last_stop = JobStop{static_cast<JobStopCause>(cause), std::move(reason), InstantFromMillis(at_ms), by_job};
  }
}

}  // namespace gpupool

namespace gpupool {

// Version 7: accounting (the ledger, then each job's usage where it has any).
void ReadModel::EncodeV7(ByteWriter& w) const {
  usage_.Encode(w);
  auto has_usage = [](const JobRecord& j) { return j.id >= 0 && j.usage != JobUsage{}; };
  w.Put<uint64_t>(std::count_if(jobs_.begin(), jobs_.end(), has_usage));
  for (const JobRecord& j : jobs_) {
    if (!has_usage(j)) continue;
    w.Put(j.id);
    w.Put(j.usage.held_milli);
    w.Put(j.usage.held_memory_mib);
    w.Put(j.usage.milli_ms);
    w.Put(j.usage.memory_mib_ms);
    w.Put<int64_t>(ToMillis(j.usage.since));
  }
}

void ReadModel::DecodeV7(ByteReader& r, ReadModel& m) {
  UsageLedger::Decode(r, m.usage_);
  if (!r.failed() && (m.usage_.tenants() != m.tenant_names_.size() || m.usage_.pools() != m.pools_.size())) r.Fail();
  const uint64_t jobs = r.GetCount(8 * 6);
  for (uint64_t i = 0; i < jobs && !r.failed(); ++i) {
    const JobId id = r.Get<JobId>();
    JobUsage u;
    u.held_milli = r.Get<int64_t>();
    u.held_memory_mib = r.Get<int64_t>();
    u.milli_ms = r.Get<int64_t>();
    u.memory_mib_ms = r.Get<int64_t>();
    u.since = InstantFromMillis(r.Get<int64_t>());
    if (id < 1 || static_cast<size_t>(id) > m.jobs_.size() || m.jobs_[id - 1].id != id) {
      r.Fail();
      break;
    }
    m.jobs_[id - 1].usage = u;
  }
}

void ReadModel::SeedUsage() {
  usage_.Resize(tenant_names_.size(), pools_.size());
  for (size_t t = 0; t < quotas_.size(); ++t) {
    for (size_t p = 0; p < quotas_[t].size(); ++p) {
      usage_.Seed(static_cast<TenantId>(t), static_cast<PoolId>(p), 0, 0, quotas_[t][p].guaranteed_milli);
    }
  }
  for (JobRecord& j : jobs_) {
    if (j.id < 0 || (j.state != JobState::kRunning && j.state != JobState::kCheckpointing)) continue;
    j.usage.held_milli = j.spec.total_gpu_milli();
    j.usage.held_memory_mib = HeldMemoryMib(j);
    j.usage.since = j.started;
    const int64_t guaranteed = static_cast<size_t>(j.spec.tenant) < quotas_.size() && j.pool < quotas_[j.spec.tenant].size()
                                   ? quotas_[j.spec.tenant][j.pool].guaranteed_milli
                                   : 0;
    usage_.Seed(j.spec.tenant, j.pool, j.usage.held_milli, j.usage.held_memory_mib, guaranteed);
  }
}

}  // namespace gpupool
