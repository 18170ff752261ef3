#include "src/server/testing/test_server.h"

#include <future>
#include <thread>

#include "src/base/check.h"

namespace gpupool {

TestServer::TestServer(TestEnv& env, ServerOptions options) : env_(env), options_(std::move(options)) {
  options_.env = &env_;
  env_.set_crash_hook([this] {
    std::lock_guard lock(mu_);
    if (core_) core_->Kill();
  });
}

TestServer::~TestServer() {
  Stop();
  env_.set_crash_hook(nullptr);
}

Status TestServer::Start(bool start) {
  crashes_at_open_ = env_.crashes();
  GP_ASSIGN_OR_RETURN(auto core, ServerCore::Open(options_));
  ServerCore* started = core.get();
  {
    std::lock_guard lock(mu_);
    core_ = std::move(core);
  }
  if (on_open_) on_open_(*started);
  if (!start) return {};
  started->Start();
  // The engine thread has taken its first time reading (its first tick is
  // one tick from now) and the start-up commands are applied, before the
  // test can move the clock: the same ticks every run.
  if (!Sync()) return FailedPrecondition("the server died as it started");
  return {};
}

Status TestServer::Restart(bool start) {
  std::unique_ptr<ServerCore> old;
  {
    std::lock_guard lock(mu_);
    old.swap(core_);
  }
  old.reset();  // joins its threads (a killed core's end at once)
  return Start(start);
}

void TestServer::Stop() {
  std::unique_ptr<ServerCore> old;
  {
    std::lock_guard lock(mu_);
    old.swap(core_);
  }
}

ServerCore& TestServer::core() {
  std::lock_guard lock(mu_);
  GP_CHECK(core_ != nullptr) << "no core runs: Start first";
  return *core_;
}

std::optional<Reply> TestServer::TryCall(Command c) {
  std::future<Reply> f = core().Execute(std::move(c));
  try {
    return f.get();
  } catch (const std::future_error&) {  // broken promise: the core was killed first
    return std::nullopt;
  }
}

Reply TestServer::Call(Command c) {
  std::optional<Reply> r = TryCall(std::move(c));
  GP_CHECK(r.has_value()) << "the core died before answering";
  return *r;
}

bool TestServer::Sync() {
  const std::optional<Reply> r = TryCall(SyncCmd{});
  return r && !r->error;  // a 503: the journal failed and the core halts
}

bool TestServer::Advance(Duration d, Duration step) {
  GP_CHECK(step > Duration::zero()) << "a step of " << ToMillis(step) << " ms";
  while (d > Duration::zero()) {
    const Duration now = std::min(d, step);
    env_.Advance(now);
    if (!Sync()) return false;
    d -= now;
  }
  return true;
}

bool TestServer::Settle(int max_rounds) {
  for (int i = 0; i < max_rounds; ++i) {
    if (!Sync()) return false;
    // Busy until a command's answer is queued (its callback returns first),
    // so the Sync after idle comes after that answer; which may plan more.
    if (core().provider_busy() == 0) {
      if (!Sync()) return false;
      if (core().provider_busy() == 0) return true;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  return false;
}

}  // namespace gpupool
