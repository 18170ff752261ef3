// A node's desired state as the engine thread last computed it, with a
// revision per node and per task (issue 18): what the agent protocol's
// watches (src/server/watch_hub.h) and its replies are built from.
//
// Revisions count up from 1 per node within one server incarnation (a run
// of the server: a restart is a new incarnation, and revisions start
// again). A task's revision is the node's revision when the task was added
// or last changed (its action, idle notice, anything of its order); so the
// changes after revision R are the tasks whose revision is above R, plus the
// list of every task's key, from which the agent learns what left.
//
// Values: a published NodeDesired is immutable and shared between threads.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "src/api/agent_protocol.h"

namespace gpupool {

struct DesiredTask {
  int64_t revision = 0;
  TaskOrder order;
};

struct NodeDesired {
  std::string node;          // its name
  int32_t node_index = -1;
  int64_t revision = 0;      // 1, 2, ... within the incarnation
  std::string session;       // the latest registration's; empty: unknown (the server restarted since)
  std::string pool;
  int64_t heartbeat_interval_ms = 0;
  int64_t fence_after_ms = 0;
  std::vector<DesiredTask> tasks;  // ascending (job, replica, attempt)
  std::vector<ScrubOrder> scrubs;  // oldest first
};

using NodeDesiredPtr = std::shared_ptr<const NodeDesired>;

// The next revision of `was` (null: none yet) given the node's state now:
// `now`'s tasks that equal one of `was` keep its revision, the others get
// the new revision. Null when nothing differs (no new revision).
NodeDesiredPtr NextRevision(const NodeDesired* was, NodeDesired now);

// A watch's answer: every task (full, a resync) or those changed after `since`.
WatchReply WatchReplyOf(const NodeDesired& d, const std::string& incarnation, bool full, int64_t since);
// The whole desired state as a reply of protocol 2 (registration).
AgentReply FullReplyOf(const NodeDesired& d, const std::string& incarnation);

}  // namespace gpupool
