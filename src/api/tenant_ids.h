// Each tenant's range of host uids and gids (EXEC-2): the user namespace of
// every container of that tenant maps its root (uid 0) to the range's first
// id and the next `count - 1` ids after it, so tenants never share an id on
// any node, and files a tenant's tasks write (checkpoints on shared storage)
// belong to the same host ids everywhere.
//
// The range is a function of the tenant's id: tenant ids are journaled
// (TenantAdded) and never reused, so the range is the same on every node
// and across restarts of the server and the agents, and needs no record of
// its own. Tenant t gets
//
//   first = 1,000,000 + t * 65,536,   count = 65,536
//
// (above the ids distributions give to people and services, 65,536 ids per
// tenant as /etc/subuid ranges usually are). Ids stay below 2^31, so at most
// kMaxUidTenants tenants exist; the server refuses to create more.
#pragma once

#include <cstdint>
#include <utility>

#include "src/base/check.h"
#include "src/model/job.h"

namespace gpupool {

inline constexpr int64_t kTenantUidBase = 1'000'000;
inline constexpr int64_t kTenantUidCount = 65'536;
// Tenants 0 .. kMaxUidTenants - 1 have a range below 2^31 (32,752 of them).
inline constexpr int64_t kMaxUidTenants = ((int64_t{1} << 31) - kTenantUidBase) / kTenantUidCount;

// The tenant's first host uid/gid and the range's size. `tenant` must be
// in [0, kMaxUidTenants).
inline std::pair<int64_t, int64_t> TenantUidRange(TenantId tenant) {
  GP_CHECK(tenant >= 0 && tenant < kMaxUidTenants) << "tenant " << tenant << " has no uid range";
  return {kTenantUidBase + int64_t{tenant} * kTenantUidCount, kTenantUidCount};
}

}  // namespace gpupool
