// The order in which a scheduling pass serves tenants (like the Mesos
// allocator's sorter): a pure function of the state, handed to the pass
// rather than steered through the Engine's members.
//
// Key, smallest first:
//   1. with `reserved_first_pool` set (QUOTA-5: a node a scale-out brought
//      to that pool), tenants holding a reserved quota there;
//   2. tenants with an idle guarantee (guaranteed GPUs they are not using);
//   3. weighted dominant resource share (DRF over GPU, CPU and memory of
//      the pools the tenant may use, divided by its largest quota weight);
//   4. tenant id, so that the order is total and deterministic.
//
// Thread-safety: none needed (reads the state it is given).
#pragma once

#include <compare>
#include <cstdint>

#include "src/engine/state.h"

namespace gpupool {

struct TenantOrder {
  int32_t reserved_first_pool = -1;  // a PoolId, or -1: no pool's reserved tenants go first

  struct Key {
    int phase;  // -1: reserved first, 0: has an idle guarantee, 1: the rest
    double share;
    TenantId tenant;
    auto operator<=>(const Key&) const = default;
  };
  Key KeyOf(const EngineState& s, TenantId t) const;
};

// Weighted dominant share of tenant t (step 3 above).
double DominantShare(const EngineState& s, TenantId t);
// Does tenant t have guaranteed GPUs it is not using in some pool?
bool HasIdleGuarantee(const EngineState& s, TenantId t);

}  // namespace gpupool
