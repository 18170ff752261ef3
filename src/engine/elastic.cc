// Elastic training in the Engine (SCALE-7): running elastic jobs shrink off
// nodes that leave or fail and give back what they grew for queued work;
// each change is one JobResized with a reshard step (the job's checkpoint
// duration), never a restart. Growth onto free capacity is a control loop
// (src/control/elastic_growth.h). See JobSpec::min_replicas and the Engine
// header. Also here: moving a job off a node (Actions::MoveOff), which
// shrinks elastic jobs first.
#include <algorithm>
#include <tuple>

#include "src/engine/engine.h"

namespace gpupool {

bool Engine::ShrinkElastic(const Job& j, NodeIndex node, const std::string& reason, Instant now, const Sink& sink) {
  if (!j.spec.elastic() || j.state != JobState::kRunning || j.stopping != Job::Stop::kNone) return false;
  std::vector<int32_t> removed;
  const int32_t size = static_cast<int32_t>(j.placements.size());
  if (node >= 0) {
    for (int32_t i = 0; i < size; ++i) {
      if (j.placements[i].node == node) removed.push_back(i);
    }
  } else {
    for (int32_t i = j.spec.min_replicas; i < size; ++i) removed.push_back(i);
  }
  if (removed.empty() || size - static_cast<int32_t>(removed.size()) < j.spec.min_replicas) return false;
  Emit(JobResized{j.id, std::move(removed), {}, j.borrowed, j.spec.checkpoint_duration, reason}, now, sink);
  return true;
}

bool Engine::YieldElastic(const Job& j, PoolId p, Instant now, const Sink& sink) {
  if (!any_elastic_) return false;
  std::vector<const Job*> extra;
  int64_t freeable = 0;
  for (const auto& [id, r] : state_.running) {
    if (id == j.id || r->pool != p || !r->spec.elastic() || r->state != JobState::kRunning ||
        r->stopping != Job::Stop::kNone || r->spec.replicas <= r->spec.min_replicas) {
      continue;
    }
    extra.push_back(r);
    freeable += int64_t{r->spec.replicas - r->spec.min_replicas} * r->spec.demand.total_gpu_milli();
  }
  if (extra.empty()) return false;
  int64_t allocated = 0;
  for (const Tenant& t : state_.tenants) allocated += t.pools[p].usage.gpu_milli;
  const int64_t free = state_.pool_ready_gpu_milli(p) - allocated;
  const int64_t need = j.spec.total_gpu_milli();
  if (free + freeable < need) return false;  // it would not fit anyway
  std::sort(extra.begin(), extra.end(), [](const Job* a, const Job* b) {
    return std::make_tuple(a->spec.priority, -(a->spec.replicas - a->spec.min_replicas), a->id) <
           std::make_tuple(b->spec.priority, -(b->spec.replicas - b->spec.min_replicas), b->id);
  });
  int64_t freed = 0;
  bool any = false;
  for (const Job* r : extra) {
    if (free + freed >= need) break;
    freed += int64_t{r->spec.replicas - r->spec.min_replicas} * r->spec.demand.total_gpu_milli();
    any |= ShrinkElastic(*r, -1, "gave back grown replicas to queued job " + std::to_string(j.id), now, sink);
  }
  return any;
}

void Engine::MoveOff(const Job& j, NodeIndex n, PreemptReason reason, const std::string& where, Instant now,
                     const Sink& sink) {
  if (ShrinkElastic(j, n, where, now, sink)) return;
  const JobId id = j.id;
  const bool checkpoint = j.spec.checkpointable;
  Emit(PreemptionStarted{id, -1, reason, checkpoint}, now, sink);
  if (!checkpoint) Emit(JobPreempted{id, Duration(0)}, now, sink);  // stateless: nothing to lose
}

}  // namespace gpupool
