// What nodes report that the Engine must act on (issue 15): GPU health
// (EXEC-11), the GPU memory shares really use (REQUIREMENTS' lessons) and
// the MIG modes and instances the hardware has (EXEC-7).
#include <algorithm>
#include <bit>
#include <string>
#include <tuple>
#include <vector>

#include "src/engine/engine.h"
#include "src/model/mig.h"

namespace gpupool {

Status Engine::ReportGpuHealth(NodeIndex node, GpuMask unhealthy, std::string reason, Instant now, const Sink& sink) {
  if (node < 0 || node >= state_.cluster.node_count()) return NotFound("node " + std::to_string(node));
  const Node& n = state_.cluster.node(node);
  if (unhealthy >> n.gpu_count) {
    return InvalidArgument("unhealthy: node " + state_.cluster.node_name(node) + " has " +
                           std::to_string(n.gpu_count) + " GPUs (mask " + std::to_string(unhealthy) + ")");
  }
  if (unhealthy == n.gpu_unhealthy) return {};
  const GpuMask newly = static_cast<GpuMask>(unhealthy & ~n.gpu_unhealthy);
  Emit(GpuHealthChanged{node, unhealthy, unhealthy == 0 ? std::string() : std::move(reason)}, now, sink);
  if (newly != 0) MoveOffUnhealthyGpus(node, newly, now, sink);
  SchedulePass(now, sink);
  return {};
}

void Engine::MoveOffUnhealthyGpus(NodeIndex n, GpuMask gpus, Instant now, const Sink& sink) {
  const std::string where = "node " + state_.cluster.node_name(n) + " GPU unhealthy";
  for (const Job* j : MovableJobsOn(state_, n, gpus)) MoveOff(*j, n, PreemptReason::kGpuUnhealthy, where, now, sink);
}

Status Engine::ReportTaskMemory(JobId job, int32_t replica, int64_t used_mib, Instant now, const Sink& sink) {
  if (used_mib < 0) return InvalidArgument("gpu_memory_mib: must not be negative (got " + std::to_string(used_mib) + ")");
  const Job* j = state_.find_job(job);
  if (!j || (j->state != JobState::kRunning && j->state != JobState::kCheckpointing)) {
    return NotFound("job " + std::to_string(job) + " is not running");
  }
  if (replica < 0 || replica >= static_cast<int32_t>(j->placements.size())) {
    return InvalidArgument("replica: job " + std::to_string(job) + " has " + std::to_string(j->placements.size()));
  }
  const Allocation& a = state_.cluster.allocation(j->placements[replica].allocation);
  if (a.demand.kind() != DemandKind::kGpuShare || a.mig_profile >= 0) return {};  // its memory is its own
  const int64_t steps = (used_mib + kObservedMemoryStepMib - 1) / kObservedMemoryStepMib;
  const int64_t rounded = steps * kObservedMemoryStepMib;
  const int64_t charged = int64_t{a.demand.gpu_memory_mib} + a.observed_extra_mib;
  if (rounded < charged + kObservedMemoryStepMib) return {};
  // Nothing to charge when its GPU has no free memory left for it.
  const Node& n = state_.cluster.node(a.node);
  bool room = false;
  for (int g = 0; g < n.gpu_count; ++g) room |= (a.gpus >> g & 1) && n.gpu_memory_free_mib[g] > 0;
  if (!room) return {};
  Emit(TaskMemoryObserved{job, replica, rounded}, now, sink);
  return {};
}

}  // namespace gpupool

namespace gpupool {
namespace {

std::string SlotName(const MigSlot& m) { return m.profile + "@" + std::to_string(m.start); }

using MigLayout = std::vector<std::pair<int, uint8_t>>;  // (profile index, start slice)

// Checks a MIG report for GPU `gpu` of node n and sorts `instances` by
// start: their layout (profile indexes), or InvalidArgument naming the field.
Result<MigLayout> CheckMigReport(const Node& n, int32_t gpu, bool mig_enabled, std::vector<MigSlot>& instances) {
  const std::string where = "gpus[" + std::to_string(gpu) + "]";
  if (gpu < 0 || gpu >= n.gpu_count) return InvalidArgument(where + ": node has " + std::to_string(n.gpu_count) + " GPUs");
  if (mig_enabled && n.mig_table == 0) return InvalidArgument(where + ".mig_enabled: its model has no MIG");
  if (!mig_enabled && !instances.empty()) return InvalidArgument(where + ".mig: MIG instances without MIG mode");
  std::sort(instances.begin(), instances.end(), [](const MigSlot& a, const MigSlot& b) { return a.start < b.start; });
  const MigTable* t = n.mig_table == 0 ? nullptr : &MigTables()[n.mig_table - 1];
  MigLayout layout;
  for (const MigSlot& m : instances) {
    const int p = FindProfile(*t, m.profile);
    if (p < 0) return InvalidArgument(where + ".mig: unknown profile '" + m.profile + "' for " + t->gpu_model);
    const auto& starts = t->profiles[p].starts;
    if (std::find(starts.begin(), starts.end(), m.start) == starts.end()) {
      return InvalidArgument(where + ".mig: " + SlotName(m) + " is not a placement of " + m.profile);
    }
    layout.emplace_back(p, static_cast<uint8_t>(m.start));
  }
  if (t && !IsValidLayout(*t, layout)) {
    return InvalidArgument(where + ".mig: the instances overlap or exceed their profiles' limits");
  }
  return layout;
}

// An instance of a job the Engine placed on the reported GPU.
struct PlannedInstance {
  int profile;
  uint8_t start;
  JobId job;
};

std::vector<PlannedInstance> PlannedOn(const EngineState& s, NodeIndex node, int32_t gpu) {
  std::vector<PlannedInstance> planned;
  for (JobId id : JobsOnNode(s, node)) {
    for (const ReplicaPlacement& r : s.job(id).placements) {
      const Allocation& a = s.cluster.allocation(r.allocation);
      if (r.node == node && (a.gpus >> gpu & 1) && a.mig_profile >= 0) planned.push_back({a.mig_profile, a.mig_start, id});
    }
  }
  return planned;
}

// A reported instance (profile p at `start`) equal to a planned one is the
// Engine's own (`own`); one that overlaps a planned one without being it
// clashes: the first such, named, else "".
std::string ClashOf(const MigTable& t, const std::vector<PlannedInstance>& planned, int p, uint8_t start, bool* own) {
  const uint8_t mask = SliceMask(t, p, start);
  *own = false;
  std::string clash;
  for (const PlannedInstance& x : planned) {
    const bool same = x.profile == p && x.start == start;
    *own |= same;
    if (!same && (SliceMask(t, x.profile, x.start) & mask) != 0 && clash.empty()) {
      clash = t.profiles[x.profile].name + "@" + std::to_string(x.start) + " (job " + std::to_string(x.job) + ")";
    }
  }
  return clash;
}

uint64_t LayoutBytes(uint64_t bytes, int p, uint8_t start) { return bytes | uint64_t(p + 1) << (8 * start); }

}  // namespace

Status Engine::ReportMigLayout(NodeIndex node, int32_t gpu, bool mig_enabled, std::vector<MigSlot> instances,
                               Instant now, const Sink& sink) {
  if (node < 0 || node >= state_.cluster.node_count()) return NotFound("node " + std::to_string(node));
  const Node& n = state_.cluster.node(node);
  GP_ASSIGN_OR_RETURN(const MigLayout layout, CheckMigReport(n, gpu, mig_enabled, instances));
  // The same report as last time, when nothing clashed then (the common
  // case: every heartbeat): nothing to decide.
  uint64_t bytes = 0;
  for (const auto& [p, start] : layout) bytes = LayoutBytes(bytes, p, start);
  MigReportMemo& memo = mig_reports_[{node, gpu}];
  if (memo.seen && memo.enabled == mig_enabled && memo.bytes == bytes && memo.clashes.empty()) return {};
  const std::vector<PlannedInstance> planned = PlannedOn(state_, node, gpu);
  std::vector<MigSlot> adopted;
  std::vector<std::string> clashes;
  uint64_t adopted_bytes = 0;
  for (size_t i = 0; i < instances.size(); ++i) {
    const auto [p, start] = layout[i];
    const MigSlot& m = instances[i];
    bool own = false;
    const std::string clash = ClashOf(MigTables()[n.mig_table - 1], planned, p, start, &own);
    if (own) continue;
    if (clash.empty()) {
      adopted.push_back(m);
      adopted_bytes = LayoutBytes(adopted_bytes, p, start);
      continue;
    }
    // Said once per clash, not at every heartbeat while it lasts.
    const std::string key = SlotName(m) + " " + clash;
    if (std::find(memo.clashes.begin(), memo.clashes.end(), key) == memo.clashes.end()) {
      Emit(MigLayoutMismatch{node, gpu, SlotName(m), clash}, now, sink);
    }
    clashes.push_back(key);
  }
  memo = MigReportMemo{true, mig_enabled, bytes, std::move(clashes)};
  const bool known = n.mig_reported >> gpu & 1;
  if (known && static_cast<bool>(n.mig_enabled >> gpu & 1) == mig_enabled && n.mig_existing[gpu] == adopted_bytes) {
    return {};
  }
  Emit(MigLayoutReported{node, gpu, mig_enabled, std::move(adopted)}, now, sink);
  SchedulePass(now, sink);
  return {};
}

}  // namespace gpupool
