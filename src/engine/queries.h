// Read-only questions over an EngineState that the Engine and its control
// loops (src/engine/control_loop.h) both ask. Pure functions of the state:
// deterministic, no side effects, iteration in id order.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "src/base/time.h"
#include "src/engine/state.h"

namespace gpupool {

// Running (or checkpointing) jobs with a replica on node n, by id. O(running).
std::vector<JobId> JobsOnNode(const EngineState& s, NodeIndex n);

// Running jobs with a replica on node n's GPUs `gpus` that can move off
// them: not stopping, and elastic above their minimum, checkpointable, or
// stateless online inference; by id.
std::vector<const Job*> MovableJobsOn(const EngineState& s, NodeIndex n, GpuMask gpus);

// Pools (a pool-id mask) that some queued job may run in: its group's
// pools where its tenant has quota.
uint64_t PoolsWantedByQueue(const EngineState& s);

// QUOTA-1, the tenant's half of admission: how many more GPU milli tenant t
// may hold in pool p under its elastic limit, once `freed` GPU milli of its
// own work there has stopped: limit - (usage - freed), negative when it
// holds more. A job of `need` GPU milli is admitted in p only when need is
// at most this (MayBorrow; within the guarantee it always is, as the
// guarantee is at most the limit), and only where the tenant has quota
// (elastic limit above 0). The pool autoscaler counts queued demand with it
// (src/control/pool_autoscaling.h).
int64_t QuotaHeadroom(const EngineState& s, TenantId t, PoolId p, int64_t freed = 0);

// QUOTA-1: may tenant t borrow `need` more GPU milli in pool p (its elastic
// limit, QuotaHeadroom, and the pool's elastic capacity left after every
// effective guarantee), once `freed` GPU milli of its own work there has
// stopped?
bool MayBorrow(const EngineState& s, TenantId t, PoolId p, int64_t need, int64_t freed = 0);

// OPS-4: MayBorrow for a job that a node failure has interrupted
// (JobInterrupted; Job::interruptions > 0, so also when it waits again
// later for another reason: the state keeps no more). The failure shrank the pool's elastic capacity,
// perhaps below what is borrowed already, and the job did nothing to lose
// its place: so besides the elastic capacity it may borrow the part of
// other tenants' effective guarantees they leave unused. It stays
// borrowed, so a guarantee's owner takes its GPUs back by preemption the
// moment it needs them (PreemptReason::kGuaranteeReclaim). The tenant's
// elastic limit still holds.
bool MayBorrowToRecover(const EngineState& s, TenantId t, PoolId p, int64_t need);

// The GPU milli that pool p's tenants are guaranteed: the sum over tenants
// of Quota::guaranteed_milli there (the whole guarantee, lent part
// included: lending, QUOTA-3, is taken back on demand).
int64_t GuaranteedMilli(const EngineState& s, PoolId p);

// j's demand as it asks for room in pool p alone, counting nodes held for
// j (NodesReserved) as free: for planning a preemption or a re-cut.
Demand DemandHeldIn(const Job& j, PoolId p);

// The work `v` loses when stopped at `now` without a checkpoint: nothing
// when it checkpoints, else what ran since its last periodic checkpoint
// (or since it started).
Duration LostWork(const Job& v, Instant now);

// FRAG-3: the rack of `pool` with the most free GPU capacity on partly used
// ready nodes (where a new node best joins gangs with what is left), or ""
// when the pool has no such node. Ties: the first rack by name.
std::string FragmentedRack(const EngineState& s, PoolId pool);

// Does node n hold nothing (no GPU or CPU in use, no resident)?
bool NodeEmpty(const Node& n);

}  // namespace gpupool
