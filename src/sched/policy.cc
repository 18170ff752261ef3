#include "src/sched/policy.h"

#include <functional>
#include <map>

#include "src/sched/attributes.h"
#include "src/sched/plugins/plugins.h"

namespace gpupool {
namespace {

using ScoreFactory = std::function<Result<std::unique_ptr<ScorePlugin>>(const PluginDeps&)>;
using SelectorFactory = std::function<Result<std::unique_ptr<GpuSelector>>(const PluginDeps&)>;
using FilterFactory = std::function<Result<std::unique_ptr<FilterPlugin>>(const PluginDeps&)>;

Result<const AttributeTable*> NeedAttributes(const PluginDeps& deps, std::string_view who) {
  if (deps.attributes == nullptr) return FailedPrecondition(std::string(who) + " needs the node attribute table");
  return deps.attributes;
}

const std::map<std::string, FilterFactory, std::less<>>& FilterRegistry() {
  static const auto* const kRegistry = new std::map<std::string, FilterFactory, std::less<>>{
      {"AttributeFit",
       [](const PluginDeps& d) -> Result<std::unique_ptr<FilterPlugin>> {
         GP_ASSIGN_OR_RETURN(auto t, NeedAttributes(d, "filter AttributeFit"));
         return MakeAttributeFilter(t);
       }},
  };
  return *kRegistry;
}

Result<const SharePackingModel*> NeedPacking(const PluginDeps& deps, std::string_view who) {
  if (deps.packing == nullptr) {
    return FailedPrecondition(std::string(who) + " needs the share-packing prices of the target workload");
  }
  return deps.packing;
}

Result<const FragmentationModel*> NeedFrag(const PluginDeps& deps, std::string_view who) {
  if (deps.frag == nullptr) {
    return FailedPrecondition(std::string(who) + " needs the target workload's typical demands");
  }
  return deps.frag;
}

const std::map<std::string, ScoreFactory, std::less<>>& ScoreRegistry() {
  static const auto* const kRegistry = new std::map<std::string, ScoreFactory, std::less<>>{
      {"AttributeDistance",
       [](const PluginDeps& d) -> Result<std::unique_ptr<ScorePlugin>> {
         GP_ASSIGN_OR_RETURN(auto t, NeedAttributes(d, "score plugin AttributeDistance"));
         return MakeAttributeScore(t);
       }},
      {"DotProd", [](const PluginDeps&) -> Result<std::unique_ptr<ScorePlugin>> { return MakeDotProdScore(); }},
      {"GpuClustering",
       [](const PluginDeps&) -> Result<std::unique_ptr<ScorePlugin>> { return MakeGpuClusteringScore(); }},
      {"GpuPacking", [](const PluginDeps&) -> Result<std::unique_ptr<ScorePlugin>> { return MakeGpuPackingScore(); }},
      {"BestFit", [](const PluginDeps&) -> Result<std::unique_ptr<ScorePlugin>> { return MakeBestFitScore(); }},
      {"FGD+",
       [](const PluginDeps& d) -> Result<std::unique_ptr<ScorePlugin>> {
         GP_ASSIGN_OR_RETURN(auto frag, NeedFrag(d, "score plugin FGD+"));
         GP_ASSIGN_OR_RETURN(auto packing, NeedPacking(d, "score plugin FGD+"));
         return MakeFgdPlusScore(FgdPlusConfig{frag, packing, d.cpu_reserve_per_gpu_milli});
       }},
      {"FGD",
       [](const PluginDeps& d) -> Result<std::unique_ptr<ScorePlugin>> {
         GP_ASSIGN_OR_RETURN(auto frag, NeedFrag(d, "score plugin FGD"));
         return MakeFgdScore(frag);
       }},
  };
  return *kRegistry;
}

const std::map<std::string, SelectorFactory, std::less<>>& SelectorRegistry() {
  static const auto* const kRegistry = new std::map<std::string, SelectorFactory, std::less<>>{
      {"best", [](const PluginDeps&) -> Result<std::unique_ptr<GpuSelector>> { return MakeBestFitGpuSelector(); }},
      {"fgd+",
       [](const PluginDeps& d) -> Result<std::unique_ptr<GpuSelector>> {
         GP_ASSIGN_OR_RETURN(auto frag, NeedFrag(d, "GPU selector fgd+"));
         GP_ASSIGN_OR_RETURN(auto packing, NeedPacking(d, "GPU selector fgd+"));
         return MakeFgdPlusGpuSelector(FgdPlusConfig{frag, packing, d.cpu_reserve_per_gpu_milli});
       }},
      {"random", [](const PluginDeps&) -> Result<std::unique_ptr<GpuSelector>> { return MakeRandomGpuSelector(); }},
      {"fgd",
       [](const PluginDeps& d) -> Result<std::unique_ptr<GpuSelector>> {
         GP_ASSIGN_OR_RETURN(auto frag, NeedFrag(d, "GPU selector fgd"));
         return MakeFgdGpuSelector(frag);
       }},
  };
  return *kRegistry;
}

template <class Map>
std::vector<std::string> KeysOf(const Map& m) {
  std::vector<std::string> out;
  for (const auto& [k, v] : m) out.push_back(k);
  return out;
}

std::string Join(const std::vector<std::string>& names) {
  std::string out;
  for (const auto& n : names) out += (out.empty() ? "" : ", ") + n;
  return out;
}

}  // namespace

bool Policy::node_local() const {
  for (const auto& s : scores) {
    if (!s.plugin->node_local()) return false;
  }
  return true;
}

Result<Policy> BuildPolicy(const PolicySpec& spec, const PluginDeps& deps) {
  Policy p;
  p.name = spec.name;
  p.random_node = spec.random_node;
  for (const std::string& filter : spec.filters) {
    auto it = FilterRegistry().find(filter);
    if (it == FilterRegistry().end()) {
      return InvalidArgument("policy '" + spec.name + "': unknown filter plugin '" + filter +
                             "' (known: " + Join(FilterPluginNames()) + ")");
    }
    GP_ASSIGN_OR_RETURN(auto made, it->second(deps));
    p.filters.push_back(std::move(made));
  }
  for (const auto& [plugin, weight] : spec.scores) {
    auto it = ScoreRegistry().find(plugin);
    if (it == ScoreRegistry().end()) {
      return InvalidArgument("policy '" + spec.name + "': unknown score plugin '" + plugin +
                             "' (known: " + Join(ScorePluginNames()) + ")");
    }
    if (weight <= 0) {
      return InvalidArgument("policy '" + spec.name + "': weight of '" + plugin + "' must be positive");
    }
    GP_ASSIGN_OR_RETURN(auto made, it->second(deps));
    p.scores.push_back({std::move(made), weight});
  }
  auto sel = SelectorRegistry().find(spec.gpu_selector);
  if (sel == SelectorRegistry().end()) {
    return InvalidArgument("policy '" + spec.name + "': unknown GPU selector '" + spec.gpu_selector +
                           "' (known: " + Join(GpuSelectorNames()) + ")");
  }
  GP_ASSIGN_OR_RETURN(auto made, sel->second(deps));
  p.gpu_selector = std::move(made);
  return p;
}

const std::vector<PolicySpec>& BuiltinPolicies() {
  static const auto* const kPolicies = new std::vector<PolicySpec>{
      {"Random", "a uniformly random feasible node; a uniformly random fitting GPU", {}, "random", true},
      {"DotProd", "Tetris-like: smallest dot product of free capacity and demand", {{"DotProd", 1}}, "best", false},
      {"GpuClustering", "keep demands of one GPU kind together", {{"GpuClustering", 1}}, "best", false},
      {"GpuPacking", "fill used GPUs, then used nodes, then small idle nodes", {{"GpuPacking", 1}}, "best", false},
      {"BestFit", "least CPU and GPU left after placement", {{"BestFit", 1}}, "best", false},
      {"FGD", "fragmentation gradient descent (ATC'23)", {{"FGD", 1}}, "fgd", false},
      {"FGD+", "FGD with LP-priced share packing and a CPU reserve per free GPU (ours)", {{"FGD+", 1}}, "fgd+",
       false},
      {"best", "the best policy we have: FGD+", {{"FGD+", 1}}, "fgd+", false},
  };
  return *kPolicies;
}

Result<PolicySpec> FindPolicy(std::string_view name) {
  for (const auto& p : BuiltinPolicies()) {
    if (p.name == name) return p;
  }
  std::vector<std::string> names;
  for (const auto& p : BuiltinPolicies()) names.push_back(p.name);
  return NotFound("unknown policy '" + std::string(name) + "' (known: " + Join(names) + ")");
}

std::vector<std::string> ScorePluginNames() { return KeysOf(ScoreRegistry()); }
std::vector<std::string> GpuSelectorNames() { return KeysOf(SelectorRegistry()); }
std::vector<std::string> FilterPluginNames() { return KeysOf(FilterRegistry()); }

PolicySpec WithAttributeMatching(PolicySpec base) {
  base.filters.insert(base.filters.begin(), "AttributeFit");
  // Attribute scores lie in [-1000, 1000]; 2^20 times that stays inside the
  // index's 32-bit range with base scores up to +-2^19 added.
  base.scores.insert(base.scores.begin(), {"AttributeDistance", int64_t{1} << 20});
  return base;
}

}  // namespace gpupool
