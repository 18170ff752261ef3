// Scenario tests of the Engine that read like the requirements they check.
// Every event is followed by an invariant check.
#include "src/engine/engine.h"

#include <gtest/gtest.h>

#include <algorithm>

#include "src/control/control_loops.h"
#include "tests/builders.h"
#include "src/model/mig.h"
#include <bit>

namespace gpupool {
namespace {

using namespace std::chrono_literals;
using testing::Share;
using testing::Whole;

constexpr int64_t kGpu = kMilliPerGpu;

class EngineHarness {
 public:
  explicit EngineHarness(std::string policy = "BestFit", LendingConfig lending = {},
                         ReclaimConfig reclaim = {}, Duration heartbeat_timeout = Duration(0)) {
    EngineConfig config;
    config.policy = std::move(policy);
    config.lending = lending;
    config.reclaim = reclaim;
    config.heartbeat_timeout = heartbeat_timeout;
    config.workload_learning.prior = {Whole(1, 8000), Share(500, 2000)};
    AttributeTable attrs;
    cuda_ = attrs.AddNodeClass({"a100", {}, 0, "nvidia-ampere", {{"cuda", {{12, 2, 0}}}, {"nccl", {{2, 18, 0}}}}});
    cann_ = attrs.AddNodeClass({"ascend", {}, 0, "ascend-910", {{"cann", {{8, 0, 0}}}, {"hccl", {{8, 0, 0}}}}});
    Requirement needs_cuda;
    needs_cuda.name = "cuda12";
    needs_cuda.ecosystem = {{"cuda", {{12, 0, 0}}}};
    cuda_job_ = attrs.AddRequirement(needs_cuda);
    auto e = CreateEngine(config, std::move(attrs));
    EXPECT_TRUE(e.has_value()) << (e ? "" : e.error().message);
    engine = std::move(*e);
    sink = [this](const Event& ev) {
      log.push_back(ev);
      auto ok = CheckInvariants(engine->state());
      ASSERT_TRUE(ok.has_value()) << ok.error().message << " after " << ToJsonLine(ev);
    };
  }

  PoolId Pool(std::string name, GpuModelMask models = kAnyGpuModel, std::vector<TenantId> dedicated = {}) {
    auto p = engine->AddPool(std::move(name), PoolSelector{models, {}}, std::move(dedicated), now, sink);
    EXPECT_TRUE(p.has_value()) << (p ? "" : p.error().message);
    return *p;
  }
  void Nodes(int count, std::string model, int gpus = 8, int64_t cpu = 96000, uint16_t attr = 0) {
    const GpuModelId m = *Catalog::Builtin().Find(model);
    for (int i = 0; i < count; ++i) {
      NodeSpec spec{model + "-" + std::to_string(node_seq_++), cpu, 1 << 20, gpus, m, 0, attr};
      auto n = engine->AddNode(spec, "r1", "z1", "rack1", now, sink);
      EXPECT_TRUE(n.has_value()) << (n ? "" : n.error().message);
    }
  }
  TenantId Tenant(std::string name, PoolId pool, int64_t guaranteed_gpus, int64_t limit_gpus, double weight = 1,
                  bool reserved = false) {
    auto t = engine->AddTenant(std::move(name), now, sink);
    EXPECT_TRUE(t.has_value());
    Quota q{guaranteed_gpus * kGpu, limit_gpus * kGpu, weight, reserved};
    auto ok = engine->SetQuota(*t, pool, q, now, sink);
    EXPECT_TRUE(ok.has_value()) << (ok ? "" : ok.error().message);
    return *t;
  }
  JobId Submit(TenantId t, Demand d, int replicas = 1, int priority = 0, bool checkpointable = false) {
    JobSpec s;
    s.tenant = t;
    s.demand = d;
    s.replicas = replicas;
    s.priority = priority;
    s.checkpointable = checkpointable;
    s.checkpoint_duration = 20s;
    auto id = engine->Submit(s, now, sink);
    EXPECT_TRUE(id.has_value()) << (id ? "" : id.error().message);
    return id ? *id : -1;
  }
  JobState State(JobId id) const {
    const Job* j = engine->state().find_job(id);
    return j ? j->state : JobState::kSucceeded;  // gone: finished or cancelled
  }
  template <class T>
  std::vector<T> Events() const {
    std::vector<T> out;
    for (const Event& e : log) {
      if (auto* b = std::get_if<T>(&e.body)) out.push_back(*b);
    }
    return out;
  }
  void Advance(Duration d) {
    now += d;
    engine->Tick(now, sink);
  }

  std::unique_ptr<Engine> engine;
  Engine::Sink sink;
  std::vector<Event> log;
  Instant now{};
  uint16_t cuda_ = 0, cann_ = 0, cuda_job_ = 0;

 private:
  int node_seq_ = 0;
};

TEST(EngineTest, AJobWithinItsGuaranteeRunsAtOnceAndFinishes) {
  EngineHarness h;
  const PoolId p = h.Pool("a100");
  h.Nodes(2, "A100-80GB");
  const TenantId a = h.Tenant("a", p, 8, 16);
  const JobId j = h.Submit(a, Whole(4, 8000));
  EXPECT_EQ(h.State(j), JobState::kRunning);
  ASSERT_EQ(h.Events<JobPlaced>().size(), 1u);
  EXPECT_FALSE(h.Events<JobPlaced>()[0].borrowed);
  EXPECT_EQ(h.engine->state().tenant_pool(a, p).usage.gpu_milli, 4 * kGpu);
  ASSERT_TRUE(h.engine->Finish(j, true, h.now, h.sink).has_value());
  EXPECT_EQ(h.engine->state().tenant_pool(a, p).usage.gpu_milli, 0);
  EXPECT_EQ(h.engine->state().jobs.size(), 0u);
}

TEST(EngineTest, TenantIdleForFiveMinutesLendsThirtyPercentAndGetsItBackByPreemption) {
  // Tenant A is guaranteed 10 of the 16 GPUs, B 6 with an elastic limit of 16.
  EngineHarness h;
  const PoolId p = h.Pool("a100");
  h.Nodes(2, "A100-80GB");
  const TenantId a = h.Tenant("a", p, 10, 16);
  const TenantId b = h.Tenant("b", p, 6, 16);
  // B fills its guarantee; it cannot borrow A's idle, reserved guarantee.
  std::vector<JobId> b_jobs;
  for (int i = 0; i < 6; ++i) b_jobs.push_back(h.Submit(b, Whole(1, 4000), 1, 0, /*checkpointable=*/true));
  const JobId b_extra = h.Submit(b, Whole(1, 4000), 1, 0, true);
  EXPECT_EQ(h.State(b_extra), JobState::kPending);
  // A stays idle (below 50% of its guarantee) for the whole 5-minute window.
  h.Advance(4min);
  EXPECT_TRUE(h.Events<QuotaLent>().empty());
  h.Advance(1min);
  ASSERT_EQ(h.Events<QuotaLent>().size(), 1u);
  EXPECT_EQ(h.Events<QuotaLent>()[0].milli, 3 * kGpu);  // 30% of 10 GPUs
  // B now borrows A's lent GPUs.
  EXPECT_EQ(h.State(b_extra), JobState::kRunning);
  const JobId b_more1 = h.Submit(b, Whole(1, 4000), 1, 0, true);
  const JobId b_more2 = h.Submit(b, Whole(1, 4000), 1, 0, true);
  EXPECT_EQ(h.State(b_more1), JobState::kRunning);
  EXPECT_EQ(h.State(b_more2), JobState::kRunning);
  EXPECT_EQ(h.engine->state().tenant_pool(b, p).borrowed_milli(), 3 * kGpu);
  // A submits work that needs its whole guarantee: the loan is recalled and
  // B's borrowed work is checkpointed, then preempted; A runs.
  const JobId a_job = h.Submit(a, Whole(8, 8000), 1, 0);
  ASSERT_EQ(h.Events<QuotaRecalled>().size(), 1u);
  EXPECT_EQ(h.State(a_job), JobState::kPending);
  const auto started = h.Events<PreemptionStarted>();
  ASSERT_FALSE(started.empty());
  for (const auto& s : started) {
    EXPECT_EQ(s.reason, PreemptReason::kGuaranteeReclaim);
    EXPECT_TRUE(s.checkpoint);
    EXPECT_EQ(s.preemptor, a_job);
    EXPECT_TRUE(h.engine->state().job(s.victim).borrowed);
  }
  // B is never taken below its guarantee: at most its 3 borrowed GPUs go.
  EXPECT_LE(static_cast<int64_t>(started.size()), 3);
  for (const auto& s : started) {
    EXPECT_EQ(h.State(s.victim), JobState::kCheckpointing);
    ASSERT_TRUE(h.engine->CheckpointDone(s.victim, h.now + 20s, h.sink).has_value());
  }
  EXPECT_EQ(h.State(a_job), JobState::kRunning);
  EXPECT_EQ(h.engine->state().tenant_pool(b, p).usage.gpu_milli, 16 * kGpu - 8 * kGpu - 0);  // B kept 8
  EXPECT_GE(h.engine->state().tenant_pool(b, p).usage.gpu_milli, 6 * kGpu);
}

TEST(EngineTest, HigherPriorityPreemptsLowerWithinATenantOnly) {
  EngineHarness h;
  const PoolId p = h.Pool("a100");
  h.Nodes(1, "A100-80GB");
  const TenantId a = h.Tenant("a", p, 4, 8);
  const TenantId b = h.Tenant("b", p, 4, 8);
  const JobId a_low = h.Submit(a, Whole(4, 8000), 1, /*priority=*/0);
  const JobId b_low = h.Submit(b, Whole(4, 8000), 1, 0);
  ASSERT_EQ(h.State(a_low), JobState::kRunning);
  ASSERT_EQ(h.State(b_low), JobState::kRunning);
  const JobId a_high = h.Submit(a, Whole(4, 8000), 1, /*priority=*/10);
  // A's high-priority job takes A's own low-priority job's place, not B's.
  ASSERT_EQ(h.Events<PreemptionStarted>().size(), 1u);
  EXPECT_EQ(h.Events<PreemptionStarted>()[0].victim, a_low);
  EXPECT_EQ(h.Events<PreemptionStarted>()[0].reason, PreemptReason::kPriority);
  EXPECT_EQ(h.State(a_high), JobState::kRunning);  // not checkpointable: released at once
  EXPECT_EQ(h.State(a_low), JobState::kPending);
  EXPECT_EQ(h.State(b_low), JobState::kRunning);
  ASSERT_EQ(h.Events<JobPreempted>().size(), 1u);
}

TEST(EngineTest, QuotaExhaustedAlertsOnceAndTheJobWaits) {
  EngineHarness h;
  const PoolId p = h.Pool("a100");
  h.Nodes(2, "A100-80GB");
  const TenantId a = h.Tenant("a", p, 2, 4);
  h.Submit(a, Whole(4, 8000));
  const JobId waiting = h.Submit(a, Whole(1, 8000));
  h.Submit(a, Whole(1, 8000));
  EXPECT_EQ(h.State(waiting), JobState::kPending);
  ASSERT_EQ(h.Events<QuotaExhausted>().size(), 1u);
  EXPECT_EQ(h.Events<QuotaExhausted>()[0].tenant, a);
  EXPECT_NE(h.engine->ExplainPending(waiting).find("quota exhausted"), std::string::npos)
      << h.engine->ExplainPending(waiting);
  // Raising the quota at runtime lets it run.
  ASSERT_TRUE(h.engine->SetQuota(a, p, Quota{2 * kGpu, 6 * kGpu, 1, false}, h.now, h.sink).has_value());
  EXPECT_EQ(h.State(waiting), JobState::kRunning);
}

TEST(EngineTest, AJobThatCanNeverFitIsRejectedWithTheReason) {
  EngineHarness h;
  const PoolId p = h.Pool("a100");
  h.Nodes(2, "A100-80GB");
  const TenantId a = h.Tenant("a", p, 8, 16);
  const JobId too_wide = h.Submit(a, Whole(16, 8000));  // no node has 16 GPUs
  ASSERT_EQ(h.Events<JobRejected>().size(), 1u);
  EXPECT_EQ(h.Events<JobRejected>()[0].job, too_wide);
  EXPECT_NE(h.Events<JobRejected>()[0].reason.find("no node is big enough"), std::string::npos)
      << h.Events<JobRejected>()[0].reason;
  h.Submit(a, Whole(8, 8000), 3);  // 3 x 8 GPUs > the tenant's 16-GPU limit
  ASSERT_EQ(h.Events<JobRejected>().size(), 2u);
  EXPECT_NE(h.Events<JobRejected>()[1].reason.find("above the elastic limit"), std::string::npos);
  // Bad input is an error and decides nothing.
  const size_t before = h.log.size();
  JobSpec bad;
  bad.tenant = a;
  bad.demand = Whole(2, 1000);
  bad.demand.gpu_milli = 500;
  auto r = h.engine->Submit(bad, h.now, h.sink);
  ASSERT_FALSE(r.has_value());
  EXPECT_NE(r.error().message.find("gpu_milli"), std::string::npos);
  EXPECT_EQ(h.log.size(), before);
}

TEST(EngineTest, GangIsAllOrNothingAndHoldsNodesWhileSmallJobsBackfill) {
  EngineHarness h;
  const PoolId p = h.Pool("a100");
  h.Nodes(4, "A100-80GB");
  const TenantId a = h.Tenant("a", p, 0, 32);
  // Three 5-GPU jobs land on three different nodes (no two fit one node).
  std::vector<JobId> fillers;
  for (int i = 0; i < 3; ++i) fillers.push_back(h.Submit(a, Whole(5, 4000)));
  for (JobId f : fillers) ASSERT_EQ(h.State(f), JobState::kRunning);
  // A gang of two 8-GPU replicas fits the quota but only one node is free:
  // nothing of it is placed, and it holds two nodes.
  const JobId gang = h.Submit(a, Whole(8, 8000), 2);
  EXPECT_EQ(h.State(gang), JobState::kPending);
  ASSERT_EQ(h.Events<NodesReserved>().size(), 1u);
  EXPECT_EQ(h.Events<NodesReserved>()[0].job, gang);
  const auto held = h.Events<NodesReserved>()[0].nodes;
  ASSERT_EQ(held.size(), 2u);
  // A small job backfills, but not onto the held nodes.
  const JobId small = h.Submit(a, Whole(2, 4000));
  EXPECT_EQ(h.State(small), JobState::kRunning);
  const NodeIndex small_node = h.Events<JobPlaced>().back().replicas[0].node;
  EXPECT_EQ(std::find(held.begin(), held.end(), small_node), held.end());
  // When the filler on a held node ends, the gang runs on the held nodes.
  for (JobId f : fillers) {
    const NodeIndex n = h.engine->state().job(f).placements[0].node;
    if (std::find(held.begin(), held.end(), n) != held.end()) {
      ASSERT_TRUE(h.engine->Finish(f, true, h.now, h.sink).has_value());
    }
  }
  ASSERT_EQ(h.State(gang), JobState::kRunning);
  const JobPlaced placed = h.Events<JobPlaced>().back();
  ASSERT_EQ(placed.job, gang);
  ASSERT_EQ(placed.replicas.size(), 2u);
  for (const auto& r : placed.replicas) {
    EXPECT_NE(std::find(held.begin(), held.end(), r.node), held.end());
  }
  EXPECT_EQ(h.Events<ReservationReleased>().size(), 1u);
}

TEST(EngineTest, DedicatedPoolsTakeOnlyTheirTenants) {
  EngineHarness h;
  const PoolId shared = h.Pool("shared", GpuModelMask{1} << *Catalog::Builtin().Find("A100-80GB"));
  h.Nodes(1, "A100-80GB");
  const TenantId a = h.Tenant("a", shared, 4, 8);
  const PoolId secure = h.Pool("secure", GpuModelMask{1} << *Catalog::Builtin().Find("H100"), {a});
  h.Nodes(1, "H100");
  ASSERT_TRUE(h.engine->SetQuota(a, secure, Quota{8 * kGpu, 8 * kGpu, 1, true}, h.now, h.sink).has_value());
  const TenantId b = h.Tenant("b", shared, 4, 8);
  auto refused = h.engine->SetQuota(b, secure, Quota{0, 8 * kGpu, 1, false}, h.now, h.sink);
  ASSERT_FALSE(refused.has_value());
  EXPECT_NE(refused.error().message.find("dedicated"), std::string::npos);
  JobSpec s;
  s.tenant = b;
  s.demand = Whole(8, 8000);
  s.pools = {secure};
  const JobId j = *h.engine->Submit(s, h.now, h.sink);
  ASSERT_EQ(h.Events<JobRejected>().size(), 1u);
  EXPECT_EQ(h.Events<JobRejected>()[0].job, j);
}

TEST(EngineTest, ACudaJobNeverLandsOnAnAcceleratorWithoutCuda) {
  EngineHarness h;
  const PoolId p = h.Pool("mixed");
  h.Nodes(1, "Ascend910B", 8, 96000, h.cann_);
  h.Nodes(1, "A100-80GB", 8, 96000, h.cuda_);
  const TenantId a = h.Tenant("a", p, 16, 16);
  Demand d = Whole(8, 8000);
  d.requirement = h.cuda_job_;
  const JobId first = h.Submit(a, d);
  const JobId second = h.Submit(a, d);
  ASSERT_EQ(h.State(first), JobState::kRunning);
  EXPECT_EQ(h.State(second), JobState::kPending);  // the Ascend node is free but lacks CUDA
  const NodeIndex used = h.Events<JobPlaced>()[0].replicas[0].node;
  EXPECT_EQ(h.engine->state().cluster.node(used).attr_class, h.cuda_);
  EXPECT_NE(h.engine->ExplainPending(second).find("requirements"), std::string::npos)
      << h.engine->ExplainPending(second);
}

TEST(EngineTest, ElasticCapacityIsSharedByWeightedDominantShare) {
  EngineHarness h("BestFit", LendingConfig{.enabled = false});
  const PoolId p = h.Pool("a100");
  h.Nodes(2, "A100-80GB");
  const TenantId a = h.Tenant("a", p, 0, 16, /*weight=*/1);
  const TenantId b = h.Tenant("b", p, 0, 16, /*weight=*/3);
  // Both queue far more than fits; nothing is guaranteed; a pass hands out
  // the 16 GPUs by weighted share: B (weight 3) gets about three times A's.
  for (int i = 0; i < 32; ++i) {
    JobSpec s;
    s.tenant = a;
    s.demand = Whole(1, 4000);
    ASSERT_TRUE(h.engine->Submit(s, h.now, {}).has_value());
  }
  for (int i = 0; i < 32; ++i) {
    JobSpec s;
    s.tenant = b;
    s.demand = Whole(1, 4000);
    ASSERT_TRUE(h.engine->Submit(s, h.now, {}).has_value());
  }
  // A submitted first and holds all 16 GPUs; as its jobs end, each freed
  // GPU goes to the tenant with the lower weighted share.
  std::vector<JobId> running;
  for (const auto& [id, j] : h.engine->state().running) running.push_back(id);
  for (JobId id : running) ASSERT_TRUE(h.engine->Finish(id, true, h.now, {}).has_value());
  const int64_t ua = h.engine->state().tenant_pool(a, p).usage.gpu_milli;
  const int64_t ub = h.engine->state().tenant_pool(b, p).usage.gpu_milli;
  EXPECT_EQ(ua + ub, 16 * kGpu);
  EXPECT_EQ(ua, 4 * kGpu);  // shares 4/16 = 12/16 / 3
  EXPECT_EQ(ub, 12 * kGpu);
}

}  // namespace
}  // namespace gpupool

namespace gpupool {
namespace {

// A fingerprint of the state that decisions depend on.
std::string Fingerprint(const EngineState& s) {
  std::string out;
  for (const auto& [id, j] : s.running) {
    out += "R" + std::to_string(id) + ":" + std::to_string(static_cast<int>(j->state)) + ":" + std::to_string(j->pool);
    for (const auto& r : j->placements) out += "@" + std::to_string(r.node) + "/" + std::to_string(r.gpus);
  }
  for (const Tenant& t : s.tenants) {
    for (const TenantPool& tp : t.pools) {
      out += "T" + std::to_string(tp.usage.gpu_milli) + "/" + std::to_string(tp.usage.lent_milli);
    }
  }
  for (const Node& n : s.cluster.nodes()) {
    out += "N" + std::to_string(n.gpu_milli_free_total) + "/" + std::to_string(n.cpu_milli_free) + "/" +
           std::to_string(n.reserved_for);
  }
  out += "Q" + std::to_string(s.queue.size()) + "J" + std::to_string(s.next_job_id);
  return out;
}

TEST(EngineReplayTest, ReplayingTheEventLogRebuildsTheSameState) {
  EngineHarness h;
  const PoolId p = h.Pool("a100");
  h.Nodes(3, "A100-80GB");
  const TenantId a = h.Tenant("a", p, 12, 24);
  const TenantId b = h.Tenant("b", p, 8, 24);
  std::vector<JobId> jobs;
  for (int i = 0; i < 12; ++i) {
    jobs.push_back(h.Submit(i % 2 ? a : b, i % 3 ? Whole(2, 4000) : Share(250, 2000), 1, i % 4, i % 2 == 0));
    h.Advance(std::chrono::minutes(2));
  }
  ASSERT_TRUE(h.engine->Finish(jobs[0], true, h.now, h.sink).has_value());
  ASSERT_TRUE(h.engine->Cancel(jobs[5], h.now, h.sink).has_value());
  h.Advance(std::chrono::minutes(10));
  h.Submit(a, Whole(8, 8000), 2, 9);
  // A fresh engine with the same configuration, fed only the events.
  EngineHarness fresh;
  for (const Event& e : h.log) fresh.engine->Replay(e);
  EXPECT_EQ(Fingerprint(fresh.engine->state()), Fingerprint(h.engine->state()));
  ASSERT_TRUE(CheckInvariants(fresh.engine->state()).has_value());
  // And it decides the same next events.
  std::vector<std::string> next_a, next_b;
  const Instant later = h.now + std::chrono::minutes(1);
  (void)h.engine->Submit(JobSpec{"", b, JobKind::kTraining, 5, std::nullopt, 1, 0, 0, Whole(1, 1000)}, later,
                         [&](const Event& e) { next_a.push_back(ToJsonLine(e)); });
  (void)fresh.engine->Submit(JobSpec{"", b, JobKind::kTraining, 5, std::nullopt, 1, 0, 0, Whole(1, 1000)}, later,
                             [&](const Event& e) { next_b.push_back(ToJsonLine(e)); });
  EXPECT_EQ(next_a, next_b);
  EXPECT_FALSE(next_a.empty());
}

}  // namespace
}  // namespace gpupool

namespace gpupool {
namespace {

TEST(EngineTest, AffinityAndAntiAffinityFollowOtherJobsLabels) {
  EngineHarness h;
  const PoolId p = h.Pool("a100");
  h.Nodes(3, "A100-80GB");
  const TenantId a = h.Tenant("a", p, 24, 24);
  constexpr LabelMask kCache = 1, kRanker = 2;
  JobSpec cache;
  cache.tenant = a;
  cache.demand = Whole(2, 4000);
  cache.labels = kCache;
  const JobId c = *h.engine->Submit(cache, h.now, h.sink);
  const NodeIndex cache_node = h.engine->state().job(c).placements[0].node;
  // A ranker must sit next to the feature cache (recommendation systems).
  JobSpec ranker;
  ranker.tenant = a;
  ranker.demand = Whole(1, 4000);
  ranker.labels = kRanker;
  ranker.affinity = kCache;
  const JobId r = *h.engine->Submit(ranker, h.now, h.sink);
  EXPECT_EQ(h.engine->state().job(r).placements[0].node, cache_node);
  // A second replica set of the ranker must not share a node with the first.
  JobSpec spread = ranker;
  spread.affinity = 0;
  spread.anti_affinity = kRanker | kCache;
  const JobId sp = *h.engine->Submit(spread, h.now, h.sink);
  EXPECT_NE(h.engine->state().job(sp).placements[0].node, cache_node);
  // Affinity to a label no running job carries cannot be met: it waits.
  JobSpec orphan = ranker;
  orphan.affinity = 4;
  const JobId o = *h.engine->Submit(orphan, h.now, h.sink);
  EXPECT_EQ(h.State(o), JobState::kPending);
}

TEST(EngineTest, VictimsAreTheLowestTierThenTheLeastLostWork) {
  EngineHarness h;
  const PoolId p = h.Pool("a100");
  h.Nodes(2, "A100-80GB");
  const TenantId a = h.Tenant("a", p, 16, 16);
  // Two full nodes of equal-priority work: one checkpoints (loses nothing),
  // the other has run two hours without a checkpoint.
  const JobId lossy = h.Submit(a, Whole(8, 8000), 1, /*priority=*/0, /*checkpointable=*/false);
  const JobId saver = h.Submit(a, Whole(8, 8000), 1, 0, /*checkpointable=*/true);
  h.Advance(std::chrono::hours(2));
  const JobId urgent = h.Submit(a, Whole(8, 8000), 1, /*priority=*/10);
  ASSERT_EQ(h.Events<PreemptionStarted>().size(), 1u);
  EXPECT_EQ(h.Events<PreemptionStarted>()[0].victim, saver);
  EXPECT_TRUE(h.Events<PreemptionStarted>()[0].checkpoint);
  EXPECT_EQ(h.State(lossy), JobState::kRunning);
  ASSERT_TRUE(h.engine->CheckpointDone(saver, h.now + std::chrono::seconds(20), h.sink).has_value());
  EXPECT_EQ(h.State(urgent), JobState::kRunning);
  EXPECT_EQ(h.Events<JobPreempted>()[0].lost_work, Duration(0));
}

// Randomized: a tenant that lent part of its guarantee and then needs it
// gets it back in one round of preemption; only borrowers above their
// guarantee give work back (jobs are indivisible, so the last one taken may
// straddle the line: by less than one job).
TEST(EngineTest, GuaranteeIsRecoverableWithinOnePreemptionRound) {
  for (uint64_t seed = 1; seed <= 40; ++seed) {
    Rng rng(seed);
    EngineHarness h;
    const PoolId p = h.Pool("a100");
    h.Nodes(4, "A100-80GB");  // 32 GPUs
    const int64_t a_guarantee = 8 + static_cast<int64_t>(rng.Below(13));  // 8..20
    const TenantId a = h.Tenant("a", p, a_guarantee, 32);
    const TenantId b = h.Tenant("b", p, 32 - a_guarantee, 32);
    h.Advance(std::chrono::minutes(6));  // both idle: both lend 30%
    ASSERT_EQ(h.engine->state().tenant_pool(a, p).usage.lent_milli, a_guarantee * kGpu * 3 / 10) << "seed " << seed;
    // B fills everything it may, with a random mix.
    for (int i = 0; i < 60; ++i) {
      const int gpus = 1 << rng.Below(3);  // 1, 2 or 4
      h.Submit(b, Whole(gpus, 1000 * gpus), 1, 0, rng.Below(2) == 0);
    }
    const int64_t b_guarantee = (32 - a_guarantee) * kGpu;
    ASSERT_GT(h.engine->state().tenant_pool(b, p).borrowed_milli(), 0) << "seed " << seed;
    // A needs its whole guarantee, as single GPUs.
    const size_t preemptions_before = h.Events<PreemptionStarted>().size();
    std::vector<JobId> mine;
    for (int64_t i = 0; i < a_guarantee; ++i) mine.push_back(h.Submit(a, Whole(1, 1000)));
    // One round: victims start only during A's submissions; then their
    // checkpoints finish and nothing else is preempted.
    const size_t victims = h.Events<PreemptionStarted>().size() - preemptions_before;
    for (const auto& s : h.Events<PreemptionStarted>()) {
      if (h.State(s.victim) == JobState::kCheckpointing) {
        ASSERT_TRUE(h.engine->CheckpointDone(s.victim, h.now, h.sink).has_value());
      }
    }
    EXPECT_EQ(h.Events<PreemptionStarted>().size() - preemptions_before, victims) << "seed " << seed;
    for (JobId j : mine) EXPECT_EQ(h.State(j), JobState::kRunning) << "seed " << seed;
    if (::testing::Test::HasFailure() && getenv("DUMP")) {
      for (const Event& e : h.log) std::cerr << ToJsonLine(e) << "\n";
      for (JobId j : mine) std::cerr << j << ": " << h.engine->ExplainPending(j) << "\n";
      return;
    }
    EXPECT_GT(h.engine->state().tenant_pool(b, p).usage.gpu_milli, b_guarantee - 4 * kGpu) << "seed " << seed;
  }
}

}  // namespace
}  // namespace gpupool

namespace gpupool {
namespace {

TEST(EngineSharingTest, APipelineRunsItsStagesTogetherOnOneNode) {
  EngineHarness h;
  const PoolId p = h.Pool("mixed");
  h.Nodes(2, "A100-80GB");
  h.Nodes(1, "T4", 2);  // no MIG on T4: the pipeline cannot go there
  const TenantId a = h.Tenant("a", p, 18, 18);
  // Video analytics: decode on a small MIG instance, preprocessing on a
  // time-sliced share, inference on a larger MIG instance (PART-4).
  Demand decode{2000, 8192, 1, 143, kAnyGpuModel};
  decode.mode = ShareMode::kMig;
  decode.gpu_memory_mib = 9000;  // 1g.10gb
  Demand preprocess{4000, 8192, 1, 250, kAnyGpuModel};
  preprocess.mode = ShareMode::kTimeSlice;
  preprocess.gpu_memory_mib = 8000;
  Demand infer{4000, 16384, 1, 429, kAnyGpuModel};
  infer.mode = ShareMode::kMig;
  infer.gpu_memory_mib = 30000;  // 3g.40gb
  JobSpec pipe;
  pipe.tenant = a;
  pipe.kind = JobKind::kOnlineInference;
  pipe.demand = decode;
  pipe.stages = {decode, preprocess, infer};
  const JobId id = *h.engine->Submit(pipe, h.now, h.sink);
  ASSERT_EQ(h.State(id), JobState::kRunning) << h.engine->ExplainPending(id);
  const JobPlaced placed = h.Events<JobPlaced>().back();
  ASSERT_EQ(placed.replicas.size(), 3u);
  const NodeIndex node = placed.replicas[0].node;
  for (const auto& r : placed.replicas) EXPECT_EQ(r.node, node);
  const Node& n = h.engine->state().cluster.node(node);
  EXPECT_EQ(Catalog::Builtin().Get(n.gpu_model).name, "A100-80GB");
  // The MIG stages sit on a GPU in MIG mode, the share on one in time-slice.
  const Job& job = h.engine->state().job(id);
  const Allocation& d0 = h.engine->state().cluster.allocation(job.placements[0].allocation);
  const Allocation& d1 = h.engine->state().cluster.allocation(job.placements[1].allocation);
  const Allocation& d2 = h.engine->state().cluster.allocation(job.placements[2].allocation);
  EXPECT_GE(d0.mig_profile, 0);
  EXPECT_EQ(d1.mig_profile, -1);
  EXPECT_GE(d2.mig_profile, 0);
  EXPECT_EQ(FindMigTable("A100-80GB")->profiles[d0.mig_profile].name, "1g.10gb");
  EXPECT_EQ(FindMigTable("A100-80GB")->profiles[d2.mig_profile].name, "3g.40gb");
  const int g1 = std::countr_zero(static_cast<unsigned>(d1.gpus));
  EXPECT_EQ(n.gpu_mode[g1], GpuMode::kTimeSlice);
  // Quota counts every stage, a MIG instance as its compute slices over
  // the GPU's: 1/7 (142) + 250 + 3/7 (428) milli.
  EXPECT_EQ(h.engine->state().tenant_pool(a, p).usage.gpu_milli, 820);
}

TEST(EngineSharingTest, TheModePolicyChoosesPerJob) {
  using namespace std::chrono_literals;
  JobSpec serve;
  serve.kind = JobKind::kOnlineInference;
  serve.demand = Demand{4000, 8192, 1, 250, kAnyGpuModel};
  serve.demand.gpu_memory_mib = 8000;
  serve.expected_duration = 10h;
  JobSpec train = serve;
  train.kind = JobKind::kTraining;
  train.demand.gpu_memory_mib = 30000;
  train.expected_duration = 6h;
  JobSpec big = train;
  big.demand = Demand{32000, 65536, 4, 1000, kAnyGpuModel};
  JobSpec short_train = train;
  short_train.demand.gpu_memory_mib = 8000;
  short_train.expected_duration = 20min;
  EXPECT_EQ(ChooseSharing(Seed000ModePolicy(), serve).second, SharingChoice::kTimeSlice);  // low memory
  EXPECT_EQ(ChooseSharing(Seed000ModePolicy(), train).second, SharingChoice::kMig);        // long, high memory
  EXPECT_EQ(ChooseSharing(Seed000ModePolicy(), big).second, SharingChoice::kWhole);
  EXPECT_EQ(ChooseSharing(Seed000ModePolicy(), short_train).second, SharingChoice::kTimeSlice);  // fallback
  EXPECT_EQ(ChooseSharing(Seed002ModePolicy(), serve).second, SharingChoice::kMig);
  EXPECT_EQ(ChooseSharing(Seed002ModePolicy(), train).second, SharingChoice::kMps);
  EXPECT_EQ(ChooseSharing(Seed002ModePolicy(), big).second, SharingChoice::kWhole);
  // Through the engine: the submitted spec carries the choice.
  EngineHarness h;
  const PoolId p = h.Pool("a100");
  h.Nodes(1, "A100-80GB");
  const TenantId a = h.Tenant("a", p, 8, 8);
  train.tenant = a;
  train.auto_sharing = true;
  const JobId id = *h.engine->Submit(train, h.now, h.sink);
  EXPECT_EQ(h.engine->state().job(id).spec.demand.mode, ShareMode::kMig);
  EXPECT_EQ(h.State(id), JobState::kRunning);
}

TEST(EngineSharingTest, AGpuFreedByOneTenantIsScrubbedBeforeAnotherUsesIt) {
  EngineHarness h;
  const PoolId p = h.Pool("a100");
  h.Nodes(1, "A100-80GB", 1);
  const TenantId a = h.Tenant("a", p, 0, 1);
  const TenantId b = h.Tenant("b", p, 0, 1);
  const JobId first = h.Submit(a, Whole(1, 1000));
  ASSERT_TRUE(h.engine->Finish(first, true, h.now, h.sink).has_value());
  // The same tenant again: no scrub needed.
  const JobId again = h.Submit(a, Whole(1, 1000));
  EXPECT_TRUE(h.Events<GpusScrubbed>().empty());
  ASSERT_TRUE(h.engine->Finish(again, true, h.now, h.sink).has_value());
  // Another tenant: the scrub comes right before its placement.
  h.Submit(b, Whole(1, 1000));
  ASSERT_EQ(h.Events<GpusScrubbed>().size(), 1u);
  const auto& log = h.log;
  ASSERT_GE(log.size(), 2u);
  EXPECT_TRUE(std::holds_alternative<GpusScrubbed>(log[log.size() - 2].body));
  EXPECT_TRUE(std::holds_alternative<JobPlaced>(log.back().body));
}

TEST(EngineSharingTest, QuarterGpuInferenceReplicasPackFourToAGpu) {
  EngineHarness h("BestFit");
  const PoolId p = h.Pool("t4");
  h.Nodes(1, "T4", 2);
  const TenantId a = h.Tenant("a", p, 2, 2);
  Demand quarter{2000, 4096, 1, 250, kAnyGpuModel};
  quarter.mode = ShareMode::kTimeSlice;
  quarter.gpu_memory_mib = 3500;
  for (int i = 0; i < 8; ++i) h.Submit(a, quarter);
  const Node& n = h.engine->state().cluster.node(0);
  EXPECT_EQ(n.gpu_free_milli[0], 0);
  EXPECT_EQ(n.gpu_free_milli[1], 0);
  EXPECT_EQ(n.gpu_residents[0], 4);
  EXPECT_EQ(n.gpu_memory_free_mib[0], 15360 - 4 * 3500);
  const JobId ninth = h.Submit(a, quarter);
  EXPECT_EQ(h.State(ninth), JobState::kPending);
}

}  // namespace
}  // namespace gpupool
