// Engine::LoopContext: the EngineView and Actions (src/engine/control_loop.h)
// the Engine hands its control loops for one command at `now`, deciding
// into `sink`. For the Engine's own .cc files only.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "src/engine/engine.h"

namespace gpupool {

class Engine::LoopContext final : public EngineView, public Actions {
 public:
  // `sink` must outlive the context.
  LoopContext(Engine& engine, Instant now, const Sink& sink) : e_(engine), now_(now), sink_(sink) {}

  Instant now() const override { return now_; }
  const EngineState& state() const override { return e_.state_; }
  const PoolScalingConfig* ScalingOf(PoolId pool) const override { return e_.ScalingOf(pool); }
  FitFailure Feasibility(const Node& n, const Demand& d) const override { return e_.policy_.Feasibility(n, d); }
  const TargetWorkload& target() const override { return e_.target_; }
  bool AnyElastic() const override { return e_.any_elastic_; }
  int32_t RackOf(NodeIndex n) const override {
    e_.topology_.Refresh(e_.state_);
    return e_.topology_.rack(n);
  }
  int32_t RackCount() const override {
    e_.topology_.Refresh(e_.state_);
    return e_.topology_.rack_count();
  }
  std::vector<PlacedReplica> PlaceTentatively(const Demand& d, int32_t count,
                                              const std::function<bool(NodeIndex)>& prefer) const override {
    return e_.PlaceTentatively(d, count, prefer);
  }

  void Emit(EventBody body) override { e_.Emit(std::move(body), now_, sink_); }
  void SchedulePass() override { e_.SchedulePass(now_, sink_); }
  bool ShrinkElastic(const Job& j, NodeIndex node, const std::string& reason) override {
    return e_.ShrinkElastic(j, node, reason, now_, sink_);
  }
  void MoveOff(const Job& j, NodeIndex n, PreemptReason reason, const std::string& where) override {
    e_.MoveOff(j, n, reason, where, now_, sink_);
  }

 private:
  Engine& e_;
  Instant now_;
  const Sink& sink_;
};

}  // namespace gpupool
