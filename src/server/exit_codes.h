// The exit codes of `gpupool server` and `gpupool dev` (docs/server.md,
// "Exit codes"), chosen so that a supervisor can tell a failure that a
// restart may cure from one that needs an operator.
#pragma once

namespace gpupool {

inline constexpr int kExitOk = 0;
// Start-up refused: a bad configuration, a data directory locked by another
// server or holding another system's files, an unreachable etcd. Says why.
inline constexpr int kExitStartFailed = 1;
inline constexpr int kExitUsage = 2;  // bad flags
// Stored state does not read back (a damaged snapshot, journal or
// database): the message names the file and where. A restart will not
// help; docs/server.md says what will (--recover-from-journal, a backup).
inline constexpr int kExitDataLoss = 65;
// A journal write failed for a reason other than a full disk: the Engine's
// memory is ahead of its log; a restart recovers what was acknowledged.
inline constexpr int kExitJournalFailed = 70;
// With --etcd: this server lost the leadership; a restart campaigns again.
inline constexpr int kExitLostLeadership = 75;

}  // namespace gpupool
