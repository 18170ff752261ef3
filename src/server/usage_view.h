// GET /v1/usage (docs/api/openapi.yaml) and a job's own usage, as the REST
// API returns them. The caller holds the read model's shared lock.
#pragma once

#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "src/api/json_fields.h"
#include "src/server/read_model.h"

namespace gpupool {

// The query's parameters as given (absent: nullopt).
struct UsageParams {
  std::optional<std::string> tenant, pool, from, to, by;
};

// At most this many rows in one answer; more sets "truncated": true.
inline constexpr size_t kMaxUsageRows = 10000;

// Checks the parameters and who asks, and answers the rows:
//   tenant  a tenant's name; a tenant's token may name only its own (else
//           403 naming tenant) and sees only its own without it;
//   pool    a pool's name;
//   from    a date (YYYY-MM-DD) or an RFC 3339 time, rounded down to its
//           UTC day; default: the oldest day kept (kUsageDaysKept before to);
//   to      the same, rounded up, exclusive; default: the end of `now`'s day;
//   by      day (default), week (ISO weeks, from Monday) or total.
// `caller_tenant` is the tenant of a tenant's token (or reader), empty for
// the admin and the pool-wide readers. A bad value is a 400 naming its field.
bool UsageAnswer(const UsageParams& q, const std::string& caller_tenant, const ReadModel& m, Instant now,
                 nlohmann::json* out, ApiError* err);

// The job's own accounting: {"gpu_seconds", "gpu_memory_gib_seconds"} up to `now`.
nlohmann::json JobUsageView(const JobRecord& j, Instant now);

}  // namespace gpupool
