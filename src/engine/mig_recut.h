// Planning a MIG re-cut (PART-5, vertical scaling): which instances of one
// GPU to move so that one more instance of a given profile fits.
//
// MIG fragments: a GPU can have enough free memory slices for a profile and
// still no free documented start for it (an A100 with 1g instances at
// slices 1 and 5 has six free slices, yet neither start of a 3g, 0 or 4, is
// free). Moving some instances makes room. This is a pure function over one
// GPU's layout; the Engine decides which GPU to re-cut and carries it out
// (src/engine/engine.h).
//
// How the moved instances come back decides what a plan must guarantee.
// Placement takes the first free documented start of a profile (FindPlacement)
// at the time of each allocation, and the moved tasks are placed again one at
// a time by the ordinary scheduling pass, after the new instance and in an
// order this planner cannot know (queue order, other tenants in between). So
// a plan asks more than "some valid layout exists": the new instance goes
// where first fit puts it among the instances that stay, and then the moved
// instances, placed by first fit in *any* order, must all fit again and give
// a valid layout (IsValidLayout). Tables are small (at most 8 memory slices,
// 7 instances), so the planner enumerates every subset of movable instances
// and every order of a subset's profiles.
#pragma once

#include <cstdint>
#include <optional>
#include <utility>
#include <vector>

#include "src/model/mig.h"

namespace gpupool {

// One GPU instance on the GPU being planned.
struct MigInstance {
  int profile = -1;      // index into the GPU's MigTable
  uint8_t start = 0;     // first memory slice
  bool movable = false;  // may be stopped and placed again
  int64_t cost = 0;      // what moving it costs (e.g. GPU-milli x ms of checkpoint); lower is better
};

struct MigRecutPlan {
  uint32_t moved = 0;      // bit i: instances[i] moves; 0 when the profile fits as things are
  int moved_count = 0;
  int64_t cost = 0;        // sum of the moved instances' costs
  uint8_t start = 0;       // where the new instance goes (first fit among the instances that stay)
  // The layout after the re-cut: the instances that stay, the new one, then
  // the moved ones where first fit puts them in index order. Valid.
  std::vector<std::pair<int, uint8_t>> layout;
};

// The cheapest plan that adds one instance of `profile` to the GPU holding
// `instances`: fewest moved instances, then lowest total cost, then the
// lowest `moved` bit mask (deterministic). nullopt when no plan exists
// (not enough free slices even after moving every movable instance, the
// profile's instance limit, a second +me instance, or no order-proof layout).
// Requires: `instances` is a valid layout on `t` with at most 32 entries;
// 0 <= profile < t.profiles.size().
std::optional<MigRecutPlan> PlanMigRecut(const MigTable& t, const std::vector<MigInstance>& instances, int profile);

}  // namespace gpupool
