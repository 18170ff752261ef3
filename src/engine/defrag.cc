#include "src/engine/defrag.h"

#include <cmath>

namespace gpupool {

Status ValidateDefragConfig(const DefragConfig& c) {
  if (!(c.trigger_frag_pct >= 0 && c.trigger_frag_pct <= 100)) {
    return InvalidArgument("trigger_frag_pct: must be between 0 and 100");
  }
  if (c.max_migrations_per_hour < 0) return InvalidArgument("max_migrations_per_hour: must not be negative");
  if (!(c.min_gain_per_cost >= 0) || !std::isfinite(c.min_gain_per_cost)) {
    return InvalidArgument("min_gain_per_cost: must be a finite number, not negative");
  }
  if (c.horizon <= Duration(0)) return InvalidArgument("horizon: must be positive");
  if (c.restart_cost < Duration(0)) return InvalidArgument("restart_cost: must not be negative");
  return {};
}

}  // namespace gpupool
