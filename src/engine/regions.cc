// The region table's checks (TOPO-2); see src/engine/regions.h. Placement
// by region is in src/engine/engine.cc (Engine::OrderByRegion).
#include "src/engine/regions.h"

#include "src/engine/region_json.h"

#include "src/base/fields_json.h"

#include <cmath>
#include <set>

namespace gpupool {

const char* RegionPolicyKindName(RegionPolicy::Kind k) {
  switch (k) {
    case RegionPolicy::Kind::kOff: return "off";
    case RegionPolicy::Kind::kCostAware: return "cost-aware";
    case RegionPolicy::Kind::kNearest: return "nearest";
  }
  return "off";
}

Status CheckRegionPolicy(const RegionPolicy& p) {
  auto ok_number = [](double v) { return std::isfinite(v) && v >= 0; };
  std::set<std::string> names;
  for (size_t i = 0; i < p.regions.size(); ++i) {
    const RegionInfo& r = p.regions[i];
    const std::string at = "regions[" + std::to_string(i) + "]";
    if (r.name.empty()) return InvalidArgument(at + ".name: must not be empty");
    if (!names.insert(r.name).second) return InvalidArgument(at + ".name: region '" + r.name + "' is listed twice");
    if (!ok_number(r.price_per_gpu_hour)) {
      return InvalidArgument(at + ".price_per_gpu_hour: must be a number, not negative");
    }
    for (const auto& [location, ms] : r.latency_ms) {
      if (location.empty()) return InvalidArgument(at + ".latency_ms: a location name must not be empty");
      if (!ok_number(ms)) return InvalidArgument(at + ".latency_ms." + location + ": must be a number, not negative");
    }
  }
  std::set<std::string> tenants;
  for (size_t i = 0; i < p.users.size(); ++i) {
    const TenantUsers& u = p.users[i];
    const std::string at = "users[" + std::to_string(i) + "]";
    if (u.tenant.empty()) return InvalidArgument(at + ".tenant: must not be empty");
    if (!tenants.insert(u.tenant).second) return InvalidArgument(at + ".tenant: '" + u.tenant + "' is listed twice");
    if (u.location.empty()) return InvalidArgument(at + ".location: must not be empty");
    if (!ok_number(u.latency_budget_ms)) return InvalidArgument(at + ".latency_budget_ms: must be a number, not negative");
  }
  if (p.kind != RegionPolicy::Kind::kOff && p.regions.empty()) {
    return InvalidArgument("regions: a policy other than off needs at least one region");
  }
  return {};
}

nlohmann::json RegionPolicyToJson(const RegionPolicy& p) { return FieldToJson(p); }

}  // namespace gpupool
