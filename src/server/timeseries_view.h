// Issue 19's time series (src/server/timeseries.h) as the REST API
// returns them, GET /v1/timeseries/{pools,tenants,gpus}
// (docs/api/openapi.yaml), and the observation the server records.
// The caller holds the read model's shared lock.
#pragma once

#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "src/api/json_fields.h"
#include "src/server/agent_status.h"
#include "src/server/read_model.h"
#include "src/server/timeseries.h"

namespace gpupool {

// What the pools, the tenants' pools and the GPUs look like now, from the
// read model's engine summary and the agents' last heartbeats:
//   a pool: its capacity (total, allocated, reserved, as GET /v1/pools),
//     its nodes, its pending jobs (those that may run there), and of its
//     allocated GPUs on ready nodes those whose last reported utilization
//     is at least `busy_from_pct` (busy; a GPU no agent reported is not
//     busy) and the rest of allocated (idle);
//   a tenant's pool, where the tenant has a quota, uses GPUs or has jobs
//     waiting: GPUs in use and pending jobs that may run there;
//   a GPU an agent reported, of a node the read model has and that is not
//     removed: utilization, memory used, temperature.
// Costs one pass over the nodes' GPUs and the tenants' pools.
Observation Observe(const ReadModel& m, const AgentStatusBoard& agents, double busy_from_pct);

enum class SeriesScope : uint8_t { kPools, kTenants, kGpus };

// The query's parameters as given (absent: nullopt).
struct SeriesParams {
  std::optional<std::string> pool, tenant, node, minutes;
};

// Checks the parameters and answers the series ending with `now`'s minute:
//   minutes  how many one-minute points: 1..1440, default 1440 (GPUs:
//            1..60, default 60);
//   pool     a pool's name (pools and tenants);
//   tenant   a tenant's name (tenants); a tenant's token may name only its
//            own (else 403 naming tenant) and sees only its own without it;
//   node     a node's name (GPUs; required).
// `caller_tenant` is the tenant of a tenant's token, empty for the admin
// and pool-wide readers. A tenant sees of the pools what GET /v1/pools
// shows it (total, allocated, reserved, nodes), not busy, idle or the queue
// (they come from other tenants' work). The GPU series are the admin's and
// readers' (the caller checks). A bad value is a 400 naming its field.
bool SeriesAnswer(SeriesScope scope, const SeriesParams& q, const std::string& caller_tenant, const ReadModel& m,
                  const TimeSeriesRecorder& r, Instant now, nlohmann::json* out, ApiError* err);

}  // namespace gpupool
