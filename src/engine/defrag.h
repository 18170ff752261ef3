// Defragmentation settings (FRAG-2): when the loop plans (see
// src/control/defrag_planner.h for the planner and
// src/control/defragmentation.h for the loop), and its checks, which
// Engine::Create applies before anything is decided.
#pragma once

#include <cstdint>

#include "src/base/status.h"
#include "src/base/time.h"

namespace gpupool {

struct DefragConfig {
  double trigger_frag_pct = 10;  // plan only while the fragmentation rate is above this (0..100)
  int32_t max_migrations_per_hour = 12;  // in any sliding hour (see MigrationsLeft)
  double min_gain_per_cost = 1.0;        // a step needs gain >= this x cost
  Duration horizon = std::chrono::hours(1);         // how long freed capacity is assumed to stay useful
  Duration restart_cost = std::chrono::seconds(30);  // added to each task's checkpoint_duration
};

// Fails, naming the field, on a trigger outside [0, 100], a negative budget
// or ratio, a non-positive horizon or a negative restart cost.
Status ValidateDefragConfig(const DefragConfig& c);

}  // namespace gpupool
