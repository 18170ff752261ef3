// Claim C-OPS (seed 002: "GPU utilization +60%, operations complexity
// -30%"): the whole system against the way a shared GPU cluster is often
// run without it, on the same jobs.
#pragma once

#include "src/base/status.h"
#include "src/sim/claims.h"
#include "src/sim/scenario.h"

namespace gpupool {

// Runs `s` as written (ours: every mechanism the file turns on) and the
// baseline built from it by StaticBaseline, and reports GPU utilization
// (busy GPUs over GPUs in service), service (jobs completed, waits by
// tenant) and, for each operator task the baseline leaves to a person,
// how often ours did it and how large the baseline's unattended problem
// was. Fails when the scenario has no tenants or no nodes.
Result<ClaimResult> RunOperations(const Scenario& s);

// The baseline: no pool scaling, no defragmentation, no lending, and each
// pool split between its tenants in proportion to their guarantees (whole
// GPUs, largest remainders first), each tenant capped at its part
// (guaranteed = limit). Sharing (whole GPUs only) and reclamation (off)
// are run options, not part of the scenario.
Result<Scenario> StaticBaseline(const Scenario& s);

}  // namespace gpupool
