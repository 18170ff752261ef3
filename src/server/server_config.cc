#include "src/server/server_config.h"


#include "src/config/cluster_reader.h"

namespace gpupool {
namespace {

class ServerConfigReader : public ClusterReader {
 public:
  ServerConfigReader(std::string_view source, std::string base_dir)
      : ClusterReader(source, std::move(base_dir), ClusterReadOptions{.server = true}) {}

  Result<ServerConfig> Parse(const YAML::Node& root);

 private:
  Status ParseServer(const YAML::Node& n, const std::string& path, ServerSettings& c) const;
  Status ParseHttp(const YAML::Node& n, const std::string& path, int64_t threads, HttpSettings& c) const;
  Status ParseProvider(const YAML::Node& n, const std::string& path, CommandProviderSettings& c) const;
};

Result<ServerConfig> ServerConfigReader::Parse(const YAML::Node& root) {
  ServerConfig s;
  if (root.IsNull() || !root.IsDefined()) {
    return Fail(root, "", "empty configuration (expected a map with at least 'name')");
  }
  YamlFields f;
  GP_ASSIGN_OR_RETURN(f, Map(root, "",
                             {"name", "description", "seed", "engine", "priorities", "node_classes", "requirements",
                              "job_labels", "cluster", "pools", "tenants", "server", "scaling", "regions"}));
  GP_TRY(ReadSections(f, s));
  if (auto* n = f.Find("server")) GP_TRY(ParseServer(*n, "server", s.server));
  if (auto* n = f.Find("regions")) GP_TRY(ReadRegions(*n, "regions", s));
  if (auto* n = f.Find("scaling")) {
    GP_TRY(ReadScaling(*n, "scaling", s));
    // Scale-outs are only requests: without a provider nothing would
    // ever create the nodes.
    if (s.server.provider.create.empty()) {
      return Fail(*n, "scaling", "needs server.provider (the commands that create and delete nodes)");
    }
  }
  // Agents heartbeat every reclaim.poll: a node silent for four of them
  // (20 s by default) is down, unless the configuration says otherwise
  // (0s: no failure detection, e.g. nodes without agents). Four, so that a
  // failed node's checkpointable tasks run again elsewhere within OPS-4's
  // 30 s (detection, the next tick, the push to an agent and the start;
  // tests/default_recovery_e2e_test.cc), and a node is not declared down
  // for three lost heartbeats.
  const YAML::Node* engine = f.Find("engine");
  if (!engine || !(*engine)["heartbeat_timeout"]) s.engine.heartbeat_timeout = 4 * s.engine.reclaim.poll;
  return s;
}

Status ServerConfigReader::ParseServer(const YAML::Node& n, const std::string& path, ServerSettings& c) const {
  YamlFields f;
  GP_ASSIGN_OR_RETURN(
      f,
      Map(n, path,
          {"tick", "snapshot_every_events", "max_body_bytes", "http_threads", "max_pending_jobs_per_tenant", "http",
           "provider", "default_image", "max_log_bytes_per_task"}));
  if (const YAML::Node* i = f.Find("default_image")) {
    // As a job's `image` (src/api/task_request.h, ImageProblem).
    GP_TRY(StringField(f, "default_image", c.default_image));
    if (c.default_image != "host" && (c.default_image[0] != '/' || c.default_image.size() > 4096 ||
                                      c.default_image.find('\0') != std::string::npos)) {
      return Fail(*i, f.PathOf("default_image"),
                  "expected \"host\" or an absolute path to an image on the nodes (at most 4096 bytes, without NUL)");
    }
  }
  GP_TRY(DurationField(f, "tick", c.tick, PositiveDuration));
  GP_TRY(IntField(f, "snapshot_every_events", c.snapshot_every_events, IntRange(1, INT64_MAX)));
  GP_TRY(IntField(f, "max_body_bytes", c.max_body_bytes, IntRange(1024, 1 << 30)));
  GP_TRY(IntField(f, "http_threads", c.http_threads, IntRange(1, 1024)));
  GP_TRY(IntField(f, "max_pending_jobs_per_tenant", c.max_pending_jobs_per_tenant, IntRange(1, 10'000'000)));
  GP_TRY(IntField(f, "max_log_bytes_per_task", c.max_log_bytes_per_task, IntRange(4096, int64_t{1} << 40)));
  if (const YAML::Node* h = f.Find("http")) GP_TRY(ParseHttp(*h, f.PathOf("http"), c.http_threads, c.http));
  if (const YAML::Node* p = f.Find("provider")) GP_TRY(ParseProvider(*p, f.PathOf("provider"), c.provider));
  return {};
}

// The HTTP limits (src/http/server.h); agent_threads must leave the API a thread.
Status ServerConfigReader::ParseHttp(const YAML::Node& n, const std::string& path, int64_t threads,
                                     HttpSettings& c) const {
  YamlFields f;
  GP_ASSIGN_OR_RETURN(f, Map(n, path,
                             {"max_connections", "max_connections_per_client", "max_header_bytes", "idle_timeout",
                              "header_timeout", "body_timeout", "request_timeout", "queue_length",
                              "agent_threads", "token_requests_per_s", "token_request_burst", "tenant_requests_per_s",
                              "tenant_request_burst", "failed_auth_per_s", "failed_auth_burst", "max_json_values",
                              "max_json_depth"}));
  GP_TRY(IntField(f, "max_connections", c.max_connections, IntRange(1, 1000000)));
  GP_TRY(IntField(f, "max_connections_per_client", c.max_connections_per_client, IntRange(1, 1000000)));
  GP_TRY(IntField(f, "max_header_bytes", c.max_header_bytes, IntRange(1024, 1 << 20)));
  const auto seconds_to_day = [](Duration d) -> std::string {
    return d >= std::chrono::seconds(1) && d <= std::chrono::hours(24) ? "" : "must be between 1s and 24h";
  };
  GP_TRY(DurationField(f, "idle_timeout", c.idle_timeout, seconds_to_day));
  GP_TRY(DurationField(f, "header_timeout", c.header_timeout, seconds_to_day));
  GP_TRY(DurationField(f, "body_timeout", c.body_timeout, seconds_to_day));
  GP_TRY(DurationField(f, "request_timeout", c.request_timeout, seconds_to_day));
  GP_TRY(IntField(f, "queue_length", c.queue_length, IntRange(1, 1 << 20)));
  GP_TRY(IntField(f, "agent_threads", c.agent_threads, IntRange(0, threads - 1)));
  GP_TRY(IntField(f, "token_requests_per_s", c.token_requests_per_s, IntRange(0, 1000000)));
  GP_TRY(IntField(f, "token_request_burst", c.token_request_burst, IntRange(1, 10000000)));
  GP_TRY(IntField(f, "tenant_requests_per_s", c.tenant_requests_per_s, IntRange(0, 1000000)));
  GP_TRY(IntField(f, "tenant_request_burst", c.tenant_request_burst, IntRange(1, 10000000)));
  GP_TRY(IntField(f, "failed_auth_per_s", c.failed_auth_per_s, IntRange(0, 1000000)));
  GP_TRY(IntField(f, "failed_auth_burst", c.failed_auth_burst, IntRange(1, 10000000)));
  GP_TRY(IntField(f, "max_json_values", c.max_json_values, IntRange(100, 100000000)));
  GP_TRY(IntField(f, "max_json_depth", c.max_json_depth, IntRange(8, 1024)));
  return {};
}

// The command node provider (src/server/node_provider.h).
Status ServerConfigReader::ParseProvider(const YAML::Node& n, const std::string& path,
                                         CommandProviderSettings& c) const {
  YamlFields f;
  GP_ASSIGN_OR_RETURN(f, Map(n, path, {"create", "delete", "timeout"}));
  if (n.IsNull()) return Fail(n, path, "expected a map with create (and delete, timeout)");
  GP_TRY(Require(f, "create"));
  GP_TRY(StringField(f, "create", c.create));
  GP_TRY(StringField(f, "delete", c.remove));
  GP_TRY(DurationField(f, "timeout", c.timeout, [](Duration d) -> std::string {
    return d >= std::chrono::seconds(1) ? "" : "must be at least 1s";
  }));
  return {};
}

}  // namespace

Result<ServerConfig> ParseServerConfig(std::string_view text, std::string_view source, const std::string& base_dir) {
  return ReadYamlDocument(text, source,
                          [&](const YAML::Node& root) { return ServerConfigReader(source, base_dir).Parse(root); });
}

Result<ServerConfig> LoadServerConfig(const std::string& path) {
  GP_ASSIGN_OR_RETURN(const std::string text, ReadConfigFile(path));
  return ParseServerConfig(text, path, ConfigFileDir(path));
}

}  // namespace gpupool
