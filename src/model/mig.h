// MIG (Multi-Instance GPU) profiles and the placements the hardware accepts
// (PART-2), for A100-40GB, A100-80GB, A30-24GB, H100-80GB and H200-141GB.
//
// A GPU has `memory_slices` memory slices (8, or 4 on the A30). A GPU
// instance of a profile occupies the contiguous memory slices
// [start, start + memory_slices) for one of the profile's documented start
// positions (`nvidia-smi mig -lgipp`); creating one fails only when its
// memory slices overlap an existing instance's (NVML). Compute slices lie
// inside the memory range in every documented placement, so non-overlap of
// memory slices also bounds compute. At most one "+me" (media extensions)
// instance exists per GPU. Sources: NVIDIA's MIG user guide (supported
// profiles, concepts, getting started) and `nvidia-smi mig -lgip/-lgipp`
// output of real A100, A30 and H100 GPUs; H200 placements follow the H100's
// (same slice layout; NVIDIA documents the H200 profile sizes and counts).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace gpupool {

struct MigProfile {
  std::string name;            // "3g.40gb"
  uint8_t compute_slices = 0;  // the "Ng"
  uint8_t memory_slices = 0;   // slices occupied
  int32_t memory_mib = 0;      // as the driver reports it
  uint8_t max_instances = 0;
  bool media_extensions = false;  // a "+me" profile
  std::vector<uint8_t> starts;    // valid first memory slices
};

struct MigTable {
  std::string gpu_model;          // a catalog name
  uint8_t memory_slices = 8;
  uint8_t compute_slices = 7;
  std::vector<MigProfile> profiles;  // smallest first
};

// The built-in tables, one per MIG-capable model.
const std::vector<MigTable>& MigTables();
// The table for a catalog model name, or nullptr.
const MigTable* FindMigTable(std::string_view gpu_model);

// Compute slices a MIG share of `gpu_milli` needs on a GPU with `slices`
// compute slices: its fraction of a GPU, rounded up, with a hair of
// tolerance so that 428 or 429 milli on a 7-slice GPU is 3 slices.
int ComputeSlicesFor(int32_t gpu_milli, int slices);

// The index of the profile named `name` in t ("3g.40gb"), or -1.
int FindProfile(const MigTable& t, std::string_view name);

// The smallest profile (fewest memory slices, then fewest compute slices;
// never a "+me" one) with at least `compute_slices` and `memory_mib`, or -1.
int SmallestProfile(const MigTable& t, int compute_slices, int32_t memory_mib);

// A placement for profile `p` on a GPU whose used memory slices are
// `used_slices` (bit i = slice i) and that holds `me_instances` +me
// instances: the first documented start whose slices are all free, or
// nullopt.
std::optional<uint8_t> FindPlacement(const MigTable& t, int p, uint8_t used_slices, int me_instances);

// MIG instances that exist on a GPU (reported by its node, Node::mig_existing):
// byte s (bits 8s..8s+7) is 1 + the profile index of an instance whose first
// memory slice is s, 0 for none. At most one instance starts at each slice.
using MigLayoutBytes = uint64_t;
// The profile of the instance starting at slice s, or -1.
inline int ExistingProfileAt(MigLayoutBytes existing, int s) {
  return static_cast<int>((existing >> (8 * s)) & 0xff) - 1;
}
// The memory slices the existing instances cover.
uint8_t ExistingSlices(const MigTable& t, MigLayoutBytes existing);
// A placement for profile `p` among existing instances: an existing
// instance of p whose slices `used_slices` leaves free (lowest start), else
// the first documented start free of used slices and of every existing
// instance (which are never cut into); nullopt when neither. With no
// existing instances it is FindPlacement.
std::optional<uint8_t> FindPlacementAmong(const MigTable& t, int p, uint8_t used_slices, int me_instances,
                                          MigLayoutBytes existing);

// Memory-slice mask of profile p placed at `start`.
uint8_t SliceMask(const MigTable& t, int p, uint8_t start);

// Is this set of (profile, start) instances a layout the hardware accepts?
// (Documented starts, no overlapping memory slices, at most one +me and at
// most max_instances of each profile.)
bool IsValidLayout(const MigTable& t, const std::vector<std::pair<int, uint8_t>>& instances);

}  // namespace gpupool
