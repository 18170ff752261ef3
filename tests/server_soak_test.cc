// The fault-injection soak of the whole server (issue 22).
//
// In process (ServerSoakTest): per seed, a whole ServerCore on the test Env
// (src/server/testing/) with three simulated agents (sim_agent.h) runs a
// schedule drawn from the seed: tenants submit whole-GPU, gang and shared
// (MPS, time-sliced) jobs, bursts of up to three in one batch, and cancel
// them, agents
// register, heartbeat, report tasks that exit, are killed (with or without
// their tasks) and come back or go silent past the heartbeat timeout, the
// clock steps, snapshots are taken, the disk fills for a moment, faults are
// armed on the next commits (fail the commit, lose the unsynced batch, cut
// power while it is synced, crash between commit and publish) and the
// process dies at random moments. After every crash the new core is
// checked before it starts, and at the end the stopped one
// (invariants.h: nothing acknowledged lost, changed or duplicated, no
// acknowledged task exit undone, the state equals a replay of the journal,
// no GPU held twice in the Engine's state; unscrubbed hand-overs stop the
// replay); after every step the agents' own checks (no task started on
// another tenant's unscrubbed GPU, no GPU given to more than it holds).
//   GPUPOOL_SOAK_SEEDS       seeds to run (default 200; `make soak` 10,000)
//   GPUPOOL_SOAK_FIRST_SEED  the first (default 1)
//   GPUPOOL_SOAK_STEPS       steps per seed (default 60)
//   GPUPOOL_SOAK_VERBOSE     1: print every step
// A violation names its seed and step, with the command that replays it and
// the steps before it. The schedule is the seed's; how the core's threads
// group commits is not, so a replay usually, not always, meets the same
// fault at the same commit.
//
// As processes (ServerSoakProcessTest): the real server binary, killed with
// SIGKILL GPUPOOL_SOAK_KILLS times (default 5; `make soak` 100) while 16
// clients of four tenants submit and cancel jobs and a real agent with
// fake GPUs runs them; after each restart every acknowledged job is there
// once under its id, every acknowledged cancellation holds, and no GPU is
// given beyond itself.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <deque>
#include <filesystem>
#include <future>
#include <mutex>
#include <thread>

#include "src/base/rng.h"
#include "src/server/testing/invariants.h"
#include "src/server/testing/sim_agent.h"
#include "src/server/testing/test_server.h"
#include "tests/agent_e2e_fixture.h"
#include "tests/run_binary.h"
#include "tests/server_checks.h"

namespace gpupool {
namespace {

using namespace std::chrono_literals;
using Fault = TestEnv::Fault;

// An environment variable as an integer in [lo, hi], or `fallback`.
int64_t EnvInt(const char* name, int64_t fallback, int64_t lo, int64_t hi) {
  const char* v = std::getenv(name);
  if (v == nullptr || *v == '\0') return fallback;
  char* end = nullptr;
  const long long n = std::strtoll(v, &end, 10);
  if (*end != '\0' || n < lo || n > hi) {
    ADD_FAILURE() << name << "=" << v << ": not an integer in [" << lo << ", " << hi << "]";
    return fallback;
  }
  return n;
}

// Nodes register through their agents (three of four H100s); a node
// without a heartbeat for 3 s is down; snapshots every 25 events, so that
// crashes fall between snapshots and their read-model twins.
constexpr const char* kSoakConfig = R"(name: soak
engine: {heartbeat_timeout: 3s}
pools:
  - name: gpu
server:
  tick: 100ms
  snapshot_every_events: 25
)";
constexpr int kAgents = 3;
constexpr Duration kHalfSecond = 500ms;
constexpr const char* kTenants[] = {"a", "b", "c"};
constexpr Fault kFaults[] = {Fault::kFailCommit, Fault::kCrashBeforeCommit, Fault::kCrashDuringCommit,
                             Fault::kCrashAfterCommit};
constexpr const char* kFaultNames[] = {"fail-commit", "crash-before-commit", "crash-during-commit",
                                       "crash-after-commit"};

enum class Action : uint8_t {
  kSubmit, kCancel, kBeat, kEndTask, kTick, kSilence, kKillAgent, kReviveAgent, kArmFault, kCrash, kSnapshot,
  kDiskFull,
};
struct Weighted {
  Action action;
  uint64_t weight;
};
constexpr Weighted kSchedule[] = {
    {Action::kSubmit, 26},    {Action::kCancel, 8},   {Action::kBeat, 12},    {Action::kEndTask, 12},
    {Action::kTick, 14},      {Action::kSilence, 2},  {Action::kKillAgent, 3}, {Action::kReviveAgent, 5},
    {Action::kArmFault, 10},  {Action::kCrash, 3},    {Action::kSnapshot, 2}, {Action::kDiskFull, 2},
};

// What all seeds did, for the report.
struct SoakCounts {
  int64_t seeds = 0, steps = 0, acknowledged_jobs = 0, acknowledged_cancels = 0, acknowledged_exits = 0;
  int64_t agent_kills = 0, silences = 0, random_crashes = 0, crashes = 0, restarts = 0, disk_full = 0;
  int64_t fired[4] = {0, 0, 0, 0};
  int64_t violations = 0;
};

// What both views of a node's desired state carry (the protocol-1 reply
// leaves out fields its agent does not know), as text.
std::string DesiredText(const std::vector<TaskOrder>& tasks, const std::vector<ScrubOrder>& scrubs) {
  std::string t = "tasks:";
  for (const TaskOrder& o : tasks) {
    t += " " + std::to_string(o.job) + "." + std::to_string(o.replica) + "." + std::to_string(o.attempt) +
         (o.action == TaskAction::kCheckpoint ? " checkpoint" : " run") + " " + o.gpu_mode + " " +
         std::to_string(o.gpu_milli) + " on";
    for (int g : o.gpus) t += " " + std::to_string(g);
    t += ";";
  }
  t += " scrubs:";
  for (const ScrubOrder& s : scrubs) {
    t += " " + std::to_string(s.id) + " of";
    for (int g : s.gpus) t += " " + std::to_string(g);
    t += ";";
  }
  return t;
}

std::string DesiredText(const NodeDesired& d) {
  std::vector<TaskOrder> tasks;
  for (const DesiredTask& t : d.tasks) tasks.push_back(t.order);
  return DesiredText(tasks, d.scrubs);
}

// One seed's schedule against one server and its agents.
class SoakRun {
 public:
  SoakRun(uint64_t seed, const std::string& dir, int steps, bool verbose, SoakCounts& counts)
      : seed_(seed), steps_(steps), verbose_(verbose), counts_(counts), rng_(seed), env_(TestEnv::Options{.seed = seed}) {
    server_ = std::make_unique<TestServer>(env_, ServerOptions{.data_dir = dir, .config_text = kSoakConfig});
    server_->set_on_open([this](ServerCore& core) { Listen(core); });
    for (int i = 0; i < kAgents; ++i) agents_.emplace_back(SimAgent::Options{.node = "node-" + std::to_string(i), .trace = verbose});
    partitioned_.assign(kAgents, false);
  }
  ~SoakRun() {
    server_.reset();
    counts_.crashes += env_.crashes();
    for (int k = 0; k < 4; ++k) counts_.fired[k] += env_.fired(kFaults[k]);
  }

  // The first violation ("seed S, step N: ..."), or "".
  std::string Run() {
    if (std::string v = SetUp(); !v.empty()) return Report(-1, v);
    for (int step = 0; step < steps_; ++step) {
      const Action a = Draw();
      Note(step, a);
      Do(a);
      ++counts_.steps;
      if (std::string v = AfterStep(); !v.empty()) return Report(step, v);
    }
    if (std::string v = Finish(); !v.empty()) return Report(steps_, v);
    return "";
  }

 private:
  std::optional<Reply> Call(Command c) { return server_->TryCall(std::move(c)); }

  // The revisions each new core publishes for agents' watches (protocol 2).
  void Listen(ServerCore& core) {
    {
      std::lock_guard lock(published_mu_);
      published_.clear();  // a new incarnation: revisions start again
    }
    core.set_desired_listener([this](const std::vector<NodeDesiredPtr>& changes) {
      std::lock_guard lock(published_mu_);
      for (const NodeDesiredPtr& d : changes) published_[d->node] = d;
    });
  }
  void Beat(int i) { agents_[i].Beat(Caller(), Now()); }
  // Each live agent's node, probed by a heartbeat of its session that
  // reports nothing (it changes nothing; no clock moved, so nothing runs
  // after it in its pass): the latest revision published for the node's
  // watch (protocol 2) must say what the answer says. "" or the violation.
  std::string CheckPublished() {
    for (int i = 0; i < kAgents; ++i) {
      const SimAgent& a = agents_[i];
      if (!a.alive() || partitioned_[i] || a.session().empty()) continue;
      HeartbeatRequest probe;
      probe.node = a.node();
      probe.session = a.session();
      const std::optional<Reply> r = Call(AgentHeartbeatCmd{probe});
      if (!r || r->error) continue;
      const ApiResult<AgentReply> reply = ParseAgentReply(r->detail);
      if (!reply.ok()) return "the probe's reply does not parse: " + reply.error.message;
      const std::string answered = DesiredText(reply.value->tasks, reply.value->scrubs);
      std::lock_guard lock(published_mu_);
      const auto it = published_.find(a.node());
      const std::string published = it == published_.end() ? "(none)" : DesiredText(*it->second);
      if (published == answered) continue;
      return "the desired state published for " + a.node() + " (revision " +
             (it == published_.end() ? std::string("none") : std::to_string(it->second->revision)) +
             ") is not what a heartbeat is answered: published " + published + "; answered " + answered;
    }
    return "";
  }
  SimAgent::Call Caller() {
    return [this](Command c) { return Call(std::move(c)); };
  }
  Instant Now() { return env_.Now(); }
  uint64_t Below(uint64_t n) { return rng_.Below(n); }

  std::string SetUp() {
    if (auto ok = server_->Start(); !ok) return "the server does not start: " + ok.error().message;
    for (int i = 0; i < kAgents; ++i) {  // first: guarantees need the capacity
      Beat(i);
      if (agents_[i].last_reply().session.empty()) return "agent " + agents_[i].node() + " does not register";
    }
    const Quota quotas[] = {Quota{4000, 12000}, Quota{4000, 8000}, Quota{0, 12000}};
    for (int t = 0; t < 3; ++t) {
      const Reply r = server_->Call(CreateTenantCmd{kTenants[t], MintToken(kTenants[t], "initial", kRoleTenant).record, {{"gpu", quotas[t]}}});
      if (r.error) return "tenant " + std::string(kTenants[t]) + ": " + r.error->message;
    }
    return "";
  }

  Action Draw() {
    uint64_t total = 0;
    for (const Weighted& w : kSchedule) total += w.weight;
    uint64_t pick = Below(total);
    for (const Weighted& w : kSchedule) {
      if (pick < w.weight) return w.action;
      pick -= w.weight;
    }
    return Action::kBeat;
  }

  void Do(Action a) {
    switch (a) {
      case Action::kSubmit: return Submit(1 + static_cast<int>(Below(3)));
      case Action::kCancel: return Cancel();
      case Action::kBeat: return BeatAll();
      case Action::kEndTask: return EndTask();
      case Action::kTick: return Advance(2);
      case Action::kSilence: return Silence();
      case Action::kKillAgent: return KillAgent();
      case Action::kReviveAgent: return ReviveAgent();
      case Action::kArmFault: return ArmFault();
      case Action::kCrash: return CrashAnyMoment();
      case Action::kSnapshot: return (void)Call(SnapshotCmd{});
      case Action::kDiskFull: return DiskFull();
    }
  }

  // A job of `tenant`: one or two whole GPUs, a gang of two, a quarter or
  // half share; with a command (a task the agents run) or not. Tenants
  // never share a GPU at once (the simulated agents' hand-over check holds
  // only then: sim_agent.h): c's shares are time-sliced, a's and b's MPS
  // (one tenant per GPU).
  JobSpec NextJob(const std::string& tenant) {
    JobSpec s;
    s.name = "s" + std::to_string(seed_) + "-j" + std::to_string(next_job_++);
    s.priority = static_cast<int32_t>(Below(3));
    const uint64_t kind = Below(6);
    s.demand = Demand{2000, 4096, 1, kMilliPerGpu};
    if (kind == 1) s.demand.gpu_count = 2;
    if (kind == 2) s.replicas = 2;
    if (kind == 3 || kind == 4) {
      s.demand.gpu_milli = kind == 3 ? 250 : 500;
      s.demand.mode = tenant == "c" ? ShareMode::kTimeSlice : ShareMode::kMps;
      s.demand.gpu_memory_mib = 8192;
    }
    s.checkpointable = kind == 5;
    if (kind != 2 && Below(4) != 0) s.task.command = {"train"};
    return s;
  }

  // `n` submissions at once: they may share an engine pass and a commit.
  void Submit(int n) {
    std::vector<std::tuple<std::string, int32_t, std::future<Reply>>> replies;
    for (int i = 0; i < n; ++i) {
      const char* tenant = kTenants[Below(3)];
      JobSpec s = NextJob(tenant);
      std::string name = s.name;
      const int32_t replicas = s.replicas;
      if (verbose_) std::printf("    submit %s/%s\n", tenant, name.c_str());
      replies.emplace_back(std::move(name), replicas, server_->core().Execute(SubmitJobCmd{tenant, std::move(s)}));
    }
    Collect(replies);
  }
  void Collect(std::vector<std::tuple<std::string, int32_t, std::future<Reply>>>& replies) {
    for (auto& [name, replicas, f] : replies) {
      try {
        if (Reply r = f.get(); !r.error) {
          acknowledged_.jobs[r.id] = name;
          replicas_[r.id] = replicas;
          ++counts_.acknowledged_jobs;
        }
      } catch (const std::future_error&) {  // the core died before answering
      }
    }
  }

  void Cancel() {
    if (acknowledged_.jobs.empty()) return;
    auto it = acknowledged_.jobs.begin();
    std::advance(it, static_cast<std::ptrdiff_t>(Below(acknowledged_.jobs.size())));
    const std::optional<Reply> r = Call(CancelJobCmd{it->first, ""});
    if (r && !r->error) {
      acknowledged_.cancelled.insert(it->first);
      ++counts_.acknowledged_cancels;
    }
  }

  void BeatAll() {
    for (int i = 0; i < kAgents; ++i) {
      if (!partitioned_[i]) Beat(i);
    }
  }

  void EndTask() {
    SimAgent& a = agents_[Below(kAgents)];
    a.EndTask(rng_.Next(), Below(4) == 0 ? 1 : 0);
  }

  // `halves` half-seconds, each a tick, then every agent that can beats.
  void Advance(int halves) {
    for (int h = 0; h < halves; ++h) {
      env_.Advance(kHalfSecond);
      (void)server_->Sync();
      BeatAll();
      for (SimAgent& a : agents_) a.Fence(Now());
    }
  }

  // An agent's node is cut off past the heartbeat timeout: the server
  // declares it down, the agent fences itself.
  void Silence() {
    const int i = static_cast<int>(Below(kAgents));
    partitioned_[i] = true;
    ++counts_.silences;
    Advance(8);
  }

  void KillAgent() {
    SimAgent& a = agents_[Below(kAgents)];
    if (!a.alive()) return;
    a.Kill(/*tasks_survive=*/Below(2) == 0);
    ++counts_.agent_kills;
  }

  void ReviveAgent() {
    const int i = static_cast<int>(Below(kAgents));
    partitioned_[i] = false;
    agents_[i].Revive();
    Beat(i);
  }

  void ArmFault() {
    if (env_.fault_armed()) return;
    const int64_t n = 1 + static_cast<int64_t>(Below(4));
    const size_t k = Below(4);
    if (verbose_) std::printf("    %s at commit %lld from now\n", kFaultNames[k], static_cast<long long>(n));
    env_.ArmCommitFault(n, kFaults[k]);
  }

  // The process dies while commands are in flight, not at a commit.
  void CrashAnyMoment() {
    std::vector<std::tuple<std::string, int32_t, std::future<Reply>>> replies;
    const int n = static_cast<int>(Below(4));
    for (int i = 0; i < n; ++i) {
      JobSpec s = NextJob("a");
      std::string name = s.name;
      const int32_t replicas = s.replicas;
      replies.emplace_back(std::move(name), replicas, server_->core().Execute(SubmitJobCmd{"a", std::move(s)}));
    }
    server_->Crash();
    ++counts_.random_crashes;
    Collect(replies);
  }

  // The disk fills for a submission and a round of heartbeats: refused
  // with 503, and nothing refused may come back.
  void DiskFull() {
    env_.set_disk_full(true);
    Submit(1);
    BeatAll();
    env_.set_disk_full(false);
    ++counts_.disk_full;
  }

  // The agents' exits become acknowledgements, their violations ours; a
  // server that died is restarted and checked.
  std::string AfterStep() {
    for (SimAgent& a : agents_) {
      for (const SimAgent::AcknowledgedExit& e : a.TakeAcknowledgedExits()) {
        ++counts_.acknowledged_exits;
        if (replicas_[e.job] != 1) continue;  // a gang's replicas report apart
        int32_t& attempt = acknowledged_.ended[e.job];
        attempt = std::max(attempt, e.attempt);
      }
      if (!a.violations().empty()) return "agent " + a.node() + ": " + a.violations().front();
    }
    if (std::string v = Recover(); !v.empty()) return v;
    return CheckPublished();
  }

  // Up (a Sync is answered), or restarted and checked after a crash.
  std::string Recover() {
    for (int i = 0; i < 3 && !server_->crashed(); ++i) {
      if (server_->Sync()) return "";
    }
    for (int waited_ms = 0; !server_->crashed(); ++waited_ms) {
      if (waited_ms == 10'000) return "the server neither answers nor crashes";
      std::this_thread::sleep_for(1ms);  // a 503 comes before the halt
    }
    const Status ok = RestartChecked(*server_, env_, acknowledged_);
    ++counts_.restarts;
    return ok ? "" : "after a crash: " + ok.error().message;
  }

  // No more faults; every agent back; the checks of a clean stop.
  std::string Finish() {
    env_.DisarmCommitFault();
    if (std::string v = Recover(); !v.empty()) return v;
    for (int i = 0; i < kAgents; ++i) {
      partitioned_[i] = false;
      agents_[i].Revive();
    }
    Advance(4);
    if (std::string v = AfterStep(); !v.empty()) return v;
    const Status ok = StopChecked(*server_, acknowledged_);
    return ok ? "" : "at the end: " + ok.error().message;
  }

  void Note(int step, Action a) {
    static constexpr const char* kNames[] = {"submit", "cancel", "beat",   "end a task", "tick", "silence an agent",
                                             "kill an agent", "revive an agent", "arm a fault", "crash",
                                             "snapshot", "disk full"};
    std::string line = "step " + std::to_string(step) + ": " + kNames[static_cast<int>(a)];
    if (verbose_) std::printf("  %s\n", line.c_str());
    history_.push_back(std::move(line));
    if (history_.size() > 20) history_.pop_front();
  }

  std::string Report(int step, const std::string& v) {
    ++counts_.violations;
    std::string out = "seed " + std::to_string(seed_) + ", step " + std::to_string(step) + ": " + v +
                      "\nreplay: GPUPOOL_SOAK_FIRST_SEED=" + std::to_string(seed_) +
                      " GPUPOOL_SOAK_SEEDS=1 GPUPOOL_SOAK_VERBOSE=1 build/gpupool_tests "
                      "--gtest_filter=ServerSoakTest.*\nthe steps before it:";
    for (const std::string& line : history_) out += "\n  " + line;
    return out;
  }

  const uint64_t seed_;
  const int steps_;
  const bool verbose_;
  SoakCounts& counts_;
  Rng rng_;
  TestEnv env_;
  std::unique_ptr<TestServer> server_;
  std::vector<SimAgent> agents_;
  std::vector<bool> partitioned_;
  Acknowledged acknowledged_;
  std::map<JobId, int32_t> replicas_;
  int64_t next_job_ = 0;
  std::deque<std::string> history_;
  std::mutex published_mu_;
  std::map<std::string, NodeDesiredPtr> published_;  // GUARDED_BY(published_mu_); by node name
};

TEST(ServerSoakTest, FaultSeedsBreakNoInvariant) {
  const int64_t seeds = EnvInt("GPUPOOL_SOAK_SEEDS", 200, 1, 10'000'000);
  const int64_t first = EnvInt("GPUPOOL_SOAK_FIRST_SEED", 1, 0, INT64_MAX / 2);
  const int steps = static_cast<int>(EnvInt("GPUPOOL_SOAK_STEPS", 60, 1, 100'000));
  const bool verbose = EnvInt("GPUPOOL_SOAK_VERBOSE", 0, 0, 1) == 1;
  const std::string root = testing::MakeTempDir();
  SoakCounts counts;
  const auto t0 = std::chrono::steady_clock::now();
  for (int64_t seed = first; seed < first + seeds; ++seed) {
    if (verbose) std::printf("seed %lld\n", static_cast<long long>(seed));
    const std::string dir = root + "/seed-" + std::to_string(seed);
    {
      SoakRun run(static_cast<uint64_t>(seed), dir, steps, verbose, counts);
      const std::string violation = run.Run();
      EXPECT_TRUE(violation.empty()) << violation;
    }
    ++counts.seeds;
    std::filesystem::remove_all(dir);
    if (counts.violations >= 10) break;  // enough to go on
  }
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::printf(
      "soak: %lld seeds from %lld, %lld steps in %.1f s; acknowledged %lld jobs, %lld cancellations, %lld task "
      "exits; faults fired: %s %lld, %s %lld, %s %lld, %s %lld; %lld crashes (%lld at random moments), %lld "
      "checked restarts; %lld agent kills, %lld silences past the heartbeat timeout, %lld disk-full moments; "
      "%lld violations\n",
      static_cast<long long>(counts.seeds), static_cast<long long>(first), static_cast<long long>(counts.steps),
      seconds, static_cast<long long>(counts.acknowledged_jobs), static_cast<long long>(counts.acknowledged_cancels),
      static_cast<long long>(counts.acknowledged_exits), kFaultNames[0], static_cast<long long>(counts.fired[0]),
      kFaultNames[1], static_cast<long long>(counts.fired[1]), kFaultNames[2], static_cast<long long>(counts.fired[2]),
      kFaultNames[3], static_cast<long long>(counts.fired[3]), static_cast<long long>(counts.crashes),
      static_cast<long long>(counts.random_crashes), static_cast<long long>(counts.restarts),
      static_cast<long long>(counts.agent_kills), static_cast<long long>(counts.silences),
      static_cast<long long>(counts.disk_full), static_cast<long long>(counts.violations));
  EXPECT_EQ(counts.violations, 0);
  // The schedule reaches what it is for (at the default size and above).
  if (counts.seeds >= 100) {
    EXPECT_GT(counts.restarts, counts.seeds / 2);
    EXPECT_GT(counts.acknowledged_exits, counts.seeds);
    for (int64_t fired : counts.fired) EXPECT_GT(fired, counts.seeds / 20);
  }
  std::filesystem::remove_all(root);
}

// What the soak found, each as the smallest schedule that shows it: one
// node of two GPUs with its simulated agent, tenants a and b.
class ServerSoakFindingTest : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = testing::MakeTempDir();
    server_ = std::make_unique<TestServer>(env_, ServerOptions{.data_dir = root_ + "/data", .config_text = kSoakConfig});
    ASSERT_TRUE(server_->Start().has_value());
    ASSERT_TRUE(Beat());
    for (const char* t : {"a", "b"}) {
      ASSERT_FALSE(server_->Call(CreateTenantCmd{t, MintToken(t, "initial", kRoleTenant).record, {{"gpu", Quota{0, 2000}}}}).error);
    }
  }
  void TearDown() override {
    server_.reset();
    std::filesystem::remove_all(root_);
  }
  bool Beat() {
    return agent_.Beat([this](Command c) { return server_->TryCall(std::move(c)); }, env_.Now());
  }
  // A job of `gpus` whole GPUs that runs a task; its reply.
  Reply Submit(const std::string& tenant, int gpus) {
    JobSpec s;
    s.name = tenant + std::to_string(next_++);
    s.demand = Demand{1000, 1024, gpus, kMilliPerGpu};
    s.task.command = {"train"};
    return server_->Call(SubmitJobCmd{tenant, std::move(s)});
  }

  std::string root_;
  TestEnv env_;
  std::unique_ptr<TestServer> server_;
  SimAgent agent_{SimAgent::Options{.node = "node-0", .gpus = 2}};
  int next_ = 0;
};

// A full disk refused a placement and its scrub order (GpusScrubbed, event
// N); the Engine went back to the journal, but the agent service kept the
// refused order. The next placement's scrub, also event N, then came with
// it under the same id: the agent, which keeps scrubs by id, ran the first
// (one GPU) and took the second (both GPUs) for done, and b's task started
// on a GPU holding a's data; or the agent's report of the refused order
// took the next one away. Found by soak seeds 942 and 958 (fixed:
// RollBack rebuilds the scrub orders from the journal alone).
TEST_F(ServerSoakFindingTest, AScrubOrderAFullDiskRefusedDoesNotShadowTheNextOneOfTheSameSeq) {
  ASSERT_FALSE(Submit("a", 1).error);
  ASSERT_FALSE(Submit("a", 1).error);
  ASSERT_TRUE(Beat());  // both of a's tasks start
  ASSERT_EQ(agent_.running(), 2);
  ASSERT_TRUE(agent_.EndTask(0, 0));
  ASSERT_TRUE(agent_.EndTask(0, 0));
  ASSERT_TRUE(Beat());  // they end: both GPUs hold a's data
  env_.set_disk_full(true);
  const Reply refused = Submit("b", 1);  // its scrub and placement are refused
  ASSERT_TRUE(refused.error.has_value());
  EXPECT_EQ(refused.error->http_status, 503);
  env_.set_disk_full(false);
  ASSERT_FALSE(Submit("b", 2).error);  // both GPUs, scrubbed first
  ASSERT_TRUE(Beat());
  EXPECT_EQ(agent_.running(), 1);
  EXPECT_TRUE(agent_.violations().empty()) << agent_.violations().front();
  server_->Stop();
}

}  // namespace
}  // namespace gpupool

namespace gpupool::testing {
namespace {

using nlohmann::json;

// As dev mode runs (12 s heartbeat timeout, jobs on the node's own files),
// with snapshots often enough that restarts load one and replay the rest.
constexpr const char* kProcessSoakConfig = R"(name: soak
engine:
  heartbeat_timeout: 12s
pools:
  - name: gpu
server:
  tick: 100ms
  snapshot_every_events: 200
  default_image: host
)";
constexpr int kClients = 16;
constexpr int kProcessTenants = 4;

class ServerSoakProcessTest : public AgentE2eTest {
 protected:
  std::string Config() const override { return kProcessSoakConfig; }
  std::vector<std::string> AgentFlags() const override { return {"--runtime", "process"}; }
  void TearDown() override {
    StopClients();
    AgentE2eTest::TearDown();
  }
  void StopClients() {
    stop_ = true;
    for (std::thread& th : clients_) th.join();
    clients_.clear();
  }

  // A tenant of up to 8 GPUs; its token.
  std::string Tenant(const std::string& name) {
    auto t = Http(*server_, "POST", "/v1/tenants", admin_,
                  json{{"name", name}, {"quota", {{"gpu", {{"guaranteed_gpus", 2}, {"limit_gpus", 8}}}}}});
    EXPECT_EQ(t.status, 201) << t.text;
    return t.body.value("token", "");
  }

  // Client `c`, until `stop_`: in turn a quarter share that holds its GPU
  // until the client's next one (cancelled then), a whole GPU for 0.1 s, a
  // half share and two whole GPUs that exit at once; about 10 a second.
  // Every answer is recorded; no answer (the server is down) is retried
  // under a new name.
  void Client(int c, const std::string& token) {
    const int port = server_->port();
    int64_t holding = -1;  // the client's quarter share
    for (int i = 0; !stop_; ++i) {
      const std::string name = "c" + std::to_string(c) + "-" + std::to_string(i);
      json body{{"name", name}, {"cpu_cores", 0.5}, {"memory_gib", 1}};
      if (i % 4 == 0) body.update(json{{"gpu_fraction", 0.25}, {"gpu_memory_gib", 8}, {"sharing", "time-slice"}});
      if (i % 4 == 1) body.update(json{{"gpus", 1}, {"command", {"sh", "-c", "sleep 0.1"}}});
      if (i % 4 == 2) {
        body.update(json{{"gpu_fraction", 0.5}, {"gpu_memory_gib", 8}, {"sharing", "time-slice"}, {"command", {"true"}}});
      }
      if (i % 4 == 3) body.update(json{{"gpus", 2}, {"command", {"true"}}});
      const auto r = HttpTo("127.0.0.1", port, "POST", "/v1/jobs", token, body.dump());
      if (r.status == 201) {
        const int64_t id = r.body["id"];
        {
          std::lock_guard lock(mu_);
          told_.jobs[name] = id;
        }
        if (i % 4 == 0) {
          if (holding > 0) Cancel(port, token, holding);
          holding = id;
        }
      } else if (r.status != 0 && r.status != 503) {
        std::lock_guard lock(mu_);
        failures_.push_back("client " + std::to_string(c) + ": " + std::to_string(r.status) + " " + r.text);
        return;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(r.status == 201 ? 100 : 20));
    }
  }
  void Cancel(int port, const std::string& token, int64_t id) {
    const auto r = HttpTo("127.0.0.1", port, "DELETE", "/v1/jobs/" + std::to_string(id), token, "");
    if (r.status == 200) {
      std::lock_guard lock(mu_);
      told_.cancelled.insert(id);
    }
  }
  AcknowledgedJobs Told() {
    std::lock_guard lock(mu_);
    return told_;
  }
  int64_t Count(const std::string& state) {
    int64_t n = 0, after = 0;
    for (int page = 0; page < kMaxJobPages; ++page) {
      const auto r = Http(*server_, "GET", "/v1/jobs?state=" + state + "&limit=1000&after=" + std::to_string(after),
                          admin_);
      n += static_cast<int64_t>(r.body.value("jobs", json::array()).size());
      if (r.status != 200 || r.body["next_after"].is_null()) break;
      after = r.body["next_after"].get<int64_t>();
    }
    return n;
  }

  std::atomic<bool> stop_{false};
  std::vector<std::thread> clients_;
  std::mutex mu_;
  AcknowledgedJobs told_;             // GUARDED_BY(mu_)
  std::vector<std::string> failures_;  // GUARDED_BY(mu_)
};

// The real binary, SIGKILLed GPUPOOL_SOAK_KILLS times at seeded moments
// while 16 clients submit and a real agent runs their jobs; after each
// restart the checks of tests/server_checks.h on what was acknowledged
// before the kill.
TEST_F(ServerSoakProcessTest, SigkillsUnderSixteenClientsAndARunningAgent) {
  const int kills = static_cast<int>(EnvInt("GPUPOOL_SOAK_KILLS", 5, 1, 100'000));
  StartAgent("node-0", "8xH100");
  std::vector<std::string> tokens;
  for (int t = 0; t < kProcessTenants; ++t) tokens.push_back(Tenant("t" + std::to_string(t)));
  for (int c = 0; c < kClients; ++c) {
    clients_.emplace_back([this, c, token = tokens[c % kProcessTenants]] { Client(c, token); });
  }
  Rng rng(22);
  const auto t0 = std::chrono::steady_clock::now();
  double restart_seconds = 0;
  int violations = 0;
  for (int k = 0; k < kills && violations < 5; ++k) {
    std::this_thread::sleep_for(std::chrono::milliseconds(200 + rng.Below(600)));
    server_->Kill();
    const AcknowledgedJobs before = Told();  // all told before the kill
    const auto r0 = std::chrono::steady_clock::now();
    ASSERT_TRUE(server_->Start()) << "kill " << k << ": " << server_->log();
    restart_seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - r0).count();
    for (const std::string& v : {CheckAcknowledgedJobs(*server_, admin_, before), CheckGpusHeldOnce(*server_, admin_)}) {
      if (v.empty()) continue;
      ++violations;
      ADD_FAILURE() << "after kill " << k << ": " << v;
    }
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  StopClients();
  const AcknowledgedJobs told = Told();
  EXPECT_EQ(CheckAcknowledgedJobs(*server_, admin_, told), "");
  EXPECT_EQ(CheckGpusHeldOnce(*server_, admin_), "");
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  const int64_t succeeded = Count("succeeded");
  std::printf("process soak: %d SIGKILLs in %.1f s (restart to /healthz %.2f s on average); %zu jobs and %zu "
              "cancellations acknowledged, %lld jobs succeeded on the agent; %d violations\n",
              kills, seconds, restart_seconds / kills, told.jobs.size(), told.cancelled.size(),
              static_cast<long long>(succeeded), violations);
  for (const std::string& f : failures_) ADD_FAILURE() << f;
  EXPECT_EQ(violations, 0);
  EXPECT_GT(told.jobs.size(), static_cast<size_t>(10 * kills)) << "the clients hardly got through";
  EXPECT_GT(succeeded, 0) << "the agent ran nothing: " << agents_[0]->log();
}

}  // namespace
}  // namespace gpupool::testing
