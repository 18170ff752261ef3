// The server's configuration (`gpupool server --config FILE`, documented in
// docs/server.md): a cluster configuration (src/config/cluster_config.h),
// with tenants and the cluster section optional (the API and the agents add
// them later), plus the `server` section. Read strictly
// (src/config/yaml_reader.h): every error names the file, line, column and
// the key's path.
#pragma once

#include <string>
#include <string_view>

#include "src/base/status.h"
#include "src/base/time.h"
#include "src/config/cluster_config.h"

namespace gpupool {

// Settings of `gpupool server` (the `server` section of a server
// configuration; see docs/server.md).
// The daemon's command node provider (SCALE-1, `server.provider`; see
// src/server/node_provider.h): shell command lines run with /bin/sh -c to
// create and delete a node. Configured exactly when `scaling` is.
struct CommandProviderSettings {
  std::string create;  // empty: no provider
  std::string remove;  // `delete`; empty: removed nodes are not deleted
  Duration timeout{std::chrono::minutes(10)};  // per command; then it is killed
};

struct ServerSettings {
  Duration tick{std::chrono::seconds(1)};  // how often the control loops run
  int64_t snapshot_every_events = 20000;    // a snapshot after this many events
  int64_t max_body_bytes = 1 << 20;         // larger request bodies are refused
  int64_t http_threads = 64;                // concurrent HTTP connections served
  CommandProviderSettings provider;
  // The image of a job that runs a command and names none: "host" or an
  // absolute path on the nodes; empty: such a job is refused (EXEC-1).
  std::string default_image;
};

struct ServerConfig : ClusterConfig {
  ServerSettings server;
};

// Parses a server configuration; `source` names it in messages, `base_dir`
// resolves relative paths. `scaling` requires `server.provider`; without
// `engine.heartbeat_timeout`, a node silent for six `engine.reclaim.poll`
// periods is down.
Result<ServerConfig> ParseServerConfig(std::string_view text, std::string_view source, const std::string& base_dir);
// Reads and parses a file (relative paths in it are relative to its folder).
Result<ServerConfig> LoadServerConfig(const std::string& path);

}  // namespace gpupool
