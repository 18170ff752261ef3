// Dynamic lending of idle guarantees (QUOTA-3): pure decisions over the
// state, and the control loop that emits them.
//
// Lend: a tenant whose usage in a pool has stayed below `threshold` x its
// guarantee for a whole `window`, with nothing of its own waiting, lends
// `lend_fraction` x its guarantee to the pool's elastic capacity. Reserved
// quotas (QUOTA-5) never lend; a tenant lends once until it recalls.
// Recall: as soon as the tenant submits work that does not fit what it kept,
// the whole loan returns; borrowers beyond the shrunken elastic capacity are
// then preempted by the normal guarantee reclaim. The settings are the
// state's (LendingConfig, src/engine/state.h), so that a replay lends alike.
#pragma once

#include <vector>

#include "src/engine/control_loop.h"
#include "src/engine/event.h"
#include "src/engine/state.h"

namespace gpupool {

std::vector<QuotaLent> LendDecisions(const EngineState& s, Instant now);
std::vector<QuotaRecalled> RecallDecisions(const EngineState& s, const Job& submitted);

// Lends at each Tick (QuotaLent), recalls at each submission
// (QuotaRecalled). No soft state: everything it needs is in the state.
class QuotaLending final : public QuotaLender {
 public:
  void Tick(const EngineView& view, Actions& act) override;
  void Submitted(const Job& submitted, const EngineView& view, Actions& act) override;
};

}  // namespace gpupool
