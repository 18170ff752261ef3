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

// The HTTP listeners' limits (`server.http`; src/http/server.h): what one
// client may hold, and the deadlines of a request's parts.
struct HttpSettings {
  int64_t max_connections = 4096;           // open connections per listener
  int64_t max_connections_per_client = 256;  // open connections from one client address
  int64_t max_header_bytes = 16384;         // request line and headers
  Duration idle_timeout{std::chrono::seconds(30)};     // a keep-alive connection without a request
  Duration header_timeout{std::chrono::seconds(10)};   // to send a request's line and headers
  Duration body_timeout{std::chrono::seconds(30)};     // to send its body once the headers are in
  Duration request_timeout{std::chrono::seconds(60)};  // an answer that waits longer is a 504
  int64_t queue_length = 1024;  // requests waiting for a handler thread, per lane; beyond: 503
  int64_t agent_threads = -1;   // of http_threads, kept for agents and /healthz; -1: a quarter
  // Requests per second of each tenant or reader token, in a bucket of
  // token_request_burst; beyond: 429 with Retry-After. 0: no limit. The
  // admin token and node tokens are not limited here (agents have their
  // own caps: the watch hub's reconnect limit).
  int64_t token_requests_per_s = 1000;
  int64_t token_request_burst = 2000;
  // Requests per second of all of one tenant's tokens together (and of all
  // the pool readers' tokens together), in a bucket of
  // tenant_request_burst, so that minting tokens buys at most this much.
  // 0: no limit.
  int64_t tenant_requests_per_s = 4000;
  int64_t tenant_request_burst = 8000;
  // Failed authentications (401) per second from one client address, in a
  // bucket of failed_auth_burst; beyond: 429 before any token is checked
  // (guessing tokens). 0: no limit.
  int64_t failed_auth_per_s = 10;
  int64_t failed_auth_burst = 100;
  // Values (objects, arrays, scalars) in one JSON request body; beyond: 400
  // naming `body`. Bounds the memory a parsed body takes, whatever its shape.
  int64_t max_json_values = 20000;
  // Nesting of objects and arrays in one JSON request body; deeper: 400
  // naming `body`. The API's own requests nest a few levels.
  int64_t max_json_depth = 64;
};

struct ServerSettings {
  Duration tick{std::chrono::seconds(1)};  // how often the control loops run
  int64_t snapshot_every_events = 20000;    // a snapshot after this many events
  int64_t max_body_bytes = 1 << 20;         // larger request bodies are refused
  int64_t http_threads = 16;                // handler threads (not connections: src/http/server.h)
  // A tenant's submissions beyond this many pending (queued) jobs are
  // refused with 429 until some start or are cancelled (SEC: limits on
  // everything; one tenant cannot grow the queue, the journal and the
  // server's memory without bound).
  int64_t max_pending_jobs_per_tenant = 10000;
  // Bytes of one task log (a replica attempt's stdout and stderr) kept in
  // DIR/logs; the agents' later chunks are counted but not stored.
  int64_t max_log_bytes_per_task = int64_t{64} << 20;
  HttpSettings http;
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
