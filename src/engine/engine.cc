#include "src/engine/engine.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <set>

#include "src/base/check.h"
#include "src/engine/engine_loops.h"
#include "src/engine/preemption.h"

namespace gpupool {
namespace {

Node Pristine(const Node& n) { return EmptyLike(n); }

// How many replicas of `d` an empty node of this shape holds.
int ReplicasPerEmptyNode(const Node& empty, const Demand& d) {
  Node n = empty;
  int count = 0;
  while (count < 1024 && CheckFit(n, d) == FitFailure::kNone) {
    TakeOut(n, d);
    ++count;
  }
  return count;
}

}  // namespace

Result<std::unique_ptr<Engine>> Engine::Create(EngineConfig config, AttributeTable attributes, ControlLoops loops) {
  std::unique_ptr<Engine> e(new Engine(std::move(config), std::move(attributes), std::move(loops)));
  GP_TRY(e->Init());
  return e;
}

Result<std::unique_ptr<Engine>> Engine::Restore(EngineConfig config, AttributeTable attributes, EngineState state,
                                                Instant now, ControlLoops loops) {
  if (auto ok = CheckInvariants(state); !ok) return FailedPrecondition("restore: " + ok.error().message);
  for (NodeIndex i = 0; i < state.cluster.node_count(); ++i) {
    if (state.cluster.node(i).attr_class >= attributes.node_class_count()) {
      return FailedPrecondition("restore: node " + state.cluster.node_name(i) + " has node class " +
                                std::to_string(state.cluster.node(i).attr_class) + ", unknown to the attribute table");
    }
  }
  for (const auto& [id, j] : state.jobs) {
    if (j.spec.demand.requirement >= attributes.requirement_count()) {
      return FailedPrecondition("restore: job " + std::to_string(id) + " has requirement " +
                                std::to_string(j.spec.demand.requirement) + ", unknown to the attribute table");
    }
  }
  std::unique_ptr<Engine> e(new Engine(std::move(config), std::move(attributes), std::move(loops)));
  GP_TRY(e->Init());
  // Moved, not copied: `running` points into `jobs`, and a move keeps the
  // map's nodes where they are.
  e->state_ = std::move(state);
  e->state_.workload.Configure(e->config_.workload_learning);
  GP_TRY(e->RebuildTarget());  // the learner's last rebuild, as the engine that wrote the state had it
  e->state_.lending = e->config_.lending;
  for (const auto& [id, j] : e->state_.jobs) e->any_elastic_ |= j.spec.elastic();
  const Sink none;  // restarting decides nothing
  LoopContext restarted(*e, now, none);
  for (ControlLoop* loop : e->loops_.all()) loop->Restarted(restarted);
  return e;
}

Status Engine::Init() {
  if (auto ok = CheckWorkloadLearningConfig(config_.workload_learning); !ok) {
    return InvalidArgument("workload_learning." + ok.error().message);
  }
  prior_ = config_.workload_learning.prior.empty() ? DefaultWorkloadPrior() : config_.workload_learning.prior;
  state_.workload.Configure(config_.workload_learning);
  GP_TRY(RebuildTarget());
  auto modes = FindModePolicy(config_.sharing_policy);
  if (!modes) return InvalidArgument("sharing_policy: " + modes.error().message);
  mode_policy_ = std::move(*modes);
  if (config_.lending.threshold < 0 || config_.lending.threshold > 1 || config_.lending.lend_fraction < 0 ||
      config_.lending.lend_fraction > 1 || config_.lending.window < Duration(0)) {
    return InvalidArgument("lending: threshold and lend fraction must be in [0, 1], the window not negative");
  }
  if (auto ok = ValidateDefragConfig(config_.defrag_config); !ok) return InvalidArgument("defrag." + ok.error().message);
  if (config_.defrag && config_.defrag_every <= Duration(0)) return InvalidArgument("defrag.every: must be positive");
  if (config_.hotspots.enabled) {
    if (auto ok = CheckHotspotConfig(config_.hotspots); !ok) return InvalidArgument("hotspots." + ok.error().message);
  }
  if (config_.elastic_resize_every < Duration(0)) return InvalidArgument("elastic.resize_every: must not be negative");
  if (auto ok = CheckRegionPolicy(config_.regions); !ok) return ok;
  for (size_t i = 0; i < config_.scaling.size(); ++i) {
    if (auto ok = CheckScalingConfig(config_.scaling[i]); !ok) return ok;
    for (size_t k = 0; k < i; ++k) {
      if (config_.scaling[k].pool == config_.scaling[i].pool) {
        return InvalidArgument("scaling: pool '" + config_.scaling[i].pool + "' has two scaling entries");
      }
      if (config_.scaling[k].node.name_prefix == config_.scaling[i].node.name_prefix) {
        return InvalidArgument("scaling[" + config_.scaling[i].pool + "].node.name_prefix: '" +
                               config_.scaling[i].node.name_prefix + "' is also pool '" + config_.scaling[k].pool +
                               "''s (provisioned node names would clash)");
      }
    }
  }
  return {};
}

Engine::Engine(EngineConfig config, AttributeTable attributes, ControlLoops loops)
    : config_(std::move(config)),
      attributes_(std::move(attributes)),
      state_(config_.lending),
      rng_(config_.seed),
      loops_(std::move(loops)) {
  for (const ControlLoop* loop : loops_.all()) GP_CHECK(loop != nullptr) << "every control loop must be set";
}

Status Engine::RebuildTarget() {
  auto spec = FindPolicy(config_.policy);
  if (!spec) return InvalidArgument("policy: " + spec.error().message);
  GP_ASSIGN_OR_RETURN(target_, state_.workload.BuildTarget(prior_, config_.workload_learning.prior_weight));
  PluginDeps deps = target_.deps();
  deps.attributes = &attributes_;
  GP_ASSIGN_OR_RETURN(policy_, BuildPolicy(WithAttributeMatching(*spec), deps));
  scheduler_.reset();
  target_builds_ = state_.workload.builds();
  return {};
}

void Engine::FollowLearnedTarget() {
  if (state_.workload.builds() == target_builds_) return;
  auto ok = RebuildTarget();
  GP_CHECK(ok.has_value()) << "rebuilding the learned target: " << ok.error().message;  // validated shapes only
}

void Engine::Emit(EventBody body, Instant now, const Sink& sink) {
  Event e{state_.last_seq + 1, std::max(now, state_.now), std::move(body)};
  state_.Apply(e);
  FollowLearnedTarget();
  // POOL-3: a borrowed node counts in its borrower's topology from now on.
  if (const auto* lent = std::get_if<NodeLent>(&e.body)) {
    topology_.Lent(lent->to, state_.cluster.node(lent->node).gpu_count);
  }
  for (ControlLoop* loop : loops_.all()) loop->Observe(e);
  if (sink) sink(e);
}

void Engine::Replay(const Event& e) {
  state_.Apply(e);
  FollowLearnedTarget();
  if (const auto* s = std::get_if<JobSubmitted>(&e.body)) any_elastic_ |= s->spec.elastic();
}

Scheduler& Engine::scheduler() {
  if (!scheduler_ || scheduler_nodes_ != state_.cluster.node_count()) {
    scheduler_ = std::make_unique<Scheduler>(&state_.cluster, &policy_,
                                             StableRanks(state_.cluster.node_count(), config_.seed), &rng_);
    scheduler_nodes_ = state_.cluster.node_count();
  }
  return *scheduler_;
}

// --- set-up -------------------------------------------------------------------

Result<PoolId> Engine::AddPool(std::string name, PoolSelector selector, std::vector<TenantId> dedicated_to,
                               Instant now, const Sink& sink) {
  if (name.empty()) return InvalidArgument("pool name: must not be empty");
  if (state_.pools.size() >= static_cast<size_t>(kMaxPools)) {
    return InvalidArgument("pools: at most " + std::to_string(kMaxPools));
  }
  for (const Pool& p : state_.pools) {
    if (p.name == name) return InvalidArgument("pool '" + name + "' already exists");
  }
  for (TenantId t : dedicated_to) {
    if (t < 0 || t >= static_cast<TenantId>(state_.tenants.size())) {
      return InvalidArgument("pool '" + name + "': dedicated_to names unknown tenant " + std::to_string(t));
    }
  }
  Pool p;
  p.id = static_cast<PoolId>(state_.pools.size());
  p.name = std::move(name);
  p.selector = std::move(selector);
  p.dedicated_to = std::move(dedicated_to);
  const PoolId id = p.id;
  Emit(PoolAdded{std::move(p)}, now, sink);
  return id;
}

std::optional<PoolId> Engine::PoolFor(GpuModelId model, const std::string& region) const {
  for (const Pool& p : state_.pools) {
    const bool model_ok =
        model == kNoGpuModel ? p.selector.models == kAnyGpuModel : (p.selector.models >> model & 1) != 0;
    const bool region_ok = p.selector.regions.empty() ||
                           std::find(p.selector.regions.begin(), p.selector.regions.end(), region) !=
                               p.selector.regions.end();
    if (model_ok && region_ok) return p.id;
  }
  return std::nullopt;
}

Result<NodeIndex> Engine::AddNode(NodeSpec spec, std::string region, std::string zone, std::string rack,
                                  Instant now, const Sink& sink) {
  for (NodeIndex i = 0; i < state_.cluster.node_count(); ++i) {
    if (state_.cluster.node_name(i) == spec.name) return InvalidArgument("node '" + spec.name + "' already exists");
  }
  if (spec.attr_class >= attributes_.node_class_count()) {
    return InvalidArgument("node '" + spec.name + "': unknown attribute class " + std::to_string(spec.attr_class));
  }
  const std::optional<PoolId> pool = PoolFor(spec.gpu_model, region);
  if (!pool) return InvalidArgument("node '" + spec.name + "': no pool selects its GPU model and region");
  spec.pool = *pool;
  // Validate as the cluster would, before anything is decided.
  Cluster probe;
  GP_TRY(probe.AddNode(spec));
  const NodeIndex index = state_.cluster.node_count();
  Emit(NodeAdded{std::move(spec), std::move(region), std::move(zone), std::move(rack)}, now, sink);
  SchedulePass(now, sink);
  return index;
}

Result<TenantId> Engine::AddTenant(std::string name, Instant now, const Sink& sink) {
  if (name.empty()) return InvalidArgument("tenant name: must not be empty");
  for (const Tenant& t : state_.tenants) {
    if (t.name == name) return InvalidArgument("tenant '" + name + "' already exists");
  }
  const auto id = static_cast<TenantId>(state_.tenants.size());
  Emit(TenantAdded{id, std::move(name)}, now, sink);
  return id;
}

Status Engine::SetQuota(TenantId tenant, PoolId pool, Quota quota, Instant now, const Sink& sink) {
  if (tenant < 0 || tenant >= static_cast<TenantId>(state_.tenants.size())) {
    return NotFound("tenant " + std::to_string(tenant) + " does not exist");
  }
  if (auto ok = CheckQuota(tenant, pool, quota); !ok) return ok;
  Emit(QuotaSet{tenant, pool, quota}, now, sink);
  SchedulePass(now, sink);
  return {};
}

Status Engine::CheckQuota(TenantId tenant, PoolId pool, const Quota& quota) const {
  if (pool >= state_.pools.size()) return NotFound("pool " + std::to_string(pool) + " does not exist");
  if (quota.guaranteed_milli < 0) return InvalidArgument("guaranteed: must not be negative");
  if (quota.elastic_limit_milli < quota.guaranteed_milli) {
    return InvalidArgument("elastic limit: must be at least the guarantee");
  }
  if (!(quota.weight > 0) || !std::isfinite(quota.weight)) return InvalidArgument("weight: must be positive");
  const Pool& p = state_.pools[pool];
  if (!p.dedicated_to.empty() && quota.elastic_limit_milli > 0 &&
      std::find(p.dedicated_to.begin(), p.dedicated_to.end(), tenant) == p.dedicated_to.end()) {
    return InvalidArgument("pool '" + p.name + "' is dedicated to other tenants");
  }
  int64_t guaranteed = quota.guaranteed_milli;
  for (const Tenant& t : state_.tenants) {
    if (t.id != tenant) guaranteed += t.pools[pool].quota.guaranteed_milli;
  }
  if (guaranteed > state_.pool_totals[pool].gpu_milli) {
    return InvalidArgument("guaranteed: pool '" + p.name + "' would guarantee " + std::to_string(guaranteed) +
                           " GPU milli of its " + std::to_string(state_.pool_totals[pool].gpu_milli));
  }
  return {};
}

// --- jobs ---------------------------------------------------------------------

void Engine::RefreshPoolShapes() {
  const int64_t shapes_key = int64_t{state_.cluster.node_count()} * (int64_t{1} << 32) + state_.removed_nodes;
  if (pool_shapes_nodes_ == shapes_key) return;
  pool_shapes_.assign(state_.pools.size(), {});
  auto add = [&](const Node& empty) {
    auto& shapes = pool_shapes_[empty.pool];
    auto it = std::find_if(shapes.begin(), shapes.end(), [&](const auto& s) { return s.first == empty; });
    if (it == shapes.end()) {
      shapes.emplace_back(empty, 1);
    } else {
      ++it->second;
    }
  };
  for (NodeIndex i = 0; i < state_.cluster.node_count(); ++i) {
    const Node& n = state_.cluster.node(i);
    if (n.condition == NodeCondition::kRemoved) continue;
    Node home = Pristine(n);
    // A node lent to another pool (POOL-3) counts where it belongs.
    if (auto lent = state_.lent_nodes.find(i); lent != state_.lent_nodes.end()) home.pool = lent->second;
    add(home);
  }
  for (const PoolScalingConfig& c : config_.scaling) {
    for (const Pool& p : state_.pools) {
      if (p.name != c.pool) continue;
      Cluster probe;
      const NodeTemplate& t = c.node;
      auto added = probe.AddNode(NodeSpec{"template", t.cpu_milli, t.memory_mib, t.gpus, t.gpu_model, p.id, t.attr_class});
      if (added) add(Pristine(probe.node(*added)));
    }
  }
  pool_shapes_nodes_ = shapes_key;
}

int64_t Engine::ReplicasHostable(const JobSpec& spec, PoolId pool, FitFailure* first_failure) const {
  Demand d = spec.demand;
  d.allowed_pools = uint64_t{1} << pool;
  int64_t hostable = 0;
  *first_failure = FitFailure::kNone;
  for (const auto& [shape, count] : pool_shapes_[pool]) {
    FitFailure f = FitFailure::kNone;
    int64_t per_node = 0;
    if (spec.is_pipeline()) {
      // The whole pipeline on one empty node of this shape?
      Node copy = shape;
      for (int r = 0; r < spec.replicas && f == FitFailure::kNone; ++r) {
        Demand sd = spec.replica_demand(r);
        sd.allowed_pools = d.allowed_pools;
        f = policy_.Feasibility(copy, sd);
        if (f == FitFailure::kNone) TakeOut(copy, sd);
      }
      per_node = spec.replicas;
    } else {
      f = policy_.Feasibility(shape, d);
      if (f == FitFailure::kNone) per_node = ReplicasPerEmptyNode(shape, d);
    }
    if (f == FitFailure::kNone) {
      hostable += per_node * count;
    } else if (*first_failure == FitFailure::kNone) {
      *first_failure = f;
    }
  }
  return hostable;
}

std::string Engine::NeverFitsReason(const JobSpec& spec, uint64_t* fitting_pools) {
  RefreshPoolShapes();
  const Tenant& tenant = state_.tenants[spec.tenant];
  std::string why;
  *fitting_pools = 0;
  for (const Pool& p : state_.pools) {
    if (!(spec.demand.allowed_pools >> p.id & 1)) continue;
    const TenantPool& tp = tenant.pools[p.id];
    std::string pool_why;
    if (tp.quota.elastic_limit_milli == 0) {
      pool_why = "no quota";
    } else if (spec.total_gpu_milli() > tp.quota.elastic_limit_milli) {
      pool_why = "asks for " + std::to_string(spec.total_gpu_milli()) + " GPU milli, above the elastic limit " +
                 std::to_string(tp.quota.elastic_limit_milli);
    } else {
      FitFailure first_failure;
      const int64_t hostable = ReplicasHostable(spec, p.id, &first_failure);
      if (hostable >= spec.replicas) {
        *fitting_pools |= uint64_t{1} << p.id;
        continue;
      }
      if (hostable == 0) {
        pool_why = first_failure == FitFailure::kFiltered ? "no node meets the job's requirements"
                   : first_failure == FitFailure::kNone   ? "the pool has no nodes"
                                                          : std::string("no node is big enough (") +
                                                                FitFailureName(first_failure) + ")";
      } else {
        pool_why = "empty nodes hold " + std::to_string(hostable) + " of its " + std::to_string(spec.replicas) +
                   " replicas";
      }
    }
    why += (why.empty() ? "" : "; ") + std::string("pool '") + p.name + "': " + pool_why;
  }
  return why.empty() ? "no pool may run it" : why;
}

Status Engine::PrepareSpec(JobSpec& spec) {
  if (spec.auto_sharing && spec.demand.gpu_count > 0 && !spec.is_pipeline()) {
    ApplySharing(ChooseSharing(mode_policy_, spec).second, spec);
  }
  GP_TRY(ValidateDemand(spec.demand));
  ScopeMpsShares(spec);
  if (spec.is_pipeline()) {
    if (spec.stages.size() > static_cast<size_t>(kMaxGpusPerNode)) {
      return InvalidArgument("stages: at most " + std::to_string(kMaxGpusPerNode) + " stages on one node");
    }
    for (size_t i = 0; i < spec.stages.size(); ++i) {
      if (auto ok = ValidateDemand(spec.stages[i]); !ok) {
        return InvalidArgument("stages[" + std::to_string(i) + "]." + ok.error().message);
      }
    }
    spec.replicas = static_cast<int32_t>(spec.stages.size());
  }
  if (spec.elastic() || spec.min_replicas != 0) {  // SCALE-7
    if (spec.is_pipeline()) return InvalidArgument("max_replicas: a pipeline cannot be elastic");
    if (spec.max_replicas < 1 || spec.max_replicas > config_.max_replicas) {
      return InvalidArgument("max_replicas: must be between 1 and " + std::to_string(config_.max_replicas));
    }
    if (spec.min_replicas < 1 || spec.min_replicas > spec.max_replicas) {
      return InvalidArgument("min_replicas: must be between 1 and max_replicas (" + std::to_string(spec.max_replicas) +
                             ")");
    }
    spec.replicas = spec.min_replicas;  // it starts as its smallest gang and grows
    any_elastic_ = true;
  }
  if (spec.replicas < 1 || spec.replicas > config_.max_replicas) {
    return InvalidArgument("replicas: must be between 1 and " + std::to_string(config_.max_replicas));
  }
  if (spec.checkpoint_interval < Duration(0) || spec.checkpoint_duration < Duration(0)) {
    return InvalidArgument("checkpoint: interval and duration must not be negative");
  }
  if (spec.demand.requirement >= attributes_.requirement_count()) {
    return InvalidArgument("requirement: unknown requirement " + std::to_string(spec.demand.requirement));
  }
  return {};
}

Result<uint64_t> Engine::PoolsFor(const JobSpec& spec) const {
  uint64_t pools = 0;
  for (PoolId p : spec.pools) {
    if (p >= state_.pools.size()) return InvalidArgument("pools: pool " + std::to_string(p) + " does not exist");
    pools |= uint64_t{1} << p;
  }
  if (spec.pools.empty()) pools = state_.pools.empty() ? 0 : (~uint64_t{0} >> (64 - state_.pools.size()));
  // Isolation: dedicated pools accept only their tenants (POOL-2).
  for (const Pool& p : state_.pools) {
    if (!p.dedicated_to.empty() &&
        std::find(p.dedicated_to.begin(), p.dedicated_to.end(), spec.tenant) == p.dedicated_to.end()) {
      pools &= ~(uint64_t{1} << p.id);
    }
  }
  return pools;
}

Result<JobId> Engine::Submit(JobSpec spec, Instant now, const Sink& sink) {
  if (spec.tenant < 0 || spec.tenant >= static_cast<TenantId>(state_.tenants.size())) {
    return NotFound("tenant " + std::to_string(spec.tenant) + " does not exist");
  }
  GP_TRY(PrepareSpec(spec));
  GP_ASSIGN_OR_RETURN(const uint64_t pools, PoolsFor(spec));
  spec.demand.allowed_pools = pools;
  spec.demand.reservation = -1;
  ChargeMigAsSlices(spec, MigModelsIn(pools));
  const JobId id = state_.next_job_id;
  uint64_t fitting = 0;
  const std::string why = NeverFitsReason(spec, &fitting);
  if (fitting == 0) {
    Emit(JobRejected{id, std::move(spec), why}, now, sink);
    return id;
  }
  spec.demand.allowed_pools = fitting;
  Emit(JobSubmitted{id, std::move(spec)}, now, sink);
  LoopContext ctx(*this, now, sink);
  loops_.lending->Submitted(state_.job(id), ctx, ctx);
  SchedulePass(now, sink);
  return id;
}

Status Engine::Cancel(JobId id, Instant now, const Sink& sink) {
  const Job* j = state_.find_job(id);
  if (!j) return NotFound("job " + std::to_string(id) + " is not pending or running");
  if (state_.reservations.contains(id)) Emit(ReservationReleased{id}, now, sink);
  Emit(JobCancelled{id}, now, sink);
  SchedulePass(now, sink);
  return {};
}

Status Engine::Finish(JobId id, bool succeeded, Instant now, const Sink& sink, std::string reason) {
  const Job* j = state_.find_job(id);
  if (!j || (j->state != JobState::kRunning && j->state != JobState::kCheckpointing)) {
    return NotFound("job " + std::to_string(id) + " is not running");
  }
  Emit(JobFinished{id, succeeded, succeeded ? std::string() : std::move(reason)}, now, sink);
  SchedulePass(now, sink);
  return {};
}

Status Engine::CheckpointDone(JobId id, Instant now, const Sink& sink) {
  const Job* j = state_.find_job(id);
  if (!j || j->state != JobState::kCheckpointing) {
    return NotFound("job " + std::to_string(id) + " is not checkpointing");
  }
  if (j->stopping == Job::Stop::kPreempt) {
    Emit(JobPreempted{id, Duration(0)}, now, sink);
    LoopContext ctx(*this, now, sink);
    loops_.defrag->Checkpointed(id, ctx, ctx);
  } else {
    Emit(JobReclaimed{id}, now, sink);
  }
  SchedulePass(now, sink);
  return {};
}

Status Engine::SetRegions(RegionPolicy policy, Instant now, const Sink& sink) {
  if (auto ok = CheckRegionPolicy(policy); !ok) return ok;
  Emit(RegionsSet{std::move(policy)}, now, sink);
  SchedulePass(now, sink);
  return {};
}

GpuModelMask Engine::MigModelsIn(uint64_t pools) const {
  GpuModelMask models = 0;
  for (const Node& n : state_.cluster.nodes()) {
    if (n.mig_table != 0 && (pools >> n.pool & 1) && n.condition != NodeCondition::kRemoved) {
      models |= GpuModelMask{1} << n.gpu_model;
    }
  }
  return models;
}

// --- scheduling ---------------------------------------------------------------

void Engine::SchedulePass(Instant now, const Sink& sink, const TenantOrder& tenant_order) {
  auto key_of = [&](TenantId t) { return tenant_order.KeyOf(state_, t); };
  // Jobs that preempted others take what their victims freed, first.
  const std::vector<QueueKey> nominated(state_.nominated.begin(), state_.nominated.end());
  for (const QueueKey& key : nominated) {
    Job* j = state_.jobs.contains(key.job) ? &state_.job(key.job) : nullptr;
    if (j && j->state == JobState::kPending && j->victims_pending == 0) TryStart(*j, now, sink);
  }
  std::set<TenantOrder::Key> order;
  for (TenantId t : state_.queue.tenants()) order.insert(key_of(t));
  while (!order.empty()) {
    const TenantOrder::Key k = *order.begin();
    order.erase(order.begin());
    JobQueue::TenantQueue* tq = &state_.queue.tenant(k.tenant);
    bool placed = false;
    for (auto it = tq->heads.begin(); it != tq->heads.end() && !placed; ++it) {
      const GroupKey group = it->second;
      if (tq->groups.at(group).blocked_epoch == state_.capacity_epoch) continue;
      Job& j = state_.job(it->first.job);
      Outcome o = TryStart(j, now, sink);
      if (o == Outcome::kPlaced) {
        placed = true;
        break;
      }
      // A job waiting for its victims does not speak for the rest of its
      // group: each of them may make room for itself by preemption too (so a
      // tenant gets its guarantee back in one round, not one job per round).
      if (o == Outcome::kWaiting) {
        std::vector<JobId> members;  // copied: trying one may change the group
        for (const QueueKey& m : state_.queue.tenant(k.tenant).groups.at(group).jobs) members.push_back(m.job);
        for (size_t m = 1; m < members.size() && o == Outcome::kWaiting; ++m) {
          Job& other = state_.job(members[m]);
          if (other.victims_pending > 0 || state_.reservations.contains(other.id)) continue;
          o = TryStart(other, now, sink);
        }
        if (o == Outcome::kPlaced) {
          placed = true;
          break;
        }
      }
      // The job (and so its group) is still queued: skip the group until
      // capacity frees up.
      tq = &state_.queue.tenant(k.tenant);
      tq->groups.at(group).blocked_epoch = state_.capacity_epoch;
      it = tq->heads.lower_bound({it->first, group});
    }
    if (placed && state_.queue.find_tenant(k.tenant)) order.insert(key_of(k.tenant));
  }
}

const RegionInfo* Engine::PoolRegion(PoolId p) const {
  const auto& selected = state_.pools[p].selector.regions;
  if (selected.size() != 1) return nullptr;
  for (const RegionInfo& r : regions().regions) {
    if (r.name == selected[0]) return &r;
  }
  return nullptr;
}

bool Engine::OutsideLatencyBudget(const Job& j, PoolId p) const {
  if (regions().kind == RegionPolicy::Kind::kOff || j.spec.kind != JobKind::kOnlineInference) return false;
  for (const TenantUsers& u : regions().users) {
    if (u.tenant != state_.tenants[j.spec.tenant].name || u.latency_budget_ms <= 0) continue;
    const RegionInfo* r = PoolRegion(p);
    if (r == nullptr) return true;
    auto it = r->latency_ms.find(u.location);
    return it == r->latency_ms.end() || it->second > u.latency_budget_ms;
  }
  return false;
}

template <class C>
void Engine::OrderByRegion(const Job& j, std::vector<C>& candidates) const {
  const TenantUsers* users = nullptr;
  for (const TenantUsers& u : regions().users) {
    if (u.tenant == state_.tenants[j.spec.tenant].name) users = &u;
  }
  const bool online = j.spec.kind == JobKind::kOnlineInference;
  auto latency = [&](PoolId p) {
    const RegionInfo* r = PoolRegion(p);
    if (r == nullptr || users == nullptr) return std::numeric_limits<double>::infinity();
    auto it = r->latency_ms.find(users->location);
    return it == r->latency_ms.end() ? std::numeric_limits<double>::infinity() : it->second;
  };
  auto price = [&](PoolId p) {
    const RegionInfo* r = PoolRegion(p);
    return r == nullptr ? std::numeric_limits<double>::infinity() : r->price_per_gpu_hour;
  };
  std::erase_if(candidates, [&](const C& c) { return OutsideLatencyBudget(j, c.pool); });
  const bool by_latency = online || regions().kind == RegionPolicy::Kind::kNearest;
  std::stable_sort(candidates.begin(), candidates.end(), [&](const C& a, const C& b) {
    const double ka = by_latency ? latency(a.pool) : price(a.pool), kb = by_latency ? latency(b.pool) : price(b.pool);
    if (ka != kb) return ka < kb;
    return by_latency && price(a.pool) < price(b.pool);
  });
}

Engine::Admission Engine::Admit(const Job& j) const {
  const TenantId t = j.spec.tenant;
  const int64_t need = j.spec.total_gpu_milli();
  // Admission is accounting: may the tenant hold `need` more in the pool?
  // Whether the capacity is free right now is the placement's question.
  Admission a;
  for (PoolId p = 0; p < state_.pools.size(); ++p) {
    if (!(j.spec.demand.allowed_pools >> p & 1)) continue;
    const TenantPool& tp = state_.tenant_pool(t, p);
    if (tp.quota.elastic_limit_milli == 0) continue;
    const bool within = tp.usage.gpu_milli + need <= tp.effective_guarantee();
    const bool recovering = j.interruptions > 0;  // a node failure interrupted it (OPS-4)
    if (!within && !MayBorrow(state_, t, p, need) && !(recovering && MayBorrowToRecover(state_, t, p, need))) {
      if (tp.usage.gpu_milli + need > tp.quota.elastic_limit_milli && !a.quota_limited) a.quota_limited = p;
      continue;
    }
    a.candidates.push_back({p, within});
  }
  std::stable_sort(a.candidates.begin(), a.candidates.end(),
                   [](const Candidate& x, const Candidate& y) { return x.within > y.within; });
  if (regions().kind != RegionPolicy::Kind::kOff) OrderByRegion(j, a.candidates);
  return a;
}

// The PostFilter strategies, in the order they are tried when a job does
// not fit (Kubernetes' PostFilter extension point). The first that places
// the job, or makes it wait for what it started, ends the attempt; one that
// asks for a retry sends the job through admission and placement once more.
const Engine::PostFilter Engine::kPostFilters[] = {
    {"elastic-yield", &Engine::YieldElasticFor},
    {"victims-pending", &Engine::WaitForVictims},
    {"mig-recut", &Engine::RecutMigFor},
    {"preemption", &Engine::PreemptFor},
    {"gang-hold", &Engine::HoldForGang},
};

Engine::Outcome Engine::TryStart(Job& j, Instant now, const Sink& sink) {
  // At most two attempts: the second only after elastic jobs gave capacity
  // back (a retry is asked for at most once).
  for (int attempt = 0; attempt < 2; ++attempt) {
    const Admission admission = Admit(j);
    for (const Candidate& c : admission.candidates) {
      if (TryPlaceIn(j, c.pool, c.within, now, sink)) return Outcome::kPlaced;
    }
    const PostFilterInput in{j, admission, /*retried=*/attempt > 0, now, sink};
    bool retry = false;
    for (const PostFilter& f : kPostFilters) {
      const PostFilterResult r = (this->*f.run)(in);
      if (r == PostFilterResult::kPlaced) return Outcome::kPlaced;
      if (r == PostFilterResult::kWaiting) return Outcome::kWaiting;
      if (r == PostFilterResult::kRetry) {
        retry = true;
        break;
      }
    }
    if (retry) continue;
    if (admission.candidates.empty() && admission.quota_limited &&
        !state_.tenant_pool(j.spec.tenant, *admission.quota_limited).usage.exhausted_alerted) {
      Emit(QuotaExhausted{j.spec.tenant, *admission.quota_limited, j.id}, now, sink);
    }
    return Outcome::kBlocked;
  }
  GP_CHECK(false);  // the second attempt never asks for a retry
  return Outcome::kBlocked;
}

// SCALE-7: what elastic jobs grew onto is lent, not theirs: they give it
// back (a reshard, no restart) before anyone is preempted, and the job is
// admitted and placed again with that capacity and quota free.
Engine::PostFilterResult Engine::YieldElasticFor(const PostFilterInput& in) {
  Job& j = in.job;
  if (!any_elastic_ || in.retried || j.victims_pending != 0) return PostFilterResult::kCannotHelp;
  bool yielded = false;
  for (PoolId p = 0; p < state_.pools.size(); ++p) {
    if (!(j.spec.demand.allowed_pools >> p & 1) || state_.tenant_pool(j.spec.tenant, p).quota.elastic_limit_milli == 0) {
      continue;
    }
    if (!OutsideLatencyBudget(j, p)) yielded |= YieldElastic(j, p, in.now, in.sink);
  }
  return yielded ? PostFilterResult::kRetry : PostFilterResult::kCannotHelp;
}

// A job whose victims are still checkpointing waits for them.
Engine::PostFilterResult Engine::WaitForVictims(const PostFilterInput& in) {
  return in.job.victims_pending > 0 ? PostFilterResult::kWaiting : PostFilterResult::kCannotHelp;
}

// Vertical scaling (PART-5): re-cut a fragmented MIG GPU. Tried before
// preemption because the moved jobs are placed again at once. A job that a
// re-cut moved waits for the room planned for it instead: the job it made
// room for starts first, then it, in this or a later pass.
Engine::PostFilterResult Engine::RecutMigFor(const PostFilterInput& in) {
  if (state_.recut_moved.contains(in.job.id)) return PostFilterResult::kCannotHelp;
  for (const Candidate& c : in.admission.candidates) {
    if (TryMigRecut(in.job, c.pool, in.now, in.sink)) return PostFilterResult::kWaiting;
  }
  return PostFilterResult::kCannotHelp;
}

// Preemption: own lower-priority work may make room (and quota); a job
// within its guarantee may also take borrowed capacity back. Not for a job
// a re-cut moved (see RecutMigFor).
Engine::PostFilterResult Engine::PreemptFor(const PostFilterInput& in) {
  Job& j = in.job;
  if (state_.recut_moved.contains(j.id)) return PostFilterResult::kCannotHelp;
  const TenantId t = j.spec.tenant;
  const int64_t need = j.spec.total_gpu_milli();
  for (PoolId p = 0; p < state_.pools.size(); ++p) {
    if (!(j.spec.demand.allowed_pools >> p & 1)) continue;
    const TenantPool& tp = state_.tenant_pool(t, p);
    if (tp.quota.elastic_limit_milli == 0 || OutsideLatencyBudget(j, p)) continue;
    const bool within = tp.usage.gpu_milli + need <= tp.effective_guarantee();
    if (!TryPreempt(j, p, within, in.now, in.sink)) continue;
    // Victims that did not checkpoint are gone already: start now if it fits.
    if (j.victims_pending == 0) {
      const bool within_now = state_.tenant_pool(t, p).usage.gpu_milli + need <= tp.effective_guarantee();
      if ((within_now || MayBorrow(state_, t, p, need)) && TryPlaceIn(j, p, within_now, in.now, in.sink)) {
        return PostFilterResult::kPlaced;
      }
    }
    return PostFilterResult::kWaiting;
  }
  return PostFilterResult::kCannotHelp;
}

// A gang that did not fit holds what frees up for it in its first pool
// (MaybeReserveForGang), so that smaller jobs cannot starve it. It stays
// blocked meanwhile.
Engine::PostFilterResult Engine::HoldForGang(const PostFilterInput& in) {
  Job& j = in.job;
  if (!in.admission.candidates.empty() && j.spec.replicas > 1 && !j.spec.is_pipeline() &&
      !state_.reservations.contains(j.id)) {
    MaybeReserveForGang(j, in.admission.candidates[0].pool, in.now, in.sink);
  }
  return PostFilterResult::kCannotHelp;
}

bool Engine::TryPreempt(Job& j, PoolId pool, bool within, Instant now, const Sink& sink) {
  std::optional<PreemptionPlan> plan = PlanPreemption(state_, policy_, j, pool, within, now);
  if (!plan) return false;
  // Hold the nodes for the preemptor (with any it already held), so that
  // nobody else takes the room while the victims checkpoint, then stop the
  // victims. The preemptor is now nominated: every pass tries nominated
  // jobs first. A node another nominated job of the tenant already holds
  // stays with that job; both get it, in queue order, when it frees.
  HoldNodesFor(j, std::move(plan->nodes), now, sink);
  for (const PreemptionVictim& c : plan->victims) {
    const bool checkpoint = c.job->spec.checkpointable;
    const JobId victim = c.job->id;
    const Duration lost = LostWork(*c.job, now);
    Emit(PreemptionStarted{victim, j.id, c.reason, checkpoint}, now, sink);
    if (!checkpoint) Emit(JobPreempted{victim, lost}, now, sink);
  }
  return true;
}

void Engine::HoldNodesFor(const Job& j, std::set<NodeIndex> hold, Instant now, const Sink& sink) {
  if (auto held = state_.reservations.find(j.id); held != state_.reservations.end()) {
    hold.insert(held->second.begin(), held->second.end());
    Emit(ReservationReleased{j.id}, now, sink);
  }
  std::erase_if(hold, [this](NodeIndex n) { return state_.cluster.node(n).reserved_for >= 0; });
  if (!hold.empty()) Emit(NodesReserved{j.id, std::vector<NodeIndex>(hold.begin(), hold.end())}, now, sink);
}

void Engine::MaybeReserveForGang(Job& j, PoolId pool, Instant now, const Sink& sink) {
  // One hold per pool at a time, so that holds cannot starve the pool.
  for (const auto& [job, nodes] : state_.reservations) {
    if (!nodes.empty() && state_.cluster.node(nodes.front()).pool == pool) return;
  }
  Demand d = j.spec.demand;
  d.allowed_pools = uint64_t{1} << pool;
  struct Pick {
    int64_t free_milli;
    NodeIndex node;
  };
  std::vector<Pick> picks;
  for (NodeIndex n = 0; n < state_.cluster.node_count(); ++n) {
    const Node& node = state_.cluster.node(n);
    if (node.pool != pool || node.condition != NodeCondition::kReady || node.reserved_for >= 0) continue;
    if (policy_.Feasibility(Pristine(node), d) != FitFailure::kNone) continue;
    picks.push_back({node.gpu_milli_free_total, n});
  }
  std::sort(picks.begin(), picks.end(), [](const Pick& a, const Pick& b) {
    return a.free_milli != b.free_milli ? a.free_milli > b.free_milli : a.node < b.node;
  });
  std::vector<NodeIndex> hold;
  int replicas = 0;
  for (const Pick& p : picks) {
    if (replicas >= j.spec.replicas) break;
    hold.push_back(p.node);
    replicas += ReplicasPerEmptyNode(Pristine(state_.cluster.node(p.node)), d);
  }
  if (replicas < j.spec.replicas) return;
  Emit(NodesReserved{j.id, std::move(hold)}, now, sink);
}

Engine::PendingExplanation Engine::WhyPending(JobId id) const {
  PendingExplanation out;
  const Job* j = state_.find_job(id);
  if (!j) {
    out.text = "job " + std::to_string(id) + " is not live";
    return out;
  }
  if (j->state != JobState::kPending) {
    out.text = std::string("job is ") + JobStateName(j->state);
    return out;
  }
  out.pending = true;
  if (j->victims_pending > 0) {
    out.victims_pending = j->victims_pending;
    out.text = "waiting for " + std::to_string(j->victims_pending) + " preempted job(s) to checkpoint";
    return out;
  }
  for (PoolId p = 0; p < state_.pools.size(); ++p) {
    if (!(j->spec.demand.allowed_pools >> p & 1)) continue;
    const TenantPool& tp = state_.tenant_pool(j->spec.tenant, p);
    PendingReason r;
    r.pool = p;
    std::string why;
    const int64_t need = j->spec.total_gpu_milli();
    if (tp.usage.gpu_milli + need > tp.quota.elastic_limit_milli) {
      r.kind = PendingReason::Kind::kQuotaExhausted;
      r.used_milli = tp.usage.gpu_milli;
      r.limit_milli = tp.quota.elastic_limit_milli;
      why = "tenant quota exhausted (uses " + std::to_string(tp.usage.gpu_milli) + " of " +
            std::to_string(tp.quota.elastic_limit_milli) + " GPU milli)";
    } else {
      Demand d = j->spec.demand;
      d.allowed_pools = uint64_t{1} << p;
      if (state_.reservations.contains(id)) d.reservation = id;
      for (const Node& n : state_.cluster.nodes()) {
        ++r.rejection.nodes_by_reason[static_cast<int>(policy_.Feasibility(n, d))];
      }
      r.kind = r.rejection.nodes_by_reason[0] > 0 ? PendingReason::Kind::kQueued : PendingReason::Kind::kNoFittingNode;
      why = r.kind == PendingReason::Kind::kQueued ? "waits its turn in the queue" : r.rejection.Describe();
    }
    out.text += (out.text.empty() ? "" : "; ") + std::string("pool '") + state_.pools[p].name + "': " + why;
    out.pools.push_back(std::move(r));
  }
  return out;
}

}  // namespace gpupool
