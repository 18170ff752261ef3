#include "src/http/worker_pool.h"

#include "src/base/check.h"

namespace gpupool::http {

WorkerPool::WorkerPool(const WorkerOptions& options) : options_(options) {
  GP_CHECK(options.threads >= 1 && options.threads <= 1024) << options.threads;
  GP_CHECK(options.reserved >= 0 && options.reserved < options.threads) << options.reserved;
  GP_CHECK(options.queue_length >= 1 && options.queue_length <= (size_t{1} << 20)) << options.queue_length;
  threads_.reserve(static_cast<size_t>(options.threads));
  for (int i = 0; i < options.threads; ++i) threads_.emplace_back([this] { Run(); });
}

WorkerPool::~WorkerPool() { Stop(); }

bool WorkerPool::Submit(Lane lane, Task task) {
  {
    std::lock_guard lock(mu_);
    std::deque<Task>& q = lane == Lane::kReserved ? agent_ : api_;
    if (stopping_ || q.size() >= options_.queue_length) return false;
    q.push_back(std::move(task));
  }
  // One waiter suffices: any idle thread may take an agent task, and an API
  // task that none may take yet (the lane is at its share) is taken by the
  // thread that frees an API slot (Run).
  cv_.notify_one();
  return true;
}

void WorkerPool::Continue(Task task) {
  {
    std::lock_guard lock(mu_);
    if (stopping_) return;
    continuations_.push_back(std::move(task));
  }
  cv_.notify_one();
}

bool WorkerPool::Take(Task* task, bool* api) {
  *api = false;
  if (!continuations_.empty()) {
    *task = std::move(continuations_.front());
    continuations_.pop_front();
    return true;
  }
  if (!agent_.empty()) {
    *task = std::move(agent_.front());
    agent_.pop_front();
    return true;
  }
  if (!api_.empty() && busy_api_ < options_.threads - options_.reserved) {
    *task = std::move(api_.front());
    api_.pop_front();
    *api = true;
    return true;
  }
  return false;
}

void WorkerPool::Run() {
  std::unique_lock lock(mu_);
  for (;;) {
    Task task;
    bool api = false;
    cv_.wait(lock, [&] { return stopping_ || Take(&task, &api); });
    if (!task) return;  // stopping and nothing taken
    ++busy_;
    if (api) ++busy_api_;
    lock.unlock();
    task();
    task = nullptr;  // captured state is released outside the lock
    lock.lock();
    --busy_;
    if (api) {
      --busy_api_;
      // An API slot freed: a waiting API task may now run.
      if (!api_.empty()) cv_.notify_one();
    }
  }
}

void WorkerPool::Stop() {
  std::deque<Task> dropped;
  {
    std::lock_guard lock(mu_);
    if (stopping_ && threads_.empty()) return;
    stopping_ = true;
    dropped.swap(api_);
    for (Task& t : agent_) dropped.push_back(std::move(t));
    for (Task& t : continuations_) dropped.push_back(std::move(t));
    agent_.clear();
    continuations_.clear();
  }
  cv_.notify_all();
  for (std::thread& t : threads_) t.join();
  threads_.clear();
}

size_t WorkerPool::queued(Lane lane) const {
  std::lock_guard lock(mu_);
  return lane == Lane::kReserved ? agent_.size() : api_.size();
}

int WorkerPool::busy() const {
  std::lock_guard lock(mu_);
  return busy_;
}

}  // namespace gpupool::http
