#include "src/model/job.h"

#include <array>

namespace gpupool {
namespace {
constexpr std::array<const char*, kJobKindCount> kKindNames = {"training", "online-inference", "batch-inference",
                                                               "development", "cpu"};
}  // namespace

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
