#include "src/model/job.h"

#include <array>

#include "src/model/mig_charge.h"

namespace gpupool {
namespace {
constexpr std::array<const char*, kJobKindCount> kKindNames = {"training", "online-inference", "batch-inference",
                                                               "development", "cpu"};
}  // namespace

void ScopeMpsShares(JobSpec& spec) {
  auto scope = [&spec](Demand& d) {
    const bool mps = d.kind() == DemandKind::kGpuShare && d.mode == ShareMode::kMps;
    d.mps_tenant = mps ? spec.tenant : -1;
  };
  scope(spec.demand);
  for (Demand& d : spec.stages) scope(d);
}

void ChargeMigAsSlices(JobSpec& spec, GpuModelMask present) {
  const GpuModelMask models = spec.demand.allowed_models & present;
  auto charge = [models](Demand& d) {
    if (d.kind() != DemandKind::kGpuShare || d.mode != ShareMode::kMig) return;
    d.gpu_milli = MigChargedMilli(d.gpu_milli, d.gpu_memory_mib, models);
  };
  charge(spec.demand);
  for (Demand& d : spec.stages) charge(d);
}

const char* JobKindName(JobKind k) { return kKindNames[static_cast<int>(k)]; }

std::optional<JobKind> JobKindFromName(std::string_view name) {
  for (int i = 0; i < kJobKindCount; ++i) {
    if (name == kKindNames[i]) return static_cast<JobKind>(i);
  }
  return std::nullopt;
}

const char* JobStateName(JobState s) {
  switch (s) {
    case JobState::kPending: return "pending";
    case JobState::kRunning: return "running";
    case JobState::kCheckpointing: return "checkpointing";
    case JobState::kSucceeded: return "succeeded";
    case JobState::kFailed: return "failed";
    case JobState::kCancelled: return "cancelled";
    case JobState::kRejected: return "rejected";
    case JobState::kEvicted: return "evicted";
  }
  return "unknown";
}

}  // namespace gpupool
