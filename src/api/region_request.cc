#include "src/api/region_request.h"

#include <limits>

namespace gpupool {

using nlohmann::json;

ApiResult<RegionPolicy> ParseRegionRequest(const json& body) {
  ApiResult<RegionPolicy> out;
  ApiError* err = &out.error;
  FieldReader f;
  if (!FieldReader::Open(body, "", {"policy", "regions", "users"}, &f, err)) return out;
  RegionPolicy p;
  p.kind = RegionPolicy::Kind::kCostAware;
  std::string kind;
  if (!f.String("policy", kind, 32, err)) return out;
  if (f.Has("policy")) {
    bool known = false;
    for (auto k : {RegionPolicy::Kind::kOff, RegionPolicy::Kind::kCostAware, RegionPolicy::Kind::kNearest}) {
      if (kind == RegionPolicyKindName(k)) {
        p.kind = k;
        known = true;
      }
    }
    if (!known) {
      *err = BadField("policy", "expected 'cost-aware', 'nearest' or 'off' (got '" + kind + "')");
      return out;
    }
  }
  const double kMax = std::numeric_limits<double>::max();
  if (const json* regions = f.Find("regions")) {
    if (!regions->is_array()) {
      *err = BadField("regions", "expected an array, got " + JsonTypeName(*regions));
      return out;
    }
    for (size_t i = 0; i < regions->size(); ++i) {
      const std::string at = "regions[" + std::to_string(i) + "]";
      FieldReader r;
      if (!FieldReader::Open((*regions)[i], at, {"name", "price_per_gpu_hour", "latency_ms"}, &r, err)) return out;
      RegionInfo info;
      if (!r.Require("name", err) || !r.String("name", info.name, 128, err)) return out;
      if (!r.Require("price_per_gpu_hour", err) || !r.Number("price_per_gpu_hour", info.price_per_gpu_hour, 0, kMax, err)) {
        return out;
      }
      if (const json* latency = r.Find("latency_ms")) {
        if (!latency->is_object()) {
          *err = BadField(r.PathOf("latency_ms"), "expected an object of location: milliseconds");
          return out;
        }
        for (const auto& [location, ms] : latency->items()) {
          if (!ms.is_number() || ms.get<double>() < 0) {
            *err = BadField(r.PathOf("latency_ms") + "." + location, "expected a number of milliseconds, not negative");
            return out;
          }
          info.latency_ms[location] = ms.get<double>();
        }
      }
      p.regions.push_back(std::move(info));
    }
  }
  if (const json* users = f.Find("users")) {
    if (!users->is_array()) {
      *err = BadField("users", "expected an array, got " + JsonTypeName(*users));
      return out;
    }
    for (size_t i = 0; i < users->size(); ++i) {
      const std::string at = "users[" + std::to_string(i) + "]";
      FieldReader u;
      if (!FieldReader::Open((*users)[i], at, {"tenant", "location", "latency_budget_ms"}, &u, err)) return out;
      TenantUsers tu;
      if (!u.Require("tenant", err) || !u.String("tenant", tu.tenant, 128, err)) return out;
      if (!u.Require("location", err) || !u.String("location", tu.location, 128, err)) return out;
      if (!u.Number("latency_budget_ms", tu.latency_budget_ms, 0, kMax, err)) return out;
      p.users.push_back(std::move(tu));
    }
  }
  if (auto ok = CheckRegionPolicy(p); !ok) {
    const std::string& m = ok.error().message;
    const size_t colon = m.find(": ");
    *err = BadField(colon == std::string::npos ? "regions" : m.substr(0, colon),
                    colon == std::string::npos ? m : m.substr(colon + 2));
    return out;
  }
  out.value = std::move(p);
  return out;
}

}  // namespace gpupool
