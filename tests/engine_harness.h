// An Engine driven by hand for tests: events collected, invariants checked
// after every event, a clock moved in ticks.
#pragma once

#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "src/control/control_loops.h"
#include "src/engine/engine.h"
#include "src/engine/snapshot.h"
#include "tests/builders.h"

namespace gpupool::testing {

// The bodies of the events of type T in `events`, in order.
template <class T>
std::vector<T> EventsOf(const std::vector<Event>& events) {
  std::vector<T> out;
  for (const Event& e : events) {
    if (const auto* x = std::get_if<T>(&e.body)) out.push_back(*x);
  }
  return out;
}

class EngineHarness {
 public:
  explicit EngineHarness(EngineConfig config, std::vector<Demand> mix = {Whole(1, 1000)}) {
    config.lending.enabled = false;
    config.workload_learning.prior = std::move(mix);
    auto e = CreateEngine(config, AttributeTable{});
    EXPECT_TRUE(e.has_value()) << (e ? "" : e.error().message);
    engine = std::move(*e);
    sink = [this](const Event& ev) {
      events.push_back(ev);
      auto ok = CheckInvariants(engine->state());
      ASSERT_TRUE(ok.has_value()) << ok.error().message << " after " << ToJsonLine(ev);
    };
  }
  PoolId Pool(const std::string& name, PoolSelector selector = {}) {
    return *engine->AddPool(name, std::move(selector), {}, now, sink);
  }
  TenantId Tenant(const std::string& name, PoolId pool, int guaranteed_gpus, int limit_gpus, bool reserved = false) {
    const TenantId t = *engine->AddTenant(name, now, sink);
    Quota(t, pool, guaranteed_gpus, limit_gpus, reserved);
    return t;
  }
  void Quota(TenantId t, PoolId pool, int guaranteed_gpus, int limit_gpus, bool reserved = false) {
    auto ok = engine->SetQuota(t, pool,
                               gpupool::Quota{int64_t{guaranteed_gpus} * kMilliPerGpu,
                                              int64_t{limit_gpus} * kMilliPerGpu, 1, reserved},
                               now, sink);
    EXPECT_TRUE(ok.has_value()) << ok.error().message;
  }
  NodeIndex Node(const std::string& name, int gpus = 8, const std::string& region = "r",
                 const std::string& rack = "rack-0") {
    NodeSpec spec{name, 64000, 1 << 19, static_cast<uint8_t>(gpus), *Catalog::Builtin().Find("H100"), 0, 0};
    auto added = engine->AddNode(spec, region, "z", rack, now, sink);
    EXPECT_TRUE(added.has_value()) << added.error().message;
    return *added;
  }
  JobSpec Spec(TenantId t, int gpus, bool checkpointable = true) const {
    JobSpec s;
    s.tenant = t;
    s.demand = Whole(gpus, 1000);
    s.checkpointable = checkpointable;
    s.checkpoint_duration = std::chrono::seconds(30);
    return s;
  }
  JobId Submit(const JobSpec& s) {
    auto id = engine->Submit(s, now, sink);
    EXPECT_TRUE(id.has_value()) << id.error().message;
    return id ? *id : -1;
  }
  // Ticks every `step` for `d`.
  void Advance(Duration d, Duration step = std::chrono::seconds(30)) {
    const Instant end = now + d;
    while (now < end) {
      now += step;
      engine->Tick(now, sink);
    }
  }
  template <class T>
  std::vector<T> Of() const {
    return EventsOf<T>(events);
  }
  const Job& job(JobId id) const { return engine->state().job(id); }
  // A live job's state; kSucceeded once it is gone (finished or cancelled).
  JobState state(JobId id) const {
    const Job* j = engine->state().find_job(id);
    return j ? j->state : JobState::kSucceeded;
  }
  // The state survives a snapshot round trip unchanged.
  void ExpectSnapshotRoundTrip() const {
    const std::string bytes = EncodeSnapshot(engine->state());
    auto back = DecodeSnapshot(bytes, engine->config().lending);
    ASSERT_TRUE(back.has_value()) << back.error().message;
    EXPECT_EQ(EncodeSnapshot(*back), bytes);
  }

  std::unique_ptr<Engine> engine;
  Engine::Sink sink;
  std::vector<Event> events;
  Instant now{};
};

}  // namespace gpupool::testing
