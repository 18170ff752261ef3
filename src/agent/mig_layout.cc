#include "src/agent/mig_layout.h"

#include <algorithm>

namespace gpupool {

int MigProfileIndex(const MigTable& t, std::string_view profile) {
  // "1c.3g.40gb": the compute instance's slices, then the GPU instance's profile.
  if (const size_t dot = profile.find('.'); dot != std::string_view::npos && dot > 0 && profile[dot - 1] == 'c') {
    profile.remove_prefix(dot + 1);
  }
  for (int p = 0; p < static_cast<int>(t.profiles.size()); ++p) {
    if (t.profiles[p].name == profile) return p;
  }
  return -1;
}

uint8_t MigSlices(const MigTable& t, int profile, int start) {
  if (profile < 0 || profile >= static_cast<int>(t.profiles.size())) return 0;
  const int size = t.profiles[profile].memory_slices;
  if (start < 0 || start + size > t.memory_slices) return 0;
  return static_cast<uint8_t>(((1u << size) - 1) << start);
}

MigRefusal CheckMigPlacement(const MigTable& t, const std::vector<std::pair<int, int>>& existing, int profile,
                             int start) {
  if (profile < 0 || profile >= static_cast<int>(t.profiles.size())) return MigRefusal::kUnknownProfile;
  const MigProfile& p = t.profiles[profile];
  if (std::find(p.starts.begin(), p.starts.end(), start) == p.starts.end()) return MigRefusal::kBadPlacement;
  const uint8_t mask = MigSlices(t, profile, start);
  int same = 0, media = 0;
  for (const auto& [q, s] : existing) {
    if (MigSlices(t, q, s) & mask) return MigRefusal::kOverlap;
    same += q == profile ? 1 : 0;
    media += q >= 0 && q < static_cast<int>(t.profiles.size()) && t.profiles[q].media_extensions ? 1 : 0;
  }
  if (same >= p.max_instances) return MigRefusal::kInstanceLimit;
  if (p.media_extensions && media > 0) return MigRefusal::kSecondMedia;
  return MigRefusal::kNone;
}

const char* MigRefusalText(MigRefusal r) {
  switch (r) {
    case MigRefusal::kNone: return "fits";
    case MigRefusal::kUnknownProfile: return "the GPU has no such profile";
    case MigRefusal::kBadPlacement: return "not a documented placement of the profile";
    case MigRefusal::kOverlap: return "overlaps an existing GPU instance";
    case MigRefusal::kInstanceLimit: return "the profile's instance limit is reached";
    case MigRefusal::kSecondMedia: return "a +me instance exists already";
  }
  return "?";
}

std::string MigStartsText(const MigTable& t, int profile) {
  std::string out;
  if (profile < 0 || profile >= static_cast<int>(t.profiles.size())) return out;
  for (uint8_t s : t.profiles[profile].starts) out += (out.empty() ? "" : ", ") + std::to_string(s);
  return out;
}

}  // namespace gpupool
