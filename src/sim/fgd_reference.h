// Reads the published per-policy results (fgd_policy_summary.csv, derived
// from the FGD paper's cached runs) so that `sim fgd --compare` can print
// them beside ours.
#pragma once

#include <map>
#include <string>

#include "src/base/status.h"

namespace gpupool {

struct FgdReferenceRow {
  double unallocated_pct_at_100 = 0;
  double allocated_pct_sd_at_100 = 0;
  double frag_amount_pct_at_100 = 0;
};

// Key: (workload, policy), e.g. ("openb_pod_list_default", "FGD").
using FgdReference = std::map<std::pair<std::string, std::string>, FgdReferenceRow>;

Result<FgdReference> LoadFgdReference(const std::string& path);

}  // namespace gpupool
