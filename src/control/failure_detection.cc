#include "src/control/failure_detection.h"

#include <string>

#include "src/engine/queries.h"

namespace gpupool {

void FailureDetection::Extend(const EngineView& view) {
  const auto count = static_cast<size_t>(view.state().cluster.node_count());
  if (last_heartbeat_.size() < count) last_heartbeat_.resize(count, view.now());
}

void FailureDetection::Restarted(const EngineView& view) {
  last_heartbeat_.assign(view.state().cluster.node_count(), view.now());
}

Status FailureDetection::Heartbeat(NodeIndex node, const EngineView& view, Actions& act) {
  Extend(view);
  const Cluster& cluster = view.state().cluster;
  if (cluster.node(node).condition == NodeCondition::kRemoved) {
    return FailedPrecondition("node " + std::to_string(node) + " was removed (scaled in)");
  }
  last_heartbeat_[node] = view.now();
  if (cluster.node(node).condition == NodeCondition::kDown) {
    act.Emit(NodeUp{node});
    act.SchedulePass();
  }
  return {};
}

void FailureDetection::Tick(const EngineView& view, Actions& act) {
  if (timeout_ <= Duration(0)) return;
  Extend(view);  // new or recovered: the clock starts now
  const Cluster& cluster = view.state().cluster;
  for (NodeIndex n = 0; n < cluster.node_count(); ++n) {
    const NodeCondition c = cluster.node(n).condition;
    if (c == NodeCondition::kDown || c == NodeCondition::kRemoved) continue;
    if (view.now() - last_heartbeat_[n] <= timeout_) continue;
    MarkDown(n, view, act);
  }
}

void FailureDetection::MarkDown(NodeIndex n, const EngineView& view, Actions& act) {
  const EngineState& s = view.state();
  act.Emit(NodeDown{n});
  for (JobId id : JobsOnNode(s, n)) {
    const Job& j = s.job(id);
    // SCALE-7: an elastic job that keeps its minimum elsewhere goes on
    // without the replicas it lost.
    if (j.state == JobState::kRunning && j.stopping == Job::Stop::kNone &&
        act.ShrinkElastic(j, n, "node " + s.cluster.node_name(n) + " failed")) {
      continue;
    }
    const Duration ran = view.now() - j.started;
    const Duration lost = j.spec.checkpoint_interval > Duration(0) ? ran % j.spec.checkpoint_interval : ran;
    act.Emit(JobInterrupted{id, n, lost});
  }
}

}  // namespace gpupool
