// The region table of the REST API (PUT /v1/regions, GET /v1/regions;
// TOPO-2 at runtime) and its conversion to the Engine's RegionPolicy.
// docs/api/openapi.yaml lists the fields; every error names the field.
#pragma once

#include <nlohmann/json.hpp>

#include "src/api/json_fields.h"
#include "src/engine/region_json.h"  // RegionPolicyToJson: the body that describes a table

namespace gpupool {

// {"policy": "cost-aware"|"nearest"|"off",
//  "regions": [{"name", "price_per_gpu_hour", "latency_ms": {location: ms}}],
//  "users": [{"tenant", "location", "latency_budget_ms"}]}
// Form and ranges are checked here, the table's rules by CheckRegionPolicy
// (its message then names the field as a path in this body).
ApiResult<RegionPolicy> ParseRegionRequest(const nlohmann::json& body);

}  // namespace gpupool
