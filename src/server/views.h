// JSON views of the read model, as the REST API returns them
// (docs/api/openapi.yaml). The caller holds the read model's shared lock.
#pragma once

#include <nlohmann/json.hpp>

#include "src/api/job_request.h"
#include "src/server/journal.h"
#include "src/server/read_model.h"

namespace gpupool {

nlohmann::json JobView(const JobRecord& j, const ReadModel& m, const ApiNames& names);
nlohmann::json TenantView(TenantId t, const ReadModel& m);
nlohmann::json NodeView(NodeIndex n, const ReadModel& m);
nlohmann::json PoolView(PoolId p, const ReadModel& m);
nlohmann::json QuotaView(const Quota& q);
// A token as GET /v1/tokens lists it: id, name, role, tenant or node, times;
// never its hash or salt. Needs no lock.
nlohmann::json TokenView(const TokenRecord& t);

}  // namespace gpupool
