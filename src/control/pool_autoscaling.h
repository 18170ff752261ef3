// Pool autoscaling (SCALE-1..6, POOL-3, QUOTA-5, FRAG-3): the loop that
// applies each pool's scaling settings (src/engine/scaling.h) at every
// Tick. Deterministic. Per scaled pool, in the configuration's order, after
// the drains have progressed:
//  - observes the pool: utilization of its ready nodes (allocated GPU milli,
//    less what elastic jobs grew onto beyond their minimum, over their GPU
//    milli), the queued demand its tenants' quotas would admit on new nodes
//    (the next item), nodes (ready plus those requested and not yet
//    joined), how many nodes a scale-in may drain (ScaleInNodes below) and,
//    with forecasting on, the demand (allocated plus that queued GPU milli)
//    forecast `ahead` from now over the capacity at today's size; the rule
//    (src/control/autoscaler.h) decides;
//  - queued demand (issue 16: scaling obeys placement's quota rules): per
//    tenant, its queued jobs that may use the pool, in queue order, each
//    counted while its GPUs fit what is left of the tenant's headroom there
//    (QuotaHeadroom, src/engine/queries.h: its elastic limit less what it
//    holds, the limit placement's admission applies); none where it has no
//    quota. The pool-wide half of admission (borrowing within the elastic
//    capacity, MayBorrow) is left out: new nodes add that capacity. Not
//    counted either: jobs that preemption or a MIG re-cut is making room
//    for (vertical scaling serves them). So a tenant at its limit with a
//    long queue neither drives a scale-out nor holds off a scale-in;
//  - scale-out: first the nodes the pool lent are asked back, then empty
//    nodes of other pools are borrowed (POOL-3, EngineConfig::
//    borrow_between_pools, NodeLent); ScaleOutRequested for the rest of the
//    rule's step; the world's node provider creates the nodes (beside the
//    pool's scattered free GPUs when it can: FragmentedRack, FRAG-3), which
//    join with Engine::AddProvisionedNode (or fail: Engine::FailScaleOut);
//    the scheduling pass a new node starts serves tenants with a reserved
//    quota in its pool first (QUOTA-5);
//  - scale-in: drains the rule's step of nodes, chosen so that capacity
//    held for reserved tenants goes last, borrowed nodes first, and empty,
//    then least used (fragmented) nodes first (QUOTA-5, FRAG-3), and never
//    below the guarantees' floor (issue 16): the pool's ready GPU capacity
//    stays at least the sum of its tenants' guarantees (GuaranteedMilli,
//    src/engine/queries.h), whatever the utilization, as a guarantee is a
//    promise of capacity (min_nodes may keep more); where the pool has
//    guarantees the rule is told how many nodes may go, so it does not act
//    when none may:
//    NodeDrainStarted, then elastic jobs shrink off the node (JobResized,
//    SCALE-7) and each other running job there that can move does
//    (checkpoint first when it can; stateless online inference at once:
//    PreemptionStarted with reason kDrain) and queues again; the others
//    finish, or are stopped at `drain_timeout`; an empty drained node is
//    removed (NodeRemoved), or goes back to its pool when it was borrowed
//    (NodeReturned). Only scale-in keeps the floor: a lender asking its
//    node back (POOL-3) drains it regardless, the node being the lender's;
//  - warm pool: the largest scale-out of the last `lookback`, at most
//    `max_nodes` (WarmPoolSized when it changes).
//
// Soft state, fresh after a restart: per pool the rule's windows, the
// forecaster and its accuracy, the recent scale-outs; per draining node
// when its drain started (a drain found after a restart starts its clock
// then).
#pragma once

#include <deque>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "src/control/autoscaler.h"
#include "src/control/forecast.h"
#include "src/engine/control_loop.h"

namespace gpupool {

// Scale-in's choice (src/control/node_drains.cc): at most `count` nodes of
// `pool` to drain, in drain order. Candidates are its ready nodes held for
// nobody, ordered: those running reserved tenants' work last, borrowed
// nodes first, then least used (GPU, then CPU), then the newest. A
// candidate with GPUs is passed over when draining it, after those chosen
// before it, would leave the pool less ready GPU capacity
// (EngineState::pool_ready_gpu_milli) than GuaranteedMilli. Empty when the
// pool has no candidate or count <= 0; fails (FailedPrecondition, naming
// the pool, the guaranteed GPUs and its ready GPUs) when it has candidates
// but the floor keeps every one.
Result<std::vector<NodeIndex>> ScaleInNodes(const EngineState& s, PoolId pool, int32_t count);

class PoolAutoscaling final : public PoolAutoscaler {
 public:
  // `scaling`: the pools' settings, checked (CheckScalingConfig);
  // `borrow_between_pools`: POOL-3 on.
  PoolAutoscaling(std::vector<PoolScalingConfig> scaling, bool borrow_between_pools);
  void Tick(const EngineView& view, Actions& act) override;
  std::vector<ForecastStats> forecast_stats() const override;

 private:
  // Per PoolScalingConfig.
  struct Runtime {
    PoolId pool = 0;
    bool resolved = false;  // the pool exists
    std::optional<Autoscaler> rule;
    std::optional<HoltWinters> forecaster;
    Instant next_sample{};
    bool sampled = false;
    std::deque<std::pair<Instant, double>> predictions;  // (due, forecast demand in GPUs)
    int64_t predicted = 0;
    double abs_error_sum = 0, actual_sum = 0;
    std::deque<std::pair<Instant, int32_t>> scale_outs;  // for the warm pool
  };
  // What the rule observes of a pool, and the demand the forecaster
  // samples (allocated plus queued GPU milli).
  struct PoolLoad {
    PoolObservation observation;
    int64_t demand_milli = 0;
  };

  void ScalePool(size_t index, const EngineView& view, Actions& act);
  PoolLoad ObservePool(PoolId pool, const EngineView& view) const;
  // SCALE-3: samples the demand every step and scores the forecasts whose
  // time has come; sets the observation's forecast utilization.
  void Forecast(size_t index, int64_t demand_milli, PoolObservation& o);
  void ScaleOut(size_t index, int32_t nodes, const std::string& reason, const EngineView& view, Actions& act);
  void SizeWarmPool(size_t index, const EngineView& view, Actions& act);

  // Drains (src/control/node_drains.cc).
  void DrainNodes(PoolId pool, int32_t count, const std::string& reason, const EngineView& view, Actions& act);
  // Cordons node n for a drain and moves what can move off it.
  void StartDrain(NodeIndex n, const std::string& reason, const EngineView& view, Actions& act);
  void ProgressDrains(const EngineView& view, Actions& act);

  // POOL-3 (src/control/pool_borrowing.cc): lends empty nodes of other
  // pools to `pool` (at most `count`); returns how many.
  int32_t BorrowNodes(PoolId pool, int32_t count, const std::string& reason, const EngineView& view, Actions& act);
  // Asks back up to `count` nodes `pool` lent (drains them in the borrower).
  int32_t RecallLentNodes(PoolId pool, int32_t count, const EngineView& view, Actions& act);

  std::vector<PoolScalingConfig> scaling_;
  bool borrow_between_pools_;
  std::vector<Runtime> runtime_;  // built at the first Tick
  std::map<NodeIndex, Instant> drain_started_;
};

}  // namespace gpupool
