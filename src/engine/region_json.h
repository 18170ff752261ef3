// The region table as JSON, one shape for the journal (RegionsSet events)
// and the REST API (GET/PUT /v1/regions):
// {"policy": "cost-aware"|"nearest"|"off",
//  "regions": [{"name", "price_per_gpu_hour", "latency_ms": {location: ms}}],
//  "users": [{"tenant", "location", "latency_budget_ms"}]}
// Readers are the callers' (each reports errors its own way).
#pragma once

#include <nlohmann/json.hpp>

#include "src/engine/regions.h"

namespace gpupool {

nlohmann::json RegionPolicyToJson(const RegionPolicy& p);

}  // namespace gpupool
