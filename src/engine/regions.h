// Regions (TOPO-2): the region table the Engine places by, from the
// configuration or set at runtime (Engine::SetRegions, journaled as
// RegionsSet).
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "src/base/fields.h"
#include "src/base/status.h"

namespace gpupool {

// TOPO-2: regions with a price and latencies to where users are. With a
// policy, a job's candidate pools (those whose selector names one region)
// are tried in region order: latency-insensitive work (everything but
// online inference) cheapest region first; online inference nearest to
// its tenant's users first, and only regions within the tenant's latency
// budget. Kind kNearest orders all work by latency (the baseline an
// operator without a cost model has). Supply is the pools' free capacity:
// a region that cannot place the job now is passed over for the next.
struct RegionInfo {
  std::string name;
  double price_per_gpu_hour = 0;
  std::map<std::string, double> latency_ms;  // by user location
  friend bool operator==(const RegionInfo&, const RegionInfo&) = default;
  GP_FIELDS(r) {  // the journal's and the API's names (src/base/fields.h)
    v("name", r.name);
    v("price_per_gpu_hour", r.price_per_gpu_hour);
    v("latency_ms", r.latency_ms);
  }
};
struct TenantUsers {
  std::string tenant;                // a tenant name
  std::string location;              // where its users are
  double latency_budget_ms = 0;      // for its online inference; 0: none
  friend bool operator==(const TenantUsers&, const TenantUsers&) = default;
  GP_FIELDS(u) {
    v("tenant", u.tenant);
    v("location", u.location);
    v("latency_budget_ms", u.latency_budget_ms);
  }
};
struct RegionPolicy {
  enum class Kind : uint8_t { kOff, kCostAware, kNearest } kind = Kind::kOff;
  std::vector<RegionInfo> regions;
  std::vector<TenantUsers> users;
  friend bool operator==(const RegionPolicy&, const RegionPolicy&) = default;
  GP_FIELDS(p) {
    v("policy", p.kind);
    v("regions", p.regions);
    v("users", p.users);
  }
};

const char* RegionPolicyKindName(RegionPolicy::Kind k);  // "off", "cost-aware", "nearest"
template <>
struct EnumNames<RegionPolicy::Kind> {
  static constexpr int kCount = 3;
  static const char* Name(RegionPolicy::Kind k) { return RegionPolicyKindName(k); }
};

// Checks a table, naming the field: regions with unique non-empty names,
// finite non-negative prices and latencies; users with a tenant and a
// location, unique per tenant, a non-negative budget. A policy other than
// off needs at least one region.
Status CheckRegionPolicy(const RegionPolicy& p);

}  // namespace gpupool
