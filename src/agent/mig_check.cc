#include "src/agent/mig_check.h"

#include <algorithm>
#include <chrono>
#include <string>
#include <utility>
#include <vector>

#include "src/agent/mig_layout.h"
#include "src/model/mig.h"

namespace gpupool {
namespace {

using Clock = std::chrono::steady_clock;

double MsSince(Clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
}

bool Lists(DeviceBackend& b, int gpu, const std::string& uuid, Status* error) {
  auto now = b.ListMigInstances(gpu);
  if (!now) {
    *error = std::unexpected(Error{now.error().code, "listing MIG instances: " + now.error().message});
    return false;
  }
  return std::any_of(now->begin(), now->end(), [&](const MigInstance& m) { return m.uuid == uuid; });
}

// The smallest profile (table order, no "+me") and its first start that the
// driver would accept beside `existing`.
Result<std::pair<int, int>> FreePlacement(const MigTable& t, const std::vector<MigInstance>& existing) {
  std::vector<std::pair<int, int>> have;
  for (const MigInstance& m : existing) have.emplace_back(MigProfileIndex(t, m.profile), m.start);
  for (int p = 0; p < static_cast<int>(t.profiles.size()); ++p) {
    if (t.profiles[p].media_extensions) continue;
    for (uint8_t start : t.profiles[p].starts) {
      if (CheckMigPlacement(t, have, p, start) == MigRefusal::kNone) return std::pair{p, static_cast<int>(start)};
    }
  }
  return FailedPrecondition("no free placement for any profile: the GPU is cut full (destroy an instance first)");
}

}  // namespace

Result<nlohmann::json> RunMigCheck(DeviceBackend& b, int gpu) {
  GP_ASSIGN_OR_RETURN(std::vector<GpuDevice> gpus, b.Discover());
  if (gpu < 0 || gpu >= static_cast<int>(gpus.size())) {
    return NotFound("--mig-check: no GPU " + std::to_string(gpu) + " (the node has " + std::to_string(gpus.size()) + ")");
  }
  const GpuDevice& d = gpus[gpu];
  if (!d.mig_enabled) {
    return FailedPrecondition("--mig-check: GPU " + std::to_string(gpu) +
                              " is not in MIG mode (an operator's action; see docs/agent.md, MIG instances)");
  }
  const MigTable* t = FindMigTable(d.model);
  if (!t) return FailedPrecondition("--mig-check: no MIG table for model '" + d.model + "'");
  GP_ASSIGN_OR_RETURN(std::vector<MigInstance> existing, b.ListMigInstances(gpu));
  GP_ASSIGN_OR_RETURN(auto placement, FreePlacement(*t, existing));
  const std::string profile = t->profiles[placement.first].name;
  const Clock::time_point t0 = Clock::now();
  auto created = b.CreateMigInstance(gpu, profile, placement.second);
  if (!created) return std::unexpected(Error{created.error().code, "create: " + created.error().message});
  const double create_ms = MsSince(t0);
  Status listed_error;
  const bool listed = Lists(b, gpu, created->uuid, &listed_error);
  const Clock::time_point t1 = Clock::now();
  if (auto ok = b.DestroyMigInstance(gpu, *created); !ok) {
    return std::unexpected(Error{ok.error().code, "destroy " + created->uuid + ": " + ok.error().message});
  }
  const double destroy_ms = MsSince(t1);
  if (!listed_error) return std::unexpected(listed_error.error());
  if (!listed) return FailedPrecondition("create: " + created->uuid + " is missing from the GPU's instance list");
  Status gone_error;
  if (Lists(b, gpu, created->uuid, &gone_error)) return FailedPrecondition("destroy: " + created->uuid + " is still listed");
  if (!gone_error) return std::unexpected(gone_error.error());
  return nlohmann::json{{"gpu", gpu},
                        {"profile", profile},
                        {"start", placement.second},
                        {"uuid", created->uuid},
                        {"create_ms", create_ms},
                        {"destroy_ms", destroy_ms}};
}

}  // namespace gpupool
