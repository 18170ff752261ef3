// The configuration `gpupool dev` uses without --config: the server's
// default (one pool, node class and requirement `nvlink`) plus a tenant
// `team-a` (the examples' tenant) and idle reclamation on a short
// timeline, so that a newcomer sees jobs run, go idle and be reclaimed
// within a minute. See docs/agent.md.
#pragma once

namespace gpupool {

inline constexpr const char* kDevConfig = R"(name: dev
description: gpupool dev mode (server and one agent with fake GPUs)
engine:
  reclaim: {idle: true, poll: 2s, idle_below_pct: 10, idle_polls: 3, grace: 10s}
  heartbeat_timeout: 12s
node_classes:
  - name: nvlink
    gpu: {interconnect_gbps: 900}
requirements:
  - name: nvlink
    min: {interconnect_gbps: 600}
pools:
  - name: default
tenants:
  - name: team-a
    quota:
      default: {guaranteed_gpus: 0, limit_gpus: 16}  # no nodes yet to guarantee from
)";

}  // namespace gpupool
