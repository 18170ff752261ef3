// What agents last said about their nodes, for operators (GET /v1/nodes
// shows it as each node's "agent"): the devices they registered (UUIDs,
// products, MIG instances, NVLink peers), how they run tasks (isolation:
// "container" or "none"), where it serves its device metrics (metrics_url)
// and the last heartbeat's samples (utilization, memory, temperature,
// health) with its time; MIG instances as the latest heartbeat reported them.
//
// Soft state, kept in memory only: after a server restart it fills again
// as agents re-register (on their first failed heartbeat) and heartbeat.
//
// Thread-safety: safe for concurrent use (HTTP threads).
#pragma once

#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "src/api/agent_protocol.h"

namespace gpupool {

class AgentStatusBoard {
 public:
  void Registered(const RegisterRequest& r, int64_t unix_ms);
  void Heartbeat(const std::string& node, const std::vector<GpuSample>& gpus, int64_t unix_ms);
  // The MIG instances a heartbeat reported (HeartbeatRequest::mig): they
  // replace the registered ones of those GPUs until the next registration.
  void MigReported(const std::string& node, const std::map<int, std::vector<MigInstance>>& mig);
  // The node's status as JSON, or nullopt when no agent spoke for it since the start.
  std::optional<nlohmann::json> Json(const std::string& node) const;
  // Calls f(node, samples) with each node's last heartbeat's GPU samples,
  // in node name order, under the board's lock (f must not call the board).
  void ForEachSamples(const std::function<void(const std::string&, const std::vector<GpuSample>&)>& f) const;

 private:
  struct Status {
    std::string backend;
    std::string isolation;  // as registered: "container" or "none"
    std::string metrics_url;  // as registered; empty: no metrics listener
    int64_t registered_ms = 0, heartbeat_ms = 0;
    std::vector<GpuDevice> devices;
    std::vector<GpuSample> samples;
    std::map<int, std::vector<MigInstance>> mig;  // from the last heartbeat that had any
  };
  mutable std::mutex mu_;
  std::map<std::string, Status, std::less<>> nodes_;  // GUARDED_BY(mu_)
};

}  // namespace gpupool
