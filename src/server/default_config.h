// The configuration `gpupool server` uses without --config: one pool per
// GPU family, a requirement for NVLink-connected GPUs, and no nodes (they
// register through POST /v1/nodes or, later, the agent). See
// docs/server.md for every key.
#pragma once

namespace gpupool {

inline constexpr const char* kDefaultServerConfig = R"(name: default
description: gpupool server defaults
node_classes:
  - name: nvlink
    gpu: {interconnect_gbps: 900}
requirements:
  - name: nvlink
    min: {interconnect_gbps: 600}
pools:
  - name: default
)";

}  // namespace gpupool
