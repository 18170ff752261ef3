// Policies: named lists of weighted score plugins plus a GPU selector, built
// from plugins registered by name.
//
// Built-in policies (see policy.cc for their definitions):
//   Random, DotProd, GpuClustering, GpuPacking, BestFit, FGD  the six policies
//       of the FGD paper's simulator, with its GPU selection per policy
//   FGD+    our own policy (src/sched/plugins/fgd_plus.h)
//   best    an alias of the best policy we have; the default
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "src/base/status.h"
#include "src/sched/fragmentation.h"
#include "src/sched/plugin.h"
#include "src/sched/share_packing.h"

namespace gpupool {
class AttributeTable;
}  // namespace gpupool

namespace gpupool {

// What plugins may need to be built. `frag` is the target workload's
// fragmentation model (FGD and its relatives need it); it must outlive the
// policy.
// `packing` holds the share-packing prices of the same workload and
// cpu_reserve_per_gpu_milli the CPU to keep per free GPU (FGD+ needs both;
// see src/sched/plugins/fgd_plus.h). The models must outlive the policy.
struct PluginDeps {
  const FragmentationModel* frag = nullptr;
  const SharePackingModel* packing = nullptr;
  int64_t cpu_reserve_per_gpu_milli = 0;
  const AttributeTable* attributes = nullptr;  // for AttributeFit / AttributeDistance
};

struct PolicySpec {
  std::string name;
  std::string description;
  std::vector<std::pair<std::string, int64_t>> scores;  // plugin name, weight
  std::string gpu_selector;                             // selector name
  bool random_node = false;  // PreScore: a uniformly random feasible node wins
  std::vector<std::string> filters;                     // filter plugin names
};

struct WeightedScore {
  std::unique_ptr<ScorePlugin> plugin;
  int64_t weight = 1;
};

struct Policy {
  std::string name;
  std::vector<std::unique_ptr<FilterPlugin>> filters;
  std::vector<WeightedScore> scores;
  std::unique_ptr<GpuSelector> gpu_selector;
  bool random_node = false;

  // CheckFit, then every filter plugin: kNone, the CheckFit failure, or
  // kFiltered.
  FitFailure Feasibility(const Node& n, const Demand& d) const {
    const FitFailure f = CheckFit(n, d);
    if (f != FitFailure::kNone) return f;
    for (const auto& filter : filters) {
      if (!filter->Filter(n, d)) return FitFailure::kFiltered;
    }
    return FitFailure::kNone;
  }

  // Weighted sum of the plugin scores. Requires CheckFit(n, d) == kNone.
  int64_t Score(const Node& n, const Demand& d) const {
    int64_t total = 0;
    for (const auto& s : scores) total += s.weight * s.plugin->Score(n, d);
    return total;
  }
  bool node_local() const;
};

// Builds a policy from its spec; fails naming an unknown plugin or selector,
// a missing dependency, or a non-positive weight.
Result<Policy> BuildPolicy(const PolicySpec& spec, const PluginDeps& deps);

// The built-in policy specs, in display order.
const std::vector<PolicySpec>& BuiltinPolicies();
// Looks a built-in policy up by name (case-sensitive); the error lists the
// known names.
Result<PolicySpec> FindPolicy(std::string_view name);
// Names of the registered plugins.
std::vector<std::string> ScorePluginNames();
std::vector<std::string> GpuSelectorNames();
std::vector<std::string> FilterPluginNames();

// `base` with heterogeneous matching in front (src/sched/attributes.h): the
// AttributeFit filter, and the AttributeDistance score weighted so that it
// decides before the base policy's scores (which must stay within +-2^19).
PolicySpec WithAttributeMatching(PolicySpec base);

}  // namespace gpupool
