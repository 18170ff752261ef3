// What-if replay of a pool's own history (`gpupool sim replay`, issue 20):
// the events a server journaled, read back as a world and a workload, and
// run again through the simulator under a configuration.
//
// Honest simulation: the replay knows what the daemon knew. A job's request
// and submit time come from its JobSubmitted; its observed run time (its
// last placement to its JobFinished, or to a JobCancelled while it ran,
// plus the run time its earlier attempts kept: ObservedJob::kept_work) is
// used only as the work it does in the replay, never by the policies. A job still running (or still pending) at the journal's end
// keeps running to the horizon (the last event). Nodes that joined later
// (agents registering), tenants created and quotas set after the bootstrap
// are applied at the times they happened.
//
// Not replayed, and so where the replay cannot be faithful (counted in
// History::not_replayed): operators' node commands (cordon, drain, remove),
// node failures and recoveries (agent timing), GPU health and memory
// reports, utilization (not journaled: the replay's jobs are busy at 90% of
// their share, so no idle reclaim happens in it), region table changes,
// scale-out nodes (the simulator's provider stands in for them), and the
// agents' start latency beyond what the run time already holds.
//
// Limits: at most kMaxReplayJobs jobs and kMaxReplayEvents events (memory:
// the decoded events are held while the history is built).
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "src/base/status.h"
#include "src/config/cluster_config.h"
#include "src/engine/event.h"
#include "src/sim/metrics.h"

namespace gpupool {

inline constexpr int64_t kMaxReplayEvents = 20'000'000;
inline constexpr int64_t kMaxReplayJobs = 2'000'000;

// One submission, as the journal recorded it (the journal's timeline and ids).
struct ObservedJob {
  JobId job = -1;
  JobSpec spec;
  std::string tenant;  // its name
  Instant submitted{};
  std::optional<Instant> first_placed, last_placed, ended;
  std::string first_placement;  // "node:gpu,gpu node:gpu" (see PlacementText)
  bool rejected = false;
  bool cancelled_pending = false;  // cancelled before it ever ran: not replayed
  int64_t preemptions = 0;
  // Run time of earlier attempts whose work was kept: each preempted
  // attempt from its placement to its checkpoint's start (to its stop when
  // it did not checkpoint), less the work it lost. The replay's job runs
  // this plus its last attempt's run time.
  Duration kept_work{0};
  std::optional<Instant> checkpoint_started;  // while a preemption's checkpoint runs
};

// What a journal says happened.
struct History {
  Instant origin{}, end{};           // the first and the last event
  std::vector<std::string> pools;    // by the journal's pool id
  std::vector<std::string> tenants;  // by the journal's tenant id
  std::vector<std::string> nodes;    // by the journal's node index
  std::vector<Event> bootstrap;      // the set-up events at the origin
  std::vector<Event> changes;        // later NodeAdded, TenantAdded, QuotaSet (in order)
  std::vector<ObservedJob> jobs;     // in submission order
  int64_t preemptions = 0, idle_reclaims = 0;
  std::map<std::string, int64_t> not_replayed;  // event type -> how many
};

// Builds the history from the journal's events in seq order (the server's
// decoder, EventFromJson, gives them). kInvalidArgument naming the event's
// seq when the events do not form a journal (a job placed before it was
// submitted, an unknown node), kResourceExhausted past the limits.
Result<History> HistoryFromEvents(const std::vector<Event>& events);

// A node's placement as text: each replica "NODE:G,G" (its GPU indices),
// sorted, space-separated; "" when unplaced.
std::string PlacementText(const std::vector<PlacedReplica>& replicas, const std::vector<std::string>& node_names);

struct ReplayOptions {
  Duration tick{std::chrono::seconds(1)};  // the control loops' period (the server's server.tick)
  // True when `config` is not the one in force: the quotas it declares
  // replace the history's later changes to them.
  bool new_config = false;
  bool check_invariants = false;
  std::string event_log_path;  // when set, the replay's events as JSON lines (SimOptions::event_log_path)
};

// One replayed job (by index into History::jobs), on the journal's timeline.
struct ReplayedJob {
  std::optional<Instant> first_placed;
  std::string first_placement;
};

struct ReplayRun {
  SimReport report;
  std::vector<ReplayedJob> jobs;  // as History::jobs
};

// Replays `h` under `config` (pools, tenants, quotas, priorities, engine
// settings; its cluster section is ignored: the nodes are the journal's).
// Under the configuration in force (new_config false) the bootstrap's pools
// and tenants must be the configuration's, in order (else
// kFailedPrecondition naming the first difference); under a new one every
// pool a job named must exist in it.
Result<ReplayRun> ReplayHistory(const History& h, const ClusterConfig& config, const ReplayOptions& o);

// How far a replay under the configuration in force is from what happened:
// per job started in both, the start-time difference; jobs whose first
// placement differs, whose rank in start order differs, and jobs that
// started in only one of the two.
struct Fidelity {
  int64_t compared = 0;
  double start_error_p50_s = 0, start_error_p99_s = 0, start_error_max_s = 0;
  int64_t placement_differs = 0, order_differs = 0, started_in_one_only = 0;
};
Fidelity CompareWithHistory(const History& h, const ReplayRun& r);

}  // namespace gpupool
