// The daemon's command node provider (SCALE-1): the answerer of the
// Engine's scale-outs and scale-ins on real clouds, through two
// operator-supplied shell commands (`server.provider` in the server
// configuration; see docs/server.md).
//
//  - ScaleOutRequested{pool, nodes}: `create` runs once per node, with
//      GPUPOOL_POOL, GPUPOOL_NODE (the name the node must register with),
//      GPUPOOL_RACK, GPUPOOL_REGION, GPUPOOL_ZONE, GPUPOOL_GPU_MODEL,
//      GPUPOOL_GPUS and GPUPOOL_WARM (1 when the pool's warm pool, SCALE-5,
//      covers this node: the script may take a pre-initialised instance)
//    in its environment. Exit 0: the node joins (on_created, which the
//    server turns into Engine::AddProvisionedNode). Anything else, or no
//    exit within `timeout` (the command's process group is killed): the
//    request for that node fails (on_failed, Engine::FailScaleOut with
//    "create exited 3: <last lines of its output>").
//  - NodeRemoved{node}: `delete` runs with GPUPOOL_NODE and GPUPOOL_POOL;
//    a failure is logged and nothing else (the node already left its pool).
//
// Names: the pool template's ProvisionedNodeName(template, serial), the
// serial counting up past every node of the state named PREFIX-N and past
// every name this provider handed out before (so two requests in flight
// never share a name); the rack is ProvisionedNodeRack(template, serial).
//
// Commands start only once the event that asked for them is durable: the
// engine thread plans (Plan, with the state the event was applied to), the
// thread that sees commits releases (Committed). A request whose event was
// never committed runs nothing; one whose event was committed but whose
// command never answered (a crash) is still counted as requested by the
// Engine, and the server fails it at its next start.
//
// Each command runs in a thread of its own as `/bin/sh -c COMMAND` through
// the server's Env (env.h; the real one: RunProgram of
// src/base/subprocess.h, in a new session whose process group a timeout
// kills), with the server's environment plus the names above, stdin
// /dev/null, stdout and stderr captured (the last kOutputTailLines lines are
// kept for the message).
//
// Thread-safety: Plan on the engine thread only; Committed, Stop and the
// accessors from any thread. The callbacks run on the command's thread;
// they must not call back into the provider.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <functional>
#include <list>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "src/base/subprocess.h"
#include "src/base/time.h"
#include "src/engine/event.h"
#include "src/engine/scaling.h"
#include "src/engine/state.h"
#include "src/server/env.h"
#include "src/server/server_config.h"

namespace gpupool {

// Runs `/bin/sh -c command` through `env` with `vars` added to the
// server's environment, waiting at most `timeout` (the real Env: SIGTERM to
// its process group, SIGKILL a second later). Blocks the calling thread.
CommandOutcome RunCommand(Env& env, const std::string& command, const Env::Vars& vars, Duration timeout);

class CommandNodeProvider {
 public:
  struct Created {
    PoolId pool = 0;
    std::string name, rack;
  };
  struct Failed {
    PoolId pool = 0;
    std::string node;    // the name it would have had
    std::string reason;  // "create-node.sh exited 3: ..."
  };
  using CreatedFn = std::function<void(const Created&)>;
  using FailedFn = std::function<void(const Failed&)>;

  // `scaling` gives each scaled pool's node template (by pool name); `env`
  // runs the commands and outlives the provider.
  CommandNodeProvider(Env& env, CommandProviderSettings settings, std::vector<PoolScalingConfig> scaling,
                      CreatedFn on_created, FailedFn on_failed);
  ~CommandNodeProvider();  // Stop()
  CommandNodeProvider(const CommandNodeProvider&) = delete;
  CommandNodeProvider& operator=(const CommandNodeProvider&) = delete;

  // Engine thread: `e` was just applied to `state`. Plans the commands for
  // ScaleOutRequested and NodeRemoved (other events are ignored); they run
  // once Committed(seq) reaches e.seq.
  void Plan(const Event& e, const EngineState& state);
  // Every event up to `seq` is durable: starts the commands planned for them.
  void Committed(int64_t seq);
  // Drops what events after `seq` planned: they were never committed (the
  // disk refused them) and the engine went back to the journal's state.
  // The engine thread, like Plan.
  void Abandon(int64_t seq);
  // Starts nothing more (planned commands are dropped: their requests stay
  // counted by the Engine and fail at the next start); waits for the
  // running ones, each killed at its own timeout. Idempotent.
  void Stop();

  // Commands running or planned (tests, logs).
  int64_t busy() const;

 private:
  struct Action {
    int64_t seq = 0;
    bool create = true;
    PoolId pool = 0;
    std::string pool_name, node, rack;
    std::vector<std::pair<std::string, std::string>> env;
  };
  struct Worker {
    std::thread thread;
    bool done = false;
  };

  void Launch(Action a);  // mu_ held
  void RunAction(const Action& a, Worker* self);

  // Set at construction, then read-only.
  Env& env_;
  const CommandProviderSettings settings_;
  const std::vector<PoolScalingConfig> scaling_;
  const CreatedFn on_created_;
  const FailedFn on_failed_;

  std::map<std::string, int64_t> next_serial_;  // by name prefix; engine thread only

  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::vector<Action> planned_;  // in seq order; GUARDED_BY(mu_)
  // A worker's thread and `done` flag: GUARDED_BY(mu_) (the thread object
  // is joined by Launch or Stop once `done`, or once taken out of the list).
  std::list<Worker> workers_;
  int64_t running_ = 0;    // GUARDED_BY(mu_)
  bool stopping_ = false;  // GUARDED_BY(mu_)
};

}  // namespace gpupool
