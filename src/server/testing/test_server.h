// One ServerCore on a TestEnv (test_env.h), crashed and restarted inside
// the test's process: the server's crash and provider behaviour without
// forking the binary.
//
//   TestEnv env;
//   TestServer server(env, {.data_dir = dir, .config_text = kConfig});
//   ASSERT_TRUE(server.Start());
//   env.ArmCommitFault(3, TestEnv::Fault::kCrashAfterCommit);
//   auto reply = server.TryCall(SubmitJobCmd{...});  // nullopt: the core died before answering
//   ASSERT_TRUE(server.Restart());                    // a new core on the surviving journal
//
// A crash (TestEnv::Crash, a fault, a Halt) kills the running core through
// the Env's crash hook (ServerCore::Kill); Restart then destroys it and
// opens a new one on the same data directory and journal.
//
// Thread-safety: Start, Restart, Stop and Crash from the test's thread;
// TryCall, Call, Sync and Settle from any thread while a core runs.
#pragma once

#include <functional>
#include <memory>
#include <mutex>
#include <optional>

#include "src/server/server_core.h"
#include "src/server/testing/test_env.h"

namespace gpupool {

class TestServer {
 public:
  // `options.env` is replaced by `env`, which outlives this.
  TestServer(TestEnv& env, ServerOptions options);
  ~TestServer();  // Stop()
  TestServer(const TestServer&) = delete;
  TestServer& operator=(const TestServer&) = delete;

  // Opens a core on the data directory and, with `start`, starts it and
  // Syncs (so that its first tick is one tick after the clock's time now;
  // without: the test checks the recovered state first, then calls
  // core().Start() and Sync()).
  Status Start(bool start = true);
  // Destroys the core (after a crash: as it was left; else stopped
  // cleanly), then Start(start).
  Status Restart(bool start = true);
  // The process dies now: TestEnv::Crash.
  void Crash() { env_.Crash(); }
  // Whether the Env crashed since the running core was opened (every crash
  // kills the core, or leaves it with journal handles that are dead).
  bool crashed() const { return env_.crashes() != crashes_at_open_; }
  // Called with each new core once it is open, before it starts (to set
  // its desired listener, say); on the thread that opens it.
  void set_on_open(std::function<void(ServerCore&)> f) { on_open_ = std::move(f); }
  // Stops the core cleanly (final snapshot) and destroys it.
  void Stop();

  // The running core. Requires Start.
  ServerCore& core();
  // What each core is opened with (env included): for CheckEqualsReplay.
  const ServerOptions& options() const { return options_; }

  // The command's reply, or nullopt when the core died before answering
  // (a caller's connection dropped).
  std::optional<Reply> TryCall(Command c);
  // TryCall that requires an answer.
  Reply Call(Command c);
  // Returns once everything decided before, and the tick a clock step may
  // cause, is durable and published (SyncCmd); false when the core died
  // first.
  bool Sync();
  // Advances the clock by `d` in steps of at most `step`, Sync after each:
  // every tick in between happens. False (the clock stops there) when the
  // core died.
  bool Advance(Duration d, Duration step);
  // Sync until the node provider has nothing planned or running and its
  // answers are applied; false when it is still busy after `max_rounds`
  // (a program that hangs) or the core died.
  bool Settle(int max_rounds = 1000);

 private:
  TestEnv& env_;
  ServerOptions options_;
  std::function<void(ServerCore&)> on_open_;
  int64_t crashes_at_open_ = 0;  // the Env's crashes() as the core was opened
  std::mutex mu_;
  std::unique_ptr<ServerCore> core_;  // GUARDED_BY(mu_) for the crash hook; replaced by the test's thread only
};

}  // namespace gpupool
