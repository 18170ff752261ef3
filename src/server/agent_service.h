// The server's side of the agent protocol (src/api/agent_protocol.h): node
// registration, heartbeats, and each node's desired state.
//
// Lives on the engine thread and is driven by it: every event the Engine
// decides (or replays at start-up) passes through OnEvent, and the agent
// commands call the Engine's own entry points, so nothing here decides
// scheduling:
//  - Register: AddNode for a new node (its spec from the reported devices),
//    or a check that the reported node matches the registered one; then
//    Engine::Heartbeat.
//  - Heartbeat: Engine::Heartbeat; per running job, ReportUtilization with
//    the highest utilization of its replicas on the node (RECLAIM-1);
//    Finish when every replica has exited (failed as soon as one exits
//    non-zero or cannot start); CheckpointDone when every replica has
//    acknowledged its checkpoint (or timed out waiting for it).
//  - The desired state of a node: one task per replica of each running or
//    checkpointing job placed there that has a command (attempt = 1 + the
//    job's preemptions + interruptions, so it survives restarts of either
//    side), and the scrub orders (GpusScrubbed, and every GPU of a node
//    that comes back up) the agent has not yet reported done.
//  - Jobs without a command have nothing to checkpoint: Settle completes
//    their checkpoints at once.
//  - Each task order carries its container (EXEC-1..6): the job's image,
//    /dev/shm size and network, the replica's memory and CPU (the stage's,
//    for pipelines) as limits, and the tenant's uid range
//    (src/api/tenant_ids.h). A node whose agent registered without
//    reporting its isolation (an agent older than these fields) gets orders
//    without them; a node whose agent has not registered since this server
//    started gets them.
//
// Scrub orders survive restarts: the pending ones are saved with every
// engine snapshot (EncodeScrubs, journal meta "agent_scrubs") and the
// events replayed after it add theirs; an acknowledgement that arrived
// after the snapshot is lost with a crash, so such a scrub is ordered again
// (scrubbing free memory twice is harmless; skipping it is not). A return
// to the journal without a restart (ServerCore::RollBack, after a full
// disk refused events) rebuilds them the same way from none
// (ForgetScrubs first): an order of a refused event must not stay, since
// its seq, the order's id, goes to the next event, and agents keep scrubs
// by id.
//
// Task logs are accepted only for a (job, replica, attempt) placed on the
// reporting node (the placements of ended jobs are remembered for a while,
// so that their last output arrives); other chunks are acknowledged as
// consumed and dropped, so a node cannot write another node's logs.
//
// Revisions (issue 18): every event marks the nodes whose desired state it
// may change (the node it names, the nodes of the job it names, before and
// after), and so do registrations (a new session) and scrub
// acknowledgements. After each batch of commands TakeChanges recomputes
// those nodes and gives each whose state differs a new revision
// (src/server/desired_state.h), which the core publishes to the watches
// once the batch is durable. Protocol 2's replies carry the incarnation and
// revision: a registration's the whole state, a heartbeat's none (the watch
// carries it).
//
// Thread-safety: none (the engine thread only), but incarnation() may be
// read from any thread (it never changes).
#pragma once

#include <deque>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "src/api/agent_protocol.h"
#include "src/engine/engine.h"
#include "src/server/desired_state.h"
#include "src/server/log_store.h"

namespace gpupool {

class AgentService {
 public:
  // heartbeat_interval: what replies tell agents (the engine's utilization poll).
  // heartbeat_timeout: what replies tell agents to fence themselves after
  // (stop their tasks when the server has been unreachable that long).
  // incarnation: names this run of the server in protocol 2's revisions
  // (the server gives its start time on its Env's clock and a random
  // suffix: NewIncarnation; tests may keep the default).
  AgentService(Duration heartbeat_interval, Duration heartbeat_timeout, LogStore* logs,
               std::string incarnation = "0");
  static std::string NewIncarnation(Instant start);

  const std::string& incarnation() const { return incarnation_; }

  // Pools (by id) configured with `isolation: required`: a node there whose
  // agent reports isolation "none" is refused at registration (400 naming
  // `isolation`), so it never joins the pool or takes work there.
  void set_isolation_required(std::vector<bool> by_pool) { isolation_required_ = std::move(by_pool); }
  // A registration's session is BOOT-N: the server gives its start time, so
  // that sessions stay unique across restarts.
  void set_boot_id(std::string boot) { boot_ = std::move(boot); }

  // Indexes nodes and placed jobs from the state (after start-up).
  void Rebuild(const EngineState& st);
  // After a return to the journal (ServerCore::RollBack): each node's next
  // revision is a new one even where its state equals the latest made,
  // which events the disk refused may have made and nobody was told of (a
  // watch holding the published one would wait for a change that came).
  void RenewRevisions();
  // Every event, after the engine applied it.
  void OnEvent(const Event& e, const EngineState& st);
  // Completes the checkpoints of jobs that run nothing (after each batch of commands).
  void Settle(Engine& engine, Instant now, const Engine::Sink& sink);

  struct Outcome {
    std::optional<ApiError> error;
    AgentReply reply;
  };
  Outcome Register(Engine& engine, const RegisterRequest& r, const std::map<std::string, uint16_t>& node_classes,
                   Instant now, const Engine::Sink& sink);
  Outcome Heartbeat(Engine& engine, const HeartbeatRequest& r, Instant now, const Engine::Sink& sink);

  // The node's desired state as protocol 1 sends it (the reply without log
  // acknowledgements; only the fields its agent's registration showed it knows).
  AgentReply Desired(const EngineState& st, NodeIndex node) const;

  // Whether some node may have a new revision (TakeChanges has work).
  bool has_changes() const { return !dirty_.empty() || !changes_.empty(); }
  // The new revisions since the last call, each node's newest once.
  std::vector<NodeDesiredPtr> TakeChanges(const EngineState& st);
  std::optional<NodeIndex> FindNode(const std::string& name) const;

  // The pending scrub orders, for the journal (with each engine snapshot),
  // and back (before the events after that snapshot are replayed).
  std::string EncodeScrubs() const;
  Status LoadScrubs(const std::string& text, int node_count);
  // Drops every pending scrub order (before they are rebuilt from the
  // journal: LoadScrubs, then the events after the snapshot).
  void ForgetScrubs();

 private:
  static int32_t Attempt(const Job& j) { return 1 + j.preemptions + j.interruptions; }
  // The index in j.placements of the replica with stable id `replica` on
  // `node`; -1 when it is not placed there (any more).
  static int PlacementOf(const Job& j, int32_t replica, NodeIndex node);
  void Forget(JobId job);
  void AddScrub(NodeIndex node, int64_t id, GpuMask gpus);
  void ReportHealth(Engine& engine, NodeIndex node, const std::vector<GpuSample>& gpus, Instant now,
                    const Engine::Sink& sink);
  static void ReportTelemetry(Engine& engine, NodeIndex node, const std::vector<GpuSample>& gpus, Instant now,
                              const Engine::Sink& sink);
  // Register's steps; each returns the refusal, if any.
  static std::optional<ApiError> SpecOf(const RegisterRequest& r,
                                        const std::map<std::string, uint16_t>& node_classes, NodeSpec& spec);
  std::optional<ApiError> CheckIsolation(Engine& engine, const RegisterRequest& r, const NodeSpec& spec) const;
  std::optional<ApiError> JoinNode(Engine& engine, const RegisterRequest& r, const NodeSpec& spec,
                                   const std::map<std::string, uint16_t>& node_classes, Instant now,
                                   const Engine::Sink& sink, NodeIndex& node);
  // Heartbeat's task reports, per job (see TallyTasks), then applied.
  struct TaskTally {
    struct Memory {
      JobId job;
      int32_t attempt, replica;  // replica: the placement's index (what the Engine takes)
      int64_t mib;
    };
    std::map<JobId, std::pair<int32_t, double>> util;  // attempt, highest utilization of its replicas here
    std::map<JobId, int32_t> failed, reported;          // job -> attempt
    std::map<JobId, std::string> reasons;               // why a failed job failed, when its node says
    std::vector<Memory> memory;                         // GPU memory the running tasks use
  };
  // The job, if it is live and still at `attempt`.
  static const Job* CurrentAttempt(const EngineState& st, JobId job, int32_t attempt);
  TaskTally TallyTasks(const EngineState& st, NodeIndex node, const std::vector<TaskReport>& tasks);
  // Applies the task phases of a heartbeat (finishes, checkpoints, utilization).
  void ApplyTaskReports(Engine& engine, const TaskTally& tally, Instant now, const Engine::Sink& sink);
  static constexpr size_t kMaxHealthReasonBytes = 1024;  // of the agents' words, per GpuHealthChanged
  void SizeFor(const EngineState& st);
  void RememberPlacement(const Job& j);
  std::vector<LogAck> StoreLogs(NodeIndex node, const std::vector<LogChunk>& chunks);
  // Every field of every task order (protocol 2's view).
  NodeDesired ComputeNode(const EngineState& st, NodeIndex node) const;
  // The node's latest revision, recomputed first when it is marked.
  const NodeDesired& Current(const EngineState& st, NodeIndex node);
  // A protocol-2 reply without desired state (heartbeats, reports).
  AgentReply Acknowledgement(const EngineState& st, NodeIndex node);
  void MarkDirty(NodeIndex node);
  void MarkJob(JobId job, const EngineState& st);
  void MarkEvent(const Event& e, const EngineState& st);

  Duration interval_, timeout_;
  LogStore* logs_;
  // Where each replica attempt ran, for accepting its logs; ended jobs'
  // entries are dropped oldest first beyond kMaxEndedPlacements.
  std::map<std::tuple<JobId, int32_t, int32_t>, NodeIndex> placed_;
  std::deque<std::tuple<JobId, int32_t, int32_t>> ended_placements_;
  std::map<std::string, NodeIndex, std::less<>> node_by_name_;
  // The latest registration's session per node (soft: after a restart the
  // first heartbeat's session is adopted).
  std::map<NodeIndex, std::string> sessions_;
  // Per node, whether its latest registration showed an agent that knows
  // TaskOrder's container fields (soft, like sessions_: unknown after a
  // restart, and then they are sent), and what isolation it reported.
  struct AgentInfo {
    bool container_fields = true;
    std::string isolation;
    bool knows_pool = false;  // it registered with "metrics_url": its replies carry the pool
    bool knows_members = false;  // it registered with protocol 2: task orders carry members
  };
  std::map<NodeIndex, AgentInfo> agent_info_;
  std::vector<bool> isolation_required_;  // by pool
  std::string boot_ = "0";
  uint64_t next_session_ = 0;
  std::vector<std::set<JobId>> jobs_on_node_;  // running or checkpointing jobs with a replica there
  std::map<JobId, std::vector<NodeIndex>> nodes_of_job_;
  struct Scrub {
    int64_t id = 0;
    GpuMask gpus = 0;
  };
  std::vector<std::vector<Scrub>> scrubs_;  // per node, oldest first
  // Per (job, attempt): replicas that exited or acknowledged a checkpoint.
  struct Progress {
    int32_t attempt = 0;
    std::set<int32_t> exited, checkpointed;
  };
  std::map<JobId, Progress> progress_;
  std::vector<JobId> settle_;  // checkpointing jobs with nothing to run
  std::string incarnation_;
  std::vector<NodeDesiredPtr> desired_;  // per node: its latest revision (null: none yet)
  std::vector<char> marked_;             // per node: in dirty_
  std::vector<char> renew_;              // per node: its next revision is new whatever it holds
  std::vector<NodeIndex> dirty_;         // nodes to recompute, in the order marked
  std::vector<NodeDesiredPtr> changes_;  // new revisions not yet taken
};

}  // namespace gpupool
