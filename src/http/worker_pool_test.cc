#include "src/http/worker_pool.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <future>
#include <latch>

namespace gpupool::http {
namespace {

using namespace std::chrono_literals;

TEST(WorkerPoolTest, ApiTasksNeverTakeTheReservedThreads) {
  WorkerPool pool(WorkerOptions{.threads = 3, .reserved = 1, .queue_length = 8});
  std::promise<void> release;
  std::shared_future<void> gate = release.get_future().share();
  std::atomic<int> api_running{0};
  for (int i = 0; i < 4; ++i) {
    ASSERT_TRUE(pool.Submit(Lane::kApi, [&, gate] {
      ++api_running;
      gate.wait();
    }));
  }
  // Two API tasks run (3 threads - 1 reserved), two wait; an agent task still runs at once.
  std::promise<void> agent_ran;
  ASSERT_TRUE(pool.Submit(Lane::kReserved, [&] { agent_ran.set_value(); }));
  EXPECT_EQ(agent_ran.get_future().wait_for(2s), std::future_status::ready);
  std::this_thread::sleep_for(50ms);
  EXPECT_EQ(api_running.load(), 2);
  EXPECT_EQ(pool.queued(Lane::kApi), 2u);
  release.set_value();
  for (int i = 0; i < 200 && api_running.load() < 4; ++i) std::this_thread::sleep_for(10ms);
  EXPECT_EQ(api_running.load(), 4);
}

TEST(WorkerPoolTest, FullLaneRefusesAndContinuationsAreNeverRefused) {
  WorkerPool pool(WorkerOptions{.threads = 1, .reserved = 0, .queue_length = 2});
  std::latch started(1);
  std::promise<void> release;
  std::shared_future<void> gate = release.get_future().share();
  ASSERT_TRUE(pool.Submit(Lane::kApi, [&, gate] {
    started.count_down();
    gate.wait();
  }));
  started.wait();
  std::atomic<int> ran{0};
  std::vector<int> order;
  std::mutex mu;
  auto note = [&](int id) {
    std::lock_guard lock(mu);
    order.push_back(id);
    ++ran;
  };
  EXPECT_TRUE(pool.Submit(Lane::kApi, [&] { note(1); }));
  EXPECT_TRUE(pool.Submit(Lane::kApi, [&] { note(2); }));
  EXPECT_FALSE(pool.Submit(Lane::kApi, [&] { note(99); }));  // the lane's queue is full
  for (int i = 0; i < 5; ++i) pool.Continue([&] { note(10); });  // beyond queue_length: still taken
  release.set_value();
  for (int i = 0; i < 200 && ran.load() < 7; ++i) std::this_thread::sleep_for(10ms);
  ASSERT_EQ(ran.load(), 7);
  // Continuations finish admitted work first.
  EXPECT_EQ(order, (std::vector<int>{10, 10, 10, 10, 10, 1, 2}));
}

TEST(WorkerPoolTest, StopDropsQueuedTasksAndRefusesNewOnes) {
  WorkerPool pool(WorkerOptions{.threads = 1, .reserved = 0, .queue_length = 4});
  std::latch started(1);
  std::promise<void> release;
  std::shared_future<void> gate = release.get_future().share();
  std::atomic<int> ran{0};
  ASSERT_TRUE(pool.Submit(Lane::kApi, [&, gate] {
    started.count_down();
    gate.wait();
    ++ran;
  }));
  started.wait();
  ASSERT_TRUE(pool.Submit(Lane::kApi, [&] { ++ran; }));
  std::thread stopper([&] { pool.Stop(); });
  std::this_thread::sleep_for(20ms);
  release.set_value();
  stopper.join();
  EXPECT_EQ(ran.load(), 1);  // the running task finished; the queued one was dropped
  EXPECT_FALSE(pool.Submit(Lane::kReserved, [&] { ++ran; }));
  pool.Continue([&] { ++ran; });
  EXPECT_EQ(ran.load(), 1);
}

}  // namespace
}  // namespace gpupool::http
