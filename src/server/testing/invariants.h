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
//  - No GPU is handed to a tenant with another's data on it: the Engine
//    checks it at every placement, live and in replay (Cluster::Allocate's
//    CHECK), so a replay that breaks it stops the test; what a node sees
//    is checked by the simulated agents (sim_agent.h).
//
// RestartChecked and StopChecked run the checks around a TestServer
// (test_server.h), after a crash and at the end.
//
// Thread-safety: the caller holds what it passes still (a stopped core).
#pragma once

#include <map>
#include <set>
#include <string>

#include "src/base/status.h"
#include "src/server/read_model.h"
#include "src/server/server_core.h"
#include "src/server/testing/test_server.h"

namespace gpupool {

// What callers were told, as a test records the replies.
struct Acknowledged {
  std::map<JobId, std::string> jobs;  // acknowledged submissions: id -> the job's name (names are unique)
  std::set<JobId> cancelled;          // acknowledged cancellations
  // Jobs of one replica whose exit an agent reported and was answered for,
  // with the attempt that exited (1 + the job's preemptions +
  // interruptions): the job runs that attempt no more.
  std::map<JobId, int32_t> ended;
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

// After a crash: a new core on the surviving journal, checked before it
// starts (CheckEqualsReplay, CheckAcknowledged), then started. A fault still
// armed may fire as it starts (its first pass may take a snapshot): then
// again, at most `attempts` times. Fails with the first check that fails,
// or when the server does not start.
Status RestartChecked(TestServer& server, TestEnv& env, const Acknowledged& acknowledged, int attempts = 3);
// Stops the running core cleanly and checks what it held against a replay
// of its journal and against what callers were told.
Status StopChecked(TestServer& server, const Acknowledged& acknowledged);

}  // namespace gpupool
