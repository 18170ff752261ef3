// The REST API (docs/api/openapi.yaml) on the HTTP layer (src/http/server.h).
// Handlers parse and authorize, then either read the read model (shared
// lock) or hand a command to the core; a command's answer is built once it
// is durable (ServerCore::Execute's callback hands it to a worker), so no
// thread waits for the journal. No scheduling logic lives here.
//
// Listeners: the API's (Bind) serves every route; an optional agent
// listener (BindAgent, `gpupool server --agent-listen`) serves only the
// agent protocol and /healthz, with its own connection limits. Agent routes
// and /healthz also have worker threads of their own
// (`server.http.agent_threads`) on either listener.
//
// Agents' watches (POST /v1/agent/watch) are held by a WatchHub that the
// core feeds with each node's new desired-state revisions; construct this
// before the core starts, so that the hub gets the first publication.
//
// Threads: Bind and BindAgent, then Serve on one thread (it blocks); Stop
// from any thread (also before Serve has started: Serve then returns at
// once). Stop before the core stops (its last callbacks then find the
// layer stopped and are dropped), and destroy this before the core.
#pragma once

#include <condition_variable>
#include <memory>
#include <mutex>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "src/base/status.h"
#include "src/http/server.h"
#include "src/server/rate_limiter.h"
#include "src/server/server_core.h"
#include "src/server/timeseries_view.h"
#include "src/server/watch_hub.h"

namespace gpupool {

// The HTTP layer's limits from the server's settings (`server.http`).
http::Limits HttpLimits(const ServerSettings& s);

class HttpApi {
 public:
  explicit HttpApi(ServerCore& core);
  ~HttpApi();

  // Binds host:port (port 0: any free port); returns the bound port. With
  // `tls` the listener serves only TLS (src/http/tls.h).
  Result<int> Bind(const std::string& host, int port, std::optional<http::TlsIdentity> tls = std::nullopt);
  // The agent listener (optional): the same, serving only the agent routes
  // and /healthz; a `tls` with client CAs requires agents' certificates.
  Result<int> BindAgent(const std::string& host, int port, std::optional<http::TlsIdentity> tls = std::nullopt);
  // Serves until Stop (blocks). Fails when the layer cannot start.
  Status Serve();
  void Stop();
  http::ServerStats stats() const { return http_->stats(); }

 private:
  using Request = http::Request;
  using Response = http::Response;
  using ExchangePtr = http::ExchangePtr;
  // An endpoint answered at once, or one that answers later (after a command).
  using SyncHandler = void (HttpApi::*)(const Request&, Response&);
  using AsyncHandler = void (HttpApi::*)(const ExchangePtr&);

  // Registers every endpoint of the route table.
  void Routes();
  // Runs `cmd` on the core for `origin` (the audit); once it is durable,
  // `then` builds the answer on a worker.
  void Await(const ExchangePtr& ex, Origin origin, Command cmd, std::function<void(const Reply&, Response&)> then);
  // Who asks, for the audit: the principal and its token's name
  // ("tenant/T:NAME", "admin", "reader:NAME"), and the request's id (the
  // X-Request-Id that the layer's prepare step made sure of).
  static Origin OriginOf(const Request& req, const Principal& p);
  static Origin AgentOrigin(const Request& req, const std::string& node);

  // Steps the handlers share. On failure each has already put the error reply in `res`.
  // Authenticates an admin or tenant token (node tokens are refused); admin_only refuses tenant tokens too.
  std::optional<Principal> Auth(const Request& req, Response& res, bool admin_only);
  // Authenticates a node token (the agent endpoints); returns the node it speaks for.
  std::optional<std::string> AgentAuth(const Request& req, Response& res);
  // The token's principal, after the rate limits (server.http.failed_auth_*
  // per client address, token_request_* per token, tenant_request_* per
  // tenant); otherwise the 401 or 429 is in `res` and the denial counted.
  std::optional<Principal> Authenticated(const Request& req, Response& res);
  // `token`: the denied token's name ("" when none is known).
  void Deny(Response& res, const std::string& principal, const std::string& reason, const ApiError& e,
            const std::string& token = "");
  // A 429 rate_limited with Retry-After (whole seconds), counted.
  void DenyRateLimited(Response& res, const std::string& principal, const std::string& what,
                       std::chrono::milliseconds retry_after, const std::string& token = "");
  // An agent endpoint's request, parsed and checked (see the .cc); nothing after answering an error.
  template <class T>
  std::optional<T> AgentRequest(const ExchangePtr& ex, ApiResult<T> (*parse)(const nlohmann::json&, UnknownKeys));
  // The body as JSON, refused when over the configured size or malformed.
  std::optional<nlohmann::json> Body(const Request& req, Response& res);
  // The job the path's first capture names, if it exists and `p` may see it; -1 (after a 404) otherwise.
  JobId FindJob(const Request& req, Response& res, const Principal& p);

  // The endpoints (docs/api/openapi.yaml).
  void Console(const Request& req, Response& res);         // GET / and /console/{file} (src/server/console.h)
  void Health(const Request& req, Response& res);          // GET /healthz
  void GetMetrics(const Request& req, Response& res);      // GET /metrics (Prometheus text)
  void CreateTenant(const ExchangePtr& ex);                // POST /v1/tenants (admin)
  void ListTenants(const Request& req, Response& res);     // GET /v1/tenants (admin)
  void GetTenant(const Request& req, Response& res);       // GET /v1/tenants/{name}
  void SetQuota(const ExchangePtr& ex);                    // PUT /v1/tenants/{name}/quota (admin)
  void SubmitJob(const ExchangePtr& ex);                   // POST /v1/jobs
  void ListJobs(const Request& req, Response& res);        // GET /v1/jobs
  void GetJob(const ExchangePtr& ex);                      // GET /v1/jobs/{id}, with why pending
  void JobLogs(const Request& req, Response& res);         // GET /v1/jobs/{id}/logs
  void CancelJob(const ExchangePtr& ex);                   // DELETE /v1/jobs/{id}
  void AddNode(const ExchangePtr& ex);                     // POST /v1/nodes (admin)
  void IssueNodeToken(const ExchangePtr& ex);              // POST /v1/nodes/{name}/token (admin)
  void CreateToken(const ExchangePtr& ex);                 // POST /v1/tokens (admin; a tenant for itself)
  void ListTokens(const Request& req, Response& res);      // GET /v1/tokens (admin: all; a tenant: its own)
  void RevokeToken(const ExchangePtr& ex);                 // DELETE /v1/tokens/{id} (admin; a tenant its own)
  void RegisterNode(const ExchangePtr& ex);                // POST /v1/agent/register (node token)
  void AgentHeartbeat(const ExchangePtr& ex);              // POST /v1/agent/heartbeat (node token)
  void AgentWatch(const ExchangePtr& ex);                  // POST /v1/agent/watch (node token; held)
  void AgentReport(const ExchangePtr& ex);                 // POST /v1/agent/report (node token)
  void ListNodes(const Request& req, Response& res);       // GET /v1/nodes (admin)
  void GetNode(const Request& req, Response& res);         // GET /v1/nodes/{name} (admin)
  void CordonNode(const ExchangePtr& ex);                  // POST /v1/nodes/{name}/cordon (admin)
  void UncordonNode(const ExchangePtr& ex);                // POST /v1/nodes/{name}/uncordon (admin)
  void DrainNode(const ExchangePtr& ex);                   // POST /v1/nodes/{name}/drain (admin)
  void RemoveNode(const ExchangePtr& ex);                  // DELETE /v1/nodes/{name} (admin)
  // The four above: checks the caller (admin) and the body (optional:
  // reason for a cordon, reason and timeout_s for a drain, {} for an
  // uncordon) or the query (force, reason for a remove), runs the command,
  // answers with the node's view and `changed`.
  void NodeOp(const ExchangePtr& ex, NodeOpCmd::Op op);
  void ListPools(const Request& req, Response& res);       // GET /v1/pools
  void GetRegions(const Request& req, Response& res);      // GET /v1/regions
  void SetRegions(const ExchangePtr& ex);                  // PUT /v1/regions (admin)
  void ListEvents(const Request& req, Response& res);      // GET /v1/events (admin)
  void ExportJournal(const Request& req, Response& res);   // GET /v1/export (admin)
  void ListAudit(const Request& req, Response& res);       // GET /v1/audit (admin)
  void GetUsage(const Request& req, Response& res);        // GET /v1/usage
  void PoolSeries(const Request& req, Response& res);      // GET /v1/timeseries/pools
  void TenantSeries(const Request& req, Response& res);    // GET /v1/timeseries/tenants
  void GpuSeries(const Request& req, Response& res);       // GET /v1/timeseries/gpus (admin)
  // The three above (src/server/timeseries_view.h): records the moment
  // first (ServerCore::RecordSeries), then answers.
  void Series(const Request& req, Response& res, SeriesScope scope);

  ServerCore& core_;
  std::unique_ptr<WatchHub> watches_;  // fed by the core's publisher thread
  std::unique_ptr<RateLimiter> token_rate_;        // per tenant or reader token
  std::unique_ptr<RateLimiter> tenant_rate_;       // per tenant (its tokens together), and the readers'
  std::unique_ptr<RateLimiter> failed_auth_rate_;  // per client address
  std::unique_ptr<http::Server> http_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool stop_ = false;  // guarded by mu_
};

}  // namespace gpupool
