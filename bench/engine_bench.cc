// The Engine over time, at scale (`make bench`):
//  - BM_Replay/N: a generated N-job workload (ten tenants with guarantees,
//    Poisson arrivals at about 90% load, whole GPUs, gangs and shares,
//    lognormal run times) on a 10,000-GPU cluster, simulated end to end
//    (every event hashed). Reports jobs per second and the peak RSS.
//  - BM_StateBytes: heap bytes of Engine state per queued job and per GPU,
//    measured with mallinfo2 around building them.
//  - BM_OpenbReplay: the openb default trace with its real creation and
//    deletion times (skipped when the trace is absent).
#include <benchmark/benchmark.h>
#include <malloc.h>
#include <sys/resource.h>

#include "bench/bench_inputs.h"
#include "src/control/control_loops.h"
#include "src/sim/scenario_runner.h"
#include "src/config/traces_dir.h"

namespace gpupool {
namespace {

using namespace std::chrono_literals;

double PeakRssMib() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return static_cast<double>(u.ru_maxrss) / 1024.0;
}

Scenario ReplayScenario(int64_t jobs) {
  Scenario s;
  s.name = "replay-" + std::to_string(jobs);
  s.seed = 11;
  s.engine.policy = "best";
  s.nodes.push_back(NodeGroupConfig{750, "a100", "A100-80GB", 8, 128000, 1 << 20, "r", "z", 25, ""});
  s.nodes.push_back(NodeGroupConfig{500, "h100", "H100", 8, 192000, 2 << 20, "r", "z", 25, ""});
  s.pools.push_back(PoolConfig{"a100", {"A100-80GB"}, {}, {}});
  s.pools.push_back(PoolConfig{"h100", {"H100"}, {}, {}});
  // Load: E[GPUs per job] = (1 + 0.15 x 8 x 1.5 + 0.6 x 0.25 + 0.1) / 1.85
  // = 1.65 and E[run time] = 0.5 h x e^(1/2) = 0.82 h: 1.36 GPU-hours per
  // job; arrivals are set for 90% of the 10,000 GPUs.
  const double rate_per_hour = 0.9 * 10000 / 1.36;
  const Duration stop = Duration(static_cast<int64_t>(static_cast<double>(jobs) / rate_per_hour * 3600e3));
  s.horizon = stop + 24h;
  JobTemplate one{1, "one", JobKind::kTraining, "normal", 1, 1000, 8000, 65536, {1}};
  one.duration = DurationModel{DurationModel::Kind::kLogNormal, 0s, 1800, 1.0, 1.0, 60s, 72h};
  JobTemplate eight = one;
  eight.name = "eight";
  eight.weight = 0.15;
  eight.gpus = 8;
  eight.replicas = {1, 2};
  eight.checkpointable = true;
  JobTemplate share = one;
  share.name = "share";
  share.kind = JobKind::kOnlineInference;
  share.weight = 0.6;
  share.gpu_milli = 250;
  share.cpu_milli = 4000;
  JobTemplate urgent = one;
  urgent.name = "urgent";
  urgent.weight = 0.1;
  urgent.priority = "high";
  for (int t = 0; t < 10; ++t) {
    const std::string name = "tenant-" + std::to_string(t);
    s.tenants.push_back(TenantConfig{name, {{"a100", QuotaConfig{400, 2000, 1, false}},
                                              {"h100", QuotaConfig{300, 1500, 1, false}}}});
    ArrivalProcess a{ArrivalProcess::Kind::kPoisson, rate_per_hour / 10, 0.5, 14, 0s, stop};
    s.workloads.push_back(TenantWorkload{name, a, {one, eight, share, urgent}});
  }
  return s;
}

void BM_Replay(benchmark::State& state) {
  const Scenario s = ReplayScenario(state.range(0));
  SimReport last;
  for (auto _ : state) {
    auto r = RunScenario(s, {});
    if (!r) {
      state.SkipWithError(r.error().message.c_str());
      return;
    }
    last = std::move(*r);
  }
  state.counters["jobs"] = static_cast<double>(last.all.submitted);
  state.counters["jobs_per_s"] =
      benchmark::Counter(static_cast<double>(last.all.submitted), benchmark::Counter::kIsIterationInvariantRate);
  state.counters["events"] = static_cast<double>(last.events);
  state.counters["alloc_pct"] = last.allocation_pct_mean;
  state.counters["peak_rss_mib"] = PeakRssMib();
  state.SetLabel("10,000 GPUs, " + std::to_string(last.all.completed) + " completed");
}
BENCHMARK(BM_Replay)->Arg(100000)->Arg(1000000)->Iterations(1)->Unit(benchmark::kSecond)->UseRealTime();

void BM_StateBytes(benchmark::State& state) {
  for (auto _ : state) {
    const size_t before = mallinfo2().uordblks;
    Scenario s = ReplayScenario(0);
    auto engine = CreateEngine(s.engine, AttributeTable());
    Engine& e = **engine;
    const Instant t0 = kTimeOrigin;
    (void)e.AddPool("a100", {}, {}, t0, {});
    auto tenant = e.AddTenant("t", t0, {});
    int gpus = 0;
    for (int i = 0; i < 1250; ++i) {
      const GpuModelId m = *Catalog::Builtin().Find("A100-80GB");
      (void)e.AddNode(NodeSpec{"n" + std::to_string(i), 128000, 1 << 20, 8, m}, "r", "z", "k", t0, {});
      gpus += 8;
    }
    (void)e.SetQuota(*tenant, 0, Quota{0, 1'000'000'000, 1, false}, t0, {});
    const size_t with_cluster = mallinfo2().uordblks;
    // Fill the GPUs, then queue 100,000 jobs behind them.
    constexpr int kQueued = 100000;
    JobSpec fill;
    fill.tenant = *tenant;
    fill.demand = Demand{8000, 65536, 8, 1000};
    for (int i = 0; i < 1250; ++i) (void)e.Submit(fill, t0, {});
    const size_t with_running = mallinfo2().uordblks;
    JobSpec wait = fill;
    wait.demand = Demand{8000, 65536, 1, 1000};
    for (int i = 0; i < kQueued; ++i) (void)e.Submit(wait, t0, {});
    const size_t with_queue = mallinfo2().uordblks;
    state.counters["bytes_per_gpu"] = static_cast<double>(with_cluster - before) / gpus;
    state.counters["bytes_per_running_job"] = static_cast<double>(with_running - with_cluster) / 1250;
    state.counters["bytes_per_queued_job"] = static_cast<double>(with_queue - with_running) / kQueued;
  }
}
BENCHMARK(BM_StateBytes)->Iterations(1)->Unit(benchmark::kSecond);

void BM_OpenbReplay(benchmark::State& state) {
  const std::string nodes = TraceFile("alibaba-gpu-2023/openb_node_list_gpu_node.csv");
  const std::string pods = TraceFile("alibaba-gpu-2023/openb_pod_list_default.csv");
  if (nodes.empty() || pods.empty()) {
    state.SkipWithError("the Alibaba GPU 2023 trace is not here (../shared/traces or $GPUPOOL_TRACES)");
    return;
  }
  Scenario s;
  s.name = "openb-default-real-times";
  s.trace_nodes_path = nodes;
  s.pools.push_back(PoolConfig{"all", {}, {}, {}});
  s.tenants.push_back(TenantConfig{"alibaba", {{"all", QuotaConfig{0, 1e6, 1, false}}}});
  s.trace = TraceWorkload{pods, "alibaba", "normal", std::nullopt};
  s.horizon = 150 * 24h;
  s.sample_every = 1h;
  SimReport last;
  for (auto _ : state) {
    auto r = RunScenario(s, {});
    if (!r) {
      state.SkipWithError(r.error().message.c_str());
      return;
    }
    last = std::move(*r);
  }
  state.counters["pods"] = static_cast<double>(last.all.submitted);
  state.counters["events"] = static_cast<double>(last.events);
  state.SetLabel(std::to_string(last.all.completed) + " pods completed over " +
                 std::to_string(static_cast<int>(last.horizon_h / 24)) + " days");
}
BENCHMARK(BM_OpenbReplay)->Iterations(1)->Unit(benchmark::kSecond)->UseRealTime();

}  // namespace
}  // namespace gpupool
