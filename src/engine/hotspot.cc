// Hotspot detection settings (OPS-2); see src/engine/hotspot.h.
#include "src/engine/hotspot.h"

#include <cmath>

namespace gpupool {

Status CheckHotspotConfig(const HotspotConfig& c) {
  auto pct = [](double v) { return std::isfinite(v) && v >= 0 && v <= 100; };
  if (!pct(c.util_above_pct)) return InvalidArgument("util_above_pct: must be in [0, 100] (0: off)");
  if (!pct(c.memory_above_pct)) return InvalidArgument("memory_above_pct: must be in [0, 100] (0: off)");
  if (!std::isfinite(c.temperature_above_c) || c.temperature_above_c < 0 || c.temperature_above_c > 150) {
    return InvalidArgument("temperature_above_c: must be in [0, 150] (0: off)");
  }
  if (c.util_above_pct == 0 && c.memory_above_pct == 0 && c.temperature_above_c == 0) {
    return InvalidArgument("util_above_pct: at least one threshold must be on");
  }
  if (c.window <= Duration(0)) return InvalidArgument("window: must be positive");
  if (c.max_moves < 0) return InvalidArgument("max_moves: must not be negative");
  if (c.cooldown < Duration(0)) return InvalidArgument("cooldown: must not be negative");
  return {};
}

}  // namespace gpupool
