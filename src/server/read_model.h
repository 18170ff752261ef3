// What the server's read endpoints answer from: a projection of the
// committed events (jobs, including ended ones; tenants and their quotas;
// pools; nodes' static facts and hotspots; the region table in force) plus
// the latest engine summary (usage, capacity, per-GPU state) that the
// engine thread publishes.
//
// The writer thread applies each committed event (Apply) under the write
// lock; HTTP threads read under the shared lock, so a reader sees the state
// after a whole committed batch, never a command that is not yet durable.
//
// Thread-safety: the caller holds mu() (unique to change, shared to read).
#pragma once

#include <algorithm>
#include <map>
#include <memory>
#include <optional>
#include <shared_mutex>
#include <string>
#include <vector>

#include "src/base/bytes.h"
#include "src/base/status.h"
#include "src/engine/event.h"
#include "src/engine/scaling.h"
#include "src/engine/regions.h"
#include "src/model/pool.h"
#include "src/model/tenant.h"
#include "src/server/usage.h"

namespace gpupool {

// Why a job last stopped running before its end, for its tenant to see:
// preempted (reason: the PreemptReason's name), reclaimed (idle or
// deadline) or interrupted (its node went down). Recorded when the stop
// begins (a checkpoint may follow).
enum class JobStopCause : uint8_t { kPreempted, kReclaimed, kInterrupted };
const char* JobStopCauseName(JobStopCause c);
struct JobStop {
  JobStopCause cause = JobStopCause::kPreempted;
  std::string reason;
  Instant at{};
  JobId by_job = -1;  // the preemptor, when there is one
};

struct JobRecord {
  JobId id = -1;
  JobSpec spec;
  JobState state = JobState::kPending;
  Instant submitted{}, started{}, ended{};
  bool has_started = false, has_ended = false;
  PoolId pool = 0;
  bool borrowed = false;
  std::vector<PlacedReplica> placements;
  int32_t preemptions = 0, interruptions = 0;
  std::string reason;  // rejected jobs: why
  std::optional<JobStop> last_stop;
  JobUsage usage;  // its GPU-seconds (src/server/usage.h)
};

struct NodeRecord {
  NodeSpec spec;
  std::string region, zone, rack;
  // OPS-2: set by HotspotDetected, cleared by HotspotCleared (the node is
  // cordoned meanwhile).
  bool hot = false;
  GpuMask hot_gpus = 0;
  std::string hot_reason;
  Instant hot_since{};
  // POOL-3: while lent to another pool (spec.pool), its home pool; else -1.
  int32_t home_pool = -1;
  // Issue 19: an operator's cordon (NodeCordoned, NodeDrainRequested or
  // NodeRemovalRequested until NodeUncordoned), as EngineState::cordons
  // has it; kept on a removed node, to show who removed it and why.
  struct OperatorCordon {
    std::string actor, reason;
    Instant since{};
    enum class Drain : uint8_t { kNone, kDraining, kDrained } drain = Drain::kNone;
    Instant drain_deadline{};
    bool removing = false;  // NodeRemovalRequested: what is interrupted next is by the removal
  };
  std::optional<OperatorCordon> cordon;
  // A scale-in's drain (or a lender's recall, POOL-3): NodeDrainStarted's
  // reason and time, until NodeRemoved or NodeReturned.
  std::optional<std::pair<std::string, Instant>> scale_in;
};

// Published by the engine thread (every tick and after set-up commands).
struct EngineSummary {
  struct TenantPoolUsage {
    int64_t used_milli = 0, borrowed_milli = 0, lent_milli = 0;
    // QUOTA-4: a QuotaExhausted alert is outstanding (a job waits because
    // the tenant reached its elastic limit; cleared when usage falls).
    bool exhausted = false;
  };
  std::vector<std::vector<TenantPoolUsage>> usage;  // [tenant][pool]
  std::vector<PoolCapacity> capacity;                // [pool]
  std::vector<int32_t> pool_nodes;                   // [pool]
  std::vector<Node> nodes;                           // [node]: condition, per-GPU state
  // Pending jobs by tenant and priority.
  std::map<std::pair<TenantId, int32_t>, int64_t> queued;
  // Pending jobs by tenant and pool they may run in (a job allowed in two
  // pools counts in both): the time series' queue lengths.
  std::map<std::pair<TenantId, PoolId>, int64_t> queued_by_pool;
  // The autoscaler's forecast accuracy per scaling pool with forecasting on
  // (SCALE-3, Engine::forecast_stats; since the engine started).
  std::vector<ForecastStats> forecasts;
};

class ReadModel {
 public:
  std::shared_mutex& mu() const { return mu_; }

  void Apply(const Event& e);
  int64_t last_seq() const { return last_seq_; }

  const JobRecord* job(JobId id) const;
  // Jobs with id > after, ascending; of `tenant` when >= 0.
  template <class F>
  void ForEachJob(JobId after, TenantId tenant, F&& f) const;
  // Jobs with id < before (every job when before <= 0), newest first; of
  // `tenant` when >= 0.
  template <class F>
  void ForEachJobNewestFirst(JobId before, TenantId tenant, F&& f) const;

  const std::vector<Pool>& pools() const { return pools_; }
  const std::vector<std::string>& tenants() const { return tenant_names_; }
  std::optional<TenantId> tenant_id(const std::string& name) const;
  const std::vector<std::vector<Quota>>& quotas() const { return quotas_; }  // [tenant][pool]
  const std::vector<NodeRecord>& nodes() const { return nodes_; }
  std::optional<NodeIndex> node_id(const std::string& name) const;

  // TOPO-2: the region table in force, as Engine::regions() has it: the
  // last RegionsSet applied, else the configuration's. The server gives the
  // configuration's table before it recovers or serves (it is not an event:
  // a changed configuration changes it, unless a table was set through the
  // API, which the journal and the snapshot keep).
  void set_config_regions(RegionPolicy p) { config_regions_ = std::move(p); }
  const RegionPolicy& regions() const { return set_regions_ ? *set_regions_ : config_regions_; }

  // GPU usage accounting per tenant and pool (src/server/usage.h).
  const UsageLedger& usage() const { return usage_; }

  void set_summary(std::shared_ptr<const EngineSummary> s) { summary_ = std::move(s); }
  const std::shared_ptr<const EngineSummary>& summary() const { return summary_; }

  // Snapshot of everything Apply built (not the summary), and its inverse
  // into an empty model.
  std::string Encode() const;
  Status Decode(std::string_view bytes);

 private:
  // The sections of Encode and Decode by the version that added them.
  void EncodeV2(ByteWriter& w) const;
  void EncodeV3(ByteWriter& w) const;
  void EncodeV4(ByteWriter& w) const;
  void EncodeV5(ByteWriter& w) const;
  void EncodeV7(ByteWriter& w) const;
  void EncodeV8(ByteWriter& w) const;
  static void DecodeV2(ByteReader& r, ReadModel& m);
  static void DecodeV3(ByteReader& r, ReadModel& m);
  static void DecodeV4(ByteReader& r, ReadModel& m);
  static void DecodeV5(ByteReader& r, ReadModel& m);
  static void DecodeV7(ByteReader& r, ReadModel& m);
  // A snapshot older than version 7 has no accounting: what the running
  // jobs hold is set from their placements, and accrues from the next event.
  void SeedUsage();
  static void DecodeV8(ByteReader& r, ReadModel& m);
  JobRecord* mutable_job(JobId id);
  NodeRecord* mutable_node(NodeIndex n);  // null when out of range

  // Apply, one event type each; the events the read model does not show
  // change nothing but last_seq.
  template <class T>
  void On(const T&, Instant) {}
  void On(const PoolAdded& b, Instant at);
  void On(const NodeAdded& b, Instant at);
  void On(const TenantAdded& b, Instant at);
  void On(const QuotaSet& b, Instant at);
  void On(const JobSubmitted& b, Instant at);
  void On(const JobRejected& b, Instant at);
  void On(const JobPlaced& b, Instant at);
  void On(const JobFinished& b, Instant at);
  void On(const JobCancelled& b, Instant at);
  void On(const PreemptionStarted& b, Instant at);
  void On(const JobPreempted& b, Instant at);
  void On(const ReclaimStarted& b, Instant at);
  void On(const JobReclaimed& b, Instant at);
  void On(const JobInterrupted& b, Instant at);
  void On(const JobResized& b, Instant at);
  void On(const NodeLent& b, Instant at);
  void On(const NodeReturned& b, Instant at);
  void On(const HotspotDetected& b, Instant at);
  void On(const HotspotCleared& b, Instant at);
  void On(const RegionsSet& b, Instant at);
  void On(const QuotaLent& b, Instant at);
  void On(const QuotaRecalled& b, Instant at);
  void On(const NodeCordoned& b, Instant at);
  void On(const NodeUncordoned& b, Instant at);
  void On(const NodeDrainRequested& b, Instant at);
  void On(const NodeDrained& b, Instant at);
  void On(const NodeRemovalRequested& b, Instant at);
  void On(const NodeDrainStarted& b, Instant at);
  void On(const NodeRemoved& b, Instant at);
  // The operator's cordon of node n, made when new (since `at`).
  NodeRecord::OperatorCordon* CordonOf(NodeIndex n, const std::string& actor, const std::string& reason, Instant at);
  JobRecord& NewJob(JobId id, const JobSpec& spec, Instant at);
  void End(JobId id, JobState s, Instant at);
  JobRecord* Requeue(JobId id);  // back to pending, as the Engine requeues it
  // Accounting: the job holds what its placements take from `at` on
  // (placed or resized), or nothing (released); both accrue it up to `at`.
  void HoldGpus(JobRecord& j, Instant at);
  void ReleaseGpus(JobId id, Instant at);
  int64_t HeldMemoryMib(const JobRecord& j) const;  // GPU memory its placements hold (usage.h's rule)

  // Readers lock it shared through mu(), the publisher (Apply, set_summary)
  // uniquely. Before the core's threads start, its Open applies, decodes
  // and sets without it: no other thread exists yet.
  mutable std::shared_mutex mu_;
  int64_t last_seq_ = 0;                                   // GUARDED_BY(mu_)
  std::vector<JobRecord> jobs_;                            // GUARDED_BY(mu_); index id - 1 (ids are dense from 1); id -1 = never submitted
  std::map<TenantId, std::vector<JobId>> jobs_by_tenant_;  // GUARDED_BY(mu_)
  std::vector<Pool> pools_;                                // GUARDED_BY(mu_)
  std::vector<std::string> tenant_names_;                  // GUARDED_BY(mu_)
  std::map<std::string, TenantId> tenant_ids_;             // GUARDED_BY(mu_)
  std::vector<std::vector<Quota>> quotas_;                 // GUARDED_BY(mu_)
  std::vector<NodeRecord> nodes_;                          // GUARDED_BY(mu_)
  std::map<std::string, NodeIndex> node_ids_;              // GUARDED_BY(mu_)
  RegionPolicy config_regions_;                            // set before the core starts, then read-only
  std::optional<RegionPolicy> set_regions_;                // GUARDED_BY(mu_); the last RegionsSet
  UsageLedger usage_;                                      // GUARDED_BY(mu_)
  bool usage_seeded_ = false;  // GUARDED_BY(mu_); a snapshot loaded: StartSeeded at the next event
  std::shared_ptr<const EngineSummary> summary_ = std::make_shared<EngineSummary>();  // GUARDED_BY(mu_)
};

template <class F>
void ReadModel::ForEachJob(JobId after, TenantId tenant, F&& f) const {
  if (tenant >= 0) {
    auto it = jobs_by_tenant_.find(tenant);
    if (it == jobs_by_tenant_.end()) return;
    const std::vector<JobId>& ids = it->second;
    auto pos = std::upper_bound(ids.begin(), ids.end(), after);
    for (; pos != ids.end(); ++pos) {
      if (!f(jobs_[*pos - 1])) return;
    }
    return;
  }
  for (size_t i = after < 0 ? 0 : static_cast<size_t>(after); i < jobs_.size(); ++i) {
    if (jobs_[i].id < 0) continue;
    if (!f(jobs_[i])) return;
  }
}

template <class F>
void ReadModel::ForEachJobNewestFirst(JobId before, TenantId tenant, F&& f) const {
  const JobId bound = before <= 0 ? static_cast<JobId>(jobs_.size()) + 1 : before;
  if (tenant >= 0) {
    auto it = jobs_by_tenant_.find(tenant);
    if (it == jobs_by_tenant_.end()) return;
    const std::vector<JobId>& ids = it->second;
    for (auto pos = std::lower_bound(ids.begin(), ids.end(), bound); pos != ids.begin();) {
      --pos;
      if (!f(jobs_[*pos - 1])) return;
    }
    return;
  }
  for (size_t i = std::min(static_cast<size_t>(bound - 1), jobs_.size()); i-- > 0;) {
    if (jobs_[i].id < 0) continue;
    if (!f(jobs_[i])) return;
  }
}

}  // namespace gpupool
