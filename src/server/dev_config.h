// The configuration `gpupool dev` uses without --config: the server's
// default (one pool, node class and requirement `nvlink`) plus a tenant
// `team-a` (the examples' tenant) and idle reclamation on a short
// timeline, so that a newcomer sees jobs run, go idle and be reclaimed
// within a minute; jobs that name no image run with `image: host`. See
// docs/agent.md.
#pragma once

#include <string>

#include "src/server/default_config.h"

namespace gpupool {

inline const std::string kDevConfig = std::string(R"(name: dev
description: gpupool dev mode (server and one agent with fake GPUs)
engine:
  reclaim: {idle: true, poll: 2s, idle_below_pct: 10, idle_polls: 3, grace: 10s}
  heartbeat_timeout: 12s
server:
  default_image: host  # jobs without an image run on a read-only view of the node's own files
)") + kDefaultWorld + R"(tenants:
  - name: team-a
    quota:
      default: {guaranteed_gpus: 0, limit_gpus: 16}  # no nodes yet to guarantee from
)";

}  // namespace gpupool
