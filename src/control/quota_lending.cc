#include "src/control/quota_lending.h"

#include <cmath>

namespace gpupool {

std::vector<QuotaLent> LendDecisions(const EngineState& s, Instant now) {
  std::vector<QuotaLent> out;
  if (!s.lending.enabled) return out;
  for (const Tenant& t : s.tenants) {
    for (PoolId p = 0; p < s.pools.size(); ++p) {
      const TenantPool& tp = t.pools[p];
      if (tp.quota.reserved || tp.quota.guaranteed_milli <= 0 || tp.usage.lent_milli > 0) continue;
      if (!tp.usage.below_threshold_since || now - *tp.usage.below_threshold_since < s.lending.window) continue;
      // Work already waiting for this tenant keeps the guarantee at home.
      const JobQueue::TenantQueue* tq = s.queue.find_tenant(t.id);
      if (tq && tq->size > 0) continue;
      const auto milli =
          static_cast<int64_t>(std::floor(s.lending.lend_fraction * static_cast<double>(tp.quota.guaranteed_milli)));
      if (milli > 0) out.push_back(QuotaLent{t.id, p, milli});
    }
  }
  return out;
}

std::vector<QuotaRecalled> RecallDecisions(const EngineState& s, const Job& submitted) {
  std::vector<QuotaRecalled> out;
  for (PoolId p = 0; p < s.pools.size(); ++p) {
    if (!(submitted.spec.demand.allowed_pools >> p & 1)) continue;
    const TenantPool& tp = s.tenant_pool(submitted.spec.tenant, p);
    if (tp.usage.lent_milli <= 0) continue;
    if (tp.usage.gpu_milli + submitted.spec.total_gpu_milli() > tp.effective_guarantee()) {
      out.push_back(QuotaRecalled{submitted.spec.tenant, p, tp.usage.lent_milli});
    }
  }
  return out;
}

void QuotaLending::Tick(const EngineView& view, Actions& act) {
  for (QuotaLent& e : LendDecisions(view.state(), view.now())) act.Emit(std::move(e));
}

void QuotaLending::Submitted(const Job& submitted, const EngineView& view, Actions& act) {
  for (QuotaRecalled& e : RecallDecisions(view.state(), submitted)) act.Emit(std::move(e));
}

}  // namespace gpupool
