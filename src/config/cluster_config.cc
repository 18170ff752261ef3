#include "src/config/cluster_config.h"

#include <algorithm>
#include <charconv>

namespace gpupool {

int PoolOfGroup(const ClusterConfig& s, const NodeGroupConfig& g) {
  for (size_t p = 0; p < s.pools.size(); ++p) {
    const PoolConfig& pool = s.pools[p];
    const bool model_ok = g.model.empty() ? pool.models.empty()
                                          : pool.models.empty() || std::find(pool.models.begin(), pool.models.end(),
                                                                             g.model) != pool.models.end();
    const bool region_ok =
        pool.regions.empty() || std::find(pool.regions.begin(), pool.regions.end(), g.region) != pool.regions.end();
    if (model_ok && region_ok) return static_cast<int>(p);
  }
  return -1;
}


bool NodeGroupsName(const ClusterConfig& s, std::string_view name) {
  for (const NodeGroupConfig& g : s.nodes) {
    const std::string& p = g.name_prefix;
    if (name.size() <= p.size() + 1 || !name.starts_with(p) || name[p.size()] != '-') continue;
    const std::string_view index = name.substr(p.size() + 1);
    if (index.size() > 1 && index[0] == '0') continue;
    if (!std::all_of(index.begin(), index.end(), [](char c) { return c >= '0' && c <= '9'; })) continue;
    int64_t i = 0;
    auto [ptr, ec] = std::from_chars(index.data(), index.data() + index.size(), i);
    if (ec == std::errc() && ptr == index.data() + index.size() && i < g.count) return true;
  }
  return false;
}

}  // namespace gpupool
