#include "src/server/agent_service.h"

#include <algorithm>

#include "src/api/tenant_ids.h"
#include "src/model/gpu_catalog.h"
#include "src/model/mig.h"
#include "src/base/time_text.h"
#include "src/server/auth.h"

namespace gpupool {
namespace {

// What the Engine takes of a node's MIG instances: profile and first slice.
std::vector<MigSlot> SlotsOf(const std::vector<MigInstance>& instances) {
  std::vector<MigSlot> slots;
  for (const MigInstance& m : instances) slots.push_back({m.profile, m.start});
  return slots;
}

constexpr size_t kMaxScrubsPerNode = 64;
constexpr size_t kMaxEndedPlacements = 200000;

bool Live(const Job* j) { return j && (j->state == JobState::kRunning || j->state == JobState::kCheckpointing); }

std::string SpecText(const NodeSpec& s, const std::string& cls) {
  std::string t = std::to_string(s.gpu_count) + " GPUs";
  if (s.gpu_count > 0) t += " (" + Catalog::Builtin().Get(s.gpu_model).name + ")";
  t += ", " + std::to_string(s.cpu_milli) + " CPU milli, " + std::to_string(s.memory_mib) + " MiB";
  if (!cls.empty()) t += ", class " + cls;
  return t;
}

// Event bodies that name a job, a preempted job or a node.
template <class T>
concept NamesJob = requires(const T& b) { JobId{b.job}; };
template <class T>
concept NamesVictim = requires(const T& b) { JobId{b.victim}; };
template <class T>
concept NamesNode = requires(const T& b) { NodeIndex{b.node}; };

// Protocol 1's agents older than TaskOrder's container fields get none.
void StripContainerFields(TaskOrder& t) {
  t.image.clear();
  t.shm_mib = 1024;
  t.network_isolated = false;
  t.memory_mib = 0;
  t.cpu_milli = 0;
  t.uid = 0;
  t.uid_count = 0;
}

}  // namespace

AgentService::AgentService(Duration heartbeat_interval, Duration heartbeat_timeout, LogStore* logs,
                           std::string incarnation)
    : interval_(heartbeat_interval),
      timeout_(heartbeat_timeout),
      logs_(logs),
      incarnation_(std::move(incarnation)) {}

std::string AgentService::NewIncarnation(Instant start) {
  return std::to_string(ToMillis(start)) + "-" + NewToken().substr(4, 8);
}

std::optional<NodeIndex> AgentService::FindNode(const std::string& name) const {
  auto it = node_by_name_.find(name);
  if (it == node_by_name_.end()) return std::nullopt;
  return it->second;
}

void AgentService::SizeFor(const EngineState& st) {
  const size_t n = static_cast<size_t>(st.cluster.node_count());
  if (jobs_on_node_.size() < n) jobs_on_node_.resize(n);
  if (scrubs_.size() < n) scrubs_.resize(n);
  if (desired_.size() < n) desired_.resize(n);
  if (marked_.size() < n) marked_.resize(n, 0);
  if (renew_.size() < n) renew_.resize(n, 0);
}

void AgentService::MarkDirty(NodeIndex node) {
  if (node < 0 || static_cast<size_t>(node) >= marked_.size() || marked_[node]) return;
  marked_[node] = 1;
  dirty_.push_back(node);
}

void AgentService::MarkJob(JobId job, const EngineState& st) {
  if (auto it = nodes_of_job_.find(job); it != nodes_of_job_.end()) {
    for (NodeIndex n : it->second) MarkDirty(n);
  }
  if (const Job* j = st.find_job(job)) {
    for (const ReplicaPlacement& p : j->placements) MarkDirty(p.node);
  }
}

// The nodes whose desired state the event may change: called once the
// engine applied it (the state has the job's new placements) and before it
// is indexed here (nodes_of_job_ still has the old ones).
void AgentService::MarkEvent(const Event& e, const EngineState& st) {
  std::visit(
      [&](const auto& b) {
        using T = std::decay_t<decltype(b)>;
        if constexpr (NamesJob<T>) MarkJob(b.job, st);
        if constexpr (NamesVictim<T>) MarkJob(b.victim, st);
        if constexpr (NamesNode<T>) MarkDirty(b.node);
        if constexpr (std::is_same_v<T, NodeAdded>) MarkDirty(st.cluster.node_count() - 1);
      },
      e.body);
}

void AgentService::RememberPlacement(const Job& j) {
  const int32_t attempt = Attempt(j);
  for (const ReplicaPlacement& p : j.placements) placed_[{j.id, p.id, attempt}] = p.node;
}

int AgentService::PlacementOf(const Job& j, int32_t replica, NodeIndex node) {
  for (size_t i = 0; i < j.placements.size(); ++i) {
    if (j.placements[i].id == replica) return j.placements[i].node == node ? static_cast<int>(i) : -1;
  }
  return -1;
}

void AgentService::Rebuild(const EngineState& st) {
  node_by_name_.clear();
  const int n = st.cluster.node_count();
  for (NodeIndex i = 0; i < n; ++i) node_by_name_[st.cluster.node_name(i)] = i;
  jobs_on_node_.assign(n, {});
  SizeFor(st);
  nodes_of_job_.clear();
  for (const auto& [id, j] : st.running) {
    RememberPlacement(*j);
    std::vector<NodeIndex>& nodes = nodes_of_job_[id];
    for (const ReplicaPlacement& p : j->placements) {
      jobs_on_node_[p.node].insert(id);
      nodes.push_back(p.node);
    }
    if (j->state == JobState::kCheckpointing && j->spec.task.empty()) settle_.push_back(id);
  }
  progress_.clear();
  for (NodeIndex i = 0; i < n; ++i) MarkDirty(i);
}

void AgentService::Forget(JobId job) {
  // Its placements stay known for a while: the last output may still come.
  for (auto it = placed_.lower_bound({job, 0, 0}); it != placed_.end() && std::get<0>(it->first) == job; ++it) {
    ended_placements_.push_back(it->first);
  }
  while (ended_placements_.size() > kMaxEndedPlacements) {
    placed_.erase(ended_placements_.front());
    ended_placements_.pop_front();
  }
  auto it = nodes_of_job_.find(job);
  if (it != nodes_of_job_.end()) {
    for (NodeIndex n : it->second) jobs_on_node_[n].erase(job);
    nodes_of_job_.erase(it);
  }
  progress_.erase(job);
}

void AgentService::AddScrub(NodeIndex node, int64_t id, GpuMask gpus) {
  std::vector<Scrub>& v = scrubs_[node];
  v.push_back({id, gpus});
  if (v.size() > kMaxScrubsPerNode) {  // an agent that never reports: one order covers them all
    Scrub merged{v.back().id, 0};
    for (const Scrub& s : v) merged.gpus |= s.gpus;
    v.assign(1, merged);
  }
}

void AgentService::OnEvent(const Event& e, const EngineState& st) {
  SizeFor(st);  // replay at start-up may come before Rebuild
  MarkEvent(e, st);
  std::visit(
      [&](const auto& b) {
        using T = std::decay_t<decltype(b)>;
        if constexpr (std::is_same_v<T, NodeAdded>) {
          node_by_name_[b.spec.name] = st.cluster.node_count() - 1;
        } else if constexpr (std::is_same_v<T, JobPlaced>) {
          Forget(b.job);
          if (const Job* j = st.find_job(b.job)) RememberPlacement(*j);
          std::vector<NodeIndex>& nodes = nodes_of_job_[b.job];
          for (const PlacedReplica& r : b.replicas) {
            jobs_on_node_[r.node].insert(b.job);
            nodes.push_back(r.node);
          }
        } else if constexpr (std::is_same_v<T, JobFinished> || std::is_same_v<T, JobCancelled> ||
                             std::is_same_v<T, JobReclaimed> || std::is_same_v<T, JobInterrupted>) {
          Forget(b.job);
        } else if constexpr (std::is_same_v<T, JobResized>) {
          // SCALE-7: replicas left or joined; the job's nodes are its placements now.
          if (const Job* j = st.find_job(b.job); Live(j)) {
            RememberPlacement(*j);
            std::vector<NodeIndex>& nodes = nodes_of_job_[b.job];
            for (NodeIndex n : nodes) jobs_on_node_[n].erase(b.job);
            nodes.clear();
            for (const ReplicaPlacement& p : j->placements) {
              jobs_on_node_[p.node].insert(b.job);
              nodes.push_back(p.node);
            }
          }
        } else if constexpr (std::is_same_v<T, JobPreempted>) {
          Forget(b.victim);
        } else if constexpr (std::is_same_v<T, GpusScrubbed>) {
          AddScrub(b.node, e.seq, b.gpus);
        } else if constexpr (std::is_same_v<T, NodeUp>) {
          const int gpus = st.cluster.node(b.node).gpu_count;
          if (gpus > 0) AddScrub(b.node, e.seq, static_cast<GpuMask>((1u << gpus) - 1));
        } else if constexpr (std::is_same_v<T, PreemptionStarted>) {
          const Job* j = st.find_job(b.victim);
          if (b.checkpoint && j && j->spec.task.empty()) settle_.push_back(b.victim);
        } else if constexpr (std::is_same_v<T, ReclaimStarted>) {
          const Job* j = st.find_job(b.job);
          if (b.checkpoint && j && j->spec.task.empty()) settle_.push_back(b.job);
        }
      },
      e.body);
}

void AgentService::Settle(Engine& engine, Instant now, const Engine::Sink& sink) {
  while (!settle_.empty()) {
    std::vector<JobId> jobs;
    jobs.swap(settle_);
    for (JobId id : jobs) {
      const Job* j = engine.state().find_job(id);
      if (j && j->state == JobState::kCheckpointing) (void)engine.CheckpointDone(id, now, sink);
    }
  }
}

// The node the agent describes; an error names the field it cannot take.
std::optional<ApiError> AgentService::SpecOf(const RegisterRequest& r,
                                             const std::map<std::string, uint16_t>& node_classes, NodeSpec& spec) {
  spec.name = r.node;
  spec.cpu_milli = r.cpu_milli;
  spec.memory_mib = r.memory_mib;
  spec.gpu_count = static_cast<int>(r.gpus.size());
  if (spec.gpu_count > kMaxGpusPerNode) {
    return BadField("gpus", "at most " + std::to_string(kMaxGpusPerNode) + " GPUs per node (got " +
                                std::to_string(spec.gpu_count) + ")");
  }
  for (size_t i = 0; i < r.gpus.size(); ++i) {
    const GpuDevice& g = r.gpus[i];
    const std::string path = "gpus[" + std::to_string(i) + "]";
    if (g.index != static_cast<int>(i)) {
      return BadField(path + ".index", "GPUs must be listed by index from 0 (got " + std::to_string(g.index) + ")");
    }
    const auto id = Catalog::Builtin().Find(g.model);
    if (!id) {
      return BadField(path + ".model", "GPU '" + g.product + "' is not a catalog model (got '" + g.model +
                                           "'; known: " + Catalog::Builtin().Names() + ")");
    }
    if (i > 0 && *id != spec.gpu_model) {
      return BadField(path + ".model", "a node holds GPUs of one model (GPU 0 is " +
                                           Catalog::Builtin().Get(spec.gpu_model).name + ", this one " + g.model + ")");
    }
    spec.gpu_model = *id;
  }
  if (r.node_class.empty()) return std::nullopt;
  auto it = node_classes.find(r.node_class);
  if (it == node_classes.end()) {
    std::string known;
    for (const auto& [n, v] : node_classes) known += (known.empty() ? "" : ", ") + n;
    return BadField("class", "unknown node class '" + r.node_class + "' (known: " +
                                 (known.empty() ? "none configured" : known) + ")");
  }
  spec.attr_class = it->second;
  return std::nullopt;
}

// A pool with `isolation: required` takes no node whose tasks would run as
// plain processes: refused before anything is decided (a new node does not
// join; a known one gets no session and stays silent).
std::optional<ApiError> AgentService::CheckIsolation(Engine& engine, const RegisterRequest& r,
                                                     const NodeSpec& spec) const {
  if (r.isolation == "container") return std::nullopt;
  const EngineState& st = engine.state();
  std::vector<PoolId> pools;
  if (const auto found = FindNode(r.node)) {
    pools.push_back(st.cluster.node(*found).pool);
    if (auto home = st.lent_nodes.find(*found); home != st.lent_nodes.end()) pools.push_back(home->second);
  } else if (auto p = engine.PoolFor(spec.gpu_model, r.region)) {
    pools.push_back(*p);
  }
  for (PoolId p : pools) {
    if (p < isolation_required_.size() && isolation_required_[p]) {
      return BadField("isolation", "pool '" + st.pools[p].name +
                                       "' requires isolated tasks; this agent runs them as plain processes "
                                       "(isolation: " + r.isolation +
                                       "; no OCI runtime: install runc, or run the agent with --runtime oci)");
    }
  }
  return std::nullopt;
}

// A known node must come back as it was; a new one is added. Sets `node`.
std::optional<ApiError> AgentService::JoinNode(Engine& engine, const RegisterRequest& r, const NodeSpec& spec,
                                               const std::map<std::string, uint16_t>& node_classes, Instant now,
                                               const Engine::Sink& sink, NodeIndex& node) {
  if (auto found = FindNode(r.node)) {
    node = *found;
    const Node& have = engine.state().cluster.node(node);
    const bool same = have.cpu_milli_total == spec.cpu_milli && have.memory_mib_total == spec.memory_mib &&
                      have.gpu_count == spec.gpu_count && (spec.gpu_count == 0 || have.gpu_model == spec.gpu_model) &&
                      have.attr_class == spec.attr_class;
    if (same) return std::nullopt;
    NodeSpec was;
    was.cpu_milli = have.cpu_milli_total;
    was.memory_mib = have.memory_mib_total;
    was.gpu_count = have.gpu_count;
    was.gpu_model = have.gpu_model;
    std::string was_class;
    for (const auto& [n, v] : node_classes) was_class = v == have.attr_class && have.attr_class ? n : was_class;
    return MakeApiError(409, "conflict",
                        "node '" + r.node + "' is registered with " + SpecText(was, was_class) +
                            "; this agent reports " + SpecText(spec, r.node_class) +
                            " (a node's resources cannot change under a running pool)");
  }
  auto added = engine.AddNode(spec, r.region, r.zone, r.rack, now, sink);
  if (!added) {
    // The one refusal a valid report can meet: no pool takes the node.
    const bool no_pool = added.error().message.find("no pool selects") != std::string::npos;
    return BadField(no_pool ? (r.gpus.empty() ? "region" : "gpus[0].model") : "node", added.error().message);
  }
  node = *added;
  return std::nullopt;
}

AgentService::Outcome AgentService::Register(Engine& engine, const RegisterRequest& r,
                                             const std::map<std::string, uint16_t>& node_classes, Instant now,
                                             const Engine::Sink& sink) {
  Outcome out;
  if (r.protocol < kOldestAgentProtocol) {
    out.error = BadField("protocol", "agent protocol " + std::to_string(r.protocol) + " is too old for this server "
                                         "(it accepts " + std::to_string(kOldestAgentProtocol) + " to " +
                                         std::to_string(kAgentProtocol) + "): upgrade the agent");
    return out;
  }
  NodeSpec spec;
  NodeIndex node = -1;
  out.error = SpecOf(r, node_classes, spec);
  if (!out.error) out.error = CheckIsolation(engine, r, spec);
  if (!out.error) out.error = JoinNode(engine, r, spec, node_classes, now, sink, node);
  if (out.error) return out;
  // EXEC-7: the MIG modes and instances the hardware has.
  for (size_t i = 0; i < r.gpus.size(); ++i) {
    auto ok = engine.ReportMigLayout(node, static_cast<int32_t>(i), r.gpus[i].mig_enabled, SlotsOf(r.gpus[i].mig), now,
                                     sink);
    if (!ok) {
      out.error = BadField("gpus[" + std::to_string(i) + "].mig", ok.error().message);
      return out;
    }
  }
  (void)engine.Heartbeat(node, now, sink);
  // A new session; the server's start time (boot_) keeps it unique across restarts.
  sessions_[node] = boot_ + "-" + std::to_string(++next_session_);
  agent_info_[node] = AgentInfo{r.isolation_given, r.isolation, r.metrics_url_given, r.protocol >= 2};
  MarkDirty(node);
  out.reply = r.protocol >= 2 ? FullReplyOf(Current(engine.state(), node), incarnation_) : Desired(engine.state(), node);
  return out;
}

// EXEC-11: the GPUs the agent samples unhealthy, as one set (GPUs the node
// does not have are left out rather than failing the heartbeat). A
// heartbeat without samples says nothing about health.
void AgentService::ReportHealth(Engine& engine, NodeIndex node, const std::vector<GpuSample>& gpus, Instant now,
                                const Engine::Sink& sink) {
  if (gpus.empty()) return;
  const int gpu_count = engine.state().cluster.node(node).gpu_count;
  GpuMask unhealthy = 0;
  std::string reason;
  for (const GpuSample& g : gpus) {
    if (g.healthy || g.index < 0 || g.index >= gpu_count) continue;
    unhealthy |= static_cast<GpuMask>(1u << g.index);
    if (!reason.empty()) reason += "; ";
    reason += "GPU " + std::to_string(g.index) + ": " + (g.health_detail.empty() ? "unhealthy" : g.health_detail);
  }
  if (reason.size() > kMaxHealthReasonBytes) reason.resize(kMaxHealthReasonBytes);
  (void)engine.ReportGpuHealth(node, unhealthy, std::move(reason), now, sink);
}

AgentService::Outcome AgentService::Heartbeat(Engine& engine, const HeartbeatRequest& r, Instant now,
                                              const Engine::Sink& sink) {
  Outcome out;
  const auto found = FindNode(r.node);
  if (!found) {
    out.error = MakeApiError(404, "not_found", "node '" + r.node + "' is not registered (the agent registers first)");
    return out;
  }
  const NodeIndex node = *found;
  auto session = sessions_.find(node);
  if (session == sessions_.end()) {
    sessions_[node] = r.session;  // the server restarted: the agent that speaks first keeps the node
    MarkDirty(node);              // watches check it
  } else if (session->second != r.session) {
    out.error = MakeApiError(409, "conflict",
                             "another agent registered for node '" + r.node +
                                 "' after this one; only the latest may act for it (run one agent per node)",
                             "session");
    return out;
  }
  (void)engine.Heartbeat(node, now, sink);
  ReportHealth(engine, node, r.gpus, now, sink);
  // EXEC-7: the instances of its GPUs in MIG mode now (an agent without MIG
  // reports sends none: registration's stand). A report the Engine refuses
  // changes nothing; GET /v1/nodes shows what the agent said.
  for (const auto& [gpu, instances] : r.mig) (void)engine.ReportMigLayout(node, gpu, true, SlotsOf(instances), now, sink);
  ReportTelemetry(engine, node, r.gpus, now, sink);
  ApplyTaskReports(engine, TallyTasks(engine.state(), node, r.tasks), now, sink);
  for (const ScrubReport& s : r.scrubs) {
    if (!s.ok) continue;  // the order stays; the agent retries and no task starts on those GPUs
    std::vector<Scrub>& v = scrubs_[node];
    const size_t before = v.size();
    v.erase(std::remove_if(v.begin(), v.end(), [&](const Scrub& x) { return x.id == s.id; }), v.end());
    if (v.size() != before) MarkDirty(node);
  }
  Settle(engine, now, sink);
  out.reply = r.protocol >= 2 ? Acknowledgement(engine.state(), node) : Desired(engine.state(), node);
  out.reply.logs = StoreLogs(node, r.logs);
  return out;
}

// OPS-2: the GPUs' telemetry feeds hotspot detection (GPUs the node does
// not have are left out rather than failing the heartbeat).
void AgentService::ReportTelemetry(Engine& engine, NodeIndex node, const std::vector<GpuSample>& gpus, Instant now,
                                   const Engine::Sink& sink) {
  if (!engine.config().hotspots.enabled || gpus.empty()) return;
  std::vector<GpuTelemetry> telemetry;
  const int gpu_count = engine.state().cluster.node(node).gpu_count;
  for (const GpuSample& g : gpus) {
    if (g.index < 0 || g.index >= gpu_count) continue;
    GpuTelemetry t;
    t.gpu = g.index;
    t.util_pct = g.util_pct;
    t.memory_used_pct = g.memory_total_mib > 0 ? 100.0 * static_cast<double>(g.memory_used_mib) /
                                                     static_cast<double>(g.memory_total_mib)
                                               : -1;
    t.temperature_c = g.temperature_c;
    telemetry.push_back(t);
  }
  (void)engine.ReportNodeTelemetry(node, telemetry, now, sink);
}

const Job* AgentService::CurrentAttempt(const EngineState& st, JobId job, int32_t attempt) {
  const Job* j = st.find_job(job);
  return Live(j) && Attempt(*j) == attempt ? j : nullptr;
}

// What the node's task reports say, per job; reports of attempts no longer
// placed on this node are stale (the agent stops those tasks) and ignored.
AgentService::TaskTally AgentService::TallyTasks(const EngineState& st, NodeIndex node,
                                                 const std::vector<TaskReport>& tasks) {
  TaskTally tally;
  for (const TaskReport& t : tasks) {
    const Job* j = CurrentAttempt(st, t.job, t.attempt);
    const int index = j ? PlacementOf(*j, t.replica, node) : -1;
    if (index < 0) continue;
    Progress& p = progress_[t.job];
    if (p.attempt != t.attempt) p = Progress{t.attempt, {}, {}};
    switch (t.phase) {
      case TaskPhase::kRunning:
        if (t.gpu_memory_mib > 0) tally.memory.push_back({t.job, t.attempt, index, t.gpu_memory_mib});
        if (t.util_pct >= 0) {
          auto& [attempt, pct] = tally.util[t.job];
          attempt = t.attempt;
          pct = std::max(pct, t.util_pct);
        }
        break;
      case TaskPhase::kExited:
        if (t.exit_code != 0 || t.signal != 0 || !t.error.empty()) {
          tally.failed[t.job] = t.attempt;
          if (!t.error.empty()) tally.reasons[t.job] = t.error;
        }
        p.exited.insert(t.replica);
        tally.reported[t.job] = t.attempt;
        break;
      case TaskPhase::kStartFailed:
        tally.failed[t.job] = t.attempt;
        tally.reasons[t.job] = t.error;
        break;
      case TaskPhase::kCheckpointed:
        p.checkpointed.insert(t.replica);
        tally.reported[t.job] = t.attempt;
        break;
    }
  }
  return tally;
}

// Each engine call below may start a scheduling pass that ends or moves
// other jobs: every decision re-checks that the job is still the attempt
// the agent reported on.
void AgentService::ApplyTaskReports(Engine& engine, const TaskTally& tally, Instant now, const Engine::Sink& sink) {
  const EngineState& st = engine.state();
  for (const auto& [job, attempt] : tally.failed) {
    if (!CurrentAttempt(st, job, attempt)) continue;
    const auto reason = tally.reasons.find(job);
    (void)engine.Finish(job, false, now, sink, reason == tally.reasons.end() ? "" : reason->second);
  }
  for (const auto& [job, attempt] : tally.reported) {
    const Job* j = CurrentAttempt(st, job, attempt);
    if (!j || tally.failed.count(job)) continue;
    const Progress& p = progress_[job];
    const size_t replicas = j->placements.size();
    // Replicas a resize removed may have reported too: count the current ones.
    auto current = [j](const std::set<int32_t>& ids) {
      return static_cast<size_t>(std::count_if(j->placements.begin(), j->placements.end(),
                                               [&ids](const ReplicaPlacement& r) { return ids.count(r.id) > 0; }));
    };
    if (current(p.exited) == replicas) {
      // Every replica exited 0: the job is done, even if a checkpoint was
      // asked for meanwhile (Finish takes a checkpointing job).
      (void)engine.Finish(job, true, now, sink);
    } else if (j->state == JobState::kCheckpointing) {
      // A replica that exited has nothing left to save.
      std::set<int32_t> done = p.checkpointed;
      done.insert(p.exited.begin(), p.exited.end());
      if (current(done) == replicas) (void)engine.CheckpointDone(job, now, sink);
    }
  }
  for (const auto& [job, u] : tally.util) {
    if (CurrentAttempt(st, job, u.first)) (void)engine.ReportUtilization(job, u.second, now, sink);
  }
  for (const TaskTally::Memory& m : tally.memory) {
    if (CurrentAttempt(st, m.job, m.attempt)) (void)engine.ReportTaskMemory(m.job, m.replica, m.mib, now, sink);
  }
}

std::vector<LogAck> AgentService::StoreLogs(NodeIndex node, const std::vector<LogChunk>& chunks) {
  std::vector<LogAck> acks;
  for (const LogChunk& c : chunks) {
    LogAck a{c.job, c.replica, c.attempt, c.offset + static_cast<int64_t>(c.data.size())};
    auto it = placed_.find({c.job, c.replica, c.attempt});
    if (it == placed_.end() || it->second != node || !logs_) {
      acks.push_back(a);  // not this node's task: consumed, not stored
      continue;
    }
    auto held = logs_->Append(c);
    if (held) {
      a.bytes = *held;
    } else if (held.error().code == ErrorCode::kResourceExhausted) {
      a.bytes = c.offset;  // a full disk: the agent keeps the chunk and sends it again
    }  // on another write error the chunk is dropped (logs are diagnostics)
    acks.push_back(a);
  }
  return acks;
}

std::string AgentService::EncodeScrubs() const {
  nlohmann::json nodes = nlohmann::json::object();
  for (size_t n = 0; n < scrubs_.size(); ++n) {
    if (scrubs_[n].empty()) continue;
    nlohmann::json orders = nlohmann::json::array();
    for (const Scrub& s : scrubs_[n]) orders.push_back(nlohmann::json::array({s.id, s.gpus}));
    nodes[std::to_string(n)] = std::move(orders);
  }
  return nlohmann::json{{"version", 1}, {"nodes", std::move(nodes)}}.dump();
}

void AgentService::RenewRevisions() {
  for (size_t n = 0; n < renew_.size(); ++n) {
    renew_[n] = 1;
    MarkDirty(static_cast<NodeIndex>(n));
  }
}

void AgentService::ForgetScrubs() {
  for (size_t n = 0; n < scrubs_.size(); ++n) {
    if (!scrubs_[n].empty()) MarkDirty(static_cast<NodeIndex>(n));
    scrubs_[n].clear();
  }
}

Status AgentService::LoadScrubs(const std::string& text, int node_count) {
  const nlohmann::json j = nlohmann::json::parse(text, nullptr, false);
  if (j.is_discarded() || !j.is_object() || j.value("version", 0) != 1 || !j.contains("nodes") ||
      !j["nodes"].is_object()) {
    return InvalidArgument("agent_scrubs: not a scrub-order record");
  }
  if (scrubs_.size() < static_cast<size_t>(node_count)) scrubs_.resize(node_count);
  for (const auto& [key, orders] : j["nodes"].items()) {
    int n = -1;
    try {
      n = std::stoi(key);
    } catch (const std::exception&) {
    }
    if (n < 0 || n >= node_count || !orders.is_array()) return InvalidArgument("agent_scrubs: bad node '" + key + "'");
    for (const auto& o : orders) {
      if (!o.is_array() || o.size() != 2 || !o[0].is_number_integer() || !o[1].is_number_unsigned()) {
        return InvalidArgument("agent_scrubs: bad order for node " + key);
      }
      scrubs_[n].push_back(Scrub{o[0].get<int64_t>(), static_cast<GpuMask>(o[1].get<uint64_t>())});
    }
  }
  return {};
}

NodeDesired AgentService::ComputeNode(const EngineState& st, NodeIndex node) const {
  NodeDesired r;
  r.node = st.cluster.node_name(node);
  r.node_index = node;
  if (auto s = sessions_.find(node); s != sessions_.end()) r.session = s->second;
  r.heartbeat_interval_ms = ToMillis(interval_);
  r.fence_after_ms = ToMillis(timeout_);
  const Node& n = st.cluster.node(node);
  if (n.pool < st.pools.size()) r.pool = st.pools[n.pool].name;
  for (JobId id : jobs_on_node_[node]) {  // ascending ids: tasks come out in key order
    const Job* j = st.find_job(id);
    if (!Live(j) || j->spec.task.empty()) continue;
    for (size_t i = 0; i < j->placements.size(); ++i) {
      const ReplicaPlacement& p = j->placements[i];
      if (p.node != node) continue;
      TaskOrder t;
      t.job = id;
      t.replica = p.id;
      t.attempt = Attempt(*j);
      t.name = j->spec.name;
      t.tenant = st.tenants[j->spec.tenant].name;
      t.action = j->state == JobState::kCheckpointing ? TaskAction::kCheckpoint : TaskAction::kRun;
      t.idle_notice = j->idle_suspected;
      for (int g = 0; g < n.gpu_count; ++g) {
        if (p.gpus >> g & 1) t.gpus.push_back(g);
      }
      const Demand d = j->spec.replica_demand(static_cast<int>(i));
      t.gpu_mode = t.gpus.empty() ? "none" : GpuModeName(n.gpu_mode[t.gpus[0]]);
      t.gpu_milli = std::min<int32_t>(d.gpu_milli, kMilliPerGpu);
      t.gpu_memory_mib = d.gpu_memory_mib;
      if (t.gpu_mode == "mig" && p.allocation >= 0 && n.mig_table > 0) {
        const Allocation& a = st.cluster.allocation(p.allocation);
        const MigTable& table = MigTables()[n.mig_table - 1];
        if (a.mig_profile >= 0 && a.mig_profile < static_cast<int>(table.profiles.size())) {
          t.mig_profile = table.profiles[a.mig_profile].name;
          t.mig_start = a.mig_start;
        }
      }
      t.task = j->spec.task;
      // The container: the job's choices, the replica's resources as
      // limits, the tenant's uid range (the same on every node).
      t.image = j->spec.task.image;
      t.shm_mib = j->spec.task.shm_mib;
      t.network_isolated = j->spec.task.network_isolated;
      t.memory_mib = d.memory_mib;
      t.cpu_milli = d.cpu_milli;
      std::tie(t.uid, t.uid_count) = TenantUidRange(j->spec.tenant);
      for (const ReplicaPlacement& m : j->placements) t.members.push_back({m.id, st.cluster.node_name(m.node)});
      std::sort(t.members.begin(), t.members.end(),
                [](const ReplicaMember& a, const ReplicaMember& b) { return a.replica < b.replica; });
      t.generation = j->resizes;
      r.tasks.push_back(DesiredTask{0, std::move(t)});
    }
  }
  for (const Scrub& s : scrubs_[node]) {
    ScrubOrder o{s.id, {}};
    for (int g = 0; g < n.gpu_count; ++g) {
      if (s.gpus >> g & 1) o.gpus.push_back(g);
    }
    r.scrubs.push_back(std::move(o));
  }
  return r;
}

AgentReply AgentService::Desired(const EngineState& st, NodeIndex node) const {
  NodeDesired d = ComputeNode(st, node);
  AgentReply r;
  r.node_index = node;
  r.session = d.session;
  r.heartbeat_interval_ms = d.heartbeat_interval_ms;
  r.fence_after_ms = d.fence_after_ms;
  const auto info = agent_info_.find(node);
  const bool container_fields = info == agent_info_.end() || info->second.container_fields;
  if (info != agent_info_.end() && info->second.knows_pool) r.pool = d.pool;
  const bool members = info != agent_info_.end() && info->second.knows_members;
  for (DesiredTask& t : d.tasks) {
    if (!container_fields) StripContainerFields(t.order);
    if (!members) {
      t.order.members.clear();
      t.order.generation = 0;
    }
    r.tasks.push_back(std::move(t.order));
  }
  r.scrubs = std::move(d.scrubs);
  return r;
}

const NodeDesired& AgentService::Current(const EngineState& st, NodeIndex node) {
  SizeFor(st);
  if (marked_[node] || !desired_[node]) {
    marked_[node] = 0;
    NodeDesiredPtr next = NextRevision(desired_[node].get(), ComputeNode(st, node));
    if (!next && renew_[node] && desired_[node]) {
      auto copy = std::make_shared<NodeDesired>(*desired_[node]);
      ++copy->revision;  // its tasks keep theirs: a watch gets those above the revision it holds
      next = std::move(copy);
    }
    renew_[node] = 0;
    if (next) {
      desired_[node] = next;
      changes_.push_back(std::move(next));
    }
  }
  return *desired_[node];
}

std::vector<NodeDesiredPtr> AgentService::TakeChanges(const EngineState& st) {
  for (NodeIndex n : dirty_) {
    if (marked_[n]) Current(st, n);
  }
  dirty_.clear();
  // A node recomputed twice in one batch is published once, at its newest.
  std::vector<NodeDesiredPtr> out;
  for (const NodeDesiredPtr& d : changes_) {
    if (desired_[d->node_index] == d) out.push_back(d);
  }
  changes_.clear();
  return out;
}

AgentReply AgentService::Acknowledgement(const EngineState& st, NodeIndex node) {
  AgentReply r = FullReplyOf(Current(st, node), incarnation_);
  r.has_desired = false;  // the watch carries it
  r.tasks.clear();
  r.scrubs.clear();
  return r;
}

}  // namespace gpupool
