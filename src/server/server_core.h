// The server's core (DESIGN section 6): one thread owns the Engine and
// applies commands from a queue; a writer thread commits the resulting
// events to the journal in groups (one fsync for many commands); a
// publisher thread then applies each committed group to the read model and
// answers its callers (while the writer commits the next group); a timer
// on the engine thread drives the control loops (Engine::Tick).
//
// No scheduling logic lives here: every decision is the Engine's.
//
// Everything outside the process (the clock, the journal, the provider's
// programs, the files it writes) is reached through the Env of
// ServerOptions (src/server/env.h), so that tests run a whole core in
// their own process on a stepped clock and a journal that fails where
// they say (src/server/testing/test_env.h).
//
// Start-up: newest engine snapshot + replay of the later events (and the
// same for the read model); an empty data directory is bootstrapped from
// the configuration (pools, node classes, requirements, optional tenants
// and nodes).
//
// A journal write that fails stops the process (Env::Halt, exit code 70)
// after answering the waiting callers with 503: the Engine's memory would
// be ahead of its log, and a restart recovers exactly what was
// acknowledged.
#pragma once

#include <atomic>
#include <condition_variable>
#include <deque>
#include <functional>
#include <future>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <variant>
#include <vector>

#include "src/api/job_request.h"
#include "src/api/json_fields.h"
#include "src/engine/engine.h"
#include "src/server/agent_service.h"
#include "src/server/agent_status.h"
#include "src/server/auth.h"
#include "src/server/env.h"
#include "src/server/journal.h"
#include "src/server/log_store.h"
#include "src/server/metrics.h"
#include "src/server/node_provider.h"
#include "src/server/read_model.h"
#include "src/server/server_config.h"
#include "src/server/timeseries.h"

namespace gpupool {

struct ServerOptions {
  std::string data_dir;
  std::string config_path;       // empty: config_text
  std::string admin_token_file;  // empty: DIR/admin.token
  std::string config_text;       // empty: the embedded default configuration
  Env* env = nullptr;            // not owned; null: Env::Default()
  // Recover from the journal's events alone, ignoring its snapshots (tests
  // compare the state with such a replay; an operator's way round a
  // snapshot that does not load).
  bool replay_from_start = false;
  // Opens the journal instead of Env::OpenJournal(data_dir) (the etcd
  // journal, src/server/etcd_journal.h); null: the Env's. The data
  // directory then keeps only local files (admin token, task logs).
  std::function<Result<std::unique_ptr<Journal>>()> open_journal;
  // Where the state is, in start-up errors ("etcd /gpupool/prod at URL");
  // empty: data_dir.
  std::string state_name;
};

// --- commands -------------------------------------------------------------------
struct CreateTenantCmd {
  std::string name;
  TokenRecord token;  // its first token, "initial" (MintToken); created_ms set by the command
  std::vector<std::pair<std::string, Quota>> quotas;  // by pool name
};
struct SetQuotaCmd {
  std::string tenant, pool;
  Quota quota;
};
struct SubmitJobCmd {
  std::string tenant;  // resolved on the engine thread
  JobSpec spec;
};
struct CancelJobCmd {
  JobId job = -1;
  std::string tenant;  // non-empty: the caller's tenant; other tenants' jobs are not found
};
struct AddNodeCmd {
  NodeSpec spec;  // pool assigned by the engine
  std::string region, zone, rack;
};
struct ExplainCmd {  // read-only: why a pending job waits
  JobId job = -1;
};
struct SnapshotCmd {};  // take a snapshot now (tests, shutdown)
// Journals nothing; answered once everything decided before it, and the
// tick its batch may run, is durable and published (a barrier for tests:
// after Env time moves, the tick it causes has happened).
struct SyncCmd {};
// A node token (the agent's credential), journaled as its hash; the node's
// tokens issued before are revoked in the same batch.
struct IssueNodeTokenCmd {
  std::string node;
  TokenRecord token;  // MintToken("node/NAME", "node", kRoleNode)
};
// A named tenant or reader token (POST /v1/tokens). The reply's detail is
// the token's record as JSON (TokenView). 404 for an unknown tenant, 409
// for a name the principal already uses on a live token, 429 beyond
// kMaxLiveTokensPerPrincipal live tokens.
struct CreateTokenCmd {
  TokenRecord token;  // MintToken(...); created_ms set by the command
};
// Revokes a token by its ID (DELETE /v1/tokens/{id}); `tenant` non-empty:
// the caller's tenant, whose tokens only it may revoke (others are not
// found). Revoking a revoked token answers it again, journaling nothing.
struct RevokeTokenCmd {
  std::string id;
  std::string tenant;
};
// The agent protocol (src/server/agent_service.h); the reply's detail is
// the AgentReply as JSON.
struct RegisterAgentCmd {
  RegisterRequest request;
};
struct AgentHeartbeatCmd {
  HeartbeatRequest request;
};
// The node provider's answers to a scale-out (src/server/node_provider.h):
// a node it created joins (Engine::AddProvisionedNode), or nodes asked
// for will not come (Engine::FailScaleOut).
struct ProvisionedNodeCmd {
  PoolId pool = 0;
  std::string name, rack;
};
struct FailScaleOutCmd {
  PoolId pool = 0;
  int32_t nodes = 1;
  std::string reason;
};
// TOPO-2 at runtime (PUT /v1/regions): replaces the region table
// (Engine::SetRegions, journaled as RegionsSet). A table the Engine refuses
// is a 400 naming the field (e.g. "regions[1].name"); nothing is journaled.
struct SetRegionsCmd {
  RegionPolicy policy;
};
// Issue 19: an operator's node command (POST /v1/nodes/{name}/cordon,
// /uncordon, /drain; DELETE /v1/nodes/{name}), the Engine's CordonNode,
// UncordonNode, DrainNode or RemoveNode. The reply's id is the node, its
// detail {"changed": bool} (false: it was so already, nothing journaled).
// 404 naming `name` for an unknown node; 409 for a removed node, and for a
// remove without force of a node with work on it (the message names each
// job); a removal also revokes the node's tokens (its agent is refused from
// then on).
struct NodeOpCmd {
  enum class Op : uint8_t { kCordon, kUncordon, kDrain, kRemove } op = Op::kCordon;
  std::string node;
  std::string actor;   // the caller (Origin::actor), kept in the events
  std::string reason;  // at most Engine::kMaxOperatorReasonBytes
  Duration timeout{std::chrono::hours(1)};  // kDrain
  bool force = false;                       // kRemove
};
using Command = std::variant<CreateTenantCmd, SetQuotaCmd, SubmitJobCmd, CancelJobCmd, AddNodeCmd, ExplainCmd,
                             SnapshotCmd, IssueNodeTokenCmd, CreateTokenCmd, RevokeTokenCmd, RegisterAgentCmd, AgentHeartbeatCmd, ProvisionedNodeCmd,
                             FailScaleOutCmd, SetRegionsCmd, SyncCmd, NodeOpCmd>;

// Who asked for a command (the audit, docs/security.md): stamped on every
// event the command causes (JournalEvent::actor, request_id). Empty for the
// server's own work and for in-process callers that give none.
struct Origin {
  std::string actor;       // "admin", "reader:NAME", "tenant/T:NAME", "node/N:NAME" (HttpApi::OriginOf)
  std::string request_id;  // the HTTP request's X-Request-Id
};

struct Reply {
  std::optional<ApiError> error;
  int64_t id = -1;     // the job or node created
  std::string text;    // ExplainCmd: the sentence
  nlohmann::json detail;  // ExplainCmd: the structured reasons (see HttpApi's job view)
};

class ServerCore {
 public:
  static Result<std::unique_ptr<ServerCore>> Open(const ServerOptions& options);
  // Stop(), or after Kill() only the joins.
  ~ServerCore();

  // Starts the engine and writer threads; then fails the scale-outs a
  // previous run asked for whose nodes never joined (their provider
  // commands died with it), so that the autoscaler may ask again.
  void Start();
  // Waits for the node provider's running commands (each killed at its
  // timeout), drains the queue, takes a final snapshot, joins. After
  // Kill(): only waits for the threads to end.
  void Stop();
  // Stops at once as SIGKILL would stop the process, for in-process tests
  // (src/server/testing/): nothing more is decided, committed, published or
  // answered (a commit under way is the journal's to keep or lose), no
  // snapshot is taken, and commands already queued are dropped (their Done
  // is never called: a future reports a broken promise). Safe from
  // any thread, the core's own included (a journal that "crashes" calls it
  // from the writer); the destructor joins the threads.
  void Kill();

  // What is called with a command's reply, exactly once: on the publisher
  // thread once its events are durable and in the read model, on the engine
  // thread for a read-only command (ExplainCmd), or on the calling thread
  // when the server is stopping. It must not block, nor call Execute's
  // future-returning form and wait: hand longer work to another thread.
  using Done = std::function<void(Reply)>;
  // Enqueues a command; `done` gets its reply (see Done). Any thread.
  void Execute(Command c, Done done, Origin origin = {});
  // Enqueues a command; the future is ready once its events are durable.
  std::future<Reply> Execute(Command c);
  Reply Call(Command c) { return Execute(std::move(c)).get(); }

  // Nodes' new desired-state revisions (src/server/agent_service.h), called
  // on the publisher thread once they are durable, before the replies of
  // the same group are given out. It must not block. Set it before Start;
  // set it to null before the callee goes away.
  using DesiredListener = std::function<void(const std::vector<NodeDesiredPtr>&)>;
  void set_desired_listener(DesiredListener f);
  // This run's incarnation in the agent protocol (constant; any thread).
  const std::string& agent_incarnation() const { return agents_->incarnation(); }

  const ReadModel& read_model() const { return read_model_; }
  AuthStore& auth() { return auth_; }
  Journal& journal() { return *journal_; }
  Env& env() { return *env_; }
  const ApiNames& names() const { return names_; }
  const std::map<std::string, uint16_t>& node_classes() const { return node_classes_; }
  Metrics& metrics() { return metrics_; }
  LogStore& logs() { return *logs_; }
  AgentStatusBoard& agent_status() { return agent_status_; }
  // Issue 19's time series (src/server/timeseries.h). RecordSeries
  // records what the read model and the agents' heartbeats show now
  // (timeseries_view.h's Observe): the publisher thread calls it after each
  // published group, where it records at most once a second of server time
  // (and at the first group of each minute); a reader of the series calls it
  // with `on_demand`, so that the newest point is what GET /v1/pools answers
  // now. Nothing is recorded while the read model's summary is the one
  // recorded last within the same minute. Any thread.
  void RecordSeries(bool on_demand);
  const TimeSeriesRecorder& timeseries() const { return timeseries_; }
  const ServerSettings& settings() const { return config_.server; }
  const std::string& admin_token() const { return admin_token_; }
  // How long start-up took (snapshot load + replay), for logs and benchmarks.
  double recovery_seconds() const { return recovery_seconds_; }
  // How long start-up's integrity check of the journal took (quick_check).
  double integrity_check_seconds() const { return integrity_check_seconds_; }
  // The data directory's identity (src/server/data_dir.h); task logs live
  // under DIR/logs/ID.
  const std::string& data_dir_id() const { return data_dir_id_; }
  int64_t replayed_events() const { return replayed_events_; }
  // The node provider's commands planned or running (0 without scaling).
  int64_t provider_busy() const { return provider_ ? provider_->busy() : 0; }
  // The engine thread's Engine, for checks of its state: only while that
  // thread does not run (before Start, after Stop).
  const Engine& stopped_engine() const;

 private:
  ServerCore() = default;
  const std::string& StateName() const {
    return options_.state_name.empty() ? options_.data_dir : options_.state_name;
  }

  struct Pending {
    Command cmd;
    Done done;
    Origin origin;
  };
  struct WriterItem {
    JournalBatch batch;
    std::vector<Event> events;
    std::vector<std::pair<Done, Reply>> replies;
    std::shared_ptr<const EngineSummary> summary;
    bool engine_snapshot = false;
    std::vector<NodeDesiredPtr> desired;  // new revisions, published once durable
    // The engine thread's epoch when it made this item (see RollBack); -1:
    // the read model's snapshot, which holds only committed events.
    int64_t epoch = -1;
  };
  // One pass of the engine thread over a batch of commands.
  struct Step {
    Instant now;
    const Engine::Sink& sink;
    WriterItem& item;
    bool setup = false;  // capacity or placement may have changed: publish a summary
  };

  // Start-up (Open): the configuration, the stores, the services around
  // the Engine, then the state.
  Result<ServerConfig> LoadConfig(const ServerOptions& options);  // sets config_text_, config_source_
  Status RecordConfig();
  Status OpenStores();
  Status CheckIdentity(const std::vector<std::string>& others);
  Status RefuseFilesWithoutState(const std::vector<std::string>& others) const;
  void SetUpServices();
  Status Recover();
  Status RestoreFromSnapshot(AttributeTable attributes, const SnapshotRecord& snapshot);
  std::string SnapshotName(const SnapshotRecord& s) const;
  std::string JournalName() const;
  static std::string RecoveryHint(const Error& e);
  // The events after engine_seq to the engine, and with `read_model` those
  // after its own snapshot to the read model (start-up only).
  Status ReplayJournal(int64_t engine_seq, bool read_model);
  Status CheckConfigAgainstState();
  Status CheckJobLabels();
  Status Bootstrap();
  Status WriteTenantTokens(const std::vector<std::pair<std::string, std::string>>& token_files);

  // The engine thread.
  void EngineLoop();
  std::optional<std::vector<Pending>> TakeWork(Instant next_tick);
  void RunWork(std::vector<Pending>& work, Step& step);
  void AddEngineSnapshot(WriterItem& item);
  bool RollBack();
  Reply Run(Command& c, Step& step);
  std::shared_ptr<const EngineSummary> Summarize() const;
  // The commands (Run dispatches on the variant).
  Reply Do(CreateTenantCmd& cmd, Step& step);
  Reply Do(SetQuotaCmd& cmd, Step& step);
  Reply Do(SubmitJobCmd& cmd, Step& step);
  Reply Do(CancelJobCmd& cmd, Step& step);
  Reply Do(AddNodeCmd& cmd, Step& step);
  Reply Do(ExplainCmd& cmd, Step& step);
  Reply Do(SnapshotCmd& cmd, Step& step);
  Reply Do(IssueNodeTokenCmd& cmd, Step& step);
  Reply Do(CreateTokenCmd& cmd, Step& step);
  Reply Do(RevokeTokenCmd& cmd, Step& step);
  Reply Do(RegisterAgentCmd& cmd, Step& step);
  Reply Do(AgentHeartbeatCmd& cmd, Step& step);
  Reply Do(ProvisionedNodeCmd& cmd, Step& step);
  Reply Do(FailScaleOutCmd& cmd, Step& step);
  Reply Do(SetRegionsCmd& cmd, Step& step);
  Reply Do(SyncCmd& cmd, Step& step);
  Reply Do(NodeOpCmd& cmd, Step& step);
  std::optional<TenantId> TenantNamed(const std::string& name) const;

  // The writer thread.
  void WriterLoop();
  static JournalBatch MergeBatches(std::deque<WriterItem>& items);
  // Answers the group's callers with 503 and halts the process.
  void FailGroup(std::deque<WriterItem>& items, const Error& error);
  // A commit refused for want of space: answers 503 and asks the engine
  // thread to roll back; the server stays up.
  void DiskFull(std::deque<WriterItem>& items, const Error& error);
  static void RefuseGroup(std::deque<WriterItem>& items, const std::string& why);
  void CommitOrDie(const JournalBatch& batch);
  void HandToWriter(WriterItem item);
  void HandToPublisher(std::deque<WriterItem> items);

  // The publisher thread.
  void PublishLoop();
  void Publish(std::deque<std::deque<WriterItem>>& groups);
  // Hands the groups' new desired-state revisions to the listener.
  void PublishDesired(const std::deque<std::deque<WriterItem>>& groups);

  // Set in Open, then read-only.
  ServerConfig config_;
  std::string config_text_, config_source_;  // the configuration's bytes and where they came from
  ServerOptions options_;
  Env* env_ = nullptr;
  ApiNames names_;
  std::map<std::string, uint16_t> node_classes_;
  std::unique_ptr<Env::DirectoryLock> lock_;  // DIR/LOCK, held for the core's lifetime
  std::unique_ptr<Journal> journal_;  // Commit: the writer thread (Open's thread before Start); reads: any
  std::string data_dir_id_;           // the data directory's identity (data_dir.h)
  bool identity_pending_ = false;     // a new system: the bootstrap commits the identity
  double integrity_check_seconds_ = 0;
  std::string admin_token_;
  double recovery_seconds_ = 0;
  int64_t replayed_events_ = 0;

  // The engine thread's (Open's thread before Start).
  std::unique_ptr<Engine> engine_;
  std::unique_ptr<AgentService> agents_;
  int64_t events_since_snapshot_ = 0;
  // Counts the engine thread's returns to the journal's state (RollBack):
  // items made before one are refused by the writer.
  int64_t epoch_ = 0;
  bool summary_lost_ = false;  // the refused items carried the last summary
  // Per pool, the nodes asked for and not joined when the state was
  // recovered: failed by Start.
  std::vector<std::pair<PoolId, int32_t>> unanswered_scale_outs_;

  // Safe for concurrent use on their own (each has its own lock).
  ReadModel read_model_;  // changed by the publisher thread under read_model_.mu()
  // With `scaling`: plans on the engine thread, starts commands once their
  // events are committed (publisher thread).
  std::unique_ptr<CommandNodeProvider> provider_;
  std::unique_ptr<LogStore> logs_;
  AgentStatusBoard agent_status_;
  TimeSeriesRecorder timeseries_;
  // RecordSeries's: one recording at a time, and what it recorded last.
  std::mutex series_mu_;
  std::weak_ptr<const EngineSummary> series_summary_;  // GUARDED_BY(series_mu_)
  Instant series_at_{};                                 // GUARDED_BY(series_mu_)
  AuthStore auth_;
  Metrics metrics_;

  // Set by Kill (any thread); every loop ends when it sees it.
  std::atomic<bool> killed_{false};
  // Set by the writer when a commit failed, before it answers and halts
  // the process: it has ended, so Stop takes no snapshot and commits nothing
  // (with a test Env, Halt returns and the core is destroyed afterwards).
  std::atomic<bool> halted_{false};
  // The newest engine epoch whose events the disk refused (-1: none); set
  // by the writer under mu_ (so the engine thread's wait sees it), read by
  // both threads.
  std::atomic<int64_t> rollback_epoch_{-1};
  std::string disk_full_reason_;  // the writer thread's: why the last commit was refused ("" : it was not)

  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Pending> queue_;  // GUARDED_BY(mu_)
  bool stopping_ = false;      // GUARDED_BY(mu_)
  std::thread engine_thread_;

  std::mutex writer_mu_;
  std::condition_variable writer_cv_;
  // Read without the lock only once the writer thread is joined (Stop).
  std::deque<WriterItem> writer_queue_;  // GUARDED_BY(writer_mu_)
  bool writer_stopping_ = false;         // GUARDED_BY(writer_mu_)
  std::thread writer_thread_;

  // Committed groups wait here for the publisher thread, which applies them
  // to the read model and answers the callers while the writer commits the
  // next group.
  std::mutex publish_mu_;
  std::condition_variable publish_cv_;
  std::deque<std::deque<WriterItem>> publish_queue_;  // GUARDED_BY(publish_mu_)
  bool publish_stopping_ = false;                     // GUARDED_BY(publish_mu_)
  std::thread publish_thread_;

  // Set by the HTTP layer (any thread), called by the publisher thread.
  std::mutex listener_mu_;
  DesiredListener desired_listener_;  // GUARDED_BY(listener_mu_)
};

}  // namespace gpupool
