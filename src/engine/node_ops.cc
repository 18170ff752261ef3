// Operators' node commands (issue 19): cordon, uncordon, drain, remove, and
// the drains' progress at each Tick. See engine.h ("operators' node
// commands") and the events NodeCordoned .. NodeRemovalRequested.
#include <algorithm>
#include <string>
#include <vector>

#include "src/base/fields_binary.h"
#include "src/engine/engine.h"

namespace gpupool {
namespace {

// "job 4 (tenant a, replicas 0, 2)": the work on node n, for a refusal.
std::string WorkOn(const EngineState& s, NodeIndex n) {
  std::string out;
  int listed = 0;
  const std::vector<JobId> jobs = JobsOnNode(s, n);
  for (JobId id : jobs) {
    if (++listed > 10) {
      out += ", and " + std::to_string(jobs.size() - 10) + " more";
      break;
    }
    const Job& j = s.job(id);
    std::string replicas;
    for (const ReplicaPlacement& r : j.placements) {
      if (r.node == n) replicas += (replicas.empty() ? "" : ", ") + std::to_string(r.id);
    }
    if (!out.empty()) out += "; ";
    out += "job " + std::to_string(id) + " (tenant " + s.tenants[j.spec.tenant].name + ", replica" +
           (replicas.find(',') == std::string::npos ? " " : "s ") + replicas + ")";
  }
  return out;
}

}  // namespace

Status Engine::CheckNodeCommand(NodeIndex node, const std::string& reason) const {
  if (node < 0 || node >= state_.cluster.node_count()) return NotFound("node " + std::to_string(node) + " does not exist");
  if (state_.cluster.node(node).condition == NodeCondition::kRemoved) {
    return FailedPrecondition("node '" + state_.cluster.node_name(node) + "' was removed");
  }
  if (reason.size() > kMaxOperatorReasonBytes) {
    return InvalidArgument("reason: at most " + std::to_string(kMaxOperatorReasonBytes) + " bytes, got " +
                           std::to_string(reason.size()));
  }
  // The events carry it, and their JSON and binary codecs take only UTF-8.
  if (!IsValidUtf8(reason)) return InvalidArgument("reason: not valid UTF-8");
  return {};
}

void Engine::ReleaseHoldOn(NodeIndex node, Instant now, const Sink& sink) {
  const JobId holder = state_.cluster.node(node).reserved_for;
  if (holder >= 0) Emit(ReservationReleased{holder}, now, sink);
}

Result<bool> Engine::CordonNode(NodeIndex node, std::string actor, std::string reason, Instant now, const Sink& sink) {
  GP_TRY(CheckNodeCommand(node, reason));
  if (state_.cordons.contains(node)) return false;
  ReleaseHoldOn(node, now, sink);
  Emit(NodeCordoned{node, std::move(actor), std::move(reason)}, now, sink);
  return true;
}

Result<bool> Engine::UncordonNode(NodeIndex node, std::string actor, Instant now, const Sink& sink) {
  GP_TRY(CheckNodeCommand(node, ""));
  if (!state_.cordons.contains(node)) return false;
  Emit(NodeUncordoned{node, std::move(actor)}, now, sink);
  SchedulePass(now, sink);
  return true;
}

Result<bool> Engine::DrainNode(NodeIndex node, std::string actor, std::string reason, Duration timeout, Instant now,
                               const Sink& sink) {
  GP_TRY(CheckNodeCommand(node, reason));
  if (timeout < Duration(0) || timeout > kMaxDrainTimeout) {
    return InvalidArgument("timeout: must be between 0 and " + std::to_string(ToMillis(kMaxDrainTimeout) / 1000) +
                           " s, got " + std::to_string(ToMillis(timeout)) + " ms");
  }
  if (auto c = state_.cordons.find(node); c != state_.cordons.end() && c->second.draining) return false;
  ReleaseHoldOn(node, now, sink);
  const std::string where = "node " + state_.cluster.node_name(node) + " drains (operator " + actor +
                            (reason.empty() ? "" : ": " + reason) + ")";
  Emit(NodeDrainRequested{node, std::move(actor), std::move(reason), timeout}, now, sink);
  // What can move, moves, as a scale-in drain moves it
  // (PoolAutoscaling::StartDrain): elastic jobs shrink off the node, the
  // checkpointable checkpoint first, stateless online inference at once.
  for (JobId id : JobsOnNode(state_, node)) {
    const Job& j = state_.job(id);
    if (j.state != JobState::kRunning || j.stopping != Job::Stop::kNone) continue;
    if (ShrinkElastic(j, node, where, now, sink)) continue;
    if (!j.spec.checkpointable && j.spec.kind != JobKind::kOnlineInference) continue;  // until the deadline
    const bool checkpoint = j.spec.checkpointable;
    Emit(PreemptionStarted{id, -1, PreemptReason::kDrain, checkpoint}, now, sink);
    if (!checkpoint) Emit(JobPreempted{id, Duration(0)}, now, sink);  // stateless: nothing to lose
  }
  ProgressOperatorDrain(node, now, sink);  // a zero timeout stops the rest now; an empty node is drained
  SchedulePass(now, sink);
  return true;
}

Result<bool> Engine::RemoveNode(NodeIndex node, std::string actor, std::string reason, bool force, Instant now,
                                const Sink& sink) {
  if (node >= 0 && node < state_.cluster.node_count() &&
      state_.cluster.node(node).condition == NodeCondition::kRemoved) {
    return false;  // removed already
  }
  GP_TRY(CheckNodeCommand(node, reason));
  const Node& n = state_.cluster.node(node);
  const bool busy = n.gpu_kinds_present != 0 || n.cpu_only_residents != 0;
  if (busy && !force) {
    return FailedPrecondition("node '" + state_.cluster.node_name(node) + "' runs " + WorkOn(state_, node) +
                              ": drain it first, or remove it with force to interrupt them");
  }
  ReleaseHoldOn(node, now, sink);
  Emit(NodeRemovalRequested{node, std::move(actor), std::move(reason), force}, now, sink);
  // With force, what still runs is interrupted as by a node failure
  // (FailureDetection::MarkDown): queued again, its work since its last
  // checkpoint lost; an elastic job keeping its minimum elsewhere shrinks.
  for (JobId id : JobsOnNode(state_, node)) {
    const Job& j = state_.job(id);
    if (j.state == JobState::kRunning && j.stopping == Job::Stop::kNone &&
        ShrinkElastic(j, node, "node " + state_.cluster.node_name(node) + " removed", now, sink)) {
      continue;
    }
    const Duration ran = now - j.started;
    const Duration lost = j.spec.checkpoint_interval > Duration(0) ? ran % j.spec.checkpoint_interval : ran;
    Emit(JobInterrupted{id, node, lost}, now, sink);
  }
  Emit(NodeRemoved{node}, now, sink);
  if (busy) SchedulePass(now, sink);
  return true;
}

void Engine::ProgressOperatorDrain(NodeIndex node, Instant now, const Sink& sink) {
  const auto c = state_.cordons.find(node);
  if (c == state_.cordons.end() || !c->second.draining) return;
  if (std::max(now, state_.now) >= c->second.drain_deadline) {
    // Past the deadline what still runs is stopped (its work since its last
    // checkpoint is lost) and queues again, as at a scale-in's drain timeout.
    for (JobId id : JobsOnNode(state_, node)) {
      const Job& j = state_.job(id);
      if (j.state != JobState::kRunning || j.stopping != Job::Stop::kNone) continue;
      Emit(PreemptionStarted{id, -1, PreemptReason::kDrain, false}, now, sink);
      Emit(JobPreempted{id, LostWork(j, std::max(now, state_.now))}, now, sink);
    }
  }
  const Node& n = state_.cluster.node(node);
  if (n.gpu_kinds_present == 0 && n.cpu_only_residents == 0) Emit(NodeDrained{node}, now, sink);
}

void Engine::ProgressOperatorDrains(Instant now, const Sink& sink) {
  if (state_.cordons.empty()) return;
  std::vector<NodeIndex> draining;
  for (const auto& [n, c] : state_.cordons) {
    if (c.draining) draining.push_back(n);
  }
  for (NodeIndex n : draining) ProgressOperatorDrain(n, now, sink);
}

}  // namespace gpupool
