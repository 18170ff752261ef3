// MIG placement rules as the driver applies them (EXEC-7), over the
// built-in profile tables of src/model/mig.h: what the fake backend, the
// fake NVML library (tests/fake_nvml) and the agent use to decide whether a
// GPU instance can be created at a placement, and which existing instances
// a planned one overlaps. Pure functions; safe from any thread.
//
// A profile name is a table's ("3g.40gb", "1g.10gb+me"); a MIG device whose
// compute instance is smaller than its GPU instance is named by NVML with a
// compute prefix ("1c.3g.40gb"), which MigProfileIndex strips: the memory
// slices are the GPU instance's.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "src/model/mig.h"

namespace gpupool {

// The index of `profile` in `t` (a "Nc." compute prefix is ignored), or -1.
int MigProfileIndex(const MigTable& t, std::string_view profile);

// The memory slices [start, start + size) as a mask, or 0 when `start` is
// not a slice of the GPU (start < 0 or the range runs past its slices).
uint8_t MigSlices(const MigTable& t, int profile, int start);

// Why a GPU instance of `profile` cannot be created at memory slice `start`
// on a GPU whose GPU instances are `existing` ((profile index, start)
// pairs), in the driver's terms:
enum class MigRefusal {
  kNone,             // it can be created
  kUnknownProfile,   // profile < 0 or not in the table (NVML: invalid argument)
  kBadPlacement,     // `start` is not one of the profile's documented starts (NVML: invalid argument)
  kOverlap,          // its memory slices overlap an existing instance's (NVML: insufficient resources)
  kInstanceLimit,    // the profile's max_instances are there already (NVML: insufficient resources)
  kSecondMedia,      // a second "+me" instance (NVML: insufficient resources)
};
MigRefusal CheckMigPlacement(const MigTable& t, const std::vector<std::pair<int, int>>& existing, int profile,
                             int start);
// "overlaps an existing GPU instance" etc., for messages.
const char* MigRefusalText(MigRefusal r);

// The documented starts of a profile as text: "0, 4".
std::string MigStartsText(const MigTable& t, int profile);

}  // namespace gpupool
