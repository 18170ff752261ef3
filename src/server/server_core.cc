#include "src/server/server_core.h"

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <shared_mutex>

#include <fcntl.h>
#include <unistd.h>

#include "src/api/tenant_ids.h"
#include "src/base/check.h"
#include "src/base/time_text.h"
#include "src/control/control_loops.h"
#include "src/engine/snapshot.h"
#include "src/server/default_config.h"
#include "src/server/log.h"
#include "src/config/world.h"

namespace gpupool {
namespace {

using Clock = std::chrono::steady_clock;

double SecondsSince(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }


// The workload the FGD-family policies assume before any job is known: the
// typical shapes of a shared GPU cluster (shares, whole GPUs, gangs).
Result<TargetWorkload> DefaultTarget(const ServerConfig& s) {
  std::vector<Demand> demands;
  for (int32_t milli : {250, 500}) demands.push_back(Demand{4000, 16384, 1, milli});
  for (int32_t gpus : {1, 1, 2, 4, 8}) demands.push_back(Demand{8000 * gpus, 65536LL * gpus, gpus, kMilliPerGpu});
  int64_t cpu = 0, gpu = 0;
  for (const NodeGroupConfig& g : s.nodes) {
    cpu += int64_t{g.count} * g.cpu_milli;
    gpu += int64_t{g.count} * g.gpus * kMilliPerGpu;
  }
  if (gpu == 0) gpu = 8 * kMilliPerGpu;
  if (cpu == 0) cpu = 96000;
  return TargetWorkloadOf(demands, cpu, gpu);
}

// The structured form of Engine::WhyPending for the API:
// {"victims_pending": 0, "pools": [{"pool": "h100", "reason": "no_fitting_node",
//   "nodes_by_check": {"gpu_capacity": 12, "cpu": 1}}, ...]}
nlohmann::json PendingJson(const Engine::PendingExplanation& why, const EngineState& st) {
  static constexpr const char* kChecks[] = {"fits",         "unavailable", "pool",   "reserved", "gpu_model",
                                            "gpu_capacity", "cpu",         "memory", "filtered"};
  static_assert(std::size(kChecks) == kFitFailureCount);
  nlohmann::json pools = nlohmann::json::array();
  for (const Engine::PendingReason& r : why.pools) {
    nlohmann::json p{{"pool", st.pools[r.pool].name}};
    using Kind = Engine::PendingReason::Kind;
    if (r.kind == Kind::kQuotaExhausted) {
      p["reason"] = "quota_exhausted";
      p["used_gpus"] = static_cast<double>(r.used_milli) / kMilliPerGpu;
      p["limit_gpus"] = static_cast<double>(r.limit_milli) / kMilliPerGpu;
    } else {
      p["reason"] = r.kind == Kind::kQueued ? "queued" : "no_fitting_node";
      nlohmann::json checks = nlohmann::json::object();
      for (int c = 0; c < kFitFailureCount; ++c) {
        if (r.rejection.nodes_by_reason[c] > 0) checks[kChecks[c]] = r.rejection.nodes_by_reason[c];
      }
      p["nodes_by_check"] = std::move(checks);
    }
    pools.push_back(std::move(p));
  }
  return nlohmann::json{{"victims_pending", why.victims_pending}, {"pools", std::move(pools)}};
}

Status SyncDirectory(const std::string& dir) {
  const int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return IoError(dir + ": cannot open");
  const bool ok = ::fsync(fd) == 0;
  ::close(fd);
  if (!ok) return IoError(dir + ": cannot sync");
  return {};
}

// The names behind the numeric ids that events carry for node classes and
// requirements (their order in the configuration).
// The job labels' names, whose positions events carry as bits of label
// masks: a configuration may add labels at the end, never reorder or drop.
std::string JobLabelNames(const std::vector<std::string>& labels) { return nlohmann::json(labels).dump(); }

std::string AttributeNames(const ServerConfig& s) {
  nlohmann::json j{{"node_classes", nlohmann::json::array()}, {"requirements", nlohmann::json::array()}};
  for (const NodeAttributes& c : s.node_classes) j["node_classes"].push_back(c.name);
  for (const Requirement& r : s.requirements) j["requirements"].push_back(r.name);
  return j.dump();
}

Status WriteFileAtomic(const std::string& path, const std::string& text, mode_t mode) {
  const std::string tmp = path + ".tmp";
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, mode);
  if (fd < 0) return IoError(tmp + ": cannot create");
  const bool ok = ::write(fd, text.data(), text.size()) == static_cast<ssize_t>(text.size()) && ::fsync(fd) == 0;
  ::close(fd);
  if (!ok || ::rename(tmp.c_str(), path.c_str()) != 0) return IoError(path + ": cannot write");
  return {};
}

}  // namespace

Result<std::unique_ptr<ServerCore>> ServerCore::Open(const ServerOptions& options) {
  std::unique_ptr<ServerCore> core(new ServerCore());
  core->options_ = options;
  Result<ServerConfig> config =
      options.config_path.empty()
          ? ParseServerConfig(options.config_text.empty() ? kDefaultServerConfig : options.config_text,
                              "embedded configuration", ".")
          : LoadServerConfig(options.config_path);
  if (!config) return std::unexpected(config.error());
  core->config_ = std::move(*config);
  const ServerConfig& s = core->config_;

  GP_ASSIGN_OR_RETURN(auto journal, OpenSqliteJournal(options.data_dir));  // creates the directory
  core->journal_ = std::move(journal);
  GP_ASSIGN_OR_RETURN(auto token, LoadOrCreateAdminToken(options.data_dir, options.admin_token_file));
  core->admin_token_ = token;
  core->auth_.SetAdmin(token);

  for (const PoolConfig& p : s.pools) core->names_.pools.push_back(p.name);
  core->names_.priorities = s.priorities;
  core->names_.labels = s.job_labels;
  core->names_.max_replicas = s.engine.max_replicas;
  core->names_.default_image = s.server.default_image;
  core->logs_ = std::make_unique<LogStore>(options.data_dir + "/logs");
  core->agents_ = std::make_unique<AgentService>(s.engine.reclaim.poll, s.engine.heartbeat_timeout, core->logs_.get());
  std::vector<bool> isolation_required;
  for (const PoolConfig& p : s.pools) isolation_required.push_back(p.isolation_required);
  core->agents_->set_isolation_required(std::move(isolation_required));
  if (!s.engine.scaling.empty()) {
    // The provider's answers are commands like any other: applied on the
    // engine thread, journaled.
    ServerCore* self = core.get();
    core->provider_ = std::make_unique<CommandNodeProvider>(
        s.server.provider, s.engine.scaling,
        [self](const CommandNodeProvider::Created& c) { self->Execute(ProvisionedNodeCmd{c.pool, c.name, c.rack}); },
        [self](const CommandNodeProvider::Failed& f) { self->Execute(FailScaleOutCmd{f.pool, 1, f.reason}); });
  }
  // The read model answers GET /v1/regions: the configuration's table until
  // a RegionsSet (replayed, or from the read model's snapshot) replaces it.
  core->read_model_.set_config_regions(s.engine.regions);
  GP_TRY(core->Recover());
  return core;
}

Status ServerCore::Recover() {
  const auto started = Clock::now();
  const ServerConfig& s = config_;
  WorldAttributes world = BuildAttributes(s);
  node_classes_ = world.classes;
  names_.requirements = world.requirements;
  AttributeTable attributes = std::move(world.table);
  GP_ASSIGN_OR_RETURN(auto target, DefaultTarget(s));

  GP_ASSIGN_OR_RETURN(auto snapshot, journal_->LatestSnapshot("engine"));
  int64_t engine_seq = 0;
  if (snapshot) {
    auto state = DecodeSnapshot(snapshot->bytes, s.engine.lending);
    if (!state) {
      return std::unexpected(Error{state.error().code, options_.data_dir + ": engine snapshot at seq " +
                                                           std::to_string(snapshot->seq) + ": " +
                                                           state.error().message});
    }
    GP_ASSIGN_OR_RETURN(
        auto engine, RestoreEngine(s.engine, std::move(target), std::move(attributes), std::move(*state), WallNow()));
    engine_ = std::move(engine);
    engine_seq = snapshot->seq;
    // The scrub orders pending at that snapshot (saved with it).
    agents_->Rebuild(engine_->state());
    GP_ASSIGN_OR_RETURN(auto scrubs, journal_->Meta("agent_scrubs"));
    if (scrubs) {
      if (auto ok = agents_->LoadScrubs(*scrubs, engine_->state().cluster.node_count()); !ok) {
        return std::unexpected(Error{ok.error().code, options_.data_dir + ": " + ok.error().message});
      }
    }
  } else {
    GP_ASSIGN_OR_RETURN(auto engine, CreateEngine(s.engine, std::move(target), std::move(attributes)));
    engine_ = std::move(engine);
  }
  GP_ASSIGN_OR_RETURN(auto rm_snapshot, journal_->LatestSnapshot("read-model"));
  if (rm_snapshot) {
    if (auto ok = read_model_.Decode(rm_snapshot->bytes); !ok) {
      return std::unexpected(Error{ok.error().code, options_.data_dir + ": " + ok.error().message});
    }
  }
  const int64_t from = std::min(engine_seq, read_model_.last_seq());
  Status replay_status;
  auto read = journal_->ReadEvents(from, -1, [&](const JournalEvent& je) {
    auto e = EventFromJson(je.json);
    if (!e) {
      replay_status = std::unexpected(Error{e.error().code, options_.data_dir + ": event " + std::to_string(je.seq) +
                                                                ": " + e.error().message});
      return false;
    }
    if (e->seq > engine_seq) {
      if (e->seq != engine_->state().last_seq + 1) {
        replay_status = FailedPrecondition(options_.data_dir + ": the journal skips from event " +
                                           std::to_string(engine_->state().last_seq) + " to " +
                                           std::to_string(e->seq));
        return false;
      }
      engine_->Replay(*e);
      agents_->OnEvent(*e, engine_->state());
      ++replayed_events_;
    }
    if (e->seq > read_model_.last_seq()) read_model_.Apply(*e);
    return true;
  });
  if (!read) return read;
  if (!replay_status) return replay_status;
  GP_ASSIGN_OR_RETURN(auto tokens, journal_->Tokens());
  for (const TokenRecord& t : tokens) auth_.AddTenantHash(t.hash_hex, t.tenant);

  // A state that breaks an invariant is never served (e.g. a GPU held twice).
  if (auto ok = CheckInvariants(engine_->state()); !ok) {
    return FailedPrecondition(options_.data_dir + ": the recovered state is inconsistent: " + ok.error().message);
  }
  if (engine_->state().last_seq == 0) {
    if (auto ok = Bootstrap(); !ok) return ok;
  } else {
    // The pools are part of the journal; the configuration must agree.
    const auto& pools = engine_->state().pools;
    bool same = pools.size() == s.pools.size();
    for (size_t i = 0; same && i < pools.size(); ++i) same = pools[i].name == s.pools[i].name;
    if (!same) {
      std::string have, want;
      for (const Pool& p : pools) have += (have.empty() ? "" : ", ") + p.name;
      for (const PoolConfig& p : s.pools) want += (want.empty() ? "" : ", ") + p.name;
      return FailedPrecondition("configuration pools [" + want + "] differ from the pools of " + options_.data_dir +
                                " [" + have + "]; pools cannot change once the server has state");
    }
    // So are node classes and requirements: events name them by position.
    GP_ASSIGN_OR_RETURN(auto names, journal_->Meta("attribute_names"));
    if (names && *names != AttributeNames(s)) {
      return FailedPrecondition("configuration node_classes and requirements " + AttributeNames(s) +
                                " differ from those of " + options_.data_dir + " " + *names +
                                "; they cannot change once the server has state");
    }
    GP_TRY(CheckJobLabels());
  }
  agents_->Rebuild(engine_->state());
  const auto& pool_scaling = engine_->state().pool_scaling;
  for (size_t p = 0; p < pool_scaling.size(); ++p) {
    if (pool_scaling[p].requested_nodes > 0) {
      unanswered_scale_outs_.emplace_back(static_cast<PoolId>(p), pool_scaling[p].requested_nodes);
    }
  }
  {
    std::unique_lock lock(read_model_.mu());
    read_model_.set_summary(Summarize());
  }
  recovery_seconds_ = SecondsSince(started);
  // Replayed events count toward the next snapshot, so that a crash loop
  // cannot make each start-up replay more than the last.
  events_since_snapshot_ = replayed_events_;
  return {};
}

// The configuration's job_labels against those the data directory's events
// were written with: those must be a prefix (labels are added at the end).
// A data directory from before job labels has none. A grown list is
// recorded at once, so that a later reorder is caught.
Status ServerCore::CheckJobLabels() {
  const std::vector<std::string>& want = config_.job_labels;
  GP_ASSIGN_OR_RETURN(auto stored, journal_->Meta("job_labels"));
  std::vector<std::string> have;
  if (stored) {
    const auto j = nlohmann::json::parse(*stored, nullptr, /*allow_exceptions=*/false);
    if (!j.is_array()) return FailedPrecondition(options_.data_dir + ": job_labels meta is not a list");
    for (const auto& name : j) have.push_back(name.is_string() ? name.get<std::string>() : "");
  }
  if (have.size() > want.size() || !std::equal(have.begin(), have.end(), want.begin())) {
    return FailedPrecondition("configuration job_labels " + JobLabelNames(want) + " do not start with those of " +
                              options_.data_dir + " " + JobLabelNames(have) +
                              "; labels may be added at the end, never reordered or removed");
  }
  if (stored && have.size() == want.size()) return {};
  JournalBatch batch;
  batch.meta.emplace_back("job_labels", JobLabelNames(want));
  return journal_->Commit(batch);
}

Status ServerCore::Bootstrap() {
  const ServerConfig& s = config_;
  const Instant now = WallNow();
  JournalBatch batch;
  std::vector<Event> events;
  const Engine::Sink sink = [&](const Event& e) {
    batch.events.push_back(JournalEvent{e.seq, ToMillis(e.at), EventName(e.body), ToJsonLine(e)});
    events.push_back(e);
  };
  if (static_cast<int64_t>(s.tenants.size()) > kMaxUidTenants) {
    return InvalidArgument("tenants: at most " + std::to_string(kMaxUidTenants) + " (each has its own uid range)");
  }
  GP_ASSIGN_OR_RETURN(auto plan, PlanNodes(s, node_classes_));
  if (auto ok = BuildWorld(s, plan, *engine_, now, sink); !ok) return ok;
  std::vector<std::pair<std::string, std::string>> token_files;  // tenant, token
  for (const TenantConfig& t : s.tenants) {
    const std::string token = NewToken();
    batch.tokens.push_back(TokenRecord{HashToken(token), t.name, ToMillis(now)});
    token_files.emplace_back(t.name, token);
  }
  batch.meta.emplace_back("attribute_names", AttributeNames(s));
  batch.meta.emplace_back("job_labels", JobLabelNames(s.job_labels));
  // Tokens of configured tenants: shown once, in files only the operator
  // reads. Written (and synced) before the commit: if the commit does not
  // happen, the next start bootstraps again and writes new ones.
  if (!token_files.empty()) {
    const std::string dir = (std::filesystem::path(options_.data_dir) / "tokens").string();
    std::error_code ec;
    std::filesystem::create_directories(dir, ec);
    if (ec) return IoError(dir + ": cannot create (" + ec.message() + ")");
    for (const auto& [tenant, token] : token_files) {
      if (auto ok = WriteFileAtomic(dir + "/" + tenant + ".token", token + "\n", 0600); !ok) return ok;
    }
    if (auto ok = SyncDirectory(dir); !ok) return ok;
  }
  if (auto ok = journal_->Commit(batch); !ok) return ok;
  for (const TokenRecord& t : batch.tokens) auth_.AddTenantHash(t.hash_hex, t.tenant);
  for (const Event& e : events) read_model_.Apply(e);
  LogInfo("bootstrapped an empty data directory from the configuration",
          {{"data_dir", options_.data_dir}, {"events", std::to_string(events.size())},
           {"pools", std::to_string(s.pools.size())}, {"tenants", std::to_string(s.tenants.size())}});
  return {};
}

ServerCore::~ServerCore() { Stop(); }

void ServerCore::Start() {
  // Queued before the engine thread starts: answered before any tick.
  for (const auto& [pool, nodes] : unanswered_scale_outs_) {
    LogInfo("failing a scale-out that the provider never answered",
            {{"pool", config_.pools[pool].name}, {"nodes", std::to_string(nodes)}});
    Execute(FailScaleOutCmd{pool, nodes, "server restarted before the provider answered"});
  }
  unanswered_scale_outs_.clear();
  engine_thread_ = std::thread([this] { EngineLoop(); });
  writer_thread_ = std::thread([this] { WriterLoop(); });
  publish_thread_ = std::thread([this] { PublishLoop(); });
}

void ServerCore::Stop() {
  if (!engine_thread_.joinable()) return;
  // First the provider: its commands' answers still go through the queue.
  if (provider_) provider_->Stop();
  Call(SnapshotCmd{});
  {
    std::lock_guard lock(mu_);
    stopping_ = true;
  }
  cv_.notify_all();
  engine_thread_.join();
  {
    std::lock_guard lock(writer_mu_);
    writer_stopping_ = true;
  }
  writer_cv_.notify_all();
  writer_thread_.join();
  {
    std::lock_guard lock(publish_mu_);
    publish_stopping_ = true;
  }
  publish_cv_.notify_all();
  publish_thread_.join();
  // A read-model snapshot the publisher queued after the writer stopped.
  for (WriterItem& it : writer_queue_) CommitOrDie(it.batch);
  writer_queue_.clear();
}

void ServerCore::Execute(Command c, Done done) {
  {
    std::lock_guard lock(mu_);
    if (!stopping_) {
      queue_.push_back(Pending{std::move(c), std::move(done)});
      done = nullptr;
    }
  }
  if (done) {
    done(Reply{MakeApiError(503, "unavailable", "the server is shutting down")});
    return;
  }
  cv_.notify_one();
}

std::future<Reply> ServerCore::Execute(Command c) {
  auto promise = std::make_shared<std::promise<Reply>>();
  std::future<Reply> f = promise->get_future();
  Execute(std::move(c), [promise](Reply r) { promise->set_value(std::move(r)); });
  return f;
}

Reply ServerCore::Run(Command& c, Instant now, const Engine::Sink& sink, WriterItem& item, bool& setup) {
  Engine& e = *engine_;
  const EngineState& st = e.state();
  auto tenant_named = [&](const std::string& name) -> std::optional<TenantId> {
    for (const Tenant& t : st.tenants) {
      if (t.name == name) return t.id;
    }
    return std::nullopt;
  };
  auto engine_error = [](const Error& err, std::string field = "") {
    return Reply{MakeApiError(err.code == ErrorCode::kNotFound ? 404 : 400,
                     err.code == ErrorCode::kNotFound ? "not_found" : "invalid_argument", err.message, field)};
  };
  return std::visit(
      [&](auto& cmd) -> Reply {
        using T = std::decay_t<decltype(cmd)>;
        if constexpr (std::is_same_v<T, CreateTenantCmd>) {
          setup = true;
          if (tenant_named(cmd.name)) return Reply{MakeApiError(409, "conflict", "tenant '" + cmd.name + "' exists", "name")};
          std::vector<std::pair<PoolId, Quota>> quotas;
          for (const auto& [pool, q] : cmd.quotas) {
            const auto pid = names_.pool_id(pool);
            if (!pid) return Reply{MakeApiError(400, "invalid_argument", "unknown pool '" + pool + "'", "quota." + pool)};
            quotas.emplace_back(*pid, q);
          }
          // Validate every quota before deciding anything: a rejected request journals nothing.
          const TenantId next = static_cast<TenantId>(st.tenants.size());
          if (next >= kMaxUidTenants) {  // each tenant has its own uid range below 2^31 (src/api/tenant_ids.h)
            return Reply{MakeApiError(400, "invalid_argument",
                                      "at most " + std::to_string(kMaxUidTenants) + " tenants (each has its own uid range)",
                                      "name")};
          }
          for (const auto& [pid, q] : quotas) {
            if (auto ok = e.CheckQuota(next, pid, q); !ok) {
              return Reply{MakeApiError(400, "invalid_argument", "quota." + st.pools[pid].name + ": " + ok.error().message,
                                        "quota." + st.pools[pid].name)};
            }
          }
          auto id = e.AddTenant(cmd.name, now, sink);
          if (!id) return engine_error(id.error(), "name");
          for (const auto& [pid, q] : quotas) {
            const Status ok = e.SetQuota(*id, pid, q, now, sink);
            GP_CHECK(ok.has_value()) << "quota checked above was refused: " << ok.error().message;
          }
          item.batch.tokens.push_back(TokenRecord{cmd.token_hash, cmd.name, ToMillis(now)});
          return Reply{std::nullopt, *id};
        } else if constexpr (std::is_same_v<T, SetQuotaCmd>) {
          setup = true;
          const auto t = tenant_named(cmd.tenant);
          if (!t) return Reply{MakeApiError(404, "not_found", "no tenant '" + cmd.tenant + "'")};
          const auto pid = names_.pool_id(cmd.pool);
          if (!pid) return Reply{MakeApiError(400, "invalid_argument", "unknown pool '" + cmd.pool + "'", "pool")};
          const Pool& p = st.pools[*pid];
          if (!p.dedicated_to.empty() && cmd.quota.elastic_limit_milli > 0 &&
              std::find(p.dedicated_to.begin(), p.dedicated_to.end(), *t) == p.dedicated_to.end()) {
            return Reply{MakeApiError(400, "invalid_argument", "pool '" + p.name + "' is dedicated to other tenants", "pool")};
          }
          if (auto ok = e.SetQuota(*t, *pid, cmd.quota, now, sink); !ok) {
            const std::string& m = ok.error().message;
            const std::string field = m.rfind("guaranteed:", 0) == 0    ? "guaranteed_gpus"
                                      : m.rfind("elastic limit:", 0) == 0 ? "limit_gpus"
                                      : m.rfind("weight:", 0) == 0        ? "weight"
                                                                          : "pool";
            return engine_error(ok.error(), field);
          }
          return Reply{};
        } else if constexpr (std::is_same_v<T, SubmitJobCmd>) {
          const auto t = tenant_named(cmd.tenant);
          if (!t) return Reply{MakeApiError(400, "invalid_argument", "unknown tenant '" + cmd.tenant + "'", "tenant")};
          cmd.spec.tenant = *t;
          auto id = e.Submit(std::move(cmd.spec), now, sink);
          if (!id) return engine_error(id.error());
          return Reply{std::nullopt, *id};
        } else if constexpr (std::is_same_v<T, CancelJobCmd>) {
          const Job* j = st.find_job(cmd.job);
          if (!j) return Reply{MakeApiError(404, "not_found", "no live job " + std::to_string(cmd.job))};
          if (!cmd.tenant.empty() && st.tenants[j->spec.tenant].name != cmd.tenant) {
            return Reply{MakeApiError(404, "not_found", "no job " + std::to_string(cmd.job))};
          }
          if (auto ok = e.Cancel(cmd.job, now, sink); !ok) return engine_error(ok.error());
          return Reply{std::nullopt, cmd.job};
        } else if constexpr (std::is_same_v<T, AddNodeCmd>) {
          setup = true;
          for (int i = 0; i < st.cluster.node_count(); ++i) {
            if (st.cluster.node_name(i) == cmd.spec.name) {
              return Reply{MakeApiError(409, "conflict", "node '" + cmd.spec.name + "' exists", "name")};
            }
          }
          auto id = e.AddNode(cmd.spec, cmd.region, cmd.zone, cmd.rack, now, sink);
          if (!id) return engine_error(id.error());
          return Reply{std::nullopt, *id};
        } else if constexpr (std::is_same_v<T, IssueNodeTokenCmd>) {
          item.batch.tokens.push_back(TokenRecord{cmd.token_hash, std::string(kNodeTokenPrefix) + cmd.node,
                                                  ToMillis(now)});
          return Reply{};
        } else if constexpr (std::is_same_v<T, RegisterAgentCmd>) {
          AgentService::Outcome o = agents_->Register(e, cmd.request, node_classes_, now, sink);
          if (o.error) return Reply{o.error};
          setup = true;  // a new node changes capacity
          Reply r;
          r.id = o.reply.node_index;
          r.detail = ToJson(o.reply);
          return r;
        } else if constexpr (std::is_same_v<T, AgentHeartbeatCmd>) {
          const size_t before = item.events.size();
          AgentService::Outcome o = agents_->Heartbeat(e, cmd.request, now, sink);
          // A hotspot found or cleared cordons or frees the node, and a GPU
          // that turns unhealthy or healthy changes what it takes: the node
          // view shows it at once, not at the next tick.
          for (size_t i = before; i < item.events.size(); ++i) {
            setup = setup || std::holds_alternative<HotspotDetected>(item.events[i].body) ||
                    std::holds_alternative<HotspotCleared>(item.events[i].body) ||
                    std::holds_alternative<GpuHealthChanged>(item.events[i].body);
          }
          if (o.error) return Reply{o.error};
          Reply r;
          r.id = o.reply.node_index;
          r.detail = ToJson(o.reply);
          return r;
        } else if constexpr (std::is_same_v<T, ProvisionedNodeCmd>) {
          setup = true;  // a new node changes capacity
          auto id = e.AddProvisionedNode(cmd.pool, cmd.name, cmd.rack, now, sink);
          if (!id) {
            // E.g. an operator added a node of that name meanwhile: the
            // request for it fails, so the autoscaler may ask again.
            LogError("a provisioned node could not join", {{"node", cmd.name}, {"error", id.error().message}});
            if (cmd.pool < st.pool_scaling.size() && st.pool_scaling[cmd.pool].requested_nodes > 0) {
              const Status ok = e.FailScaleOut(cmd.pool, 1, "node '" + cmd.name + "' could not join: " + id.error().message,
                                               now, sink);
              GP_CHECK(ok.has_value()) << ok.error().message;
            }
            return engine_error(id.error());
          }
          return Reply{std::nullopt, *id};
        } else if constexpr (std::is_same_v<T, FailScaleOutCmd>) {
          if (auto ok = e.FailScaleOut(cmd.pool, cmd.nodes, cmd.reason, now, sink); !ok) {
            LogError("a failed scale-out could not be recorded", {{"reason", cmd.reason}, {"error", ok.error().message}});
            return engine_error(ok.error());
          }
          return Reply{};
        } else if constexpr (std::is_same_v<T, SetRegionsCmd>) {
          setup = true;  // the scheduling pass that follows may place jobs
          if (auto ok = e.SetRegions(std::move(cmd.policy), now, sink); !ok) {
            // CheckRegionPolicy's message starts with the field's path in the body.
            const std::string& m = ok.error().message;
            const size_t colon = m.find(": ");
            return engine_error(ok.error(), colon == std::string::npos ? "regions" : m.substr(0, colon));
          }
          return Reply{};
        } else if constexpr (std::is_same_v<T, ExplainCmd>) {
          const Engine::PendingExplanation why = e.WhyPending(cmd.job);
          if (!why.pending) return Reply{};
          Reply r{std::nullopt, cmd.job, why.text};
          r.detail = PendingJson(why, st);
          return r;
        } else {
          static_assert(std::is_same_v<T, SnapshotCmd>);
          item.batch.snapshots.push_back(SnapshotRecord{"engine", st.last_seq, EncodeSnapshot(st)});
          item.batch.meta.emplace_back("agent_scrubs", agents_->EncodeScrubs());
          item.engine_snapshot = true;
          events_since_snapshot_ = 0;
          return Reply{};
        }
      },
      c);
}

std::shared_ptr<const EngineSummary> ServerCore::Summarize() const {
  auto s = std::make_shared<EngineSummary>();
  const EngineState& st = engine_->state();
  s->usage.resize(st.tenants.size());
  for (size_t t = 0; t < st.tenants.size(); ++t) {
    for (const TenantPool& tp : st.tenants[t].pools) {
      s->usage[t].push_back({tp.usage.gpu_milli, tp.borrowed_milli(), tp.usage.lent_milli});
    }
  }
  s->pool_nodes.assign(st.pools.size(), 0);
  for (size_t p = 0; p < st.pools.size(); ++p) s->capacity.push_back(st.Capacity(static_cast<PoolId>(p)));
  s->nodes = st.cluster.nodes();
  for (const Node& n : s->nodes) ++s->pool_nodes[n.pool];
  for (TenantId t : st.queue.tenants()) {
    const JobQueue::TenantQueue* q = st.queue.find_tenant(t);
    if (!q) continue;
    for (const auto& [key, group] : q->groups) {
      for (const QueueKey& k : group.jobs) ++s->queued[{t, -k.neg_priority}];
    }
  }
  return s;
}

void ServerCore::EngineLoop() {
  const Duration tick = config_.server.tick;
  Instant next_tick = WallNow() + tick;
  const int64_t snapshot_every = config_.server.snapshot_every_events;
  for (;;) {
    std::vector<Pending> work;
    {
      std::unique_lock lock(mu_);
      const auto deadline = std::chrono::system_clock::time_point(
          std::chrono::milliseconds(ToMillis(next_tick)));
      cv_.wait_until(lock, deadline, [&] { return stopping_ || !queue_.empty() || agents_->has_changes(); });
      if (stopping_ && queue_.empty()) break;
      const size_t n = std::min<size_t>(queue_.size(), 4096);
      for (size_t i = 0; i < n; ++i) {
        work.push_back(std::move(queue_.front()));
        queue_.pop_front();
      }
    }
    const Instant now = std::max(WallNow(), engine_->state().now);
    WriterItem item;
    const Engine::Sink sink = [&](const Event& e) {
      item.batch.events.push_back(JournalEvent{e.seq, ToMillis(e.at), EventName(e.body), ToJsonLine(e)});
      item.events.push_back(e);
      agents_->OnEvent(e, engine_->state());
      if (provider_) provider_->Plan(e, engine_->state());
    };
    bool setup = false;
    for (Pending& p : work) {
      if (std::holds_alternative<ExplainCmd>(p.cmd)) {  // read-only: answered at once
        WriterItem unused;
        p.done(Run(p.cmd, now, sink, unused, setup));
        continue;
      }
      const auto t0 = Clock::now();
      Reply r = Run(p.cmd, now, sink, item, setup);
      metrics_.ObserveDecision(SecondsSince(t0));
      item.replies.emplace_back(std::move(p.done), std::move(r));
    }
    const bool ticked = now >= next_tick;
    if (ticked) {
      engine_->Tick(now, sink);
      next_tick = now + tick;
    }
    agents_->Settle(*engine_, now, sink);
    item.desired = agents_->TakeChanges(engine_->state());
    events_since_snapshot_ += static_cast<int64_t>(item.events.size());
    if (events_since_snapshot_ >= snapshot_every && !item.engine_snapshot) {
      item.batch.snapshots.push_back(
          SnapshotRecord{"engine", engine_->state().last_seq, EncodeSnapshot(engine_->state())});
      item.batch.meta.emplace_back("agent_scrubs", agents_->EncodeScrubs());
      item.engine_snapshot = true;
      events_since_snapshot_ = 0;
    }
    if (setup || ticked) item.summary = Summarize();
    if (item.batch.empty() && item.replies.empty() && !item.summary && item.desired.empty()) continue;
    {
      std::lock_guard lock(writer_mu_);
      writer_queue_.push_back(std::move(item));
    }
    writer_cv_.notify_one();
  }
}

void ServerCore::set_desired_listener(DesiredListener f) {
  std::lock_guard lock(listener_mu_);
  desired_listener_ = std::move(f);
}

void ServerCore::CommitOrDie(const JournalBatch& batch) {
  if (auto ok = journal_->Commit(batch); !ok) {
    LogError("journal commit failed: stopping (a restart recovers every acknowledged command)",
             {{"error", ok.error().message}});
    std::_Exit(70);
  }
}

void ServerCore::WriterLoop() {
  for (;;) {
    std::deque<WriterItem> items;
    {
      std::unique_lock lock(writer_mu_);
      writer_cv_.wait(lock, [&] { return writer_stopping_ || !writer_queue_.empty(); });
      if (writer_queue_.empty() && writer_stopping_) break;
      items.swap(writer_queue_);
    }
    JournalBatch batch;
    for (WriterItem& it : items) {
      for (JournalEvent& e : it.batch.events) batch.events.push_back(std::move(e));
      for (TokenRecord& t : it.batch.tokens) batch.tokens.push_back(std::move(t));
      for (SnapshotRecord& s : it.batch.snapshots) batch.snapshots.push_back(std::move(s));
      for (auto& m : it.batch.meta) batch.meta.push_back(std::move(m));
      it.batch = JournalBatch{};
    }
    if (!batch.empty()) {
      const auto t0 = Clock::now();
      if (auto ok = journal_->Commit(batch); !ok) {
        for (WriterItem& it : items) {
          for (auto& [done, reply] : it.replies) {
            done(Reply{MakeApiError(503, "unavailable", "the journal could not be written; retry after "
                                                                     "the server restarts")});
          }
        }
        LogError("journal commit failed: stopping (a restart recovers every acknowledged command)",
                 {{"error", ok.error().message}});
        std::this_thread::sleep_for(std::chrono::milliseconds(200));  // let the answers go out
        std::_Exit(70);
      }
      metrics_.ObserveCommit(SecondsSince(t0), batch.events.size());
    }
    // Tokens work as soon as they are durable (before the caller hears of them).
    for (const TokenRecord& t : batch.tokens) auth_.AddTenantHash(t.hash_hex, t.tenant);
    {
      std::lock_guard lock(publish_mu_);
      publish_queue_.push_back(std::move(items));
    }
    publish_cv_.notify_one();
  }
}

void ServerCore::PublishLoop() {
  for (;;) {
    std::deque<std::deque<WriterItem>> groups;
    {
      std::unique_lock lock(publish_mu_);
      publish_cv_.wait(lock, [&] { return publish_stopping_ || !publish_queue_.empty(); });
      if (publish_queue_.empty() && publish_stopping_) break;
      groups.swap(publish_queue_);
    }
    bool engine_snapshot = false;
    {
      std::unique_lock lock(read_model_.mu());
      for (const auto& items : groups) {
        for (const WriterItem& it : items) {
          for (const Event& e : it.events) read_model_.Apply(e);
          if (it.summary) read_model_.set_summary(it.summary);
          engine_snapshot = engine_snapshot || it.engine_snapshot;
        }
      }
    }
    {
      // Watches hear of a revision before any reply that names it.
      std::lock_guard lock(listener_mu_);
      for (const auto& items : groups) {
        for (const WriterItem& it : items) {
          if (desired_listener_ && !it.desired.empty()) desired_listener_(it.desired);
        }
      }
    }
    for (auto& items : groups) {
      for (WriterItem& it : items) {
        for (auto& [done, reply] : it.replies) done(std::move(reply));
      }
    }
    if (provider_) {  // the provider's commands start once their events are durable
      int64_t committed = 0;
      for (const auto& items : groups) {
        for (const WriterItem& it : items) {
          if (!it.events.empty()) committed = std::max(committed, it.events.back().seq);
        }
      }
      if (committed > 0) provider_->Committed(committed);
    }
    for (const auto& items : groups) {
      for (const WriterItem& it : items) {
        for (const Event& e : it.events) metrics_.CountEvent(e);
      }
    }
    if (engine_snapshot) {
      // The read model's own snapshot, at the seq it has reached; committed
      // through the writer like any batch.
      WriterItem rm;
      {
        std::shared_lock lock(read_model_.mu());
        rm.batch.snapshots.push_back(SnapshotRecord{"read-model", read_model_.last_seq(), read_model_.Encode()});
      }
      {
        std::lock_guard lock(writer_mu_);
        writer_queue_.push_back(std::move(rm));
      }
      writer_cv_.notify_one();
    }
  }
}

}  // namespace gpupool
