// The Engine's side of its control loops (src/engine/control_loop.h): Tick
// runs them, the commands that feed them validate and hand on, and the
// queries only they ask.
#include "src/engine/engine_loops.h"

#include <cmath>

namespace gpupool {

void Engine::Tick(Instant now, const Sink& sink) {
  ProgressOperatorDrains(now, sink);  // issue 19; nothing unless an operator drains a node
  LoopContext ctx(*this, now, sink);
  loops_.lending->Tick(ctx, ctx);
  loops_.deadlines->Tick(ctx, ctx);
  loops_.idle->Tick(ctx, ctx);
  loops_.failures->Tick(ctx, ctx);
  loops_.scaling->Tick(ctx, ctx);
  loops_.defrag->Tick(ctx, ctx);
  SchedulePass(now, sink);
  loops_.elastic->Tick(ctx, ctx);
}

Status Engine::ReportUtilization(JobId id, double util_pct, Instant now, const Sink& sink) {
  const Job* j = state_.find_job(id);
  if (!j) return NotFound("job " + std::to_string(id) + " is not live");
  if (!std::isfinite(util_pct) || util_pct < 0 || util_pct > 100) {
    return InvalidArgument("utilization: must be a percentage, got " + std::to_string(util_pct));
  }
  LoopContext ctx(*this, now, sink);
  loops_.idle->Utilization(*j, util_pct, ctx, ctx);
  return {};
}

Status Engine::Heartbeat(NodeIndex node, Instant now, const Sink& sink) {
  if (node < 0 || node >= state_.cluster.node_count()) return NotFound("node " + std::to_string(node) + " does not exist");
  LoopContext ctx(*this, now, sink);
  return loops_.failures->Heartbeat(node, ctx, ctx);
}

Status Engine::ReportNodeTelemetry(NodeIndex node, const std::vector<GpuTelemetry>& gpus, Instant now,
                                   const Sink& sink) {
  if (node < 0 || node >= state_.cluster.node_count()) return NotFound("node " + std::to_string(node) + " does not exist");
  const Node& n = state_.cluster.node(node);
  for (const GpuTelemetry& g : gpus) {
    if (g.gpu < 0 || g.gpu >= n.gpu_count) {
      return InvalidArgument("gpus: GPU " + std::to_string(g.gpu) + " is not on node " + state_.cluster.node_name(node) +
                             " (it has " + std::to_string(n.gpu_count) + ")");
    }
  }
  LoopContext ctx(*this, now, sink);
  loops_.hotspots->Telemetry(node, gpus, ctx, ctx);
  return {};
}

std::vector<PlacedReplica> Engine::PlaceTentatively(const Demand& d, int32_t count,
                                                    const std::function<bool(NodeIndex)>& prefer) {
  Scheduler& sched = scheduler();
  Cluster& cluster = state_.cluster;
  std::vector<PlacedReplica> placed;
  std::vector<AllocationId> tentative;
  const size_t slots = cluster.allocation_slots().size();
  for (int32_t i = 0; i < count; ++i) {
    std::optional<Placement> p;
    if (prefer) p = sched.ScheduleWhere(d, prefer);
    if (!p) p = sched.Schedule(d);
    if (!p) break;
    placed.push_back({p->node, p->gpus});
    tentative.push_back(cluster.Allocate(p->node, d, p->gpus));
  }
  for (auto it = tentative.rbegin(); it != tentative.rend(); ++it) cluster.Release(*it);
  cluster.TrimFreeSlots(slots);  // the slot table as Apply alone leaves it (a replay's)
  return placed;
}

}  // namespace gpupool
