#include "src/model/mig.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <optional>

#include "src/model/demand.h"

namespace gpupool {
namespace {

// The 8-slice layout shared by A100, H100 and H200: names and memory differ.
MigTable EightSlice(std::string model, const char* m1, const char* m1_me, const char* m1x2, const char* m2,
                    const char* m3, const char* m4, const char* m7, std::array<int32_t, 6> mib) {
  MigTable t;
  t.gpu_model = std::move(model);
  t.memory_slices = 8;
  t.compute_slices = 7;
  t.profiles = {
      {m1, 1, 1, mib[0], 7, false, {0, 1, 2, 3, 4, 5, 6}},
      {m1_me, 1, 1, mib[0], 1, true, {0, 1, 2, 3, 4, 5, 6}},
      {m1x2, 1, 2, mib[1], 4, false, {0, 2, 4, 6}},
      {m2, 2, 2, mib[2], 3, false, {0, 2, 4}},
      {m3, 3, 4, mib[3], 2, false, {0, 4}},
      {m4, 4, 4, mib[4], 1, false, {0}},
      {m7, 7, 8, mib[5], 1, false, {0}},
  };
  return t;
}

std::vector<MigTable> Build() {
  std::vector<MigTable> tables;
  tables.push_back(EightSlice("A100-40GB", "1g.5gb", "1g.5gb+me", "1g.10gb", "2g.10gb", "3g.20gb", "4g.20gb",
                              "7g.40gb", {4864, 9856, 9856, 19968, 19968, 40192}));
  tables.push_back(EightSlice("A100-80GB", "1g.10gb", "1g.10gb+me", "1g.20gb", "2g.20gb", "3g.40gb", "4g.40gb",
                              "7g.80gb", {9728, 19968, 19968, 40448, 40448, 80896}));
  tables.push_back(EightSlice("H100", "1g.10gb", "1g.10gb+me", "1g.20gb", "2g.20gb", "3g.40gb", "4g.40gb", "7g.80gb",
                              {9984, 20096, 20096, 40448, 40448, 81152}));
  tables.push_back(EightSlice("H200", "1g.18gb", "1g.18gb+me", "1g.35gb", "2g.35gb", "3g.71gb", "4g.71gb",
                              "7g.141gb", {16384, 33280, 33280, 70656, 70656, 143360}));
  MigTable a30;
  a30.gpu_model = "A30";
  a30.memory_slices = 4;
  a30.compute_slices = 4;
  a30.profiles = {
      {"1g.6gb", 1, 1, 5949, 4, false, {0, 1, 2, 3}},
      {"1g.6gb+me", 1, 1, 5949, 1, true, {0, 1, 2, 3}},
      {"2g.12gb", 2, 2, 11970, 2, false, {0, 2}},
      {"2g.12gb+me", 2, 2, 11970, 1, true, {0, 2}},
      {"4g.24gb", 4, 4, 24002, 1, false, {0}},
  };
  tables.push_back(std::move(a30));
  return tables;
}

}  // namespace

const std::vector<MigTable>& MigTables() {
  static const auto* const kTables = new std::vector<MigTable>(Build());
  return *kTables;
}

const MigTable* FindMigTable(std::string_view gpu_model) {
  for (const MigTable& t : MigTables()) {
    if (t.gpu_model == gpu_model) return &t;
  }
  return nullptr;
}

int ComputeSlicesFor(int32_t gpu_milli, int slices) {
  const double exact = static_cast<double>(gpu_milli) * slices / kMilliPerGpu;
  return std::max(1, static_cast<int>(std::ceil(exact - 0.01)));
}

int FindProfile(const MigTable& t, std::string_view name) {
  for (int p = 0; p < static_cast<int>(t.profiles.size()); ++p) {
    if (t.profiles[p].name == name) return p;
  }
  return -1;
}

int SmallestProfile(const MigTable& t, int compute_slices, int32_t memory_mib) {
  int best = -1;
  for (int p = 0; p < static_cast<int>(t.profiles.size()); ++p) {
    const MigProfile& prof = t.profiles[p];
    if (prof.media_extensions || prof.compute_slices < compute_slices || prof.memory_mib < memory_mib) continue;
    if (best < 0 || prof.memory_slices < t.profiles[best].memory_slices ||
        (prof.memory_slices == t.profiles[best].memory_slices &&
         prof.compute_slices < t.profiles[best].compute_slices)) {
      best = p;
    }
  }
  return best;
}

uint8_t SliceMask(const MigTable& t, int p, uint8_t start) {
  const int size = t.profiles[p].memory_slices;
  return static_cast<uint8_t>(((1u << size) - 1) << start);
}

std::optional<uint8_t> FindPlacement(const MigTable& t, int p, uint8_t used_slices, int me_instances) {
  const MigProfile& prof = t.profiles[p];
  if (prof.media_extensions && me_instances > 0) return std::nullopt;
  for (uint8_t start : prof.starts) {
    if ((SliceMask(t, p, start) & used_slices) == 0) return start;
  }
  return std::nullopt;
}

uint8_t ExistingSlices(const MigTable& t, MigLayoutBytes existing) {
  uint8_t slices = 0;
  for (int s = 0; s < t.memory_slices && existing != 0; ++s) {
    if (const int p = ExistingProfileAt(existing, s); p >= 0) slices |= SliceMask(t, p, static_cast<uint8_t>(s));
  }
  return slices;
}

std::optional<uint8_t> FindPlacementAmong(const MigTable& t, int p, uint8_t used_slices, int me_instances,
                                          MigLayoutBytes existing) {
  if (existing == 0) return FindPlacement(t, p, used_slices, me_instances);
  const MigProfile& prof = t.profiles[p];
  if (prof.media_extensions && me_instances > 0) return std::nullopt;
  for (uint8_t start : prof.starts) {
    if (ExistingProfileAt(existing, start) == p && (SliceMask(t, p, start) & used_slices) == 0) return start;
  }
  return FindPlacement(t, p, static_cast<uint8_t>(used_slices | ExistingSlices(t, existing)), me_instances);
}

bool IsValidLayout(const MigTable& t, const std::vector<std::pair<int, uint8_t>>& instances) {
  uint8_t used = 0;
  int me = 0;
  std::vector<int> count(t.profiles.size(), 0);
  for (const auto& [p, start] : instances) {
    if (p < 0 || p >= static_cast<int>(t.profiles.size())) return false;
    const MigProfile& prof = t.profiles[p];
    if (std::find(prof.starts.begin(), prof.starts.end(), start) == prof.starts.end()) return false;
    const uint8_t mask = SliceMask(t, p, start);
    if (used & mask) return false;
    used |= mask;
    me += prof.media_extensions ? 1 : 0;
    if (++count[p] > prof.max_instances) return false;
  }
  return me <= 1;
}

}  // namespace gpupool
