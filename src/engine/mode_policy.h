// Automatic choice of a GPU sharing mode per job (PART-3): a table of rules
// over the job's kind, GPU memory need and expected duration, first match
// wins. Jobs that ask for `auto_sharing` get their demand rewritten at
// submission (the JobSubmitted event records the result).
//
// Two tables ship (the seeds disagree; the default is seed 000's, which
// carries measurements):
//  seed-000  multi-GPU or >= 3/4 of a GPU -> whole GPUs; short (<= 1 h) or
//            low-memory (<= 16 GiB) inference -> time-slice; long (> 1 h) or
//            high-memory (> 16 GiB) training -> MIG; the rest -> time-slice.
//  seed-002  multi-GPU or >= 3/4 of a GPU -> whole GPUs; training -> MPS
//            (time-sliced, preemptible, concurrent kernels); latency-
//            sensitive online inference -> MIG (static QoS partitions);
//            the rest -> time-slice.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "src/base/status.h"
#include "src/base/time.h"
#include "src/model/job.h"

namespace gpupool {

enum class SharingChoice : uint8_t { kWhole, kTimeSlice, kMps, kMig };
const char* SharingChoiceName(SharingChoice c);

struct ModeRule {
  std::string name;
  std::vector<JobKind> kinds;           // empty = any kind
  std::optional<int32_t> min_gpus;      // whole GPUs asked (>= 2 means multi-GPU)
  std::optional<int32_t> min_gpu_milli; // per-GPU share at least this
  std::optional<int32_t> max_memory_mib, min_memory_mib;              // GPU memory need
  std::optional<Duration> max_duration, min_duration;                 // expected duration
  bool match_any = false;  // the memory/duration conditions: any of them (true) or all (false)
  SharingChoice choice = SharingChoice::kTimeSlice;
};

struct ModePolicy {
  std::string name;
  std::vector<ModeRule> rules;
  SharingChoice fallback = SharingChoice::kTimeSlice;
};

const ModePolicy& Seed000ModePolicy();
const ModePolicy& Seed002ModePolicy();
// "seed-000" or "seed-002"; the error lists both.
Result<ModePolicy> FindModePolicy(std::string_view name);

// The rule that decides for `spec` (its name, for reports) and the choice.
std::pair<std::string, SharingChoice> ChooseSharing(const ModePolicy& p, const JobSpec& spec);

// Rewrites spec.demand for the choice: whole GPUs become gpu_milli 1000 on
// ceil(need) GPUs; shares keep their compute and memory and get the mode.
void ApplySharing(SharingChoice c, JobSpec& spec);

}  // namespace gpupool
