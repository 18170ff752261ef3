// `-o table` views of the API's objects (JOB, NODE, pool, TENANT in
// docs/api/openapi.yaml). They take the server's JSON as it is and never
// fail: a missing or null field prints as "-", so a newer server that adds
// fields or an older one that lacks some still prints.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>

namespace gpupool {

// One line per job: ID NAME TENANT STATE PRIORITY GPUS AGE NODES REASON.
// GPUS is per replica, prefixed by the gang size when above one ("2x4",
// "0.25", "4x0.5"), or the pipeline's total; AGE is `now_unix_ms` minus
// submitted_at; NODES the placements' nodes (at most three, then "+N");
// REASON why a pending job waits or why a job was rejected.
std::string FormatJobsTable(const nlohmann::json& jobs, int64_t now_unix_ms);

// One job as "key: value" lines, with its placements and, at the end, its
// normalized request as YAML.
std::string FormatJobDetail(const nlohmann::json& job, int64_t now_unix_ms);

// The GPUS cell of a job (see FormatJobsTable), from its request.
std::string JobGpus(const nlohmann::json& job);

// NAME POOL MODEL GPUS FREE CPU MEMORY_GIB REGION ZONE RACK CONDITION
// CORDONED_BY UNHEALTHY ISOLATION.
std::string FormatNodesTable(const nlohmann::json& nodes);
// A node's `cordons`, one line each ("cordoned by operator (admin) since
// T, draining (deadline T): REASON"); "" when none holds it.
std::string FormatCordons(const nlohmann::json& node);

// NAME MODELS REGIONS NODES TOTAL ALLOCATED RESERVED FRAGMENTED AVAILABLE
// DEDICATED_TO; GPU counts from each pool's capacity.
std::string FormatPoolsTable(const nlohmann::json& pools);

// One line per tenant and pool: NAME POOL GUARANTEED LIMIT WEIGHT RESERVED
// USED BORROWED LENT; a tenant without quota gets one line of "-".
std::string FormatTenantsTable(const nlohmann::json& tenants);

// One line per token: ID NAME ROLE FOR CREATED EXPIRES REVOKED; FOR is the
// tenant, the node, or "(pool)" for a pool-wide reader.
std::string FormatTokensTable(const nlohmann::json& tokens);

// One line per audit entry: SEQ AT TYPE ACTOR REQUEST_ID.
std::string FormatAuditTable(const nlohmann::json& entries);

// GET /v1/usage's rows, one line each: TENANT POOL FROM TO GPU_HOURS
// GUARANTEED_H BORROWED_H LENT_H GPU_MEM_GIB_H JOBS (hours: the API's
// seconds / 3600; FROM and TO the period's UTC days, TO exclusive).
std::string FormatUsageTable(const nlohmann::json& rows);
// The same rows as CSV (a line each, RFC 4180 quoting): a header of the API's field names, the
// values as the API gives them (seconds), fields quoted when they need it.
std::string FormatUsageCsv(const nlohmann::json& rows);

// The region table (GET /v1/regions): a "policy: ..." line, then one line
// per region (REGION PRICE_PER_GPU_HOUR LATENCY_MS, the latencies as
// "location=ms,..."), then, when the table has users, one line per tenant
// (TENANT LOCATION LATENCY_BUDGET_MS).
std::string FormatRegionsTable(const nlohmann::json& table);

}  // namespace gpupool
