// The REST API over HTTP/1.1 (cpp-httplib's thread-pooled server), as
// described in docs/api/openapi.yaml. Handlers parse and authorize, then
// either read the read model (shared lock) or hand a command to the core
// and wait for it to be durable. No scheduling logic lives here.
#pragma once

#include <atomic>
#include <memory>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "src/base/status.h"
#include "src/server/server_core.h"

namespace httplib {
class Server;
struct Request;
struct Response;
}

namespace gpupool {

class HttpApi {
 public:
  explicit HttpApi(ServerCore& core);
  ~HttpApi();

  // Binds host:port (port 0: any free port); returns the bound port.
  Result<int> Bind(const std::string& host, int port);
  // Serves until Stop (blocks).
  void Serve();
  // Stops Serve; safe from another thread before Serve has started (it
  // waits for the server to run, or for Serve to have returned).
  void Stop();

 private:
  // An endpoint's handler; the route table in Routes maps method and path to one of these.
  using Handler = void (HttpApi::*)(const httplib::Request&, httplib::Response&);

  // Server-wide settings: thread pool, keep-alive, body limits, request ids, access log, error replies.
  void ConfigureServer();
  // Registers every endpoint from the route table, in its order (httplib matches in registration order).
  void Routes();
  // Runs `handler`, then counts the request in the metrics under `metric` with its duration.
  void Timed(const std::string& metric, Handler handler, const httplib::Request& req, httplib::Response& res);

  // Steps the handlers share. On failure each has already sent the error reply.
  // Authenticates an admin or tenant token (node tokens are refused); admin_only refuses tenant tokens too.
  std::optional<Principal> Auth(const httplib::Request& req, httplib::Response& res, bool admin_only);
  // Authenticates a node token (the agent endpoints); returns the node it speaks for.
  std::optional<std::string> AgentAuth(const httplib::Request& req, httplib::Response& res);
  // The body as JSON, refused when over the configured size or malformed.
  std::optional<nlohmann::json> Body(const httplib::Request& req, httplib::Response& res);
  // The job the path's first capture names, if it exists and `p` may see it; -1 (after a 404) otherwise.
  JobId FindJob(const httplib::Request& req, httplib::Response& res, const Principal& p);

  // The endpoints (docs/api/openapi.yaml), in registration order.
  void Health(const httplib::Request& req, httplib::Response& res);          // GET /healthz
  void GetMetrics(const httplib::Request& req, httplib::Response& res);      // GET /metrics (Prometheus text)
  void CreateTenant(const httplib::Request& req, httplib::Response& res);    // POST /v1/tenants (admin)
  void ListTenants(const httplib::Request& req, httplib::Response& res);     // GET /v1/tenants (admin)
  void GetTenant(const httplib::Request& req, httplib::Response& res);       // GET /v1/tenants/{name}
  void SetQuota(const httplib::Request& req, httplib::Response& res);        // PUT /v1/tenants/{name}/quota (admin)
  void SubmitJob(const httplib::Request& req, httplib::Response& res);       // POST /v1/jobs
  void ListJobs(const httplib::Request& req, httplib::Response& res);        // GET /v1/jobs
  void GetJob(const httplib::Request& req, httplib::Response& res);          // GET /v1/jobs/{id}, with why pending
  void JobLogs(const httplib::Request& req, httplib::Response& res);         // GET /v1/jobs/{id}/logs
  void CancelJob(const httplib::Request& req, httplib::Response& res);       // DELETE /v1/jobs/{id}
  void AddNode(const httplib::Request& req, httplib::Response& res);         // POST /v1/nodes (admin)
  void IssueNodeToken(const httplib::Request& req, httplib::Response& res);  // POST /v1/nodes/{name}/token (admin)
  void RegisterNode(const httplib::Request& req, httplib::Response& res);    // POST /v1/agent/register (node token)
  void AgentHeartbeat(const httplib::Request& req, httplib::Response& res);  // POST /v1/agent/heartbeat (node token)
  void ListNodes(const httplib::Request& req, httplib::Response& res);       // GET /v1/nodes (admin)
  void ListPools(const httplib::Request& req, httplib::Response& res);       // GET /v1/pools
  void GetRegions(const httplib::Request& req, httplib::Response& res);      // GET /v1/regions
  void SetRegions(const httplib::Request& req, httplib::Response& res);      // PUT /v1/regions (admin)
  void ListEvents(const httplib::Request& req, httplib::Response& res);      // GET /v1/events (admin)

  ServerCore& core_;
  std::unique_ptr<httplib::Server> http_;
  std::atomic<bool> served_{false};  // Serve has returned
};

}  // namespace gpupool
