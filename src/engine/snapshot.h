// Snapshots: the Engine's whole state as one compact, versioned binary
// image, so that a restart loads the latest snapshot and replays only the
// journal's events after it (EventFromJson, EngineState::Apply) instead of
// the whole history.
//
// Format (integers little-endian):
//   magic     8 bytes   "GPSNAP\r\n"
//   version   u32       kSnapshotVersion
//   length    u64       bytes of payload that follow
//   checksum  u64       SnapshotChecksum(payload) (XXH3-64, xxHash; versions
//                       4 and 5 used LegacySnapshotChecksum)
//   payload             the state field by field (see snapshot.cc): integers
//                       as LEB128 varints (signed ones zigzag-encoded),
//                       doubles as their 8 IEEE-754 bytes, strings and lists
//                       prefixed by their length.
// The checksum catches damage (a packaged, well-studied 64-bit hash: a
// damaged payload passes with odds of about 2^-64); it is not a defence
// against an attacker, so the payload is validated as well.
//
// What a snapshot holds: everything EngineState holds (the cluster with its
// allocation ids and free-slot order, pools, tenants with quotas and usage,
// live jobs with their full specs, nominated jobs, reservations, re-cut
// entries, per-node labels and places, pool totals, the learned workload
// and its last rebuild, next_job_id, last_seq, now, capacity_epoch), plus the queue's blocked-group marks (which groups
// the engine's last scheduling pass found blocked at the current capacity
// epoch; see JobQueue::Group). Not held, rebuilt on decoding:
//  - `lending` (configuration: the caller passes it);
//  - the cluster's change log: it restarts empty (Cluster::FromImage), and
//    a restored engine's score index reads every node anyway;
//  - running, running_by_tenant_pool, running_deadlines and queue, which
//    are functions of the live jobs (rebuilt exactly; the blocked marks are
//    then set again).
// A state built by Apply alone (a replay) has no blocked marks; the same
// state inside a running Engine may have some, so their snapshots differ in
// those marks only.
//
// Thread-safety: pure functions.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "src/base/status.h"
#include "src/engine/state.h"

namespace gpupool {

// 2: jobs carry their task; 3: scaling state; 4: elastic jobs, hot and lent
// nodes; 5: the task's container fields (image, shm_mib, network_isolated);
// 6: the header's checksum is XXH3-64 (the payload is as in 5); 7: each
// node's unhealthy GPUs and reported MIG modes and instances, and each
// allocation's observed memory beyond its booking (issue 15); 8: the
// workload learned from arrivals (WorkloadLearner) and stable replica ids
// (ReplicaPlacement::id, Job::next_replica_id), issue 16; 9: operators'
// cordons and drains (EngineState::cordons), issue 19.
// DecodeSnapshot also reads versions 4 (the container fields take their
// defaults), 5 (the legacy checksum), 6 (every GPU healthy, nothing
// observed beyond bookings) and 7 (nothing learned: the prior alone until
// the next arrivals) and 8 (no operator's cordon).
inline constexpr uint32_t kSnapshotVersion = 9;
inline constexpr uint32_t kOldestSnapshotVersion = 4;
inline constexpr size_t kSnapshotHeaderBytes = 28;  // magic, version, length, checksum

// The snapshot of `s`. Deterministic: equal states give equal bytes (jobs
// are written in id order, never in hash-map order).
std::string EncodeSnapshot(const EngineState& s);
// The same in an older version's format, for tests of the readers of older
// releases' snapshots: 6 (without version 7's fields: they must be at their
// defaults for the result to load as `s`), 7 (without the learned
// workload), 8 (without operators' cordons) or kSnapshotVersion.
std::string EncodeSnapshotAs(const EngineState& s, uint32_t version);

// The state a snapshot holds, with `lending` as its configuration. Every
// read is bounds-checked and every count checked against the bytes left
// before anything is allocated, so truncated, damaged or hostile bytes give
// an Error (kInvalidArgument; kFailedPrecondition for an unknown version),
// never a crash. Beyond the checksum it validates what later code relies on
// to stay in bounds (indexes of nodes, pools, tenants and allocations, enum
// values, gang sizes against stages, reservations matching nodes; see
// Cluster::FromImage for the cluster's checks) and finally CheckInvariants.
// The error names the section, the item and the field.
//
// The result must be moved, never copied: EngineState::running points into
// EngineState::jobs (a move keeps those pointers valid, a copy does not).
Result<EngineState> DecodeSnapshot(std::string_view bytes, LendingConfig lending);

// The checksum of the header (see the format above): XXH3-64 of the
// payload. Exposed so that tests can seal a payload they damaged on purpose
// and reach the validation behind the checksum.
uint64_t SnapshotChecksum(std::string_view payload);
// The checksum of versions 4 and 5 (a hash of our own, eight bytes at a
// time), kept only to read snapshots those versions wrote.
uint64_t LegacySnapshotChecksum(std::string_view payload);

}  // namespace gpupool
