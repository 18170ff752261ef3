// Placements per second of each policy on a generated 10,000-node,
// 80,000-GPU cluster with the default trace's pod mix (a generated mix when
// the trace is absent), in steady state: the cluster is first filled to
// about 85% of its GPUs, then every placement that would push allocation
// past 90% is preceded by the release of a random live allocation.
// Releases are inside the timed loop: they are part of the churn a real
// pool sees.
#include <benchmark/benchmark.h>

#include <memory>

#include "bench/bench_inputs.h"
#include "src/base/rng.h"
#include "src/sched/scheduler.h"
#include "src/sched/target_workload.h"
#include "src/sim/synthetic.h"

namespace gpupool {
namespace {

constexpr int kNodes = 10000;

struct World {
  std::vector<Demand> mix;
  std::string mix_label;
  std::vector<NodeSpec> nodes;
  std::unique_ptr<TargetWorkload> target;
};

const World& GetWorld() {
  static const World* const kWorld = [] {
    auto* w = new World;
    std::vector<TracePod> pods = bench::DefaultTracePods();
    w->mix_label = pods.empty() ? "generated mix" : "openb default mix";
    if (pods.empty()) pods = GeneratePods(8000, 7);
    for (const auto& p : pods) w->mix.push_back(p.demand);
    w->nodes = GenerateEightGpuCluster(kNodes, 11, Catalog::Builtin());
    int64_t cpu = 0, gpu = 0;
    for (const auto& n : w->nodes) {
      cpu += n.cpu_milli;
      gpu += int64_t{n.gpu_count} * kMilliPerGpu;
    }
    w->target = std::make_unique<TargetWorkload>(*TargetWorkloadOf(w->mix, cpu, gpu));
    return w;
  }();
  return *kWorld;
}

void BM_Placement(benchmark::State& state, const std::string& policy_name) {
  const World& w = GetWorld();
  Cluster cluster;
  for (const auto& n : w.nodes) (void)cluster.AddNode(n);
  auto policy = BuildPolicy(*FindPolicy(policy_name), w.target->deps());
  Rng rng(1);
  Scheduler scheduler(&cluster, &*policy, RandomRanks(cluster.node_count(), rng), &rng);
  std::vector<AllocationId> live;
  auto place_one = [&] {
    const Demand& d = w.mix[rng.Below(w.mix.size())];
    if (cluster.gpu_milli_allocated() + d.total_gpu_milli() > cluster.gpu_milli_total() * 9 / 10 && !live.empty()) {
      const size_t i = rng.Below(live.size());
      cluster.Release(live[i]);
      live[i] = live.back();
      live.pop_back();
    }
    auto p = scheduler.Schedule(d);
    if (p) live.push_back(cluster.Allocate(p->node, d, p->gpus));
    return p.has_value();
  };
  while (cluster.gpu_milli_allocated() < cluster.gpu_milli_total() * 85 / 100) place_one();  // warm up
  int64_t placed = 0, failed = 0;
  for (auto _ : state) {
    if (place_one()) {
      ++placed;
    } else {
      ++failed;
    }
  }
  state.SetItemsProcessed(placed + failed);
  state.counters["failed_pct"] = 100.0 * static_cast<double>(failed) / static_cast<double>(placed + failed);
  state.SetLabel(w.mix_label + ", " + std::to_string(cluster.node_count()) + " nodes, " +
                 std::to_string(cluster.gpu_count_total()) + " GPUs");
}

// Fill: pods drawn from the mix are placed into an empty cluster, one at a
// time with no releases (as in the FGD protocol), until the GPUs they asked
// for reach the cluster's capacity; then the cluster is rebuilt outside the
// timed region. A pod that fits nowhere is rejected with its reasons (a scan
// of every node), as the scheduler always does.
void BM_Fill(benchmark::State& state, const std::string& policy_name) {
  const World& w = GetWorld();
  auto policy = BuildPolicy(*FindPolicy(policy_name), w.target->deps());
  Rng rng(1);
  std::unique_ptr<Cluster> cluster;
  std::unique_ptr<Scheduler> scheduler;
  auto reset = [&] {
    cluster = std::make_unique<Cluster>();
    for (const auto& n : w.nodes) (void)cluster->AddNode(n);
    scheduler = std::make_unique<Scheduler>(cluster.get(), &*policy, RandomRanks(cluster->node_count(), rng), &rng);
  };
  reset();
  int64_t attempts = 0, failed = 0, arrived = 0;
  for (auto _ : state) {
    if (arrived >= cluster->gpu_milli_total()) {
      state.PauseTiming();
      reset();
      arrived = 0;
      state.ResumeTiming();
    }
    const Demand& d = w.mix[rng.Below(w.mix.size())];
    arrived += d.total_gpu_milli();
    auto p = scheduler->Schedule(d);
    if (p) {
      cluster->Allocate(p->node, d, p->gpus);
    } else {
      ++failed;
    }
    ++attempts;
  }
  state.SetItemsProcessed(attempts);
  state.counters["failed_pct"] = 100.0 * static_cast<double>(failed) / static_cast<double>(attempts);
  state.SetLabel(w.mix_label + ", " + std::to_string(cluster->node_count()) + " nodes, " +
                 std::to_string(cluster->gpu_count_total()) + " GPUs");
}

BENCHMARK_CAPTURE(BM_Fill, Random, std::string("Random"))->Unit(benchmark::kMicrosecond)->MinTime(2);
BENCHMARK_CAPTURE(BM_Fill, DotProd, std::string("DotProd"))->Unit(benchmark::kMicrosecond)->MinTime(2);
BENCHMARK_CAPTURE(BM_Fill, GpuClustering, std::string("GpuClustering"))->Unit(benchmark::kMicrosecond)->MinTime(2);
BENCHMARK_CAPTURE(BM_Fill, GpuPacking, std::string("GpuPacking"))->Unit(benchmark::kMicrosecond)->MinTime(2);
BENCHMARK_CAPTURE(BM_Fill, BestFit, std::string("BestFit"))->Unit(benchmark::kMicrosecond)->MinTime(2);
BENCHMARK_CAPTURE(BM_Fill, FGD, std::string("FGD"))->Unit(benchmark::kMicrosecond)->MinTime(2);
BENCHMARK_CAPTURE(BM_Fill, FGDPlus, std::string("FGD+"))->Unit(benchmark::kMicrosecond)->MinTime(2);

BENCHMARK_CAPTURE(BM_Placement, Random, std::string("Random"))->Unit(benchmark::kMicrosecond)->MinTime(2);
BENCHMARK_CAPTURE(BM_Placement, DotProd, std::string("DotProd"))->Unit(benchmark::kMicrosecond)->MinTime(2);
BENCHMARK_CAPTURE(BM_Placement, GpuClustering, std::string("GpuClustering"))->Unit(benchmark::kMicrosecond)->MinTime(2);
BENCHMARK_CAPTURE(BM_Placement, GpuPacking, std::string("GpuPacking"))->Unit(benchmark::kMicrosecond)->MinTime(2);
BENCHMARK_CAPTURE(BM_Placement, BestFit, std::string("BestFit"))->Unit(benchmark::kMicrosecond)->MinTime(2);
BENCHMARK_CAPTURE(BM_Placement, FGD, std::string("FGD"))->Unit(benchmark::kMicrosecond)->MinTime(2);
BENCHMARK_CAPTURE(BM_Placement, FGDPlus, std::string("FGD+"))->Unit(benchmark::kMicrosecond)->MinTime(2);

}  // namespace
}  // namespace gpupool
