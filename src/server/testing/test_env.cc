#include "src/server/testing/test_env.h"

#include <signal.h>

#include <thread>

#include "src/base/check.h"

namespace gpupool {

// A journal handle: the data directory's MemoryJournal as long as no crash
// happened since it was opened; faults are decided by the Env.
class TestEnv::Handle final : public Journal {
 public:
  Handle(TestEnv& env, std::shared_ptr<MemoryJournal> store)
      : env_(env), store_(std::move(store)), generation_(env.generation()) {}

  Status Commit(const JournalBatch& batch) override {
    GP_TRY(Alive());
    if (batch.empty()) return {};
    if (env_.disk_full()) return ResourceExhausted("disk full: journal: injected (no space left on device)");
    const std::optional<Fault> fault = env_.CountCommit();
    if (!fault) return store_->Commit(batch);
    switch (*fault) {
      case Fault::kFailCommit:
        return IoError("journal: injected failure of this commit");
      case Fault::kCrashBeforeCommit:
        env_.Crash();
        return IoError("journal: the server crashed before this commit was synced");
      case Fault::kCrashDuringCommit:
        if (env_.DrawKeep()) (void)store_->Commit(batch);
        env_.Crash();
        return IoError("journal: the server crashed while this commit was synced");
      case Fault::kCrashAfterCommit: {
        const Status ok = store_->Commit(batch);
        env_.Crash();
        return ok;
      }
    }
    return IoError("journal: unknown fault");
  }
  Result<int64_t> LastSeq() override {
    GP_TRY(Alive());
    return store_->LastSeq();
  }
  Result<std::optional<SnapshotRecord>> LatestSnapshot(const std::string& kind) override {
    GP_TRY(Alive());
    return store_->LatestSnapshot(kind);
  }
  Status ReadEvents(int64_t after_seq, int64_t limit, const std::function<bool(const JournalEvent&)>& each) override {
    GP_TRY(Alive());
    return store_->ReadEvents(after_seq, limit, each);
  }
  Result<std::vector<TokenRecord>> Tokens() override {
    GP_TRY(Alive());
    return store_->Tokens();
  }
  Result<std::optional<std::string>> Meta(const std::string& key) override {
    GP_TRY(Alive());
    return store_->Meta(key);
  }

 private:
  Status Alive() const {
    if (env_.generation() != generation_) return IoError("journal: opened by a server that has crashed since");
    return {};
  }

  TestEnv& env_;
  const std::shared_ptr<MemoryJournal> store_;
  const uint64_t generation_;
};

TestEnv::TestEnv(Options options)
    : start_(options.start), now_ms_(ToMillis(options.start)), rng_(options.seed) {}

std::string TestEnv::ProgramCall::Var(const std::string& name) const {
  for (const auto& [k, v] : vars) {
    if (k == name) return v;
  }
  return "";
}

// --- the stepped clock ---------------------------------------------------------------

Instant TestEnv::Now() { return InstantFromMillis(now_ms_.load()); }

Env::SteadyTime TestEnv::SteadyNow() {
  return SteadyTime(std::chrono::duration_cast<SteadyTime::duration>(Now() - start_));
}

void TestEnv::WaitUntil(std::condition_variable& cv, std::unique_lock<std::mutex>& lock, Instant deadline,
                        const std::function<bool()>& ready) {
  while (!ready() && Now() < deadline) cv.wait_for(lock, std::chrono::milliseconds(1));
}

void TestEnv::Advance(Duration d) {
  GP_CHECK(d >= Duration::zero()) << "the clock does not go back";
  {
    std::lock_guard lock(mu_);
    now_ms_ += ToMillis(d);
  }
  cv_.notify_all();
}

// --- journals ------------------------------------------------------------------------

Result<std::unique_ptr<Journal>> TestEnv::OpenJournal(const std::string& dir) {
  GP_TRY(CreateDirectories(dir));  // as the SQLite journal creates it
  std::lock_guard lock(mu_);
  std::shared_ptr<MemoryJournal>& store = journals_[dir];
  if (!store) store = std::make_shared<MemoryJournal>();
  return std::unique_ptr<Journal>(new Handle(*this, store));
}

void TestEnv::ArmCommitFault(int64_t n, Fault fault) {
  GP_CHECK(n >= 1) << "the first commit from now is 1, got " << n;
  std::lock_guard lock(mu_);
  fault_at_ = commits_ + n;
  fault_ = fault;
}

void TestEnv::DisarmCommitFault() {
  std::lock_guard lock(mu_);
  fault_at_ = 0;
}

bool TestEnv::fault_armed() const {
  std::lock_guard lock(mu_);
  return fault_at_ > 0;
}

int64_t TestEnv::commits() const {
  std::lock_guard lock(mu_);
  return commits_;
}

int64_t TestEnv::fired(Fault fault) const {
  std::lock_guard lock(mu_);
  auto it = fired_.find(fault);
  return it == fired_.end() ? 0 : it->second;
}

std::optional<TestEnv::Fault> TestEnv::CountCommit() {
  std::lock_guard lock(mu_);
  if (++commits_ != fault_at_) return std::nullopt;
  fault_at_ = 0;
  ++fired_[fault_];
  return fault_;
}

bool TestEnv::DrawKeep() {
  std::lock_guard lock(mu_);
  return rng_.Below(2) == 1;
}

// --- crashes -------------------------------------------------------------------------

// Counted once the hook has run: whoever sees the count change sees the
// crashed core killed (a harness that destroys a core it thinks crashed
// must not find it still running and waiting to commit).
void TestEnv::Crash() {
  std::function<void()> hook;
  {
    std::lock_guard lock(mu_);
    ++generation_;  // the handles opened before are dead from now
    hook = crash_hook_;
  }
  if (hook) hook();
  {
    std::lock_guard lock(mu_);
    ++crashes_;
  }
  cv_.notify_all();  // programs in Hang end
}

void TestEnv::set_crash_hook(std::function<void()> hook) {
  std::lock_guard lock(mu_);
  crash_hook_ = std::move(hook);
}

void TestEnv::Halt(int exit_code) {
  {
    std::lock_guard lock(mu_);
    halts_.push_back(exit_code);
  }
  Crash();
}

std::vector<int> TestEnv::halts() const {
  std::lock_guard lock(mu_);
  return halts_;
}

// --- programs ------------------------------------------------------------------------

void TestEnv::set_program(Program program) {
  std::lock_guard lock(mu_);
  program_ = std::move(program);
}

CommandOutcome TestEnv::RunProgram(const std::vector<std::string>& argv, const Vars& vars, Duration timeout) {
  ProgramCall call{argv, vars, timeout, Now()};
  Program program;
  {
    std::lock_guard lock(mu_);
    call.crashes_before = crashes_;
    calls_.push_back(call);
    program = program_;
  }
  if (!program) {
    CommandOutcome o;
    o.timeout = timeout;
    o.start_error = (argv.empty() ? std::string("(none)") : argv[0]) + ": no program in the test Env";
    return o;
  }
  CommandOutcome o = program(call);
  o.timeout = timeout;
  o.ok = o.start_error.empty() && !o.timed_out && o.signal == 0 && o.exit_code == 0;
  return o;
}

std::vector<TestEnv::ProgramCall> TestEnv::program_calls() const {
  std::lock_guard lock(mu_);
  return calls_;
}

CommandOutcome TestEnv::Hang(const ProgramCall& call) {
  CommandOutcome o;
  std::unique_lock lock(mu_);
  cv_.wait(lock, [&] { return crashes_ != call.crashes_before || Now() >= call.started + call.timeout; });
  if (crashes_ != call.crashes_before) {
    o.signal = SIGKILL;
  } else {
    o.timed_out = true;
  }
  return o;
}

CommandOutcome TestEnv::Exited(int code, std::string output_tail) {
  CommandOutcome o;
  o.exit_code = code;
  o.output_tail = std::move(output_tail);
  o.ok = code == 0;
  return o;
}

// --- files ---------------------------------------------------------------------------

void TestEnv::FailWritesUnder(std::string prefix) {
  std::lock_guard lock(mu_);
  failing_prefix_ = std::move(prefix);
}

Status TestEnv::Refused(const std::string& path) {
  std::lock_guard lock(mu_);
  if (!failing_prefix_.empty() && path.starts_with(failing_prefix_)) {
    return ResourceExhausted("disk full: " + path + ": injected (no space left on device)");
  }
  return {};
}

namespace {
class NoLock final : public Env::DirectoryLock {};
}  // namespace

Result<std::unique_ptr<Env::DirectoryLock>> TestEnv::LockDataDirectory(const std::string&) {
  return std::unique_ptr<DirectoryLock>(new NoLock());
}

Status TestEnv::CreateDirectories(const std::string& dir) {
  GP_TRY(Refused(dir));
  return Env::Default()->CreateDirectories(dir);
}

Status TestEnv::WriteFileAtomic(const std::string& path, std::string_view contents, mode_t mode) {
  GP_TRY(Refused(path));
  return Env::Default()->WriteFileAtomic(path, contents, mode);
}

Status TestEnv::AppendFile(const std::string& path, std::string_view data) {
  GP_TRY(Refused(path));
  return Env::Default()->AppendFile(path, data);
}

}  // namespace gpupool
