// The handlers' threads: a fixed pool with bounded queues, so that the
// event threads (src/http/server.h) never run a handler that may block.
//
// Lanes: `reserved` of the `threads` serve only Lane::kReserved tasks (API
// tasks run on at most threads - reserved at once), so that a flood of API
// requests cannot delay heartbeats; agent tasks may use every thread. Each
// lane's queue holds at most `queue_length` tasks: Submit refuses beyond it
// (the caller sheds the request with 503 and Retry-After).
//
// Continuations (Continue) finish work already admitted, such as answering
// a request whose command has become durable: they are never refused, run
// before new tasks, and their number is bounded by the requests in flight
// (which the connection limits bound).
//
// Threads: Submit, Continue and the counters from any thread; Stop from one
// thread, once, not from a task. After Stop, Submit refuses and Continue
// drops its task (what it would answer was answered by the server's stop).
#pragma once

#include <condition_variable>
#include <cstddef>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

#include "src/http/router.h"

namespace gpupool::http {

struct WorkerOptions {
  int threads = 16;         // 1..1024
  int reserved = 4;         // 0..threads-1: threads only agent tasks may use
  size_t queue_length = 1024;  // per lane, 1..2^20
};

class WorkerPool {
 public:
  using Task = std::function<void()>;
  explicit WorkerPool(const WorkerOptions& options);  // GP_CHECKs the ranges; starts the threads
  ~WorkerPool();  // Stop
  WorkerPool(const WorkerPool&) = delete;
  WorkerPool& operator=(const WorkerPool&) = delete;

  // False when the lane's queue is full or the pool stopped; the task is not run.
  bool Submit(Lane lane, Task task);
  void Continue(Task task);
  // Drops queued tasks (unrun), waits for running ones, joins the threads.
  void Stop();

  size_t queued(Lane lane) const;
  int busy() const;

 private:
  void Run();
  // The next task this thread may take, with lock held; false when none.
  bool Take(Task* task, bool* api);

  const WorkerOptions options_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Task> continuations_;  // guarded by mu_
  std::deque<Task> agent_;          // guarded by mu_
  std::deque<Task> api_;            // guarded by mu_
  int busy_ = 0;                    // guarded by mu_
  int busy_api_ = 0;                // guarded by mu_
  bool stopping_ = false;           // guarded by mu_
  std::vector<std::thread> threads_;
};

}  // namespace gpupool::http
