// What the server shell asks of its surroundings (issue 21's Env seam, in
// the spirit of LevelDB's Env): the wall clock and waiting on it, the
// journal, running programs, and the files it writes. The server's code
// reaches the clock, SQLite and posix_spawn only through an Env, so that a
// test can run the whole ServerCore in its own process on a stepped clock,
// an in-memory journal that fails or "crashes" where the test says, and
// programs that are functions (src/server/testing/test_env.h).
//
// Env::Default() is the real one: the system clock, the SQLite journal
// (journal.h), RunProgram (src/base/subprocess.h) and POSIX files. Log
// lines (log.h) are stamped with the real clock whatever Env a core runs
// on: they are read by people next to other processes' logs. So are the
// hold timers of agents' watches (watch_hub.h): connection timers, like
// the HTTP layer's own deadlines, not the server's timeline.
//
// Ownership: an Env outlives everything that uses it; Default() is never
// destroyed.
// Thread-safety: every function may be called from any thread.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "src/base/status.h"
#include "src/base/subprocess.h"
#include "src/base/time.h"
#include "src/server/journal.h"

namespace gpupool {

class Env {
 public:
  using SteadyTime = std::chrono::steady_clock::time_point;
  using Vars = std::vector<std::pair<std::string, std::string>>;

  virtual ~Env() = default;

  // The real Env (a process-wide singleton).
  static Env* Default();

  // --- time ------------------------------------------------------------------------
  // Now on the server's timeline (Unix milliseconds): what commands and
  // ticks are stamped with.
  virtual Instant Now() = 0;
  // A monotonic reading for measuring how long something took (metrics,
  // recovery time); only differences between two readings mean anything.
  virtual SteadyTime SteadyNow() = 0;
  // With `lock` (on the mutex `cv` is used with) held: returns once
  // `ready()` holds or Now() has reached `deadline`, whichever is first.
  // Whoever makes `ready()` true notifies `cv`; the Env wakes the waiter
  // when its own clock passes the deadline.
  virtual void WaitUntil(std::condition_variable& cv, std::unique_lock<std::mutex>& lock, Instant deadline,
                         const std::function<bool()>& ready) = 0;

  // --- the journal -----------------------------------------------------------------
  // Opens (creating when missing) the journal of the data directory `dir`.
  virtual Result<std::unique_ptr<Journal>> OpenJournal(const std::string& dir) = 0;

  // --- the data directory ----------------------------------------------------------
  // Held while a server uses a data directory; releasing it (destruction)
  // lets another in.
  class DirectoryLock {
   public:
    virtual ~DirectoryLock() = default;
  };
  // Takes DIR/LOCK (created 0600 when missing) with flock(LOCK_EX | LOCK_NB)
  // for as long as the returned handle lives, and writes this process's pid
  // into it. Fails with kFailedPrecondition naming the file, and the
  // holder's pid as its file says, when another process (or another handle
  // of this one) holds it: two servers never share a directory. `dir` must
  // exist. The test Env grants every call: the cores of one test share a
  // directory on purpose (a replay opened beside a stopped core).
  virtual Result<std::unique_ptr<DirectoryLock>> LockDataDirectory(const std::string& dir) = 0;

  // --- programs --------------------------------------------------------------------
  // Runs argv to its end as RunProgram (src/base/subprocess.h) does: `vars`
  // on top of the server's environment, killed at `timeout`. Blocks.
  virtual CommandOutcome RunProgram(const std::vector<std::string>& argv, const Vars& vars, Duration timeout) = 0;

  // --- files the server writes -----------------------------------------------------
  // Every write below that fails for want of space (ENOSPC, EDQUOT) fails
  // with kResourceExhausted and a message starting "disk full: ", so that
  // the caller can refuse (503) and try again later rather than stop.
  //
  // Creates `dir` and its missing parents, each new one with mode 0700.
  virtual Status CreateDirectories(const std::string& dir) = 0;
  // Replaces `path` with `contents` durably: written to PATH.tmp with
  // `mode`, synced, renamed over `path`, and the directory synced; a reader
  // sees the old file or the new one, never a part.
  virtual Status WriteFileAtomic(const std::string& path, std::string_view contents, mode_t mode) = 0;
  // Appends `data` to `path` (created with mode 0600, with its directory,
  // when missing), without syncing: for diagnostics that may lose their
  // tail in a crash.
  virtual Status AppendFile(const std::string& path, std::string_view data) = 0;

  // --- stopping --------------------------------------------------------------------
  // The process must stop now with `exit_code` (a journal write failed: the
  // Engine's memory is ahead of its log). The real Env gives answers already
  // handed out a moment to leave, then exits without unwinding. A test Env
  // may return; the caller then does nothing more (ServerCore halts).
  virtual void Halt(int exit_code) = 0;
};

}  // namespace gpupool
