// The configuration `gpupool server` uses without --config: one pool, a
// node class and a requirement for NVLink-connected GPUs, and no nodes
// (agents register them, or POST /v1/nodes). See docs/server.md for every
// key.
#pragma once

#include <string>

namespace gpupool {

// The node classes, requirements and pools of every embedded configuration.
inline constexpr const char* kDefaultWorld = R"(node_classes:
  - name: nvlink
    gpu: {interconnect_gbps: 900}
requirements:
  - name: nvlink
    min: {interconnect_gbps: 600}
pools:
  - name: default
)";

inline const std::string kDefaultServerConfig =
    std::string("name: default\ndescription: gpupool server defaults\n") + kDefaultWorld;

}  // namespace gpupool
