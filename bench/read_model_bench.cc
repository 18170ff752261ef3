// The server's read model on its hot path (`make bench`): ReadModel::Apply
// over a journal of job churn, as the writer thread applies each committed
// batch. The journal is made by a real Engine: 1,000 nodes of 8 GPUs in one
// pool, ten tenants with guarantees of 400 GPUs each (and limits of 1,600,
// so some work is borrowed), 100,000 jobs of 1 to 8 GPUs and GPU shares
// submitted one every 5 s of engine time (about 5.8 days, so the usage
// roll-ups change day), each finishing 4,000 submissions later.
//  - BM_ReadModelApply: applies every event to an empty read model; reports
//    events per second (items) and the event count.
//  - BM_ReadModelEncode: the read model's snapshot of the end state.
#include <benchmark/benchmark.h>

#include <memory>
#include <vector>

#include "src/control/control_loops.h"
#include "src/engine/engine.h"
#include "src/server/read_model.h"

namespace gpupool {
namespace {

const std::vector<Event>& Churn() {
  static const std::vector<Event> events = [] {
    std::vector<Event> out;
    EngineConfig config;
    config.policy = "best";
    auto created = CreateEngine(config, AttributeTable());
    Engine& e = **created;
    int64_t seq = 0;
    Instant now = kTimeOrigin;
    const Engine::Sink sink = [&](const Event& ev) {
      out.push_back(ev);
      out.back().seq = ++seq;
    };
    const GpuModelId a100 = *Catalog::Builtin().Find("A100-80GB");
    (void)e.AddPool("a100", PoolSelector{GpuModelMask{1} << a100, {}}, {}, now, sink);
    std::vector<TenantId> tenants;
    for (int t = 0; t < 10; ++t) tenants.push_back(*e.AddTenant("tenant-" + std::to_string(t), now, sink));
    for (int i = 0; i < 1000; ++i) {
      (void)e.AddNode(NodeSpec{"a100-" + std::to_string(i), 128000, 1 << 20, 8, a100}, "region-1",
                      "zone-" + std::to_string(i % 4), "rack-" + std::to_string(i % 50), now, sink);
    }
    for (TenantId t : tenants) (void)e.SetQuota(t, 0, Quota{400'000, 1'600'000, 1.0, false}, now, sink);
    std::vector<JobId> ids;
    for (int i = 0; i < 100000; ++i) {
      now += std::chrono::seconds(5);
      JobSpec j;
      j.name = "job";
      j.tenant = tenants[i % 10];
      j.demand = i % 7 == 0 ? Demand{2000, 16384, 1, 250} : Demand{8000, 65536, 1 << (i % 4), 1000};
      auto id = e.Submit(j, now, sink);
      if (id) ids.push_back(*id);
      if (ids.size() > 4000) {
        (void)e.Finish(ids[ids.size() - 4001], true, now, sink);
      }
    }
    return out;
  }();
  return events;
}

void BM_ReadModelApply(benchmark::State& state) {
  const std::vector<Event>& events = Churn();
  for (auto _ : state) {
    auto m = std::make_unique<ReadModel>();
    for (const Event& ev : events) m->Apply(ev);
    benchmark::DoNotOptimize(m->last_seq());
    state.PauseTiming();
    m.reset();
    state.ResumeTiming();
  }
  state.counters["events"] = static_cast<double>(events.size());
  state.SetItemsProcessed(static_cast<int64_t>(state.iterations() * events.size()));
}
BENCHMARK(BM_ReadModelApply)->Unit(benchmark::kMillisecond)->UseRealTime();

void BM_ReadModelEncode(benchmark::State& state) {
  ReadModel m;
  for (const Event& ev : Churn()) m.Apply(ev);
  size_t bytes = 0;
  for (auto _ : state) {
    const std::string s = m.Encode();
    bytes = s.size();
    benchmark::DoNotOptimize(s.data());
  }
  state.counters["snapshot_mib"] = static_cast<double>(bytes) / (1 << 20);
}
BENCHMARK(BM_ReadModelEncode)->Unit(benchmark::kMillisecond)->UseRealTime();

}  // namespace
}  // namespace gpupool
