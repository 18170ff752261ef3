// Failure detection (OPS-4): a node without a heartbeat for
// EngineConfig::heartbeat_timeout is down (NodeDown; 0: never). Its
// elastic jobs that keep their minimum elsewhere shrink off it (SCALE-7);
// every other job on it is interrupted (JobInterrupted, with the work lost
// since its last periodic checkpoint) and queues again. A down node that
// reports again is scrubbed and rejoins (NodeUp), and the queue is served
// at once.
//
// Soft state: when each node was last heard from. A node counts as heard
// from when the loop first sees it (it joined, or the engine restarted).
#pragma once

#include <vector>

#include "src/engine/control_loop.h"

namespace gpupool {

class FailureDetection final : public FailureDetector {
 public:
  explicit FailureDetection(Duration heartbeat_timeout) : timeout_(heartbeat_timeout) {}
  void Tick(const EngineView& view, Actions& act) override;
  Status Heartbeat(NodeIndex node, const EngineView& view, Actions& act) override;
  // Every node counts as heard from at view.now().
  void Restarted(const EngineView& view) override;

 private:
  // Nodes added since are heard from at `now`.
  void Extend(const EngineView& view);
  void MarkDown(NodeIndex n, const EngineView& view, Actions& act);

  Duration timeout_;
  std::vector<Instant> last_heartbeat_;  // per node
};

}  // namespace gpupool
