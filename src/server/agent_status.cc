#include "src/server/agent_status.h"

#include "src/base/time_text.h"

namespace gpupool {

void AgentStatusBoard::Registered(const RegisterRequest& r, int64_t unix_ms) {
  std::lock_guard lock(mu_);
  Status& s = nodes_[r.node];
  s.backend = r.backend;
  s.isolation = r.isolation;
  s.metrics_url = r.metrics_url;
  s.registered_ms = unix_ms;
  s.heartbeat_ms = unix_ms;
  s.devices = r.gpus;
  s.samples.clear();
  s.mig.clear();
}

void AgentStatusBoard::MigReported(const std::string& node, const std::map<int, std::vector<MigInstance>>& mig) {
  if (mig.empty()) return;
  std::lock_guard lock(mu_);
  nodes_[node].mig = mig;
}

void AgentStatusBoard::Heartbeat(const std::string& node, const std::vector<GpuSample>& gpus, int64_t unix_ms) {
  std::lock_guard lock(mu_);
  Status& s = nodes_[node];
  s.heartbeat_ms = unix_ms;
  s.samples = gpus;
}

void AgentStatusBoard::ForEachSamples(
    const std::function<void(const std::string&, const std::vector<GpuSample>&)>& f) const {
  std::lock_guard lock(mu_);
  for (const auto& [node, s] : nodes_) f(node, s.samples);
}

std::optional<nlohmann::json> AgentStatusBoard::Json(const std::string& node) const {
  std::lock_guard lock(mu_);
  auto it = nodes_.find(node);
  if (it == nodes_.end()) return std::nullopt;
  const Status& s = it->second;
  nlohmann::json gpus = nlohmann::json::array();
  for (const GpuDevice& d : s.devices) {
    nlohmann::json g{{"index", d.index}, {"uuid", d.uuid}, {"product", d.product}, {"mig_enabled", d.mig_enabled},
                     {"nvlink_peers", d.nvlink_peers}};
    const auto reported = s.mig.find(d.index);
    const std::vector<MigInstance>& instances = reported != s.mig.end() ? reported->second : d.mig;
    if (!instances.empty() || reported != s.mig.end()) {
      nlohmann::json mig = nlohmann::json::array();
      for (const MigInstance& m : instances) {
        mig.push_back({{"uuid", m.uuid}, {"profile", m.profile}, {"start", m.start}});
      }
      g["mig"] = std::move(mig);
    }
    for (const GpuSample& x : s.samples) {
      if (x.index != d.index) continue;
      g["util_pct"] = x.util_pct;
      g["memory_used_mib"] = x.memory_used_mib;
      if (x.temperature_c >= 0) g["temperature_c"] = x.temperature_c;
      g["healthy"] = x.healthy;
      if (!x.health_detail.empty()) g["health_detail"] = x.health_detail;
    }
    gpus.push_back(std::move(g));
  }
  nlohmann::json out{{"backend", s.backend},
                     {"registered_at", FormatRfc3339(InstantFromMillis(s.registered_ms))},
                     {"last_heartbeat_at", FormatRfc3339(InstantFromMillis(s.heartbeat_ms))},
                     {"gpus", std::move(gpus)}};
  if (!s.isolation.empty()) out["isolation"] = s.isolation;
  if (!s.metrics_url.empty()) out["metrics_url"] = s.metrics_url;  // known once it registered since the server started
  return out;
}

}  // namespace gpupool
