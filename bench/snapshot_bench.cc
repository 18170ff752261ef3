// Persistence at scale (`make bench`), on an Engine state with 10,000 nodes
// (80,000 GPUs, every one allocated to 45,000 running jobs) and 100,000
// queued jobs of ten tenants:
//  - BM_EncodeSnapshot / BM_DecodeSnapshot: the snapshot codec
//    (src/engine/snapshot.h); decoding includes its validation and
//    CheckInvariants. Reports the snapshot's size and throughput.
//  - BM_RestoreEngine: decoding plus Engine::Restore (which checks the
//    invariants again) and the first scheduling pass (a Tick), which builds
//    the scheduler's caches: the time from snapshot bytes to a working engine.
//  - BM_EventFromJson / BM_ToJsonLine: the journal's line codec over the
//    events that built the state (JobSubmitted lines dominate).
//  - BM_EventToBinary / BM_EventFromBinary: the same events in the binary
//    form (EventToBinary), generated from the same Fields lists.
#include <benchmark/benchmark.h>

#include <memory>
#include <string>
#include <vector>

#include "src/control/control_loops.h"
#include "src/engine/engine.h"
#include "src/engine/snapshot.h"

namespace gpupool {
namespace {

EngineConfig Config() {
  EngineConfig c;
  c.policy = "best";
  return c;
}


struct World {
  std::unique_ptr<Engine> engine;
  std::vector<std::string> lines;  // every event, as journal lines
  size_t line_bytes = 0;
};

const World& BigState() {
  static const World world = [] {
    World w;
    auto engine = CreateEngine(Config(), AttributeTable());
    w.engine = std::move(*engine);
    Engine& e = *w.engine;
    const Engine::Sink sink = [&w](const Event& ev) {
      w.lines.push_back(ToJsonLine(ev));
      w.line_bytes += w.lines.back().size() + 1;
    };
    const Instant t0 = kTimeOrigin;
    const GpuModelId a100 = *Catalog::Builtin().Find("A100-80GB");
    const GpuModelId h100 = *Catalog::Builtin().Find("H100");
    (void)e.AddPool("a100", PoolSelector{GpuModelMask{1} << a100, {}}, {}, t0, sink);
    (void)e.AddPool("h100", PoolSelector{GpuModelMask{1} << h100, {}}, {}, t0, sink);
    std::vector<TenantId> tenants;
    for (int t = 0; t < 10; ++t) tenants.push_back(*e.AddTenant("tenant-" + std::to_string(t), t0, sink));
    for (int i = 0; i < 10000; ++i) {
      const bool a = i % 2 == 0;
      (void)e.AddNode(NodeSpec{(a ? "a100-" : "h100-") + std::to_string(i), 128000, 1 << 20, 8, a ? a100 : h100},
                      "region-1", "zone-" + std::to_string(i % 4), "rack-" + std::to_string(i % 250), t0, sink);
    }
    for (TenantId t : tenants) {
      for (PoolId p : {0, 1}) (void)e.SetQuota(t, p, Quota{0, 1'000'000'000, 1.0 + t % 3, false}, t0, sink);
    }
    // Every GPU allocated: 5,000 whole nodes and 40,000 single GPUs.
    JobSpec run;
    run.name = "train";
    run.checkpointable = true;
    for (int i = 0; i < 45000; ++i) {
      run.tenant = tenants[i % 10];
      run.demand = i < 5000 ? Demand{64000, 524288, 8, 1000} : Demand{8000, 65536, 1, 1000};
      (void)e.Submit(run, t0, sink);
    }
    // 100,000 queued jobs of several shapes and priorities (none above the
    // running jobs', so nothing preempts).
    for (int i = 0; i < 100000; ++i) {
      JobSpec q;
      q.name = "queued-" + std::to_string(i);
      q.tenant = tenants[i % 10];
      q.priority = -(i % 3);
      q.kind = i % 4 == 0 ? JobKind::kOnlineInference : JobKind::kTraining;
      q.demand = Demand{4000 + 1000 * (i % 4), 32768, 1 << (i % 4), 1000};
      if (i % 5 == 0) q.deadline = InstantFromMillis(86'400'000 + i);
      (void)e.Submit(q, t0 + Duration(i), sink);
    }
    return w;
  }();
  return world;
}

void BM_EncodeSnapshot(benchmark::State& state) {
  const EngineState& s = BigState().engine->state();
  size_t bytes = 0;
  for (auto _ : state) {
    const std::string snapshot = EncodeSnapshot(s);
    bytes = snapshot.size();
    benchmark::DoNotOptimize(snapshot.data());
  }
  state.counters["snapshot_mib"] = static_cast<double>(bytes) / (1 << 20);
  state.counters["queued"] = static_cast<double>(s.queue.size());
  state.counters["running"] = static_cast<double>(s.running.size());
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * bytes));
}
BENCHMARK(BM_EncodeSnapshot)->Unit(benchmark::kMillisecond)->UseRealTime();

void BM_DecodeSnapshot(benchmark::State& state) {
  const std::string snapshot = EncodeSnapshot(BigState().engine->state());
  for (auto _ : state) {
    auto decoded = DecodeSnapshot(snapshot, Config().lending);
    if (!decoded) {
      state.SkipWithError(decoded.error().message.c_str());
      return;
    }
    benchmark::DoNotOptimize(decoded->jobs.size());
  }
  state.counters["snapshot_mib"] = static_cast<double>(snapshot.size()) / (1 << 20);
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * snapshot.size()));
}
BENCHMARK(BM_DecodeSnapshot)->Unit(benchmark::kMillisecond)->UseRealTime();

void BM_RestoreEngine(benchmark::State& state) {
  const Engine& original = *BigState().engine;
  const std::string snapshot = EncodeSnapshot(original.state());
  for (auto _ : state) {
    auto decoded = DecodeSnapshot(snapshot, Config().lending);
    auto restored = RestoreEngine(Config(), AttributeTable(), std::move(*decoded), original.state().now);
    if (!restored) {
      state.SkipWithError(restored.error().message.c_str());
      return;
    }
    (*restored)->Tick(original.state().now, {});
    benchmark::DoNotOptimize(restored->get());
  }
}
BENCHMARK(BM_RestoreEngine)->Unit(benchmark::kMillisecond)->UseRealTime();

std::vector<Event> DecodedEvents(const World& w) {
  std::vector<Event> events;
  events.reserve(w.lines.size());
  for (const std::string& line : w.lines) events.push_back(*EventFromJson(line));
  return events;
}

void BM_EventFromJson(benchmark::State& state) {
  const World& w = BigState();
  for (auto _ : state) {
    for (const std::string& line : w.lines) {
      auto e = EventFromJson(line);
      benchmark::DoNotOptimize(e.has_value());
    }
  }
  state.SetItemsProcessed(static_cast<int64_t>(state.iterations() * w.lines.size()));
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * w.line_bytes));
  state.counters["events"] = static_cast<double>(w.lines.size());
}
BENCHMARK(BM_EventFromJson)->Unit(benchmark::kMillisecond)->UseRealTime();

void BM_ToJsonLine(benchmark::State& state) {
  const World& w = BigState();
  const std::vector<Event> events = DecodedEvents(w);
  for (auto _ : state) {
    for (const Event& e : events) benchmark::DoNotOptimize(ToJsonLine(e).size());
  }
  state.SetItemsProcessed(static_cast<int64_t>(state.iterations() * events.size()));
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * w.line_bytes));
}
BENCHMARK(BM_ToJsonLine)->Unit(benchmark::kMillisecond)->UseRealTime();

void BM_EventToBinary(benchmark::State& state) {
  const std::vector<Event> events = DecodedEvents(BigState());
  size_t bytes = 0;
  for (const Event& e : events) bytes += EventToBinary(e).size();
  for (auto _ : state) {
    for (const Event& e : events) benchmark::DoNotOptimize(EventToBinary(e).size());
  }
  state.SetItemsProcessed(static_cast<int64_t>(state.iterations() * events.size()));
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * bytes));
  state.counters["bytes_per_line_json"] = static_cast<double>(BigState().line_bytes) / events.size();
  state.counters["bytes_per_event"] = static_cast<double>(bytes) / events.size();
}
BENCHMARK(BM_EventToBinary)->Unit(benchmark::kMillisecond)->UseRealTime();

void BM_EventFromBinary(benchmark::State& state) {
  std::vector<std::string> encoded;
  for (const Event& e : DecodedEvents(BigState())) encoded.push_back(EventToBinary(e));
  for (auto _ : state) {
    for (const std::string& b : encoded) {
      auto e = EventFromBinary(b);
      benchmark::DoNotOptimize(e.has_value());
    }
  }
  state.SetItemsProcessed(static_cast<int64_t>(state.iterations() * encoded.size()));
}
BENCHMARK(BM_EventFromBinary)->Unit(benchmark::kMillisecond)->UseRealTime();

}  // namespace
}  // namespace gpupool
