// Persistence: the journal (events as JSON lines, EventFromJson) and
// snapshots (EncodeSnapshot / DecodeSnapshot, Engine::Restore) rebuild
// exactly the state and the decisions of an engine that never stopped.
#include "src/engine/snapshot.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cstring>
#include <limits>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "src/base/rng.h"
#include "src/control/control_loops.h"
#include "src/engine/engine.h"
#include "src/sim/scenario.h"
#include "src/sim/scenario_runner.h"
#include "tests/builders.h"

namespace gpupool {
namespace {

using namespace std::chrono_literals;

const std::string kScenarios = std::string(GPUPOOL_SOURCE_DIR) + "/scenarios";

// --- helpers ------------------------------------------------------------------

EngineState Replay(EngineState s, const std::vector<Event>& events, size_t from, size_t to) {
  for (size_t i = from; i < to; ++i) s.Apply(events[i]);
  return s;
}

size_t BlockedGroups(const EngineState& s) {
  size_t n = 0;
  for (TenantId t : s.queue.tenants()) {
    for (const auto& [key, group] : s.queue.find_tenant(t)->groups) n += group.blocked_epoch != UINT64_MAX;
  }
  return n;
}

// What a replay (Apply alone) cannot know: the engine's blocked-group marks.
void ForgetBlockedGroups(EngineState& s) {
  const std::set<TenantId> tenants = s.queue.tenants();
  for (TenantId t : tenants) {
    for (auto& [key, group] : s.queue.tenant(t).groups) group.blocked_epoch = UINT64_MAX;
  }
}

// The parts of a state that the snapshot does not write but rebuilds or
// derives: they must come back equal, not merely re-encode equal.
void ExpectSameDerivedParts(const EngineState& a, const EngineState& b) {
  ASSERT_EQ(a.cluster.node_count(), b.cluster.node_count());
  for (NodeIndex i = 0; i < a.cluster.node_count(); ++i) {
    EXPECT_TRUE(a.cluster.node(i) == b.cluster.node(i)) << "node " << a.cluster.node_name(i);
  }
  EXPECT_EQ(a.cluster.gpu_milli_total(), b.cluster.gpu_milli_total());
  EXPECT_EQ(a.cluster.gpu_milli_allocated(), b.cluster.gpu_milli_allocated());
  EXPECT_EQ(a.cluster.live_allocations(), b.cluster.live_allocations());
  EXPECT_EQ(a.cluster.allocation_slots().size(), b.cluster.allocation_slots().size());
  EXPECT_EQ(a.cluster.free_allocation_ids(), b.cluster.free_allocation_ids());
  std::vector<JobId> ra, rb;
  for (const auto& [id, j] : a.running) ra.push_back(id);
  for (const auto& [id, j] : b.running) {
    rb.push_back(id);
    EXPECT_EQ(j, &b.jobs.at(id)) << "running points into jobs";
  }
  EXPECT_EQ(ra, rb);
  EXPECT_EQ(a.running_by_tenant_pool, b.running_by_tenant_pool);
  EXPECT_EQ(a.running_deadlines, b.running_deadlines);
  EXPECT_EQ(a.queue.size(), b.queue.size());
  ASSERT_EQ(a.queue.tenants(), b.queue.tenants());
  for (TenantId t : a.queue.tenants()) {
    const JobQueue::TenantQueue& qa = *a.queue.find_tenant(t);
    const JobQueue::TenantQueue& qb = *b.queue.find_tenant(t);
    EXPECT_EQ(qa.size, qb.size);
    EXPECT_TRUE(qa.heads == qb.heads) << "tenant " << t;
    ASSERT_EQ(qa.groups.size(), qb.groups.size());
    for (auto ia = qa.groups.begin(), ib = qb.groups.begin(); ia != qa.groups.end(); ++ia, ++ib) {
      EXPECT_TRUE(ia->first == ib->first);
      EXPECT_EQ(ia->second.jobs, ib->second.jobs);
      EXPECT_EQ(ia->second.blocked_epoch, ib->second.blocked_epoch);
    }
  }
}

// Equal snapshots; on a difference, where it starts (not the whole bytes).
::testing::AssertionResult SameBytes(const std::string& a, const std::string& b) {
  if (a == b) return ::testing::AssertionSuccess();
  size_t at = 0;
  while (at < a.size() && at < b.size() && a[at] == b[at]) ++at;
  return ::testing::AssertionFailure() << "snapshots of " << a.size() << " and " << b.size()
                                       << " bytes differ from byte " << at;
}

EngineState Decoded(const std::string& bytes, LendingConfig lending) {
  auto s = DecodeSnapshot(bytes, lending);
  EXPECT_TRUE(s.has_value()) << s.error().message;
  return s ? std::move(*s) : EngineState(lending);
}

// --- the example scenarios --------------------------------------------------------

struct ScenarioRun {
  LendingConfig lending;
  std::vector<Event> events;
  std::string engine_snapshot;  // of the engine itself at the horizon (with its blocked marks)
  size_t engine_blocked_groups = 0;
};

// Each scenario runs once per test binary.
const ScenarioRun& ScenarioEvents(const std::string& file) {
  static std::map<std::string, ScenarioRun> runs;
  if (auto it = runs.find(file); it != runs.end()) return it->second;
  ScenarioRun& run = runs[file];
  auto s = LoadScenario(kScenarios + "/" + file);
  EXPECT_TRUE(s.has_value()) << s.error().message;
  if (!s) return run;
  run.lending = s->engine.lending;
  RunOptions o;
  o.on_event = [&run](const Event& e) { run.events.push_back(e); };
  o.on_finish = [&run](const Engine& e) {
    run.engine_snapshot = EncodeSnapshot(e.state());
    run.engine_blocked_groups = BlockedGroups(e.state());
  };
  auto r = RunScenario(*s, o);
  EXPECT_TRUE(r.has_value()) << r.error().message;
  EXPECT_FALSE(run.engine_snapshot.empty());
  return run;
}

const std::vector<std::string> kFiles = {"sharing.yaml", "heterogeneous.yaml", "scaling.yaml"};

TEST(JournalTest, EveryEventOfTheExampleScenariosRoundTripsAndTheyCoverEveryType) {
  std::set<std::string> seen;
  for (const std::string& file : kFiles) {
    const ScenarioRun& run = ScenarioEvents(file);
    ASSERT_GT(run.events.size(), 1000u) << file;
    for (const Event& e : run.events) {
      const std::string line = ToJsonLine(e);
      auto back = EventFromJson(line);
      ASSERT_TRUE(back.has_value()) << file << ": " << line << ": " << back.error().message;
      ASSERT_EQ(ToJsonLine(*back), line) << file;
      seen.insert(EventName(e.body));
    }
  }
  // Types the scenarios never produce are covered by hand-built events in
  // event_json_test.cc (EveryEventTypeRoundTripsWithEveryField) and by the
  // engine runs below; list them so that a scenario change is noticed.
  std::vector<std::string> missing;
  for (size_t i = 0; i < std::variant_size_v<EventBody>; ++i) {
    EventBody body = [i] {
      EventBody b;
      [&]<size_t... I>(std::index_sequence<I...>) {
        ((i == I ? (void)b.emplace<I>() : (void)0), ...);
      }(std::make_index_sequence<std::variant_size_v<EventBody>>());
      return b;
    }();
    if (!seen.contains(EventName(body))) missing.push_back(EventName(body));
  }
  const std::vector<std::string> expected_missing = {"JobRejected",     "JobCancelled",   "QuotaExhausted",
                                                      "MigRecutStarted", "ScaleOutFailed", "HotspotDetected",
                                                      "HotspotCleared",  "NodeLent",       "NodeReturned",
                                                      "RegionsSet",      "GpuHealthChanged", "TaskMemoryObserved",
                                                      "MigLayoutReported", "MigLayoutMismatch",
                                                      // operators' node commands: node_ops_test.cc
                                                      "NodeCordoned",    "NodeUncordoned", "NodeDrainRequested",
                                                      "NodeDrained",     "NodeRemovalRequested"};
  for (const std::string& m : missing) {
    EXPECT_NE(std::find(expected_missing.begin(), expected_missing.end(), m), expected_missing.end())
        << m << " no longer appears in the example scenarios";
  }
  EXPECT_GE(seen.size(), std::variant_size_v<EventBody> - expected_missing.size());
}

TEST(JournalTest, ReplayingTheDecodedEventsRebuildsTheRunsFinalState) {
  for (const std::string& file : kFiles) {
    const ScenarioRun& run = ScenarioEvents(file);
    std::vector<Event> decoded;
    for (const Event& e : run.events) decoded.push_back(*EventFromJson(ToJsonLine(e)));
    const EngineState original = Replay(EngineState(run.lending), run.events, 0, run.events.size());
    const EngineState rebuilt = Replay(EngineState(run.lending), decoded, 0, decoded.size());
    const std::string bytes = EncodeSnapshot(original);
    EXPECT_TRUE(SameBytes(EncodeSnapshot(rebuilt), bytes)) << file;
    ExpectSameDerivedParts(original, rebuilt);
    // The engine's own state differs from a replay only in its blocked marks.
    EngineState engine = Decoded(run.engine_snapshot, run.lending);
    EXPECT_TRUE(SameBytes(EncodeSnapshot(engine), run.engine_snapshot)) << file << ": decode then encode";
    EXPECT_EQ(BlockedGroups(engine), run.engine_blocked_groups);
    ForgetBlockedGroups(engine);
    EXPECT_TRUE(SameBytes(EncodeSnapshot(engine), bytes)) << file;
    ExpectSameDerivedParts(original, engine);
  }
}

TEST(SnapshotTest, ASnapshotAtAnyCutThenTheRestOfTheJournalGivesTheSameFinalState) {
  for (const std::string& file : kFiles) {
    const ScenarioRun& run = ScenarioEvents(file);
    const std::vector<Event>& events = run.events;
    const EngineState final_state = Replay(EngineState(run.lending), events, 0, events.size());
    const std::string final_bytes = EncodeSnapshot(final_state);
    // Cuts: empty, set-up only, several points in the run, the end.
    std::vector<size_t> cuts = {0, 1, 60};
    for (int k = 1; k <= 6; ++k) cuts.push_back(events.size() * k / 7);
    cuts.push_back(events.size());
    EngineState at(run.lending);
    size_t applied = 0;
    for (size_t cut : cuts) {
      for (; applied < cut; ++applied) at.Apply(events[applied]);
      const std::string bytes = EncodeSnapshot(at);
      auto decoded = DecodeSnapshot(bytes, run.lending);
      ASSERT_TRUE(decoded.has_value()) << file << " cut " << cut << ": " << decoded.error().message;
      EngineState restored = std::move(*decoded);
      ASSERT_TRUE(CheckInvariants(restored).has_value()) << file << " cut " << cut;
      EXPECT_TRUE(SameBytes(EncodeSnapshot(restored), bytes)) << file << " cut " << cut;
      ExpectSameDerivedParts(at, restored);
      restored = Replay(std::move(restored), events, cut, events.size());
      EXPECT_TRUE(SameBytes(EncodeSnapshot(restored), final_bytes)) << file << " cut " << cut;
      ExpectSameDerivedParts(final_state, restored);
    }
  }
}

// --- a small engine driven by seeded random commands -------------------------------

EngineConfig TestConfig() {
  EngineConfig c;
  c.policy = "best";
  c.lending.window = 2min;
  c.reclaim.idle = false;  // utilization polls are soft state (not restored)
  c.reclaim.deadlines = true;
  c.workload_learning.prior = {testing::Whole(1, 8000), testing::Share(500, 2000)};
  return c;
}

AttributeTable TestAttributes() {
  AttributeTable attrs;
  attrs.AddNodeClass({"h100", {}, 0, "nvidia-hopper", {{"cuda", {{12, 4, 0}}}}});
  Requirement cuda;
  cuda.name = "cuda12";
  cuda.ecosystem = {{"cuda", {{12, 0, 0}}}};
  attrs.AddRequirement(cuda);
  return attrs;
}

// Two pools of MIG-capable GPUs, three tenants (one borrows only), and a
// stream of mixed jobs: whole GPUs, gangs, time-slice, MPS and MIG shares,
// pipelines, priorities, deadlines, checkpoints; finishes, cancellations
// and ticks. Decisions draw on every part of the state.
class World {
 public:
  World() {
    auto e = CreateEngine(TestConfig(), TestAttributes());
    EXPECT_TRUE(e.has_value()) << e.error().message;
    engine = std::move(*e);
    const auto h100 = *Catalog::Builtin().Find("H100");
    const auto a100 = *Catalog::Builtin().Find("A100-80GB");
    Ok(engine->AddTenant("a", now, {}));
    Ok(engine->AddTenant("b", now, {}));
    Ok(engine->AddTenant("c", now, {}));
    Ok(engine->AddPool("h100", PoolSelector{GpuModelMask{1} << h100, {}}, {}, now, {}));
    Ok(engine->AddPool("a100", PoolSelector{GpuModelMask{1} << a100, {}}, {}, now, {}));
    for (int i = 0; i < 4; ++i) {
      Ok(engine->AddNode(NodeSpec{"h" + std::to_string(i), 128000, 1 << 20, 8, h100, 0, 1}, "r", "z",
                         "k" + std::to_string(i % 2), now, {}));
    }
    for (int i = 0; i < 3; ++i) {
      Ok(engine->AddNode(NodeSpec{"a" + std::to_string(i), 128000, 1 << 20, 8, a100}, "r", "z", "k", now, {}));
    }
    for (PoolId p : {0, 1}) {
      Ok(engine->SetQuota(0, p, Quota{12000, 32000, 2, false}, now, {}));
      Ok(engine->SetQuota(1, p, Quota{8000, 28000, 1, p == 1}, now, {}));
      Ok(engine->SetQuota(2, p, Quota{0, 24000, 1, false}, now, {}));
    }
  }

  template <class R>
  static void Ok(const R& r) {
    EXPECT_TRUE(r.has_value()) << r.error().message;
  }

  // The next command, chosen from `engine`'s state and `rng`; applied to
  // each engine of `engines` (the same command), returning each one's events.
  std::vector<std::vector<std::string>> Step(Rng& rng, const std::vector<Engine*>& engines) {
    std::vector<std::vector<std::string>> out(engines.size());
    auto sink_for = [&out](size_t k) {
      return [&out, k](const Event& e) { out[k].push_back(ToJsonLine(e)); };
    };
    const EngineState& s = engine->state();
    const uint64_t r = rng.Below(100);
    std::vector<JobId> running, checkpointing;
    for (const auto& [id, j] : s.running) {
      (j->state == JobState::kCheckpointing ? checkpointing : running).push_back(id);
    }
    if (r < 45) {
      const JobSpec spec = RandomSpec(rng);
      for (size_t k = 0; k < engines.size(); ++k) {
        auto id = engines[k]->Submit(spec, now, sink_for(k));
        out[k].push_back(id ? "id " + std::to_string(*id) : "error " + id.error().message);
      }
    } else if (r < 62 && !running.empty()) {
      const JobId id = running[rng.Below(running.size())];
      const bool succeeded = rng.Below(2) == 0;
      for (size_t k = 0; k < engines.size(); ++k) Ok(engines[k]->Finish(id, succeeded, now, sink_for(k)));
    } else if (r < 72 && !checkpointing.empty()) {
      const JobId id = checkpointing[rng.Below(checkpointing.size())];
      for (size_t k = 0; k < engines.size(); ++k) Ok(engines[k]->CheckpointDone(id, now, sink_for(k)));
    } else if (r < 76 && !s.jobs.empty()) {
      const JobId id = rng.Below(2) == 0 && !running.empty() ? running[rng.Below(running.size())]
                                                              : s.next_job_id - 1 - static_cast<JobId>(rng.Below(4));
      for (size_t k = 0; k < engines.size(); ++k) {
        auto ok = engines[k]->Cancel(id, now, sink_for(k));
        out[k].push_back(ok ? "cancelled" : ok.error().message);
      }
    } else {
      now += Duration(static_cast<int64_t>(5000 + rng.Below(120000)));
      for (size_t k = 0; k < engines.size(); ++k) engines[k]->Tick(now, sink_for(k));
    }
    return out;
  }

  JobSpec RandomSpec(Rng& rng) const {
    JobSpec s;
    s.name = "job-" + std::to_string(rng.Below(1000));
    s.tenant = static_cast<TenantId>(rng.Below(3));
    s.priority = static_cast<int32_t>(rng.Below(4));
    s.checkpointable = rng.Below(3) != 0;
    s.checkpoint_duration = Duration(static_cast<int64_t>(rng.Below(60000)));
    s.checkpoint_interval = rng.Below(2) ? 10min : Duration(0);
    if (rng.Below(5) == 0) s.deadline = now + Duration(static_cast<int64_t>(60000 + rng.Below(3'600'000)));
    if (rng.Below(4) == 0) s.pools = {static_cast<PoolId>(rng.Below(2))};
    if (rng.Below(6) == 0) s.labels = uint64_t{1} << rng.Below(3);
    if (rng.Below(10) == 0) s.anti_affinity = uint64_t{1} << rng.Below(3);
    if (rng.Below(3) == 0) {  // a task to run (servers with agents)
      s.task.command = {"sh", "-c", "step " + std::to_string(rng.Below(100))};
      s.task.env = {{"RUN", std::to_string(rng.Below(10))}};
      s.task.checkpoint_timeout = Duration(static_cast<int64_t>(1000 + rng.Below(60000)));
    }
    const bool needs_cuda = rng.Below(8) == 0;
    switch (rng.Below(8)) {
      case 0:
      case 1: s.demand = testing::Whole(static_cast<int32_t>(1 + rng.Below(4)), 4000, 16384); break;
      case 2:  // a gang of whole nodes
        s.demand = testing::Whole(8, 32000, 65536);
        s.replicas = static_cast<int32_t>(2 + rng.Below(2));
        break;
      case 3: s.demand = testing::Share(static_cast<int32_t>(100 + rng.Below(800)), 2000, 4096); break;
      case 4:
        s.demand = testing::Share(static_cast<int32_t>(100 + rng.Below(500)), 2000, 4096);
        s.demand.mode = ShareMode::kMps;
        s.demand.gpu_memory_mib = static_cast<int32_t>(4096 + rng.Below(20000));
        break;
      case 5:
        s.demand = testing::Share(static_cast<int32_t>(140 + rng.Below(430)), 2000, 4096);
        s.demand.mode = ShareMode::kMig;
        s.demand.gpu_memory_mib = static_cast<int32_t>(8192 + rng.Below(30000));
        s.checkpointable = true;
        break;
      case 6: {
        s.kind = JobKind::kOnlineInference;
        Demand mig = testing::Share(140, 1000, 2048);
        mig.mode = ShareMode::kMig;
        mig.gpu_memory_mib = 9000;
        Demand slice = testing::Share(250, 1000, 2048);
        slice.mode = ShareMode::kTimeSlice;
        s.stages = {mig, slice};
        s.demand = testing::Share(140, 1000, 2048);
        break;
      }
      default:
        s.auto_sharing = true;
        s.kind = rng.Below(2) ? JobKind::kDevelopment : JobKind::kTraining;
        s.demand = testing::Whole(1, 4000, 16384);
        s.demand.gpu_memory_mib = static_cast<int32_t>(rng.Below(60000));
        s.expected_duration = Duration(static_cast<int64_t>(rng.Below(7'200'000)));
    }
    if (needs_cuda) s.demand.requirement = 1;  // only the H100 nodes' class has CUDA
    return s;
  }

  std::unique_ptr<Engine> engine;
  Instant now{};
};

std::unique_ptr<Engine> RestoredFrom(const Engine& e, Instant now) {
  auto state = DecodeSnapshot(EncodeSnapshot(e.state()), e.config().lending);
  EXPECT_TRUE(state.has_value()) << state.error().message;
  auto restored = RestoreEngine(TestConfig(), TestAttributes(), std::move(*state), now);
  EXPECT_TRUE(restored.has_value()) << restored.error().message;
  return std::move(*restored);
}

TEST(EngineRestoreTest, ARestoredEngineDecidesWhatTheOriginalDecides) {
  World w;
  Rng rng(42);
  constexpr int kWindows = 8, kSteps = 80;
  std::set<std::string> kinds;
  size_t blocked_at_cuts = 0, events = 0;
  for (int window = 0; window < kWindows; ++window) {
    blocked_at_cuts += BlockedGroups(w.engine->state());
    std::unique_ptr<Engine> restored = RestoredFrom(*w.engine, w.now);
    ASSERT_TRUE(restored);
    for (int step = 0; step < kSteps; ++step) {
      const auto out = w.Step(rng, {w.engine.get(), restored.get()});
      ASSERT_EQ(out[0], out[1]) << "window " << window << " step " << step;
      events += out[0].size();
      for (const std::string& line : out[0]) {
        if (line.starts_with("{")) kinds.insert(EventName(EventFromJson(line)->body));
      }
    }
    EXPECT_TRUE(SameBytes(EncodeSnapshot(restored->state()), EncodeSnapshot(w.engine->state()))) << "window " << window;
    ASSERT_TRUE(CheckInvariants(restored->state()).has_value());
  }
  // The run must have exercised what makes continuation hard.
  for (const char* kind : {"JobPlaced", "PreemptionStarted", "JobPreempted", "NodesReserved", "ReservationReleased",
                           "QuotaLent", "QuotaRecalled", "QuotaExhausted", "ReclaimStarted", "JobCancelled",
                           "GpusScrubbed", "JobRejected"}) {
    EXPECT_TRUE(kinds.contains(kind)) << kind << " never happened";
  }
  EXPECT_GT(blocked_at_cuts, 0u) << "no cut had blocked groups to carry";
  EXPECT_GT(events, 1000u);
}

TEST(EngineRestoreTest, RefusesAStateItCannotContinue) {
  World w;
  Rng rng(3);
  for (int i = 0; i < 40; ++i) w.Step(rng, {w.engine.get()});
  const std::string bytes = EncodeSnapshot(w.engine->state());
  auto load = [&] { return std::move(*DecodeSnapshot(bytes, TestConfig().lending)); };
  // A clock stepped back is no reason to refuse: events keep their order.
  auto early = RestoreEngine(TestConfig(), TestAttributes(), load(), w.now - 1h);
  ASSERT_TRUE(early.has_value()) << early.error().message;
  std::vector<Event> later;
  (*early)->Tick(w.now - 1h + 1s, [&later](const Event& e) { later.push_back(e); });
  for (const Event& e : later) EXPECT_GE(e.at, w.engine->state().now);
  auto no_classes = RestoreEngine(TestConfig(), AttributeTable(), load(), w.now);
  ASSERT_FALSE(no_classes.has_value());
  EXPECT_NE(no_classes.error().message.find("unknown to the attribute table"), std::string::npos)
      << no_classes.error().message;
  EngineConfig bad = TestConfig();
  bad.policy = "no-such-policy";
  EXPECT_FALSE(RestoreEngine(bad, TestAttributes(), load(), w.now).has_value());
  EngineState broken = load();
  broken.tenants[0].pools[0].usage.gpu_milli += 1000;
  auto invalid = RestoreEngine(TestConfig(), TestAttributes(), std::move(broken), w.now);
  ASSERT_FALSE(invalid.has_value());
  EXPECT_NE(invalid.error().message.find("invariant broken"), std::string::npos) << invalid.error().message;
}

// A MIG re-cut in flight (PART-5) holds the most cross-references at once:
// a moved job checkpointing for a nominated beneficiary that has victims
// pending and a node held for it, and a re-cut entry.
TEST(EngineRestoreTest, AReCutInFlightContinuesAfterARestore) {
  EngineConfig config;
  config.policy = "BestFit";
  config.workload_learning.prior = TestConfig().workload_learning.prior;
  auto engine = CreateEngine(config, AttributeTable{});
  ASSERT_TRUE(engine.has_value()) << engine.error().message;
  Engine& e = **engine;
  std::vector<Event> log;
  const Engine::Sink sink = [&log](const Event& ev) { log.push_back(ev); };
  Instant now{};
  const PoolId pool = *e.AddPool("gpus", PoolSelector{kAnyGpuModel, {}}, {}, now, sink);
  const GpuModelId a100 = *Catalog::Builtin().Find("A100-80GB");
  ASSERT_TRUE(e.AddNode(NodeSpec{"a100-0", 96000, 1 << 20, 1, a100}, "r", "z", "k", now, sink).has_value());
  const TenantId a = *e.AddTenant("a", now, sink), b = *e.AddTenant("b", now, sink);
  ASSERT_TRUE(e.SetQuota(a, pool, Quota{0, 1000, 1, false}, now, sink).has_value());
  ASSERT_TRUE(e.SetQuota(b, pool, Quota{0, 1000, 1, false}, now, sink).has_value());
  auto mig = [&](TenantId t, int32_t milli, int32_t memory_mib, bool checkpointable) {
    JobSpec s;
    s.tenant = t;
    s.demand = Demand{1000, 4096, 1, milli, kAnyGpuModel};
    s.demand.mode = ShareMode::kMig;
    s.demand.gpu_memory_mib = memory_mib;
    s.checkpointable = checkpointable;
    s.checkpoint_duration = 20s;
    return *e.Submit(s, now, sink);
  };
  // Seven 1g of b on slices 0-6; those at 1 and 5 stay, so no 3g start is free.
  std::vector<JobId> small;
  for (int i = 0; i < 7; ++i) small.push_back(mig(b, 100, 9000, i == 1 || i == 5));
  for (int i = 0; i < 7; ++i) {
    if (i != 1 && i != 5) {
      ASSERT_TRUE(e.Finish(small[i], true, now, sink).has_value());
    }
  }
  const JobId big = mig(a, 400, 30000, true);
  ASSERT_FALSE(e.state().recut_moved.empty()) << "no re-cut started";
  ASSERT_FALSE(e.state().nominated.empty());
  ASSERT_FALSE(e.state().reservations.empty());
  ASSERT_EQ(e.state().job(big).victims_pending, 1);

  auto state = DecodeSnapshot(EncodeSnapshot(e.state()), config.lending);
  ASSERT_TRUE(state.has_value()) << state.error().message;
  auto restored = RestoreEngine(config, AttributeTable{}, std::move(*state), now);
  ASSERT_TRUE(restored.has_value()) << restored.error().message;
  Engine& r = **restored;
  EXPECT_EQ(r.state().recut_moved, e.state().recut_moved);
  EXPECT_EQ(r.state().reservations, e.state().reservations);
  std::vector<std::string> original, continued;
  auto to = [](std::vector<std::string>& lines) {
    return [&lines](const Event& ev) { lines.push_back(ToJsonLine(ev)); };
  };
  now += 20s;
  ASSERT_TRUE(e.CheckpointDone(small[1], now, to(original)).has_value());
  ASSERT_TRUE(r.CheckpointDone(small[1], now, to(continued)).has_value());
  now += 30s;
  e.Tick(now, to(original));
  r.Tick(now, to(continued));
  ASSERT_TRUE(e.Finish(small[5], true, now, to(original)).has_value());
  ASSERT_TRUE(r.Finish(small[5], true, now, to(continued)).has_value());
  EXPECT_EQ(continued, original);
  EXPECT_EQ(r.state().job(big).state, JobState::kRunning);
  EXPECT_TRUE(SameBytes(EncodeSnapshot(r.state()), EncodeSnapshot(e.state())));

  // The journal of the same history, decoded and replayed, rebuilds it too.
  EngineState replayed(config.lending);
  for (const Event& ev : log) replayed.Apply(*EventFromJson(ToJsonLine(ev)));
  EXPECT_TRUE(std::any_of(log.begin(), log.end(),
                          [](const Event& ev) { return std::holds_alternative<MigRecutStarted>(ev.body); }));
  for (const std::string& line : original) replayed.Apply(*EventFromJson(line));
  EngineState engine_state = Decoded(EncodeSnapshot(e.state()), config.lending);
  ForgetBlockedGroups(engine_state);
  EXPECT_TRUE(SameBytes(EncodeSnapshot(replayed), EncodeSnapshot(engine_state)));
}

// Heartbeat clocks are soft state: after a restore every node counts as
// heard from at the restore time.
TEST(EngineRestoreTest, FailureDetectionRestartsItsClocksAtTheRestore) {
  EngineConfig config = TestConfig();
  config.heartbeat_timeout = 20s;
  World w;  // set up at time 0; its nodes never heartbeat
  w.now = InstantFromMillis(600'000);
  auto state = DecodeSnapshot(EncodeSnapshot(w.engine->state()), config.lending);
  ASSERT_TRUE(state.has_value()) << state.error().message;
  auto restored = RestoreEngine(config, TestAttributes(), std::move(*state), w.now);
  ASSERT_TRUE(restored.has_value()) << restored.error().message;
  Engine& r = **restored;
  std::vector<NodeIndex> down;
  const Engine::Sink sink = [&down](const Event& ev) {
    if (const auto* d = std::get_if<NodeDown>(&ev.body)) down.push_back(d->node);
  };
  for (NodeIndex n = 1; n < r.state().cluster.node_count(); ++n) {
    ASSERT_TRUE(r.Heartbeat(n, w.now + 15s, sink).has_value());
  }
  r.Tick(w.now + 20s, sink);  // 20 s since the restore: not yet past the timeout
  EXPECT_TRUE(down.empty());
  r.Tick(w.now + 21s, sink);  // node 0 has been silent since the restore
  EXPECT_EQ(down, std::vector<NodeIndex>{0});
}

// A gang is placed replica by replica on the real cluster and undone when a
// replica does not fit; the attempt must leave the state as a replay of the
// events (which never sees it) leaves it, allocation slots included.
TEST(SnapshotTest, AGangThatDidNotFitLeavesNoTraceInTheState) {
  auto created = CreateEngine(TestConfig(), TestAttributes());
  ASSERT_TRUE(created.has_value()) << created.error().message;
  Engine& e = **created;
  std::vector<Event> log;
  const Engine::Sink sink = [&log](const Event& ev) { log.push_back(ev); };
  const Instant t0{};
  const GpuModelId h100 = *Catalog::Builtin().Find("H100");
  ASSERT_TRUE(e.AddPool("p", PoolSelector{}, {}, t0, sink).has_value());
  for (int i = 0; i < 3; ++i) {
    ASSERT_TRUE(e.AddNode(NodeSpec{"n" + std::to_string(i), 128000, 1 << 20, 8, h100}, "r", "z", "k", t0, sink));
  }
  const TenantId t = *e.AddTenant("t", t0, sink);
  ASSERT_TRUE(e.SetQuota(t, 0, Quota{0, 64000, 1, false}, t0, sink).has_value());
  // CPU-only work takes most cores of two nodes: enough GPUs in total for
  // the gang, but only one node with the cores for a replica.
  JobSpec cpu;
  cpu.tenant = t;
  cpu.kind = JobKind::kCpu;
  cpu.demand = testing::CpuOnly(100000, 1024);
  ASSERT_TRUE(e.Submit(cpu, t0, sink).has_value());
  ASSERT_TRUE(e.Submit(cpu, t0, sink).has_value());
  JobSpec gang;
  gang.tenant = t;
  gang.demand = testing::Whole(8, 100000, 1024);
  gang.replicas = 2;  // the first replica fits, the second does not: tried, then undone
  const JobId id = *e.Submit(gang, t0, sink);
  ASSERT_EQ(e.state().job(id).state, JobState::kPending);
  EngineState replayed(TestConfig().lending);
  for (const Event& ev : log) replayed.Apply(ev);
  EngineState engine_state = Decoded(EncodeSnapshot(e.state()), TestConfig().lending);
  ForgetBlockedGroups(engine_state);
  EXPECT_EQ(e.state().cluster.allocation_slots().size(), 2u);
  EXPECT_TRUE(SameBytes(EncodeSnapshot(engine_state), EncodeSnapshot(replayed)));
}

// --- damaged snapshots ---------------------------------------------------------------

// A header for `payload`, as EncodeSnapshot writes it.
std::string Sealed(std::string_view payload) {
  std::string out(kSnapshotHeaderBytes, '\0');
  std::memcpy(out.data(), "GPSNAP\r\n", 8);
  auto put = [&out](size_t at, uint64_t v, int bytes) {
    for (int i = 0; i < bytes; ++i) out[at + i] = static_cast<char>(v >> (8 * i));
  };
  put(8, kSnapshotVersion, 4);
  put(12, payload.size(), 8);
  put(20, SnapshotChecksum(payload), 8);
  out.append(payload);
  return out;
}

std::string SmallSnapshot() {
  World w;
  Rng rng(9);
  for (int i = 0; i < 60; ++i) w.Step(rng, {w.engine.get()});
  EXPECT_GT(w.engine->state().running.size(), 3u);
  EXPECT_GT(w.engine->state().queue.size(), 0u);
  return EncodeSnapshot(w.engine->state());
}

TEST(SnapshotTest, EveryTruncationIsAnError) {
  const std::string bytes = SmallSnapshot();
  ASSERT_EQ(Sealed(std::string_view(bytes).substr(kSnapshotHeaderBytes)), bytes);
  ASSERT_LT(bytes.size(), 16384u);
  const std::string_view payload = std::string_view(bytes).substr(kSnapshotHeaderBytes);
  for (size_t cut = 0; cut < bytes.size(); ++cut) {
    auto raw = DecodeSnapshot(std::string_view(bytes).substr(0, cut), {});
    ASSERT_FALSE(raw.has_value()) << "cut at " << cut;
  }
  // Resealed, so that the reader itself meets the end of the bytes.
  std::set<std::string> sections;
  for (size_t cut = 0; cut < payload.size(); ++cut) {
    auto sealed = DecodeSnapshot(Sealed(payload.substr(0, cut)), {});
    ASSERT_FALSE(sealed.has_value()) << "payload cut at " << cut;
    const std::string& m = sealed.error().message;
    sections.insert(m.substr(0, m.find(':', 10)));
  }
  EXPECT_GE(sections.size(), 8u);  // the error says where it stopped
}

TEST(SnapshotTest, DamagedBytesAreErrorsOrValidStatesNeverCrashes) {
  const std::string bytes = SmallSnapshot();
  const std::string payload = bytes.substr(kSnapshotHeaderBytes);
  const LendingConfig lending = TestConfig().lending;
  Rng rng(17);
  // The checksum catches any change within one 8-byte word.
  for (int trial = 0; trial < 300; ++trial) {
    std::string bad = bytes;
    bad[kSnapshotHeaderBytes + rng.Below(payload.size())] ^= static_cast<char>(1 + rng.Below(255));
    auto r = DecodeSnapshot(bad, lending);
    ASSERT_FALSE(r.has_value());
    EXPECT_NE(r.error().message.find("checksum"), std::string::npos);
  }
  std::string wrong_version = bytes;
  wrong_version[8] = static_cast<char>(kSnapshotVersion + 1);
  auto v = DecodeSnapshot(wrong_version, lending);
  ASSERT_FALSE(v.has_value());
  EXPECT_EQ(v.error().code, ErrorCode::kFailedPrecondition);
  // Behind the checksum: damage sealed as if it were genuine.
  int valid = 0, refused = 0;
  for (int trial = 0; trial < 4000; ++trial) {
    std::string bad = payload;
    const int flips = 1 + static_cast<int>(rng.Below(3));
    for (int f = 0; f < flips; ++f) {
      const size_t at = rng.Below(bad.size());
      bad[at] = rng.Below(2) ? static_cast<char>(bad[at] ^ (1 << rng.Below(8))) : static_cast<char>(rng.Below(256));
    }
    auto r = DecodeSnapshot(Sealed(bad), lending);
    if (!r.has_value()) {
      ++refused;
      EXPECT_EQ(r.error().message.rfind("snapshot: ", 0), 0u) << r.error().message;
      continue;
    }
    ++valid;
    EngineState s = std::move(*r);
    ASSERT_TRUE(CheckInvariants(s).has_value());
    const std::string again = EncodeSnapshot(s);
    auto twice = DecodeSnapshot(again, lending);
    ASSERT_TRUE(twice.has_value()) << twice.error().message;
    EXPECT_TRUE(SameBytes(EncodeSnapshot(*twice), again));
  }
  EXPECT_GT(refused, 1000);
  EXPECT_GT(valid, 0);  // e.g. a job's name or a time changed
}

TEST(SnapshotTest, AnEmptyStateRoundTrips) {
  const EngineState empty;
  const std::string bytes = EncodeSnapshot(empty);
  EXPECT_LT(bytes.size(), 64u);
  auto back = DecodeSnapshot(bytes, {});
  ASSERT_TRUE(back.has_value()) << back.error().message;
  EXPECT_TRUE(SameBytes(EncodeSnapshot(*back), bytes));
  EXPECT_FALSE(DecodeSnapshot("", {}).has_value());
  EXPECT_FALSE(DecodeSnapshot(std::string(100, 'x'), {}).has_value());
}


// --- version 4 (before issue 14's container fields) ----------------------------

// The engine snapshot of tests/fixtures/data-v4 (written by the release
// before issue 14, see its README.md): tenants team-a and team-b, node-1,
// job 1 running `sh -c "echo hello; sleep 1000"` (env FOO=bar, working_dir
// /tmp, SIGUSR2, 30s, 5s) and job 3 pending with `python3 train.py`.
constexpr const char* kVersion4Hex =
    "4750534E41500D0A04000000E80100000000000067CE5551415E574D081688ABA292C6680301000764656661756C74FFFFFF"
    "FFFFFFFFFFFF010000A01F80FA01808008000200067465616D2D6101D00FA01F000000000000F03F00D00FD00F8020000001"
    "0002067465616D2D6201D00FD00F000000000000F03F00000000000182EFA092C668000001066E6F64652D3180FA01808008"
    "B0EA0180E00707020000000180800A020000020000010001000001D00F0080800A0000000108726567696F6E2D31067A6F6E"
    "652D31067261636B2D3100010001D00F802002D00FFFFFFFFFFFFFFFFFFF0101000200000001000002021066697874757265"
    "2D747261696E696E670000C8010002D00F802002D00FFFFFFFFFFFFFFFFFFF010100010000000000000100E0D40300000003"
    "027368022D63166563686F2068656C6C6F3B20736C65657020313030300103464F4F03626172042F746D7018E0D403904E00"
    "000196EFA092C66896EFA092C66896EFA092C6680196EFA092C668000001000100000100000000000000060E666978747572"
    "652D7175657565640002C8010002A01F804004D00FFFFFFFFFFFFFFFFFFF010100010000000000000000E0D4030000000207"
    "707974686F6E3308747261696E2E7079000014C0A907A09C0100000088ABA292C66888ABA292C66800000000000001000000"
    "00000000000000010603000000000000";

std::string FromHex(std::string_view hex) {
  std::string out;
  for (size_t i = 0; i + 1 < hex.size(); i += 2) {
    out.push_back(static_cast<char>(std::stoi(std::string(hex.substr(i, 2)), nullptr, 16)));
  }
  return out;
}

TEST(SnapshotTest, AVersion4SnapshotLoadsWithTheContainerFieldsAtTheirDefaults) {
  const std::string bytes = FromHex(kVersion4Hex);
  ASSERT_EQ(bytes[8], 4);
  auto s = DecodeSnapshot(bytes, {});
  ASSERT_TRUE(s.has_value()) << s.error().message;
  ASSERT_EQ(s->tenants.size(), 2u);
  EXPECT_EQ(s->tenants[1].name, "team-b");
  const Job& running = s->job(1);
  EXPECT_EQ(running.state, JobState::kRunning);
  EXPECT_EQ(running.spec.task.command, (std::vector<std::string>{"sh", "-c", "echo hello; sleep 1000"}));
  EXPECT_EQ(running.spec.task.env, (std::vector<std::pair<std::string, std::string>>{{"FOO", "bar"}}));
  EXPECT_EQ(running.spec.task.working_dir, "/tmp");
  EXPECT_EQ(running.spec.task.checkpoint_signal, 12);
  EXPECT_EQ(running.spec.task.checkpoint_timeout, 30s);
  EXPECT_EQ(running.spec.task.stop_grace, 5s);
  EXPECT_EQ(running.spec.task.image, "");
  EXPECT_EQ(running.spec.task.shm_mib, 1024);
  EXPECT_FALSE(running.spec.task.network_isolated);
  EXPECT_EQ(s->job(3).state, JobState::kPending);
  EXPECT_EQ(s->job(3).spec.task.command, (std::vector<std::string>{"python3", "train.py"}));
  // Written again it is the current version, and reads back to the same bytes.
  const std::string current = EncodeSnapshot(*s);
  EXPECT_EQ(current[8], static_cast<char>(kSnapshotVersion));
  auto again = DecodeSnapshot(current, {});
  ASSERT_TRUE(again.has_value()) << again.error().message;
  EXPECT_TRUE(SameBytes(EncodeSnapshot(*again), current));
  // Versions before 4 are refused as unknown.
  std::string v3 = bytes;
  v3[8] = 3;
  auto old = DecodeSnapshot(v3, {});
  ASSERT_FALSE(old.has_value());
  EXPECT_EQ(old.error().code, ErrorCode::kFailedPrecondition);
}

// Version 5 has version 6's payload under the legacy checksum: such a
// snapshot (the release before the XXH3 checksum wrote it) loads, and a
// version 6 header with the legacy checksum is damage.
TEST(SnapshotTest, AVersion5SnapshotLoadsUnderItsLegacyChecksum) {
  auto s = DecodeSnapshot(FromHex(kVersion4Hex), {});
  ASSERT_TRUE(s.has_value()) << s.error().message;
  s->job(1).spec.task.image = "host";
  const std::string v6 = EncodeSnapshotAs(*s, 6);
  ASSERT_EQ(v6[8], 6);
  const std::string_view payload = std::string_view(v6).substr(kSnapshotHeaderBytes);
  std::string v5 = v6;
  v5[8] = 5;
  for (int i = 0; i < 8; ++i) v5[20 + i] = static_cast<char>(LegacySnapshotChecksum(payload) >> (8 * i));
  auto loaded = DecodeSnapshot(v5, {});
  ASSERT_TRUE(loaded.has_value()) << loaded.error().message;
  EXPECT_EQ(loaded->job(1).spec.task.image, "host");
  EXPECT_TRUE(SameBytes(EncodeSnapshotAs(*loaded, 6), v6));
  // A version 6 snapshot loads too, and is written again in the current version.
  auto six = DecodeSnapshot(v6, {});
  ASSERT_TRUE(six.has_value()) << six.error().message;
  EXPECT_EQ(EncodeSnapshot(*six), EncodeSnapshot(*loaded));
  EXPECT_EQ(EncodeSnapshot(*six)[8], static_cast<char>(kSnapshotVersion));
  std::string mixed = v5;
  mixed[8] = 6;
  auto refused = DecodeSnapshot(mixed, {});
  ASSERT_FALSE(refused.has_value());
  EXPECT_NE(refused.error().message.find("checksum mismatch"), std::string::npos) << refused.error().message;
  EXPECT_NE(SnapshotChecksum(payload), LegacySnapshotChecksum(payload));
}

// Issue 16: the workload learned from arrivals is in the snapshot (version
// 8); a version 7 snapshot has none and loads with the learner empty (the
// prior alone until the next arrivals), the rest as it was.
TEST(SnapshotTest, TheLearnedWorkloadRoundTripsAndVersion7LoadsWithoutIt) {
  World w;
  Rng rng(5);
  for (int i = 0; i < 120; ++i) w.Step(rng, {w.engine.get()});
  const WorkloadLearner& learned = w.engine->state().workload;
  ASSERT_GT(learned.arrivals(), 20);
  ASSERT_GT(learned.builds(), 3u);
  const std::string v8 = EncodeSnapshot(w.engine->state());
  auto back = DecodeSnapshot(v8, TestConfig().lending);
  ASSERT_TRUE(back.has_value()) << back.error().message;
  EXPECT_EQ(back->workload.image().weights, learned.image().weights);
  EXPECT_EQ(back->workload.image().built, learned.image().built);
  EXPECT_EQ(back->workload.builds(), learned.builds());
  EXPECT_TRUE(SameBytes(EncodeSnapshot(*back), v8));

  const std::string v7 = EncodeSnapshotAs(w.engine->state(), 7);
  ASSERT_EQ(v7[8], 7);
  ASSERT_LT(v7.size(), v8.size());
  auto old = DecodeSnapshot(v7, TestConfig().lending);
  ASSERT_TRUE(old.has_value()) << old.error().message;
  EXPECT_EQ(old->workload.arrivals(), 0);
  EXPECT_EQ(old->workload.builds(), 0u);
  EXPECT_TRUE(SameBytes(EncodeSnapshotAs(*old, 7), v7));
  auto restored = RestoreEngine(TestConfig(), TestAttributes(), std::move(*old), w.now);
  ASSERT_TRUE(restored.has_value()) << restored.error().message;
}

// A learned weight that cannot be (not a number) is refused, naming the
// section; the snapshot's last 8 bytes are the built list's last weight.
TEST(SnapshotTest, ADamagedLearnedWeightIsAnErrorNamingTheWorkload) {
  const std::string good = SmallSnapshot();
  std::string payload = good.substr(kSnapshotHeaderBytes);
  const uint64_t nan = std::bit_cast<uint64_t>(std::numeric_limits<double>::quiet_NaN());
  for (int i = 0; i < 8; ++i) payload[payload.size() - 8 + i] = static_cast<char>(nan >> (8 * i));
  auto r = DecodeSnapshot(Sealed(payload), {});
  ASSERT_FALSE(r.has_value());
  EXPECT_NE(r.error().message.find("workload"), std::string::npos) << r.error().message;
  EXPECT_NE(r.error().message.find("built"), std::string::npos) << r.error().message;
}

TEST(SnapshotTest, TheContainerFieldsRoundTrip) {
  auto s = DecodeSnapshot(FromHex(kVersion4Hex), {});
  ASSERT_TRUE(s.has_value()) << s.error().message;
  TaskSpec& t = s->job(1).spec.task;
  t.image = "/var/lib/gpupool/images/pytorch-2.4";
  t.shm_mib = 8192;
  t.network_isolated = true;
  s->job(3).spec.task.image = "host";
  const std::string bytes = EncodeSnapshot(*s);
  auto back = DecodeSnapshot(bytes, {});
  ASSERT_TRUE(back.has_value()) << back.error().message;
  EXPECT_EQ(back->job(1).spec.task, t);
  EXPECT_EQ(back->job(3).spec.task.image, "host");
  EXPECT_EQ(back->job(3).spec.task.shm_mib, 1024);
  EXPECT_TRUE(SameBytes(EncodeSnapshot(*back), bytes));
}

}  // namespace
}  // namespace gpupool
