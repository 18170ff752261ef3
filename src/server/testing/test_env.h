// The test Env (src/server/env.h): a whole ServerCore runs inside a test's
// process on
//  - a stepped clock that only the test moves (Advance);
//  - journals held in memory (MemoryJournal), one per data directory, that
//    outlive the cores using them, with faults armed on the Nth commit from
//    now (FoundationDB's AsyncFileNonDurable is the model: what was not
//    synced may be lost; what was acknowledged must not be):
//      kFailCommit         the commit fails; nothing is written (the core
//                          answers 503 and halts: a crash);
//      kCrashBeforeCommit  power is cut before the batch is synced: it is
//                          lost;
//      kCrashDuringCommit  cut while it is being synced: kept or lost, as
//                          the Env's seeded generator draws;
//      kCrashAfterCommit   cut after the commit, before anyone hears of it:
//                          kept, never answered, never published;
//  - programs that are functions the test supplies (set_program), and
//  - the real files of the test's directories, where writes under a prefix
//    can be made to fail (FailWritesUnder).
//
// A "crash" (Crash, a crash fault, or Halt) stands for the server process
// dying: every journal handle opened before it fails from then on (so a
// dead core cannot write), programs hanging in Hang end as killed, and the
// crash hook runs; the harness (test_server.h) kills its ServerCore there
// and later opens a new one on the surviving journal.
//
// Thread-safety: every function may be called from any thread. The crash
// hook is called on the crashing thread (a core's writer, or the test's)
// without the Env's lock held.
#pragma once

#include <atomic>
#include <condition_variable>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "src/base/rng.h"
#include "src/server/env.h"
#include "src/server/testing/memory_journal.h"

namespace gpupool {

class TestEnv final : public Env {
 public:
  struct Options {
    Instant start = InstantFromMillis(1'780'000'000'000);  // 2026-05-28T20:26:40Z
    uint64_t seed = 1;  // draws kCrashDuringCommit's outcome
  };
  enum class Fault { kFailCommit, kCrashBeforeCommit, kCrashDuringCommit, kCrashAfterCommit };

  // What a program was asked to run.
  struct ProgramCall {
    std::vector<std::string> argv;
    Vars vars;
    Duration timeout{0};
    Instant started{};
    int64_t crashes_before = 0;  // the Env's crashes() as it started: Hang ends at the next
    // The value of `name` among `vars`, or "".
    std::string Var(const std::string& name) const;
  };
  using Program = std::function<CommandOutcome(const ProgramCall&)>;

  TestEnv() : TestEnv(Options{}) {}
  explicit TestEnv(Options options);
  ~TestEnv() override = default;
  TestEnv(const TestEnv&) = delete;
  TestEnv& operator=(const TestEnv&) = delete;

  // --- the stepped clock -------------------------------------------------------------
  Instant Now() override;
  // The start of the steady reading is arbitrary; it moves with Now().
  SteadyTime SteadyNow() override;
  // A waiter notices a step within a millisecond of real time: it polls,
  // since a step cannot notify a condition variable whose mutex it does not
  // hold without risking a lost wake-up.
  void WaitUntil(std::condition_variable& cv, std::unique_lock<std::mutex>& lock, Instant deadline,
                 const std::function<bool()>& ready) override;
  // Requires d >= 0.
  void Advance(Duration d);

  // --- journals ----------------------------------------------------------------------
  Result<std::unique_ptr<Journal>> OpenJournal(const std::string& dir) override;
  // Arms `fault` for the n-th non-empty commit from now (n >= 1) on any of
  // this Env's journals, replacing an armed fault that has not fired.
  void ArmCommitFault(int64_t n, Fault fault);
  void DisarmCommitFault();
  bool fault_armed() const;
  // Non-empty commits asked of this Env's journals (succeeded or not).
  int64_t commits() const;
  // How many armed faults of kind `fault` have fired so far.
  int64_t fired(Fault fault) const;

  // While set, every non-empty commit fails as on a full disk
  // (kResourceExhausted, "disk full: ..."), writing nothing and crashing
  // nothing; armed faults wait (they count no such commit).
  void set_disk_full(bool full) { disk_full_ = full; }
  bool disk_full() const { return disk_full_.load(); }

  // --- crashes -----------------------------------------------------------------------
  // The server process dies now (see the top of this file).
  void Crash();
  void set_crash_hook(std::function<void()> hook);
  // Crashes so far, each counted once its hook has returned.
  int64_t crashes() const { return crashes_.load(); }
  // Records `exit_code`, then Crash(); returns.
  void Halt(int exit_code) override;
  std::vector<int> halts() const;

  // --- programs ----------------------------------------------------------------------
  // Without one, every program "cannot start".
  void set_program(Program program);
  CommandOutcome RunProgram(const std::vector<std::string>& argv, const Vars& vars, Duration timeout) override;
  std::vector<ProgramCall> program_calls() const;
  // For a Program that never ends by itself: returns once the Env crashes
  // (killed by SIGKILL) or its clock passes the call's timeout (timed out),
  // as RunProgram would report them.
  CommandOutcome Hang(const ProgramCall& call);
  // An outcome of a program that exited with `code`, having printed `output_tail`.
  static CommandOutcome Exited(int code, std::string output_tail = "");

  // --- files -------------------------------------------------------------------------
  // Every call succeeds and excludes nothing: the cores of one test share
  // a directory on purpose (CheckEqualsReplay opens one beside another).
  Result<std::unique_ptr<DirectoryLock>> LockDataDirectory(const std::string& dir) override;
  // The real files (Env::Default()), but writes to paths starting with
  // `prefix` fail as on a full disk ("" lets every write through again).
  void FailWritesUnder(std::string prefix);
  Status CreateDirectories(const std::string& dir) override;
  Status WriteFileAtomic(const std::string& path, std::string_view contents, mode_t mode) override;
  Status AppendFile(const std::string& path, std::string_view data) override;

 private:
  class Handle;
  // Counts a commit and says which fault, if any, it meets.
  std::optional<Fault> CountCommit();
  bool DrawKeep();
  Status Refused(const std::string& path);
  uint64_t generation() const { return generation_.load(); }

  const Instant start_;
  std::atomic<int64_t> now_ms_;
  std::atomic<uint64_t> generation_{0};  // crashes so far: a handle of an older one is dead
  std::atomic<int64_t> crashes_{0};
  std::atomic<bool> disk_full_{false};

  mutable std::mutex mu_;
  std::condition_variable cv_;  // clock steps and crashes, for Hang
  std::map<std::string, std::shared_ptr<MemoryJournal>> journals_;  // GUARDED_BY(mu_); by data directory
  int64_t commits_ = 0;                                              // GUARDED_BY(mu_)
  int64_t fault_at_ = 0;                                             // GUARDED_BY(mu_); 0: none armed
  Fault fault_ = Fault::kFailCommit;                                 // GUARDED_BY(mu_)
  std::map<Fault, int64_t> fired_;                                   // GUARDED_BY(mu_)
  Rng rng_;                                                          // GUARDED_BY(mu_)
  std::function<void()> crash_hook_;                                 // GUARDED_BY(mu_)
  std::vector<int> halts_;                                           // GUARDED_BY(mu_)
  Program program_;                                                  // GUARDED_BY(mu_)
  std::vector<ProgramCall> calls_;                                   // GUARDED_BY(mu_)
  std::string failing_prefix_;                                       // GUARDED_BY(mu_)
};

}  // namespace gpupool
