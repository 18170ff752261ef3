// Drains for a scale-in (SCALE-4/6; never below the capacity the tenants'
// guarantees need, issue 16) and for nodes going back to the pool that lent
// them (POOL-3); see src/control/pool_autoscaling.h.
#include <algorithm>
#include <cstdio>
#include <string>
#include <vector>

#include "src/control/pool_autoscaling.h"
#include "src/engine/queries.h"

namespace gpupool {
namespace {

// Ready nodes of `pool` held for nobody, in drain order (ScaleInNodes).
std::vector<NodeIndex> DrainCandidates(const EngineState& s, PoolId pool) {
  // Capacity that runs reserved tenants' work goes last; then empty, then
  // least used (fragmented) nodes first; then the highest index (the newest).
  struct Candidate {
    bool reserved_work;
    bool own;  // not borrowed from another pool (borrowed nodes go back first)
    int64_t used_milli;
    NodeIndex node;
  };
  std::vector<Candidate> candidates;
  std::vector<bool> reserved_work(s.cluster.node_count(), false);
  for (const auto& [id, j] : s.running) {
    const Quota& q = s.tenant_pool(j->spec.tenant, j->pool).quota;
    if (!q.reserved) continue;
    for (const ReplicaPlacement& p : j->placements) reserved_work[p.node] = true;
  }
  for (NodeIndex n = 0; n < s.cluster.node_count(); ++n) {
    const Node& node = s.cluster.node(n);
    if (node.pool != pool || node.condition != NodeCondition::kReady || node.reserved_for >= 0) continue;
    const int64_t used = (node.gpu_milli_total() - node.gpu_milli_free_total) * 1000 +
                         (node.cpu_milli_total - node.cpu_milli_free) / 1000;
    candidates.push_back({reserved_work[n], !s.lent_nodes.contains(n), used, n});
  }
  std::sort(candidates.begin(), candidates.end(), [](const Candidate& a, const Candidate& b) {
    if (a.reserved_work != b.reserved_work) return !a.reserved_work;
    if (a.own != b.own) return !a.own;
    if (a.used_milli != b.used_milli) return a.used_milli < b.used_milli;
    return a.node > b.node;
  });
  std::vector<NodeIndex> nodes;
  nodes.reserve(candidates.size());
  for (const Candidate& c : candidates) nodes.push_back(c.node);
  return nodes;
}

std::string Gpus(int64_t milli) {  // "16", "2.5"
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g", static_cast<double>(milli) / kMilliPerGpu);
  return buf;
}

}  // namespace

Result<std::vector<NodeIndex>> ScaleInNodes(const EngineState& s, PoolId pool, int32_t count) {
  const std::vector<NodeIndex> candidates = DrainCandidates(s, pool);
  // The floor: ready GPU capacity left >= the tenants' guarantees.
  const int64_t floor = GuaranteedMilli(s, pool);
  int64_t ready = s.pool_ready_gpu_milli(pool);
  std::vector<NodeIndex> chosen;
  for (NodeIndex n : candidates) {
    if (static_cast<int32_t>(chosen.size()) >= count) break;
    const int64_t gpus = s.cluster.node(n).gpu_milli_total();
    if (gpus > 0 && ready - gpus < floor) continue;  // a smaller node further on may still go
    ready -= gpus;
    chosen.push_back(n);
  }
  if (chosen.empty() && !candidates.empty() && count > 0) {
    return FailedPrecondition("pool '" + s.pools[pool].name + "': no node may drain, its tenants are guaranteed " +
                              Gpus(floor) + " GPUs and it has " + Gpus(s.pool_ready_gpu_milli(pool)) + " ready");
  }
  return chosen;
}

void PoolAutoscaling::DrainNodes(PoolId pool, int32_t count, const std::string& reason, const EngineView& view,
                                 Actions& act) {
  // The rule was told how many may go (PoolObservation::removable_nodes), so
  // the floor refuses nothing here unless the state changed in between;
  // then nothing drains.
  const Result<std::vector<NodeIndex>> nodes = ScaleInNodes(view.state(), pool, count);
  if (!nodes) return;
  for (NodeIndex n : *nodes) StartDrain(n, reason, view, act);
}

void PoolAutoscaling::StartDrain(NodeIndex n, const std::string& reason, const EngineView& view, Actions& act) {
  const EngineState& s = view.state();
  act.Emit(NodeDrainStarted{n, reason});
  drain_started_[n] = view.now();
  // Running work that can move, moves: elastic jobs shrink off the node
  // (SCALE-7); the rest is checkpointed first when it can be; stateless
  // online inference moves at once.
  for (JobId id : JobsOnNode(s, n)) {
    const Job& j = s.job(id);
    if (j.state != JobState::kRunning || j.stopping != Job::Stop::kNone) continue;
    if (act.ShrinkElastic(j, n, "node " + s.cluster.node_name(n) + " drains: " + reason)) continue;
    if (!j.spec.checkpointable && j.spec.kind != JobKind::kOnlineInference) continue;
    const bool checkpoint = j.spec.checkpointable;
    act.Emit(PreemptionStarted{id, -1, PreemptReason::kDrain, checkpoint});
    if (!checkpoint) act.Emit(JobPreempted{id, Duration(0)});  // stateless: nothing to lose
  }
}

void PoolAutoscaling::ProgressDrains(const EngineView& view, Actions& act) {
  const EngineState& s = view.state();
  const Instant now = view.now();
  const std::vector<NodeIndex> draining(s.draining.begin(), s.draining.end());
  for (NodeIndex n : draining) {
    const Node& node = s.cluster.node(n);
    auto started = drain_started_.find(n);
    if (started == drain_started_.end()) started = drain_started_.emplace(n, now).first;  // after a restart
    if (node.gpu_kinds_present == 0 && node.cpu_only_residents == 0) {
      // A borrowed node goes back to its pool (POOL-3); others leave.
      if (s.lent_nodes.contains(n)) {
        act.Emit(NodeReturned{n});
      } else {
        act.Emit(NodeRemoved{n});
      }
      drain_started_.erase(n);
      continue;
    }
    // Past the drain timeout, what still runs there is stopped (its work
    // since its last checkpoint is lost) and queues again.
    const PoolScalingConfig* config = view.ScalingOf(node.pool);
    const Duration timeout = config != nullptr ? config->drain_timeout : std::chrono::hours(1);
    if (now - started->second < timeout) continue;
    for (JobId id : JobsOnNode(s, n)) {
      const Job& j = s.job(id);
      if (j.state != JobState::kRunning || j.stopping != Job::Stop::kNone) continue;
      act.Emit(PreemptionStarted{id, -1, PreemptReason::kDrain, false});
      act.Emit(JobPreempted{id, LostWork(j, now)});
    }
  }
}

}  // namespace gpupool
