// A stand-in for the Engine, as a control loop sees it (EngineView and
// Actions, src/engine/control_loop.h), for unit tests of one loop: the
// state is built from events by hand, every emitted event is applied to it
// and shown to the loop under test (ControlLoop::Observe), and the actions
// that are Engine work (a pass, a shrink, a move) are only recorded.
// Placement is first fit on node order; the filters are CheckFit.
#pragma once

#include <gtest/gtest.h>

#include <bit>
#include <map>
#include <string>
#include <vector>

#include "src/engine/control_loop.h"
#include "src/engine/state.h"
#include "src/model/gpu_catalog.h"
#include "src/sched/target_workload.h"
#include "tests/builders.h"
#include "tests/engine_harness.h"

namespace gpupool::testing {

class FakeEngineView final : public EngineView, public Actions {
 public:
  FakeEngineView() : target_(*TargetWorkloadOf(std::vector<Demand>{Whole(1, 1000)}, 1, 1)) {
    Apply(PoolAdded{Pool{0, "gpu", {}, {}}});
    Apply(TenantAdded{0, "t"});
    Apply(QuotaSet{0, 0, Quota{0, int64_t{1} << 40, 1, false}});
  }

  // The loop that sees every emitted event (may be null).
  ControlLoop* observer = nullptr;
  Instant clock{};
  bool any_elastic = false;
  std::vector<PoolScalingConfig> scaling;
  // What the loop did.
  std::vector<Event> events;
  int passes = 0;
  struct Move {
    JobId job;
    NodeIndex node;
    PreemptReason reason;
  };
  std::vector<Move> moves;
  std::vector<std::pair<JobId, NodeIndex>> shrinks;
  bool shrink_succeeds = false;

  // --- building the state -----------------------------------------------------
  NodeIndex Node(const std::string& name, int gpus = 8, const std::string& rack = "rack-0") {
    const NodeIndex n = state_.cluster.node_count();
    NodeSpec spec{name, 64000, 1 << 19, static_cast<uint8_t>(gpus), *Catalog::Builtin().Find("H100"), 0, 0};
    Apply(NodeAdded{spec, "r", "z", rack});
    return n;
  }
  // A job of tenant 0, queued.
  JobId Queue(JobSpec spec = {}) {
    const JobId id = state_.next_job_id;
    spec.tenant = 0;
    if (spec.demand.gpu_count == 0 && spec.demand.cpu_milli == 0) spec.demand = Whole(1, 1000);
    spec.demand.allowed_pools = 1;
    if (spec.replicas < 1) spec.replicas = 1;
    Apply(JobSubmitted{id, spec});
    return id;
  }
  // A single-replica job of tenant 0 running on `gpus` of `node` (its
  // demand: spec.demand, by default one whole GPU per GPU of the mask).
  JobId Run(NodeIndex node, GpuMask gpus, JobSpec spec = {}) {
    if (spec.demand.gpu_count == 0) spec.demand = Whole(std::popcount(gpus), 1000);
    const JobId id = Queue(spec);
    Apply(JobPlaced{id, 0, false, {PlacedReplica{node, gpus}}});
    return id;
  }
  // Applies an event as the Engine would, without showing it to the loop.
  void Apply(EventBody body) {
    const Event e{state_.last_seq + 1, std::max(clock, state_.now), std::move(body)};
    state_.Apply(e);
  }
  EngineState& mutable_state() { return state_; }

  template <class T>
  std::vector<T> Of() const {
    return EventsOf<T>(events);
  }

  // --- EngineView ---------------------------------------------------------------
  Instant now() const override { return clock; }
  const EngineState& state() const override { return state_; }
  const PoolScalingConfig* ScalingOf(PoolId pool) const override {
    for (const PoolScalingConfig& c : scaling) {
      if (pool < state_.pools.size() && c.pool == state_.pools[pool].name) return &c;
    }
    return nullptr;
  }
  FitFailure Feasibility(const gpupool::Node& n, const Demand& d) const override { return CheckFit(n, d); }
  const TargetWorkload& target() const override { return target_; }
  bool AnyElastic() const override { return any_elastic; }
  int32_t RackOf(NodeIndex n) const override {
    std::map<std::string, int32_t> ids;
    for (const auto& place : state_.node_places) ids.emplace(place.rack, static_cast<int32_t>(ids.size()));
    return ids.at(state_.node_places[n].rack);
  }
  int32_t RackCount() const override {
    std::map<std::string, int32_t> ids;
    for (const auto& place : state_.node_places) ids.emplace(place.rack, 0);
    return static_cast<int32_t>(ids.size());
  }
  std::vector<PlacedReplica> PlaceTentatively(const Demand& d, int32_t count,
                                              const std::function<bool(NodeIndex)>& prefer) const override {
    std::vector<gpupool::Node> nodes = state_.cluster.nodes();
    std::vector<PlacedReplica> placed;
    for (int32_t i = 0; i < count; ++i) {
      NodeIndex at = -1;
      for (int pass = 0; pass < 2 && at < 0; ++pass) {
        for (NodeIndex n = 0; n < static_cast<NodeIndex>(nodes.size()) && at < 0; ++n) {
          if (pass == 0 && prefer && !prefer(n)) continue;
          if (CheckFit(nodes[n], d) == FitFailure::kNone) at = n;
        }
      }
      if (at < 0) break;
      const GpuMask gpus = FirstFittingGpus(nodes[at], d);
      OccupyGpus(nodes[at], d, gpus, nullptr);
      placed.push_back({at, gpus});
    }
    return placed;
  }

  // --- Actions ------------------------------------------------------------------
  void Emit(EventBody body) override {
    const Event e{state_.last_seq + 1, std::max(clock, state_.now), std::move(body)};
    state_.Apply(e);
    if (observer != nullptr) observer->Observe(e);
    events.push_back(e);
  }
  void SchedulePass() override { ++passes; }
  bool ShrinkElastic(const Job& j, NodeIndex node, const std::string&) override {
    shrinks.emplace_back(j.id, node);
    return shrink_succeeds;
  }
  void MoveOff(const Job& j, NodeIndex n, PreemptReason reason, const std::string&) override {
    moves.push_back({j.id, n, reason});
  }

 private:
  EngineState state_;
  TargetWorkload target_;
};

}  // namespace gpupool::testing
