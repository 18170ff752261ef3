// Tenants and their quotas, per pool (QUOTA-1, QUOTA-3, QUOTA-5).
//
// In each pool a tenant has three tiers, in GPU milli:
//   guaranteed     reserved for the tenant: nobody else may use it unless
//                  the tenant lends part of it (lent_milli);
//   elastic limit  the most the tenant may use in the pool; usage beyond its
//                  effective guarantee (guaranteed - lent) is "borrowed"
//                  from the shared elastic capacity and preemptible;
//   weight         its share of the elastic capacity under weighted DRF.
// A reserved quota is never lent (QUOTA-5).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "src/base/time.h"
#include "src/model/job.h"

namespace gpupool {

struct Quota {
  int64_t guaranteed_milli = 0;
  int64_t elastic_limit_milli = 0;  // >= guaranteed_milli
  double weight = 1.0;              // > 0
  bool reserved = false;

  friend bool operator==(const Quota&, const Quota&) = default;

  GP_FIELDS(q) {  // the journal's names (src/base/fields.h)
    v("guaranteed_milli", q.guaranteed_milli);
    v("elastic_limit_milli", q.elastic_limit_milli);
    v("weight", q.weight);
    v("reserved", q.reserved);
  }
};

// What the tenant holds in one pool right now.
struct PoolUsage {
  int64_t gpu_milli = 0;
  int64_t cpu_milli = 0;
  int64_t memory_mib = 0;
  int64_t lent_milli = 0;            // part of the guarantee lent to the elastic pool
  // Lending (QUOTA-3): since when usage has stayed below the lend threshold;
  // unset while at or above it.
  std::optional<Instant> below_threshold_since;
  bool exhausted_alerted = false;    // a quota-exhausted alert is outstanding
  // Usage above the elastic limit that a quota cut left in place (running
  // work is not preempted for a quota cut); shrinks as that work ends. The
  // tenant is never placed above limit + this.
  int64_t over_limit_milli = 0;
};

struct TenantPool {
  Quota quota;
  PoolUsage usage;
  int64_t effective_guarantee() const { return quota.guaranteed_milli - usage.lent_milli; }
  // GPU milli used beyond the effective guarantee.
  int64_t borrowed_milli() const {
    const int64_t over = usage.gpu_milli - effective_guarantee();
    return over > 0 ? over : 0;
  }
  // Guaranteed GPU milli the tenant is not using: held idle for it.
  int64_t idle_guarantee_milli() const {
    const int64_t idle = effective_guarantee() - usage.gpu_milli;
    return idle > 0 ? idle : 0;
  }
};

struct Tenant {
  TenantId id = -1;
  std::string name;
  // Indexed by PoolId; a pool the tenant has no quota in has elastic limit 0
  // and is outside its virtual pool (QUOTA-4).
  std::vector<TenantPool> pools;
};

}  // namespace gpupool
