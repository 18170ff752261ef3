#include "src/engine/mode_policy.h"

#include <algorithm>

namespace gpupool {
namespace {

using namespace std::chrono_literals;
constexpr int32_t kSixteenGib = 16 * 1024;

bool Matches(const ModeRule& r, const JobSpec& s) {
  if (!r.kinds.empty() && std::find(r.kinds.begin(), r.kinds.end(), s.kind) == r.kinds.end()) return false;
  const Demand& d = s.demand;
  if (r.min_gpus && !(d.gpu_count >= *r.min_gpus && d.gpu_milli == kMilliPerGpu)) return false;
  if (r.min_gpu_milli && d.gpu_milli < *r.min_gpu_milli) return false;
  std::vector<bool> conditions;
  if (r.max_memory_mib) conditions.push_back(d.gpu_memory_mib <= *r.max_memory_mib);
  if (r.min_memory_mib) conditions.push_back(d.gpu_memory_mib > *r.min_memory_mib);
  const Duration expected = s.expected_duration.value_or(Duration::max());
  if (r.max_duration) conditions.push_back(expected <= *r.max_duration);
  if (r.min_duration) conditions.push_back(s.expected_duration.has_value() && expected > *r.min_duration);
  if (conditions.empty()) return true;
  if (r.match_any) return std::find(conditions.begin(), conditions.end(), true) != conditions.end();
  return std::find(conditions.begin(), conditions.end(), false) == conditions.end();
}

ModePolicy MakeSeed000() {
  ModePolicy p{"seed-000", {}, SharingChoice::kTimeSlice};
  p.rules.push_back({"large jobs take whole GPUs", {}, 2, std::nullopt, {}, {}, {}, {}, false, SharingChoice::kWhole});
  p.rules.push_back(
      {"most of a GPU takes it whole", {}, std::nullopt, 750, {}, {}, {}, {}, false, SharingChoice::kWhole});
  p.rules.push_back({"short or low-memory inference time-slices",
                     {JobKind::kOnlineInference, JobKind::kBatchInference},
                     std::nullopt, std::nullopt, kSixteenGib, std::nullopt, 1h, std::nullopt, true,
                     SharingChoice::kTimeSlice});
  p.rules.push_back({"long or high-memory training gets MIG",
                     {JobKind::kTraining, JobKind::kDevelopment},
                     std::nullopt, std::nullopt, std::nullopt, kSixteenGib, std::nullopt, 1h, true,
                     SharingChoice::kMig});
  return p;
}

ModePolicy MakeSeed002() {
  ModePolicy p{"seed-002", {}, SharingChoice::kTimeSlice};
  p.rules.push_back({"large jobs take whole GPUs", {}, 2, std::nullopt, {}, {}, {}, {}, false, SharingChoice::kWhole});
  p.rules.push_back(
      {"most of a GPU takes it whole", {}, std::nullopt, 750, {}, {}, {}, {}, false, SharingChoice::kWhole});
  p.rules.push_back({"training time-slices preemptively with MPS", {JobKind::kTraining}, std::nullopt, std::nullopt,
                     {}, {}, {}, {}, false, SharingChoice::kMps});
  p.rules.push_back({"latency-sensitive inference gets a static MIG partition", {JobKind::kOnlineInference},
                     std::nullopt, std::nullopt, {}, {}, {}, {}, false, SharingChoice::kMig});
  return p;
}

}  // namespace

const char* SharingChoiceName(SharingChoice c) {
  switch (c) {
    case SharingChoice::kWhole: return "whole";
    case SharingChoice::kTimeSlice: return "time-slice";
    case SharingChoice::kMps: return "mps";
    case SharingChoice::kMig: return "mig";
  }
  return "unknown";
}

const ModePolicy& Seed000ModePolicy() {
  static const auto* const kPolicy = new ModePolicy(MakeSeed000());
  return *kPolicy;
}

const ModePolicy& Seed002ModePolicy() {
  static const auto* const kPolicy = new ModePolicy(MakeSeed002());
  return *kPolicy;
}

Result<ModePolicy> FindModePolicy(std::string_view name) {
  if (name == "seed-000") return Seed000ModePolicy();
  if (name == "seed-002") return Seed002ModePolicy();
  return NotFound("unknown sharing-mode policy '" + std::string(name) + "' (known: seed-000, seed-002)");
}

std::pair<std::string, SharingChoice> ChooseSharing(const ModePolicy& p, const JobSpec& spec) {
  for (const ModeRule& r : p.rules) {
    if (Matches(r, spec)) return {r.name, r.choice};
  }
  return {"fallback", p.fallback};
}

void ApplySharing(SharingChoice c, JobSpec& spec) {
  Demand& d = spec.demand;
  if (d.gpu_count == 0) return;
  switch (c) {
    case SharingChoice::kWhole:
      d.gpu_milli = kMilliPerGpu;
      d.mode = ShareMode::kAny;
      d.gpu_memory_mib = 0;
      return;
    case SharingChoice::kTimeSlice: d.mode = ShareMode::kTimeSlice; break;
    case SharingChoice::kMps: d.mode = ShareMode::kMps; break;
    case SharingChoice::kMig: d.mode = ShareMode::kMig; break;
  }
}

}  // namespace gpupool
