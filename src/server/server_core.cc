#include "src/server/server_core.h"

#include <chrono>
#include <filesystem>
#include <shared_mutex>

#include "src/api/tenant_ids.h"
#include "src/base/check.h"
#include "src/base/time_text.h"
#include "src/control/control_loops.h"
#include "src/engine/snapshot.h"
#include "src/config/yaml_reader.h"
#include "src/server/config_record.h"
#include "src/server/data_dir.h"
#include "src/server/default_config.h"
#include "src/server/exit_codes.h"
#include "src/server/log.h"
#include "src/server/timeseries_view.h"
#include "src/server/views.h"
#include "src/config/world.h"

namespace gpupool {
namespace {

// Commands the engine thread takes from the queue in one pass (one group
// commit at most this large, so that a flood cannot delay the tick).
constexpr size_t kMaxCommandsPerPass = 4096;
// The Retry-After of a write refused for a full disk: how soon a client
// may try again (the journal is retried with the next write).
constexpr int64_t kDiskFullRetryAfterS = 5;

double SecondsSince(Env& env, Env::SteadyTime t) {
  return std::chrono::duration<double>(env.SteadyNow() - t).count();
}

Reply EngineError(const Error& err, std::string field = "") {
  const bool not_found = err.code == ErrorCode::kNotFound;
  return Reply{MakeApiError(not_found ? 404 : 400, not_found ? "not_found" : "invalid_argument", err.message, field)};
}

Reply ApiErrorReply(int status, const std::string& code, const std::string& message, const std::string& field = "") {
  return Reply{MakeApiError(status, code, message, field)};
}

// The field of SetQuotaCmd's body that the Engine's refusal is about (its
// message starts with the quota's part).
std::string QuotaField(const std::string& message) {
  if (message.rfind("guaranteed:", 0) == 0) return "guaranteed_gpus";
  if (message.rfind("elastic limit:", 0) == 0) return "limit_gpus";
  if (message.rfind("weight:", 0) == 0) return "weight";
  return "pool";
}

// A hotspot found or cleared cordons or frees the node, and a GPU that
// turns unhealthy or healthy changes what it takes: the node view must show
// it at once, not at the next tick.
bool ChangesNodeView(const Event& e) {
  return std::holds_alternative<HotspotDetected>(e.body) || std::holds_alternative<HotspotCleared>(e.body) ||
         std::holds_alternative<GpuHealthChanged>(e.body);
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

// The job labels' names, whose positions events carry as bits of label
// masks: a configuration may add labels at the end, never reorder or drop.
std::string JobLabelNames(const std::vector<std::string>& labels) { return nlohmann::json(labels).dump(); }

// The names behind the numeric ids that events carry for node classes and
// requirements (their order in the configuration).
std::string AttributeNames(const ServerConfig& s) {
  nlohmann::json j{{"node_classes", nlohmann::json::array()}, {"requirements", nlohmann::json::array()}};
  for (const NodeAttributes& c : s.node_classes) j["node_classes"].push_back(c.name);
  for (const Requirement& r : s.requirements) j["requirements"].push_back(r.name);
  return j.dump();
}

}  // namespace

// --- start-up ------------------------------------------------------------------------

Result<std::unique_ptr<ServerCore>> ServerCore::Open(const ServerOptions& options) {
  std::unique_ptr<ServerCore> core(new ServerCore());
  core->options_ = options;
  core->env_ = options.env ? options.env : Env::Default();
  GP_ASSIGN_OR_RETURN(core->config_, core->LoadConfig(options));
  GP_TRY(core->OpenStores());
  core->SetUpServices();
  GP_TRY(core->Recover());
  GP_TRY(core->RecordConfig());
  // Only once the state is there: a first start that fails before its
  // bootstrap leaves nothing beside the database (FilesBesidesDatabase).
  GP_ASSIGN_OR_RETURN(core->admin_token_,
                      LoadOrCreateAdminToken(*core->env_, options.data_dir, options.admin_token_file));
  core->auth_.SetAdmin(core->admin_token_);
  return core;
}

Result<ServerConfig> ServerCore::LoadConfig(const ServerOptions& options) {
  if (!options.config_path.empty()) {
    GP_ASSIGN_OR_RETURN(config_text_, ReadConfigFile(options.config_path));
    config_source_ = options.config_path;
    return ParseServerConfig(config_text_, options.config_path, ConfigFileDir(options.config_path));
  }
  config_text_ = options.config_text.empty() ? kDefaultServerConfig : options.config_text;
  config_source_ = "embedded configuration";
  return ParseServerConfig(config_text_, config_source_, ".");
}

// The configuration this start runs under, in the journal when it differs
// from the last one recorded (config_record.h), and its hash in the log.
Status ServerCore::RecordConfig() {
  GP_ASSIGN_OR_RETURN(const int64_t last, journal_->LastSeq());
  GP_ASSIGN_OR_RETURN(const ConfigRecord r, RecordConfigInForce(*journal_, config_text_, config_source_, last + 1,
                                                                ToMillis(env_->Now())));
  LogInfo("configuration in force", {{"source", config_source_},
                                     {"sha256", r.sha256},
                                     {"since_seq", std::to_string(r.since_seq)},
                                     {"recorded_text", r.text_kept ? "yes" : "no (larger than the limit)"}});
  return {};
}

Status ServerCore::OpenStores() {
  const std::string& dir = options_.data_dir;
  GP_TRY(env_->CreateDirectories(dir));
  GP_ASSIGN_OR_RETURN(lock_, env_->LockDataDirectory(dir));
  GP_ASSIGN_OR_RETURN(const int64_t tightened, TightenPermissions(dir));
  if (tightened > 0) {
    LogInfo("took group and other permissions off data directory files (now owner only)",
            {{"data_dir", dir}, {"entries", std::to_string(tightened)}});
  }
  // Before the journal opens: opening creates the database.
  GP_ASSIGN_OR_RETURN(const auto others, FilesBesidesDatabase(dir));
  if (options_.open_journal) {
    GP_ASSIGN_OR_RETURN(journal_, options_.open_journal());
  } else {
    GP_ASSIGN_OR_RETURN(journal_, env_->OpenJournal(dir));
  }
  const Env::SteadyTime t0 = env_->SteadyNow();
  GP_TRY(journal_->CheckIntegrity());
  integrity_check_seconds_ = SecondsSince(*env_, t0);
  metrics_.SetIntegrityCheck(integrity_check_seconds_);
  LogInfo("journal integrity checked", {{"check", options_.open_journal ? "none (replicated journal)" : "quick_check"},
                                        {"seconds", std::to_string(integrity_check_seconds_)}});
  GP_TRY(CheckIdentity(others));
  logs_ = std::make_unique<LogStore>(*env_, dir + "/logs/" + data_dir_id_, config_.server.max_log_bytes_per_task);
  return {};
}

Status ServerCore::RefuseFilesWithoutState(const std::vector<std::string>& others) const {
  const std::string& dir = options_.data_dir;
  std::string names;
  for (const std::string& n : others) names += (names.empty() ? "" : ", ") + n;
  return FailedPrecondition(dir + " holds files (" + names + ") but no database state (" +
                            (std::filesystem::path(dir) / kDatabaseFile).string() +
                            " is missing or empty): refusing to start a new system over another one's files; "
                            "restore the database from a backup, or move those files away to start afresh");
}

// See data_dir.h. `others`: what the directory held besides its database
// before the journal opened.
Status ServerCore::CheckIdentity(const std::vector<std::string>& others) {
  const std::string& dir = options_.data_dir;
  const std::string file = (std::filesystem::path(dir) / kIdentityFile).string();
  const std::string db = (std::filesystem::path(dir) / kDatabaseFile).string();
  // A replicated journal's servers each keep a directory of their own, and
  // one with an empty directory takes over: only the local journal's
  // directory must agree with its database.
  const bool local = !options_.open_journal;
  GP_ASSIGN_OR_RETURN(auto stored, journal_->Meta(kIdentityMeta));
  GP_ASSIGN_OR_RETURN(const int64_t last, journal_->LastSeq());
  GP_ASSIGN_OR_RETURN(auto in_file, ReadIdentityFile(dir));
  if (!stored && last == 0) {  // no state: a new system, bootstrapped by Recover
    if (local && !others.empty()) return RefuseFilesWithoutState(others);
    data_dir_id_ = NewDataDirId();
    identity_pending_ = true;  // committed with the bootstrap, then written to the file
    return {};
  }
  if (!stored) {  // written by a release before identities: give it one
    if (local && in_file) {
      return FailedPrecondition(db + " has no identity but " + file + " says " + *in_file +
                                ": the database was not written in this directory (restored from an older "
                                "copy?); put back the database that belongs here, or move the directory's "
                                "other files away");
    }
    data_dir_id_ = NewDataDirId();
    JournalBatch batch;
    batch.meta.emplace_back(kIdentityMeta, data_dir_id_);
    GP_TRY(journal_->Commit(batch));
    GP_TRY(WriteIdentityFile(*env_, dir, data_dir_id_));
    GP_ASSIGN_OR_RETURN(const int64_t moved, MoveLegacyLogs(dir + "/logs", data_dir_id_));
    LogInfo("gave the data directory an identity (written by an earlier release)",
            {{"data_dir", dir}, {"identity", data_dir_id_}, {"task_logs_moved", std::to_string(moved)}});
    return {};
  }
  data_dir_id_ = *stored;
  if (in_file && *in_file != *stored) {
    if (local) {
      return FailedPrecondition(db + " belongs to data directory " + *stored + " but " + file + " says " +
                                *in_file + ": the database comes from another data directory; put back the "
                                "database that belongs here, or start that one in a directory of its own");
    }
    LogInfo("this data directory served other state before; it now follows " + StateName(),
            {{"data_dir", dir}, {"was", *in_file}, {"identity", *stored}});
  }
  if (!in_file || *in_file != *stored) {
    GP_TRY(WriteIdentityFile(*env_, dir, data_dir_id_));
    if (!in_file) LogInfo("wrote the data directory's identity file again", {{"file", file}, {"identity", data_dir_id_}});
  }
  return {};
}

void ServerCore::SetUpServices() {
  const ServerConfig& s = config_;
  for (const PoolConfig& p : s.pools) names_.pools.push_back(p.name);
  names_.priorities = s.priorities;
  names_.labels = s.job_labels;
  names_.max_replicas = s.engine.max_replicas;
  names_.default_image = s.server.default_image;
  agents_ = std::make_unique<AgentService>(s.engine.reclaim.poll, s.engine.heartbeat_timeout, logs_.get(),
                                           AgentService::NewIncarnation(env_->Now()));
  // Agents' sessions start with the server's start time: unique across restarts.
  agents_->set_boot_id(std::to_string(ToMillis(env_->Now())));
  std::vector<bool> isolation_required;
  for (const PoolConfig& p : s.pools) isolation_required.push_back(p.isolation_required);
  agents_->set_isolation_required(std::move(isolation_required));
  if (!s.engine.scaling.empty()) {
    // The provider's answers are commands like any other: applied on the
    // engine thread, journaled.
    provider_ = std::make_unique<CommandNodeProvider>(
        *env_, s.server.provider, s.engine.scaling,
        [this](const CommandNodeProvider::Created& c) { Execute(ProvisionedNodeCmd{c.pool, c.name, c.rack}); },
        [this](const CommandNodeProvider::Failed& f) { Execute(FailScaleOutCmd{f.pool, 1, f.reason}); });
  }
  // The read model answers GET /v1/regions: the configuration's table until
  // a RegionsSet (replayed, or from the read model's snapshot) replaces it.
  read_model_.set_config_regions(s.engine.regions);
}

Status ServerCore::Recover() {
  const Env::SteadyTime started = env_->SteadyNow();
  WorldAttributes world = BuildAttributes(config_);
  node_classes_ = world.classes;
  names_.requirements = world.requirements;
  std::optional<SnapshotRecord> snapshot, rm_snapshot;
  if (!options_.replay_from_start) {
    GP_ASSIGN_OR_RETURN(snapshot, journal_->LatestSnapshot("engine"));
    GP_ASSIGN_OR_RETURN(rm_snapshot, journal_->LatestSnapshot("read-model"));
  }
  if (snapshot) {
    GP_TRY(RestoreFromSnapshot(std::move(world.table), *snapshot));
  } else {
    GP_ASSIGN_OR_RETURN(engine_, CreateEngine(config_.engine, std::move(world.table)));
  }
  if (rm_snapshot) {
    if (auto ok = read_model_.Decode(rm_snapshot->bytes); !ok) {
      return std::unexpected(Error{ok.error().code, SnapshotName(*rm_snapshot) + ": " + ok.error().message +
                                                        RecoveryHint(ok.error())});
    }
  }
  GP_TRY(ReplayJournal(snapshot ? snapshot->seq : 0, /*read_model=*/true));
  GP_ASSIGN_OR_RETURN(auto tokens, journal_->Tokens());
  for (const TokenRecord& t : tokens) auth_.Add(t);

  // A state that breaks an invariant is never served (e.g. a GPU held twice).
  if (auto ok = CheckInvariants(engine_->state()); !ok) {
    return FailedPrecondition(StateName() + ": the recovered state is inconsistent: " + ok.error().message);
  }
  GP_TRY(engine_->state().last_seq == 0 ? Bootstrap() : CheckConfigAgainstState());
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
  recovery_seconds_ = SecondsSince(*env_, started);
  // Replayed events count toward the next snapshot, so that a crash loop
  // cannot make each start-up replay more than the last.
  events_since_snapshot_ = replayed_events_;
  return {};
}

// Where a snapshot is, for start-up errors: "DIR/gpupool.db: read-model
// snapshot at seq 120 (table snapshots, 5321 bytes)".
std::string ServerCore::SnapshotName(const SnapshotRecord& s) const {
  return JournalName() + ": " + s.kind + " snapshot at seq " + std::to_string(s.seq) + " (table snapshots, " +
         std::to_string(s.bytes.size()) + " bytes)";
}

std::string ServerCore::JournalName() const {
  if (options_.open_journal || !options_.state_name.empty()) return StateName();
  return (std::filesystem::path(options_.data_dir) / kDatabaseFile).string();
}

// What an operator can do about a damaged snapshot (docs/server.md).
std::string ServerCore::RecoveryHint(const Error& e) {
  if (e.code != ErrorCode::kDataLoss) return "";
  return "; the journal's events may still be whole: start once with --recover-from-journal to rebuild the "
         "state from them, ignoring the snapshots";
}

// The engine from its newest snapshot, with the scrub orders pending then
// (saved with it).
Status ServerCore::RestoreFromSnapshot(AttributeTable attributes, const SnapshotRecord& snapshot) {
  auto state = DecodeSnapshot(snapshot.bytes, config_.engine.lending);
  if (!state) {
    // An unknown version is the program's to fix (an upgrade); anything
    // else is a damaged snapshot.
    Error e = state.error();
    if (e.code != ErrorCode::kFailedPrecondition) e.code = ErrorCode::kDataLoss;
    return std::unexpected(Error{e.code, SnapshotName(snapshot) + ": " + e.message + RecoveryHint(e)});
  }
  GP_ASSIGN_OR_RETURN(engine_, RestoreEngine(config_.engine, std::move(attributes), std::move(*state), env_->Now()));
  agents_->Rebuild(engine_->state());
  GP_ASSIGN_OR_RETURN(auto scrubs, journal_->Meta("agent_scrubs"));
  if (scrubs) {
    if (auto ok = agents_->LoadScrubs(*scrubs, engine_->state().cluster.node_count()); !ok) {
      return std::unexpected(Error{ok.error().code, StateName() + ": " + ok.error().message});
    }
  }
  return {};
}

// The events after the older of the two snapshots: each to the engine when
// past its snapshot, to the read model when past its own.
Status ServerCore::ReplayJournal(int64_t engine_seq, bool read_model) {
  const int64_t from = read_model ? std::min(engine_seq, read_model_.last_seq()) : engine_seq;
  Status replay_status;
  auto read = journal_->ReadEvents(from, -1, [&](const JournalEvent& je) {
    auto e = EventFromJson(je.json);
    if (!e) {
      replay_status = DataLoss(JournalName() + ": event " + std::to_string(je.seq) + " (table events, row seq " +
                               std::to_string(je.seq) + ") does not decode: " + e.error().message +
                               "; the journal itself is damaged: restore the data directory from a backup");
      return false;
    }
    if (e->seq > engine_seq) {
      if (e->seq != engine_->state().last_seq + 1) {
        replay_status = DataLoss(JournalName() + ": the journal skips from event " +
                                 std::to_string(engine_->state().last_seq) + " to " + std::to_string(e->seq) +
                                 " (table events): events are missing; restore the data directory from a backup");
        return false;
      }
      engine_->Replay(*e);
      agents_->OnEvent(*e, engine_->state());
      ++replayed_events_;
    }
    if (read_model && e->seq > read_model_.last_seq()) read_model_.Apply(*e);
    return true;
  });
  if (!read) return read;
  return replay_status;
}

// The pools, node classes, requirements and job labels are part of the
// journal (events name them by position): the configuration must agree.
Status ServerCore::CheckConfigAgainstState() {
  const ServerConfig& s = config_;
  const auto& pools = engine_->state().pools;
  bool same = pools.size() == s.pools.size();
  for (size_t i = 0; same && i < pools.size(); ++i) same = pools[i].name == s.pools[i].name;
  if (!same) {
    std::string have, want;
    for (const Pool& p : pools) have += (have.empty() ? "" : ", ") + p.name;
    for (const PoolConfig& p : s.pools) want += (want.empty() ? "" : ", ") + p.name;
    return FailedPrecondition("configuration pools [" + want + "] differ from the pools of " + StateName() +
                              " [" + have + "]; pools cannot change once the server has state");
  }
  GP_ASSIGN_OR_RETURN(auto names, journal_->Meta("attribute_names"));
  if (names && *names != AttributeNames(s)) {
    return FailedPrecondition("configuration node_classes and requirements " + AttributeNames(s) +
                              " differ from those of " + StateName() + " " + *names +
                              "; they cannot change once the server has state");
  }
  return CheckJobLabels();
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
    if (!j.is_array()) return FailedPrecondition(StateName() + ": job_labels meta is not a list");
    for (const auto& name : j) have.push_back(name.is_string() ? name.get<std::string>() : "");
  }
  if (have.size() > want.size() || !std::equal(have.begin(), have.end(), want.begin())) {
    return FailedPrecondition("configuration job_labels " + JobLabelNames(want) + " do not start with those of " +
                              StateName() + " " + JobLabelNames(have) +
                              "; labels may be added at the end, never reordered or removed");
  }
  if (stored && have.size() == want.size()) return {};
  JournalBatch batch;
  batch.meta.emplace_back("job_labels", JobLabelNames(want));
  return journal_->Commit(batch);
}

Status ServerCore::Bootstrap() {
  const ServerConfig& s = config_;
  const Instant now = env_->Now();
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
  GP_TRY(BuildWorld(s, plan, *engine_, now, sink));
  std::vector<std::pair<std::string, std::string>> token_files;  // tenant, token
  for (const TenantConfig& t : s.tenants) {
    MintedToken m = MintToken(t.name, "initial", kRoleTenant);
    m.record.created_ms = ToMillis(now);
    batch.tokens.push_back(std::move(m.record));
    token_files.emplace_back(t.name, std::move(m.token));
  }
  batch.meta.emplace_back("attribute_names", AttributeNames(s));
  batch.meta.emplace_back("job_labels", JobLabelNames(s.job_labels));
  batch.meta.emplace_back(kIdentityMeta, data_dir_id_);
  GP_TRY(WriteTenantTokens(token_files));
  GP_TRY(journal_->Commit(batch));
  if (identity_pending_) {
    // After the commit: a crash before this leaves a database with an
    // identity and no file, which the next start writes again.
    GP_TRY(WriteIdentityFile(*env_, options_.data_dir, data_dir_id_));
    identity_pending_ = false;
  }
  for (const TokenRecord& t : batch.tokens) auth_.Add(t);
  for (const Event& e : events) read_model_.Apply(e);
  LogInfo("bootstrapped an empty data directory from the configuration",
          {{"data_dir", options_.data_dir}, {"events", std::to_string(events.size())},
           {"pools", std::to_string(s.pools.size())}, {"tenants", std::to_string(s.tenants.size())}});
  return {};
}

// Tokens of configured tenants: shown once, in files only the operator
// reads. Written (and synced) before the commit: if the commit does not
// happen, the next start bootstraps again and writes new ones.
Status ServerCore::WriteTenantTokens(const std::vector<std::pair<std::string, std::string>>& token_files) {
  if (token_files.empty()) return {};
  const std::string dir = (std::filesystem::path(options_.data_dir) / "tokens").string();
  GP_TRY(env_->CreateDirectories(dir));
  for (const auto& [tenant, token] : token_files) {
    GP_TRY(env_->WriteFileAtomic(dir + "/" + tenant + ".token", token + "\n", 0600));
  }
  return {};
}

// --- threads -------------------------------------------------------------------------

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
  // wait(), not get(): a core killed meanwhile breaks the promise.
  if (!killed_ && !halted_) Execute(SnapshotCmd{}).wait();
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
  if (killed_ || halted_) return;
  // A read-model snapshot the publisher queued after the writer stopped
  // (every thread is joined: no lock needed).
  for (WriterItem& it : writer_queue_) CommitOrDie(it.batch);
  writer_queue_.clear();
}

// Whatever is queued is dropped here, outside the locks (each Done is
// destroyed uncalled: a future's promise breaks); what a thread holds is
// dropped when it sees killed_, and HandToWriter and HandToPublisher drop
// what comes after.
void ServerCore::Kill() {
  killed_ = true;
  std::deque<Pending> commands;
  std::deque<WriterItem> unwritten;
  std::deque<std::deque<WriterItem>> unpublished;
  {
    std::lock_guard lock(mu_);
    stopping_ = true;
    commands.swap(queue_);
  }
  cv_.notify_all();
  {
    std::lock_guard lock(writer_mu_);
    writer_stopping_ = true;
    unwritten.swap(writer_queue_);
  }
  writer_cv_.notify_all();
  {
    std::lock_guard lock(publish_mu_);
    publish_stopping_ = true;
    unpublished.swap(publish_queue_);
  }
  publish_cv_.notify_all();
}

const Engine& ServerCore::stopped_engine() const {
  GP_CHECK(!engine_thread_.joinable()) << "the engine thread runs: its state may not be read elsewhere";
  return *engine_;
}

void ServerCore::Execute(Command c, Done done, Origin origin) {
  {
    std::lock_guard lock(mu_);
    if (!stopping_) {
      queue_.push_back(Pending{std::move(c), std::move(done), std::move(origin)});
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

// --- the engine thread ---------------------------------------------------------------

void ServerCore::EngineLoop() {
  const Duration tick = config_.server.tick;
  Instant next_tick = env_->Now() + tick;
  for (;;) {
    std::optional<std::vector<Pending>> work = TakeWork(next_tick);
    if (!work) return;
    // A write the disk refused: the Engine is ahead of its journal. Back to
    // what the journal holds before this pass decides anything more.
    if (rollback_epoch_.load() >= epoch_) {
      if (!RollBack()) return;
    }
    const Instant now = std::max(env_->Now(), engine_->state().now);
    WriterItem item;
    item.epoch = epoch_;
    const Engine::Sink sink = [&](const Event& e) {
      item.batch.events.push_back(JournalEvent{e.seq, ToMillis(e.at), EventName(e.body), ToJsonLine(e)});
      item.events.push_back(e);
      agents_->OnEvent(e, engine_->state());
      if (provider_) provider_->Plan(e, engine_->state());
    };
    Step step{now, sink, item};
    RunWork(*work, step);
    const bool ticked = now >= next_tick;
    if (ticked) {
      engine_->Tick(now, sink);
      next_tick = now + tick;
    }
    agents_->Settle(*engine_, now, sink);
    item.desired = agents_->TakeChanges(engine_->state());
    events_since_snapshot_ += static_cast<int64_t>(item.events.size());
    if (events_since_snapshot_ >= config_.server.snapshot_every_events && !item.engine_snapshot) {
      AddEngineSnapshot(item);
    }
    if (step.setup || ticked || summary_lost_) item.summary = Summarize();
    summary_lost_ = false;
    if (item.batch.empty() && item.replies.empty() && !item.summary && item.desired.empty()) continue;
    HandToWriter(std::move(item));
  }
}

// Waits for commands or the next tick; nullopt when the thread must end.
std::optional<std::vector<ServerCore::Pending>> ServerCore::TakeWork(Instant next_tick) {
  std::unique_lock lock(mu_);
  env_->WaitUntil(cv_, lock, next_tick, [&] {
    return stopping_ || !queue_.empty() || agents_->has_changes() || rollback_epoch_.load() >= epoch_;
  });
  if (killed_ || (stopping_ && queue_.empty())) return std::nullopt;
  std::vector<Pending> work;
  const size_t n = std::min(queue_.size(), kMaxCommandsPerPass);
  for (size_t i = 0; i < n; ++i) {
    work.push_back(std::move(queue_.front()));
    queue_.pop_front();
  }
  return work;
}

// The Engine as the journal holds it (its newest snapshot and the events
// after it), as a restart would recover it; the read model, tokens and
// answers are the publisher's and saw only committed events. Soft state
// starts fresh as at a restart (heartbeat clocks, idle polls, the
// autoscalers' windows), and the provider forgets what refused events
// planned. False when the journal cannot be read: the core halts.
bool ServerCore::RollBack() {
  const int64_t upto = rollback_epoch_.load();
  const Env::SteadyTime t0 = env_->SteadyNow();
  auto reload = [&]() -> Status {
    // The scrub orders too are the journal's alone (agent_service.h).
    agents_->ForgetScrubs();
    WorldAttributes world = BuildAttributes(config_);
    std::optional<SnapshotRecord> snapshot;
    if (!options_.replay_from_start) {
      GP_ASSIGN_OR_RETURN(snapshot, journal_->LatestSnapshot("engine"));
    }
    if (snapshot) {
      GP_TRY(RestoreFromSnapshot(std::move(world.table), *snapshot));
    } else {
      GP_ASSIGN_OR_RETURN(engine_, CreateEngine(config_.engine, std::move(world.table)));
    }
    const int64_t from = snapshot ? snapshot->seq : 0;
    GP_TRY(ReplayJournal(from, /*read_model=*/false));
    agents_->Rebuild(engine_->state());
    agents_->RenewRevisions();  // the latest may be a refused one's
    if (provider_) provider_->Abandon(engine_->state().last_seq);
    events_since_snapshot_ = engine_->state().last_seq - from;
    return {};
  };
  if (auto ok = reload(); !ok) {
    halted_ = true;
    LogError("cannot reload the state from the journal after a refused write: stopping",
             {{"error", ok.error().message}});
    env_->Halt(kExitJournalFailed);
    return false;
  }
  epoch_ = upto + 1;
  summary_lost_ = true;
  LogInfo("reloaded the state from the journal after writes the disk refused",
          {{"seq", std::to_string(engine_->state().last_seq)}, {"seconds", std::to_string(SecondsSince(*env_, t0))}});
  return true;
}

void ServerCore::RunWork(std::vector<Pending>& work, Step& step) {
  for (Pending& p : work) {
    if (std::holds_alternative<ExplainCmd>(p.cmd)) {  // read-only: answered at once
      WriterItem unused;
      Step read{step.now, step.sink, unused};
      p.done(Run(p.cmd, read));
      continue;
    }
    const Env::SteadyTime t0 = env_->SteadyNow();
    const size_t first_event = step.item.batch.events.size();
    Reply r = Run(p.cmd, step);
    metrics_.ObserveDecision(SecondsSince(*env_, t0));
    for (size_t i = first_event; i < step.item.batch.events.size(); ++i) {
      step.item.batch.events[i].actor = p.origin.actor;
      step.item.batch.events[i].request_id = p.origin.request_id;
    }
    step.item.replies.emplace_back(std::move(p.done), std::move(r));
  }
}

void ServerCore::AddEngineSnapshot(WriterItem& item) {
  const EngineState& st = engine_->state();
  item.batch.snapshots.push_back(SnapshotRecord{"engine", st.last_seq, EncodeSnapshot(st), ToMillis(env_->Now())});
  item.batch.meta.emplace_back("agent_scrubs", agents_->EncodeScrubs());
  item.engine_snapshot = true;
  events_since_snapshot_ = 0;
}

void ServerCore::HandToWriter(WriterItem item) {
  {
    std::lock_guard lock(writer_mu_);
    if (killed_) return;  // dropped (after the lock: Kill may be emptying the queue)
    writer_queue_.push_back(std::move(item));
  }
  writer_cv_.notify_one();
}

Reply ServerCore::Run(Command& c, Step& step) {
  return std::visit([&](auto& cmd) { return Do(cmd, step); }, c);
}

std::optional<TenantId> ServerCore::TenantNamed(const std::string& name) const {
  for (const Tenant& t : engine_->state().tenants) {
    if (t.name == name) return t.id;
  }
  return std::nullopt;
}

std::shared_ptr<const EngineSummary> ServerCore::Summarize() const {
  auto s = std::make_shared<EngineSummary>();
  const EngineState& st = engine_->state();
  s->usage.resize(st.tenants.size());
  for (size_t t = 0; t < st.tenants.size(); ++t) {
    for (const TenantPool& tp : st.tenants[t].pools) {
      s->usage[t].push_back({tp.usage.gpu_milli, tp.borrowed_milli(), tp.usage.lent_milli, tp.usage.exhausted_alerted});
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
      for (size_t p = 0; p < st.pools.size(); ++p) {
        if (key.pools >> p & 1) s->queued_by_pool[{t, static_cast<PoolId>(p)}] += static_cast<int64_t>(group.jobs.size());
      }
    }
  }
  s->forecasts = engine_->forecast_stats();
  return s;
}

// --- the commands (engine thread) ----------------------------------------------------

Reply ServerCore::Do(CreateTenantCmd& cmd, Step& step) {
  step.setup = true;
  Engine& e = *engine_;
  const EngineState& st = e.state();
  if (TenantNamed(cmd.name)) return ApiErrorReply(409, "conflict", "tenant '" + cmd.name + "' exists", "name");
  std::vector<std::pair<PoolId, Quota>> quotas;
  for (const auto& [pool, q] : cmd.quotas) {
    const auto pid = names_.pool_id(pool);
    if (!pid) return ApiErrorReply(400, "invalid_argument", "unknown pool '" + pool + "'", "quota." + pool);
    quotas.emplace_back(*pid, q);
  }
  // Validate every quota before deciding anything: a rejected request journals nothing.
  const TenantId next = static_cast<TenantId>(st.tenants.size());
  if (next >= kMaxUidTenants) {  // each tenant has its own uid range below 2^31 (src/api/tenant_ids.h)
    return ApiErrorReply(400, "invalid_argument",
                         "at most " + std::to_string(kMaxUidTenants) + " tenants (each has its own uid range)", "name");
  }
  for (const auto& [pid, q] : quotas) {
    if (auto ok = e.CheckQuota(next, pid, q); !ok) {
      const std::string field = "quota." + st.pools[pid].name;
      return ApiErrorReply(400, "invalid_argument", field + ": " + ok.error().message, field);
    }
  }
  auto id = e.AddTenant(cmd.name, step.now, step.sink);
  if (!id) return EngineError(id.error(), "name");
  for (const auto& [pid, q] : quotas) {
    const Status ok = e.SetQuota(*id, pid, q, step.now, step.sink);
    GP_CHECK(ok.has_value()) << "quota checked above was refused: " << ok.error().message;
  }
  cmd.token.tenant = cmd.name;
  cmd.token.created_ms = ToMillis(step.now);
  step.item.batch.tokens.push_back(std::move(cmd.token));
  return Reply{std::nullopt, *id};
}

Reply ServerCore::Do(SetQuotaCmd& cmd, Step& step) {
  step.setup = true;
  const EngineState& st = engine_->state();
  const auto t = TenantNamed(cmd.tenant);
  if (!t) return ApiErrorReply(404, "not_found", "no tenant '" + cmd.tenant + "'");
  const auto pid = names_.pool_id(cmd.pool);
  if (!pid) return ApiErrorReply(400, "invalid_argument", "unknown pool '" + cmd.pool + "'", "pool");
  const Pool& p = st.pools[*pid];
  if (!p.dedicated_to.empty() && cmd.quota.elastic_limit_milli > 0 &&
      std::find(p.dedicated_to.begin(), p.dedicated_to.end(), *t) == p.dedicated_to.end()) {
    return ApiErrorReply(400, "invalid_argument", "pool '" + p.name + "' is dedicated to other tenants", "pool");
  }
  if (auto ok = engine_->SetQuota(*t, *pid, cmd.quota, step.now, step.sink); !ok) {
    return EngineError(ok.error(), QuotaField(ok.error().message));
  }
  return Reply{};
}

Reply ServerCore::Do(SubmitJobCmd& cmd, Step& step) {
  const auto t = TenantNamed(cmd.tenant);
  if (!t) return ApiErrorReply(400, "invalid_argument", "unknown tenant '" + cmd.tenant + "'", "tenant");
  cmd.spec.tenant = *t;
  const int64_t cap = config_.server.max_pending_jobs_per_tenant;
  if (const JobQueue::TenantQueue* q = engine_->state().queue.find_tenant(*t);
      q != nullptr && static_cast<int64_t>(q->size) >= cap) {
    return ApiErrorReply(429, "resource_exhausted",
                         "tenant '" + cmd.tenant + "' has " + std::to_string(q->size) +
                             " pending jobs, the most server.max_pending_jobs_per_tenant allows; submit again "
                             "when some have started or after cancelling some",
                         "tenant");
  }
  auto id = engine_->Submit(std::move(cmd.spec), step.now, step.sink);
  if (!id) return EngineError(id.error());
  return Reply{std::nullopt, *id};
}

Reply ServerCore::Do(CancelJobCmd& cmd, Step& step) {
  const EngineState& st = engine_->state();
  const Job* j = st.find_job(cmd.job);
  if (!j) return ApiErrorReply(404, "not_found", "no live job " + std::to_string(cmd.job));
  if (!cmd.tenant.empty() && st.tenants[j->spec.tenant].name != cmd.tenant) {
    return ApiErrorReply(404, "not_found", "no job " + std::to_string(cmd.job));
  }
  if (auto ok = engine_->Cancel(cmd.job, step.now, step.sink); !ok) return EngineError(ok.error());
  return Reply{std::nullopt, cmd.job};
}

Reply ServerCore::Do(AddNodeCmd& cmd, Step& step) {
  step.setup = true;
  const EngineState& st = engine_->state();
  for (int i = 0; i < st.cluster.node_count(); ++i) {
    if (st.cluster.node_name(i) == cmd.spec.name) {
      return ApiErrorReply(409, "conflict", "node '" + cmd.spec.name + "' exists", "name");
    }
  }
  auto id = engine_->AddNode(cmd.spec, cmd.region, cmd.zone, cmd.rack, step.now, step.sink);
  if (!id) return EngineError(id.error());
  return Reply{std::nullopt, *id};
}

Reply ServerCore::Do(ExplainCmd& cmd, Step&) {
  const Engine::PendingExplanation why = engine_->WhyPending(cmd.job);
  if (!why.pending) return Reply{};
  Reply r{std::nullopt, cmd.job, why.text};
  r.detail = PendingJson(why, engine_->state());
  return r;
}

Reply ServerCore::Do(SnapshotCmd&, Step& step) {
  AddEngineSnapshot(step.item);
  return Reply{};
}

Reply ServerCore::Do(IssueNodeTokenCmd& cmd, Step& step) {
  const int64_t now_ms = ToMillis(step.now);
  cmd.token.tenant = std::string(kNodeTokenPrefix) + cmd.node;
  cmd.token.created_ms = now_ms;
  for (const TokenRecord& old : auth_.List(cmd.token.tenant)) {
    if (old.revoked_ms == 0) step.item.batch.revocations.push_back(TokenRevocation{old.hash_hex, now_ms});
  }
  step.item.batch.tokens.push_back(std::move(cmd.token));
  return Reply{};
}

Reply ServerCore::Do(CreateTokenCmd& cmd, Step& step) {
  TokenRecord& t = cmd.token;
  const int64_t now_ms = ToMillis(step.now);
  if (!t.tenant.empty() && !TenantNamed(t.tenant)) return ApiErrorReply(404, "not_found", "no tenant '" + t.tenant + "'", "tenant");
  const std::string whose = t.tenant.empty() ? "the pool's readers" : "tenant " + t.tenant;
  if (t.expires_ms != 0 && t.expires_ms <= now_ms) {
    return ApiErrorReply(400, "invalid_argument", "expires_in_s: the token would expire at once", "expires_in_s");
  }
  int live = 0;
  for (const TokenRecord& other : auth_.ListWithPending(t.tenant)) {  // with the creates in flight
    if (other.revoked_ms != 0 || (other.expires_ms != 0 && other.expires_ms <= now_ms)) continue;
    ++live;
    if (TokenName(other) == t.name) {
      return ApiErrorReply(409, "conflict", whose + " already has a live token named '" + t.name + "' (id " + TokenId(other) + ")", "name");
    }
  }
  if (live >= kMaxLiveTokensPerPrincipal) {
    return ApiErrorReply(429, "too_many_tokens",
                         whose + " has " + std::to_string(live) + " live tokens, the most allowed; revoke one first");
  }
  t.created_ms = now_ms;
  Reply r;
  r.detail = TokenView(t);
  auth_.AddPending(t);  // ended by the commit (Add) or the refusal (DropPending)
  step.item.batch.tokens.push_back(std::move(t));
  return r;
}

Reply ServerCore::Do(RevokeTokenCmd& cmd, Step& step) {
  std::optional<TokenRecord> t = auth_.Find(cmd.id);
  if (!t || (!cmd.tenant.empty() && t->tenant != cmd.tenant)) {
    return ApiErrorReply(404, "not_found", "no token with id '" + cmd.id + "'");
  }
  if (t->revoked_ms == 0) {
    t->revoked_ms = ToMillis(step.now);
    step.item.batch.revocations.push_back(TokenRevocation{t->hash_hex, t->revoked_ms});
  }
  Reply r;
  r.detail = TokenView(*t);
  return r;
}

Reply ServerCore::Do(RegisterAgentCmd& cmd, Step& step) {
  AgentService::Outcome o = agents_->Register(*engine_, cmd.request, node_classes_, step.now, step.sink);
  if (o.error) return Reply{o.error};
  step.setup = true;  // a new node changes capacity
  Reply r;
  r.id = o.reply.node_index;
  r.detail = ToJson(o.reply);
  return r;
}

Reply ServerCore::Do(AgentHeartbeatCmd& cmd, Step& step) {
  const size_t before = step.item.events.size();
  AgentService::Outcome o = agents_->Heartbeat(*engine_, cmd.request, step.now, step.sink);
  const auto& events = step.item.events;
  step.setup = step.setup || std::any_of(events.begin() + static_cast<std::ptrdiff_t>(before), events.end(),
                                         ChangesNodeView);
  if (o.error) return Reply{o.error};
  Reply r;
  r.id = o.reply.node_index;
  r.detail = ToJson(o.reply);
  return r;
}

Reply ServerCore::Do(ProvisionedNodeCmd& cmd, Step& step) {
  step.setup = true;  // a new node changes capacity
  auto id = engine_->AddProvisionedNode(cmd.pool, cmd.name, cmd.rack, step.now, step.sink);
  if (id) return Reply{std::nullopt, *id};
  // E.g. an operator added a node of that name meanwhile: the request for
  // it fails, so the autoscaler may ask again.
  LogError("a provisioned node could not join", {{"node", cmd.name}, {"error", id.error().message}});
  const EngineState& st = engine_->state();
  if (cmd.pool < st.pool_scaling.size() && st.pool_scaling[cmd.pool].requested_nodes > 0) {
    const Status ok = engine_->FailScaleOut(
        cmd.pool, 1, "node '" + cmd.name + "' could not join: " + id.error().message, step.now, step.sink);
    GP_CHECK(ok.has_value()) << ok.error().message;
  }
  return EngineError(id.error());
}

Reply ServerCore::Do(FailScaleOutCmd& cmd, Step& step) {
  if (auto ok = engine_->FailScaleOut(cmd.pool, cmd.nodes, cmd.reason, step.now, step.sink); !ok) {
    LogError("a failed scale-out could not be recorded", {{"reason", cmd.reason}, {"error", ok.error().message}});
    return EngineError(ok.error());
  }
  return Reply{};
}

Reply ServerCore::Do(SetRegionsCmd& cmd, Step& step) {
  step.setup = true;  // the scheduling pass that follows may place jobs
  if (auto ok = engine_->SetRegions(std::move(cmd.policy), step.now, step.sink); !ok) {
    // CheckRegionPolicy's message starts with the field's path in the body.
    const std::string& m = ok.error().message;
    const size_t colon = m.find(": ");
    return EngineError(ok.error(), colon == std::string::npos ? "regions" : m.substr(0, colon));
  }
  return Reply{};
}

Reply ServerCore::Do(SyncCmd&, Step&) { return Reply{}; }

Reply ServerCore::Do(NodeOpCmd& cmd, Step& step) {
  step.setup = true;  // the node's condition and the pools' capacity show at once
  const EngineState& st = engine_->state();
  NodeIndex node = -1;
  for (NodeIndex i = 0; i < st.cluster.node_count() && node < 0; ++i) {
    if (st.cluster.node_name(i) == cmd.node) node = i;
  }
  if (node < 0) return ApiErrorReply(404, "not_found", "no node '" + cmd.node + "'", "name");
  Engine& e = *engine_;
  Result<bool> changed = false;
  switch (cmd.op) {
    case NodeOpCmd::Op::kCordon: changed = e.CordonNode(node, cmd.actor, cmd.reason, step.now, step.sink); break;
    case NodeOpCmd::Op::kUncordon: changed = e.UncordonNode(node, cmd.actor, step.now, step.sink); break;
    case NodeOpCmd::Op::kDrain:
      changed = e.DrainNode(node, cmd.actor, cmd.reason, cmd.timeout, step.now, step.sink);
      break;
    case NodeOpCmd::Op::kRemove:
      changed = e.RemoveNode(node, cmd.actor, cmd.reason, cmd.force, step.now, step.sink);
      break;
  }
  if (!changed) {
    const Error& err = changed.error();
    if (err.code == ErrorCode::kFailedPrecondition) return ApiErrorReply(409, "conflict", err.message, "name");
    const bool timeout = err.message.starts_with("timeout");
    return EngineError(err, err.code == ErrorCode::kNotFound ? "name" : timeout ? "timeout_s" : "reason");
  }
  if (cmd.op == NodeOpCmd::Op::kRemove && *changed) {
    // Its agent's credential ends with it (as a newly issued one ends the old).
    const int64_t now_ms = ToMillis(step.now);
    for (const TokenRecord& t : auth_.List(std::string(kNodeTokenPrefix) + cmd.node)) {
      if (t.revoked_ms == 0) step.item.batch.revocations.push_back(TokenRevocation{t.hash_hex, now_ms});
    }
  }
  Reply r{std::nullopt, node};
  r.detail = nlohmann::json{{"changed", *changed}};
  return r;
}

// --- the writer thread ---------------------------------------------------------------

void ServerCore::WriterLoop() {
  for (;;) {
    std::deque<WriterItem> items;
    {
      std::unique_lock lock(writer_mu_);
      writer_cv_.wait(lock, [&] { return writer_stopping_ || !writer_queue_.empty(); });
      if (killed_ || (writer_queue_.empty() && writer_stopping_)) return;
      items.swap(writer_queue_);
    }
    // What the engine decided before it went back to the journal builds on
    // events that were never written: refused as they were.
    if (const int64_t upto = rollback_epoch_.load(); upto >= 0) {
      std::deque<WriterItem> stale;
      for (auto it = items.begin(); it != items.end();) {
        if (it->epoch >= 0 && it->epoch <= upto) {
          stale.push_back(std::move(*it));
          it = items.erase(it);
        } else {
          ++it;
        }
      }
      if (!stale.empty()) {
        for (const WriterItem& it : stale) {
          for (const TokenRecord& t : it.batch.tokens) auth_.DropPending(t.hash_hex);
        }
        RefuseGroup(stale, disk_full_reason_.empty() ? "disk full: an earlier write was refused" : disk_full_reason_);
      }
      if (items.empty()) continue;
    }
    const JournalBatch batch = MergeBatches(items);
    if (!batch.empty()) {
      const Env::SteadyTime t0 = env_->SteadyNow();
      const Status ok = journal_->Commit(batch);
      if (killed_) return;  // it crashed meanwhile: nobody hears of this batch
      if (!ok && ok.error().code == ErrorCode::kResourceExhausted) {
        for (const TokenRecord& t : batch.tokens) auth_.DropPending(t.hash_hex);
        DiskFull(items, ok.error());
        continue;
      }
      if (!ok) return FailGroup(items, ok.error());
      metrics_.ObserveCommit(SecondsSince(*env_, t0), batch.events.size());
      if (!disk_full_reason_.empty()) {
        LogInfo("the journal takes writes again", {});
        disk_full_reason_.clear();
      }
    }
    // Tokens work as soon as they are durable (before the caller hears of them).
    for (const TokenRecord& t : batch.tokens) auth_.Add(t);
    for (const TokenRevocation& r : batch.revocations) auth_.Revoke(r);
    HandToPublisher(std::move(items));
  }
}

void ServerCore::HandToPublisher(std::deque<WriterItem> items) {
  {
    std::lock_guard lock(publish_mu_);
    if (killed_) return;  // dropped, as in HandToWriter
    publish_queue_.push_back(std::move(items));
  }
  publish_cv_.notify_one();
}

// One journal batch of the group's items, in order (their own batches are
// moved out).
JournalBatch ServerCore::MergeBatches(std::deque<WriterItem>& items) {
  JournalBatch batch;
  for (WriterItem& it : items) {
    for (JournalEvent& e : it.batch.events) batch.events.push_back(std::move(e));
    for (TokenRecord& t : it.batch.tokens) batch.tokens.push_back(std::move(t));
    for (TokenRevocation& r : it.batch.revocations) batch.revocations.push_back(std::move(r));
    for (SnapshotRecord& s : it.batch.snapshots) batch.snapshots.push_back(std::move(s));
    for (auto& m : it.batch.meta) batch.meta.push_back(std::move(m));
    it.batch = JournalBatch{};
  }
  return batch;
}

// The journal is out of space: nothing of the group was written, so no
// caller hears yes. The core stays up (reads go on) and the next group is
// tried afresh; when the group changed the Engine, the engine thread goes
// back to the journal's state first (RollBack), and what it decided in the
// meantime is refused too (WriterLoop).
void ServerCore::DiskFull(std::deque<WriterItem>& items, const Error& error) {
  metrics_.CountDiskFull();
  if (disk_full_reason_.empty()) {
    LogError("disk full: refusing writes (503) until the journal takes them again", {{"error", error.message}});
  }
  disk_full_reason_ = error.message;
  int64_t newest = -1;
  for (const WriterItem& it : items) {
    if (it.epoch >= 0 && (!it.events.empty() || it.engine_snapshot)) newest = std::max(newest, it.epoch);
  }
  if (newest >= 0) {
    {
      std::lock_guard lock(mu_);
      if (newest > rollback_epoch_.load()) rollback_epoch_.store(newest);
    }
    cv_.notify_all();
  }
  RefuseGroup(items, error.message);
}

void ServerCore::RefuseGroup(std::deque<WriterItem>& items, const std::string& why) {
  for (WriterItem& it : items) {
    for (auto& [done, reply] : it.replies) {
      ApiError e = MakeApiError(503, "unavailable",
                                why + "; nothing of this request was written: retry once the server's disk has room");
      e.retry_after_s = kDiskFullRetryAfterS;
      done(Reply{std::move(e)});
    }
  }
}

void ServerCore::FailGroup(std::deque<WriterItem>& items, const Error& error) {
  halted_ = true;
  for (WriterItem& it : items) {
    for (auto& [done, reply] : it.replies) {
      // A replicated journal's deposed leader says who leads now (journal.h).
      done(Reply{MakeApiError(503, "unavailable",
                              error.message.rfind(kNotLeaderPrefix, 0) == 0
                                  ? "this server is " + error.message + "; retry there"
                                  : "the journal could not be written; retry after the server restarts")});
    }
  }
  LogError("journal commit failed: stopping (a restart recovers every acknowledged command)",
           {{"error", error.message}});
  env_->Halt(kExitJournalFailed);
}

void ServerCore::CommitOrDie(const JournalBatch& batch) {
  if (auto ok = journal_->Commit(batch); !ok) {
    if (ok.error().code == ErrorCode::kResourceExhausted) {  // a snapshot only: the journal has the events
      LogError("disk full: the last snapshot was not written", {{"error", ok.error().message}});
      return;
    }
    halted_ = true;
    LogError("journal commit failed: stopping (a restart recovers every acknowledged command)",
             {{"error", ok.error().message}});
    env_->Halt(kExitJournalFailed);
  }
}

// --- the publisher thread ------------------------------------------------------------

void ServerCore::PublishLoop() {
  for (;;) {
    std::deque<std::deque<WriterItem>> groups;
    {
      std::unique_lock lock(publish_mu_);
      publish_cv_.wait(lock, [&] { return publish_stopping_ || !publish_queue_.empty(); });
      if (killed_ || (publish_queue_.empty() && publish_stopping_)) return;
      groups.swap(publish_queue_);
    }
    Publish(groups);
  }
}

void ServerCore::RecordSeries(bool on_demand) {
  const Instant now = env_->Now();
  std::shared_lock lock(read_model_.mu());
  const std::shared_ptr<const EngineSummary>& summary = read_model_.summary();
  std::lock_guard series_lock(series_mu_);
  // The weak pointer keeps the control block, so "same owner" cannot be a
  // new summary at a reused address.
  const bool same = !series_summary_.owner_before(summary) && !summary.owner_before(series_summary_);
  const bool new_minute = TimeSeriesRecorder::MinuteOf(now) != TimeSeriesRecorder::MinuteOf(series_at_);
  if (same && !new_minute) return;
  if (!on_demand && !new_minute && now - series_at_ < std::chrono::seconds(1)) return;
  if (timeseries_.Record(now, Observe(read_model_, agent_status_, config_.engine.reclaim.idle_below_pct))) {
    series_summary_ = summary;
    series_at_ = now;
  }
}

void ServerCore::set_desired_listener(DesiredListener f) {
  std::lock_guard lock(listener_mu_);
  desired_listener_ = std::move(f);
}

void ServerCore::PublishDesired(const std::deque<std::deque<WriterItem>>& groups) {
  std::lock_guard lock(listener_mu_);
  if (!desired_listener_) return;
  for (const auto& items : groups) {
    for (const WriterItem& it : items) {
      if (!it.desired.empty()) desired_listener_(it.desired);
    }
  }
}

void ServerCore::Publish(std::deque<std::deque<WriterItem>>& groups) {
  bool engine_snapshot = false;
  int64_t committed = 0;
  {
    std::unique_lock lock(read_model_.mu());
    for (const auto& items : groups) {
      for (const WriterItem& it : items) {
        for (const Event& e : it.events) read_model_.Apply(e);
        if (it.summary) read_model_.set_summary(it.summary);
        engine_snapshot = engine_snapshot || it.engine_snapshot;
        if (!it.events.empty()) committed = std::max(committed, it.events.back().seq);
      }
    }
  }
  // Watches hear of a revision before any reply that names it.
  PublishDesired(groups);
  for (auto& items : groups) {
    for (WriterItem& it : items) {
      for (auto& [done, reply] : it.replies) done(std::move(reply));
    }
  }
  // The provider's commands start once their events are durable.
  if (provider_ && committed > 0) provider_->Committed(committed);
  for (const auto& items : groups) {
    for (const WriterItem& it : items) {
      for (const Event& e : it.events) metrics_.CountEvent(e);
    }
  }
  RecordSeries(/*on_demand=*/false);
  if (!engine_snapshot) return;
  // The read model's own snapshot, at the seq it has reached; committed
  // through the writer like any batch.
  WriterItem rm;
  {
    std::shared_lock lock(read_model_.mu());
    rm.batch.snapshots.push_back(
        SnapshotRecord{"read-model", read_model_.last_seq(), read_model_.Encode(), ToMillis(env_->Now())});
  }
  HandToWriter(std::move(rm));
}

}  // namespace gpupool
