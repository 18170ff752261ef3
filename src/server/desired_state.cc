#include "src/server/desired_state.h"

#include <map>

namespace gpupool {
namespace {

TaskRef KeyOf(const TaskOrder& o) { return TaskRef{o.job, o.replica, o.attempt}; }

bool SameScrubs(const std::vector<ScrubOrder>& a, const std::vector<ScrubOrder>& b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    if (a[i].id != b[i].id || a[i].gpus != b[i].gpus) return false;
  }
  return true;
}

}  // namespace

NodeDesiredPtr NextRevision(const NodeDesired* was, NodeDesired now) {
  const int64_t next = was ? was->revision + 1 : 1;
  bool changed = !was || was->session != now.session || was->pool != now.pool ||
                 was->heartbeat_interval_ms != now.heartbeat_interval_ms ||
                 was->fence_after_ms != now.fence_after_ms || was->tasks.size() != now.tasks.size() ||
                 !SameScrubs(was->scrubs, now.scrubs);
  std::map<TaskRef, const DesiredTask*> before;
  if (was) {
    for (const DesiredTask& t : was->tasks) before[KeyOf(t.order)] = &t;
  }
  for (DesiredTask& t : now.tasks) {
    auto it = before.find(KeyOf(t.order));
    if (it != before.end() && it->second->order == t.order) {
      t.revision = it->second->revision;
    } else {
      t.revision = next;
      changed = true;
    }
  }
  if (!changed) return nullptr;
  now.revision = next;
  return std::make_shared<const NodeDesired>(std::move(now));
}

WatchReply WatchReplyOf(const NodeDesired& d, const std::string& incarnation, bool full, int64_t since) {
  WatchReply r;
  r.incarnation = incarnation;
  r.revision = d.revision;
  r.changed = true;
  r.full = full;
  r.since = full ? 0 : since;
  r.session = d.session;
  r.pool = d.pool;
  r.heartbeat_interval_ms = d.heartbeat_interval_ms;
  r.fence_after_ms = d.fence_after_ms;
  for (const DesiredTask& t : d.tasks) {
    r.task_keys.push_back(KeyOf(t.order));
    if (full || t.revision > since) r.tasks.push_back(t.order);
  }
  r.scrubs = d.scrubs;
  return r;
}

AgentReply FullReplyOf(const NodeDesired& d, const std::string& incarnation) {
  AgentReply r;
  r.protocol = kAgentProtocol;
  r.incarnation = incarnation;
  r.revision = d.revision;
  r.node_index = d.node_index;
  r.session = d.session;
  r.pool = d.pool;
  r.heartbeat_interval_ms = d.heartbeat_interval_ms;
  r.fence_after_ms = d.fence_after_ms;
  for (const DesiredTask& t : d.tasks) r.tasks.push_back(t.order);
  r.scrubs = d.scrubs;
  return r;
}

}  // namespace gpupool
