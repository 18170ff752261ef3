// Planning a preemption (QUOTA-1): which running jobs to stop so that a
// pending job fits in one pool, and on which nodes it then goes.
//
// The rule (the Engine's contract, src/engine/engine.h): a job may preempt
// lower-priority work of its own tenant; a job within its guarantee may also
// take capacity back from other tenants' borrowed jobs, never taking a lender
// below its guarantee. Victims are lowest priority first, then least lost
// work; each replica goes to the node where the fewest, lowest-priority,
// cheapest victims make room. The plan is worked out on copies of the nodes
// it touches and decides nothing: the Engine emits it (Engine::TryPreempt).
#pragma once

#include <optional>
#include <set>
#include <vector>

#include "src/base/time.h"
#include "src/engine/state.h"
#include "src/sched/policy.h"

namespace gpupool {

// A running job as a preemption candidate: the order victims are taken in.
struct VictimCost {
  int32_t priority;  // tier: lowest first
  int64_t lost;      // GPU-milli x ms of work lost: least first
  JobId id;
  auto operator<=>(const VictimCost&) const = default;
};

struct PreemptionVictim {
  VictimCost cost;
  const Job* job;  // points into the EngineState the plan was made on
  PreemptReason reason;
};

struct PreemptionPlan {
  std::vector<PreemptionVictim> victims;  // in the order they are stopped
  std::set<NodeIndex> nodes;              // where the preemptor's replicas go
};

// The victims that make room for every replica of `j` in `pool`, or nullopt:
// no plan (a pipeline, no candidates, some replica fits nowhere even with
// every candidate gone), no victim needed (it fits as things are: a later
// pass places it), or the job would still not be admitted once they are gone
// (not `within` its guarantee, and its own freed work does not leave it
// within the guarantee or MayBorrow). `within`: j is within its guarantee
// in `pool` (Engine::PreemptFor).
// Requires: j is pending; `state` is consistent (CheckInvariants).
// Guarantees: deterministic (ordered containers only); reads `state` only.
std::optional<PreemptionPlan> PlanPreemption(const EngineState& state, const Policy& policy, const Job& j,
                                             PoolId pool, bool within, Instant now);

// Working copies of nodes (also for placement's trial runs in the Engine).
// `n` with the resources of `j`'s replicas on node `node` given back.
void GiveBack(Node& n, const Job& j, NodeIndex node, const Cluster& cluster);
// `n` as if `d` were placed on it, on the first GPUs that fit.
// Requires CheckFit(n, d) == kNone.
void TakeOut(Node& n, const Demand& d);

// Is node `n` held for a nominated job (a preemptor) of tenant t?
bool HeldForFellowPreemptor(const EngineState& s, const Node& n, TenantId t);

}  // namespace gpupool
