#include "src/engine/tenant_order.h"

#include <algorithm>

namespace gpupool {

double DominantShare(const EngineState& s, TenantId t) {
  const Tenant& tenant = s.tenants[t];
  double used[3] = {0, 0, 0}, total[3] = {0, 0, 0};
  double weight = 0;
  for (PoolId p = 0; p < s.pools.size(); ++p) {
    const TenantPool& tp = tenant.pools[p];
    if (tp.quota.elastic_limit_milli == 0) continue;
    used[0] += static_cast<double>(tp.usage.gpu_milli);
    used[1] += static_cast<double>(tp.usage.cpu_milli);
    used[2] += static_cast<double>(tp.usage.memory_mib);
    total[0] += static_cast<double>(s.pool_totals[p].gpu_milli);
    total[1] += static_cast<double>(s.pool_totals[p].cpu_milli);
    total[2] += static_cast<double>(s.pool_totals[p].memory_mib);
    weight = std::max(weight, tp.quota.weight);
  }
  double share = 0;
  for (int r = 0; r < 3; ++r) {
    if (total[r] > 0) share = std::max(share, used[r] / total[r]);
  }
  return weight > 0 ? share / weight : share;
}

bool HasIdleGuarantee(const EngineState& s, TenantId t) {
  for (const TenantPool& tp : s.tenants[t].pools) {
    if (tp.idle_guarantee_milli() > 0) return true;
  }
  return false;
}

TenantOrder::Key TenantOrder::KeyOf(const EngineState& s, TenantId t) const {
  const bool reserved_first =
      reserved_first_pool >= 0 && s.tenant_pool(t, static_cast<PoolId>(reserved_first_pool)).quota.reserved;
  return Key{reserved_first ? -1 : (HasIdleGuarantee(s, t) ? 0 : 1), DominantShare(s, t), t};
}

}  // namespace gpupool
