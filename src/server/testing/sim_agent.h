// A node's agent played inside a test's process, for soaks of a whole
// ServerCore (tests/server_soak_test.cc): it speaks protocol 1 of the agent
// protocol (src/api/agent_protocol.h) through ServerCore's commands
// (RegisterAgentCmd, AgentHeartbeatCmd) and does what each reply's desired
// state says, as the real agent (src/agent/agent.cc) does, with every
// process change instant:
//  - a task no longer desired stops (its GPUs keep its tenant's data);
//  - every scrub order runs at once (the GPUs hold nobody's data after it)
//    and is reported until the order leaves the desired state;
//  - a desired task starts once no pending scrub order covers its GPUs; a
//    checkpoint order is acknowledged at once (never started: not acked);
//  - every heartbeat reports each desired task's phase (its exit for as
//    long as it stays desired);
//  - without an answered exchange for the fencing time the server gave
//    (fence_after_ms), it stops its tasks (Fence).
//
// It models what its node's GPUs hold (which tenants' data each keeps since
// its last scrub) and checks the server's promises as the node sees them:
//  - no unscrubbed hand-over: no task starts on a GPU that holds another
//    tenant's data left by an ended task and no scrub removed since. Exact
//    only while tenants do not share a GPU at once (whole GPUs, MPS, the
//    time-sliced shares of one tenant): beside work already placed there
//    the Engine scrubs at the next hand-over, not at once (RECLAIM-4), so
//    a task placed beside another tenant's, or started again in place
//    (after fencing, by a new agent), may meet that tenant's freed memory
//    by design, and this check would count it;
//  - no GPU held twice: the tasks desired at once on a GPU take at most a
//    whole GPU (1000 milli), a whole-GPU task sharing with none.
// Each broken promise is a line in violations().
//
// Kill stands for the agent's process dying: it forgets its session, its
// orders and its scrub results; its tasks die with it (a node crash) or
// live on for the next agent to adopt (an agent crash). What the GPUs hold
// survives either way.
//
// Limits: at most kMaxGpus GPUs; violations() keeps the first
// kMaxViolations lines.
// Thread-safety: none; one test thread drives it.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "src/api/agent_protocol.h"
#include "src/server/server_core.h"

namespace gpupool {

class SimAgent {
 public:
  static constexpr int kMaxGpus = 8;
  static constexpr size_t kMaxViolations = 16;

  // Executes a command on the server; nullopt when it died before answering.
  using Call = std::function<std::optional<Reply>(Command)>;

  struct Options {
    std::string node;
    int gpus = 4;  // H100s of 80 GiB; 1..kMaxGpus
    int64_t cpu_milli = 64000;
    int64_t memory_mib = 256 * 1024;
    bool trace = false;  // print each exchange, stop, scrub and start (replays of a soak's seed)
  };
  // A task's exit that the server answered a heartbeat reporting.
  struct AcknowledgedExit {
    JobId job = -1;
    int32_t replica = 0, attempt = 0;
  };

  explicit SimAgent(Options options);

  // One exchange at `now` (the server's clock): a registration when it
  // holds no session, else a heartbeat; then what the answer says. Nothing
  // when dead. False when the server gave no answer or refused it (after a
  // refusal naming the session or the node, the next one registers).
  bool Beat(const Call& call, Instant now);
  // The reply of the latest answered exchange (empty before the first).
  const AgentReply& last_reply() const { return last_reply_; }
  // Stops every task when no exchange was answered for the fencing time
  // (also while dead to the server but alive: partitioned). Call as the
  // clock moves.
  void Fence(Instant now);

  // The agent's process dies (see the top of this file).
  void Kill(bool tasks_survive);
  // A new agent process: it registers at its next Beat.
  void Revive();
  bool alive() const { return alive_; }

  // Running task number `pick` (modulo how many run) exits with
  // `exit_code`, reported at the next Beat. False when none runs.
  bool EndTask(uint64_t pick, int exit_code);
  int running() const;
  // The exits answered since the last call.
  std::vector<AcknowledgedExit> TakeAcknowledgedExits();

  const std::string& node() const { return options_.node; }
  const std::string& session() const { return session_; }  // empty: it registers next
  const std::vector<std::string>& violations() const { return violations_; }

 private:
  struct Task {
    TaskOrder order;
    enum class Phase { kWaiting, kRunning, kExited } phase = Phase::kWaiting;
    int exit_code = 0;
    bool checkpointed = false;  // acknowledged a checkpoint order
    bool checkpoint_acked = false;
  };
  // What a GPU holds of tenants' data: tenant -> the job that left it.
  using Leftovers = std::map<std::string, JobId>;

  bool Register(const Call& call, Instant now);
  bool Heartbeat(const Call& call, Instant now);
  // The answer's desired state, in the real agent's order: stop, scrub, start.
  void Apply(const AgentReply& reply);
  void StopUndesired(const std::set<TaskRef>& desired);
  void RunScrubs();
  void StartWaiting();
  bool ScrubPending(const std::vector<int>& gpus) const;
  // The checks; each adds to violations_.
  void CheckShares(const std::vector<TaskOrder>& tasks);
  void CheckClean(const TaskOrder& order);
  // A stopped or exited task's GPUs keep its tenant's data.
  void Leave(const TaskOrder& order);
  std::optional<TaskReport> ReportOf(const Task& t) const;
  void Violation(std::string line);
  void Trace(const std::string& line) const;

  Options options_;
  bool alive_ = true;
  std::string session_;  // empty: register next
  Instant last_ok_{};
  Duration fence_after_{0};
  std::map<TaskRef, Task> tasks_;
  std::vector<ScrubOrder> scrub_orders_;
  std::set<int64_t> scrubs_done_;                  // performed, reported until the order leaves
  std::vector<Leftovers> gpus_;                    // per GPU; survives Kill
  std::vector<AcknowledgedExit> acknowledged_exits_;
  AgentReply last_reply_;
  std::vector<std::string> violations_;
};

}  // namespace gpupool
