// What the server must keep whatever happens to its process: the checks
// the in-process crash tests run after each crash (tests/server_crash_test.cc)
// and that a fault-injection soak runs after every fault.
//
//  - Nothing acknowledged is lost, changed or duplicated (CheckAcknowledged):
//    a caller told "job 12" finds job 12, with the name it submitted, once.
//  - The state equals a replay of the journal (CheckEqualsReplay): the
//    Engine's state and the read model that a core holds are those that
//    its journal's events alone rebuild, so no decision escaped the
//    journal and no snapshot disagrees with the events.
//  - No GPU is held twice: CheckInvariants (src/engine/state.h) of that
//    state, which start-up also refuses to serve without.
//
// Thread-safety: the caller holds what it passes still (a stopped core).
#pragma once

#include <map>
#include <set>
#include <string>

#include "src/base/status.h"
#include "src/server/read_model.h"
#include "src/server/server_core.h"

namespace gpupool {

// What callers were told, as a test records the replies.
struct Acknowledged {
  std::map<JobId, std::string> jobs;  // acknowledged submissions: id -> the job's name (names are unique)
  std::set<JobId> cancelled;          // acknowledged cancellations
};

// Every acknowledged job is in `model` under its id with its name, no other
// job has that name, and every acknowledged cancellation holds. Takes the
// model's shared lock.
Status CheckAcknowledged(const ReadModel& model, const Acknowledged& acknowledged);

// `core` (stopped, or opened and not started) holds the Engine state and
// read model that a recovery of its journal from the events alone rebuilds
// (ServerOptions::replay_from_start, opened with `options`, which name the
// same Env, data directory and configuration). Engine states are compared
// by their snapshot bytes without the queue's blocked marks (a running
// Engine's scheduling hints, which a replay does not set); the state must
// also pass CheckInvariants.
Status CheckEqualsReplay(const ServerCore& core, ServerOptions options);

}  // namespace gpupool
