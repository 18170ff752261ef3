#include "src/server/http_api.h"

#include <strings.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <shared_mutex>

#include "src/api/region_request.h"
#include "src/base/fields_binary.h"
#include "src/base/time_text.h"
#include "src/model/gpu_catalog.h"
#include "src/server/console.h"
#include "src/server/export_view.h"
#include "src/server/log.h"
#include "src/server/usage_view.h"
#include "src/server/views.h"
#include "src/base/json_text.h"

namespace gpupool {
namespace {

using nlohmann::json;
using http::ExchangePtr;
using http::Request;
using http::Response;

constexpr int64_t kMaxListLimit = 1000;
constexpr int64_t kMaxEventLimit = 10000;
constexpr size_t kMaxRequestIdBytes = 128;

std::string NextRequestId() {
  static std::atomic<uint64_t> n{0};
  static const std::string prefix = NewToken().substr(4, 8);
  return prefix + "-" + std::to_string(++n);
}

void SendJson(Response& res, int status, const json& body) {
  res.status = status;
  res.content_type = "application/json";
  res.body = body.dump(-1, ' ', false, json::error_handler_t::replace);
}

void SendText(Response& res, std::string text, const char* content_type) {
  res.status = 200;
  res.content_type = content_type;
  res.body = std::move(text);
}

void SendError(Response& res, const ApiError& e) {
  json err{{"code", e.code}, {"message", e.message}};
  if (!e.field.empty()) err["field"] = e.field;
  SendJson(res, e.http_status, json{{"error", err}});
  if (e.retry_after_s > 0) res.headers.emplace_back("Retry-After", std::to_string(e.retry_after_s));
}

ApiError Unauthorized() {
  return MakeApiError(401, "unauthorized", "missing, unknown, revoked or expired bearer token (Authorization: Bearer TOKEN)");
}
ApiError Forbidden() { return MakeApiError(403, "forbidden", "only the admin token may do this"); }

bool ValidName(const std::string& s) {
  if (s.empty() || s.size() > 63 || !(s[0] >= 'a' && s[0] <= 'z')) return false;
  for (char c : s) {
    if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-')) return false;
  }
  return true;
}

// Node names as agents give them: DNS-like host names.
bool ValidNodeName(const std::string& s) {
  if (s.empty() || s.size() > 253 || s[0] == '-' || s[0] == '.') return false;
  for (char c : s) {
    if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' || c == '.')) return false;
  }
  return true;
}

// A query parameter as an integer in [lo, hi].
bool IntParam(const Request& req, const char* name, int64_t& out, int64_t lo, int64_t hi, ApiError* err) {
  if (!req.HasParam(name)) return true;
  const std::string v = req.Param(name);
  try {
    size_t used = 0;
    const long long x = std::stoll(v, &used);
    if (used != v.size() || x < lo || x > hi) throw std::out_of_range("range");
    out = x;
    return true;
  } catch (const std::exception&) {
    *err = MakeApiError(400, "invalid_argument",
                        std::string(name) + ": expected an integer between " + std::to_string(lo) + " and " +
                            std::to_string(hi) + " (got \"" + v.substr(0, 32) + "\")",
                        name);
    return false;
  }
}

// The `state` query parameter, a job state's name (nullopt when absent).
bool StateParam(const Request& req, std::optional<JobState>& out, ApiError* err) {
  if (!req.HasParam("state")) return true;
  const std::string v = req.Param("state");
  for (int i = 0; i <= static_cast<int>(JobState::kEvicted); ++i) {
    if (v == JobStateName(static_cast<JobState>(i))) out = static_cast<JobState>(i);
  }
  if (out) return true;
  *err = MakeApiError(400, "invalid_argument",
                      "state: unknown job state '" + v.substr(0, 32) +
                          "' (known: pending, running, checkpointing, succeeded, failed, cancelled, rejected, evicted)",
                      "state");
  return false;
}

// Reads a quota object (guaranteed_gpus, limit_gpus, weight, reserved) from
// a FieldReader opened on it.
bool ReadQuota(const FieldReader& f, Quota& q, ApiError* err) {
  double g = 0, l = -1, w = 1;
  if (!f.Number("guaranteed_gpus", g, 0, 1e6, err)) return false;
  if (!f.Number("limit_gpus", l, 0, 1e6, err)) return false;
  if (!f.Number("weight", w, 0, 1e6, err, /*lo_open=*/true)) return false;
  if (!f.Bool("reserved", q.reserved, err)) return false;
  if (!f.Has("limit_gpus")) l = g;
  if (l < g) {
    *err = BadField(f.PathOf("limit_gpus"), "must be at least guaranteed_gpus");
    return false;
  }
  q.guaranteed_milli = std::llround(g * kMilliPerGpu);
  q.elastic_limit_milli = std::llround(l * kMilliPerGpu);
  q.weight = w;
  return true;
}

bool ReplyFailed(Response& res, const Reply& r) {
  if (!r.error) return false;
  SendError(res, *r.error);
  return true;
}

// The layer's own answers in the API's error shape. A body over the limit
// stays the documented 400 naming `body` (the layer closes the connection).
Response LayerErrorResponse(http::LayerError e, const Request& req, int64_t max_body) {
  Response res;
  switch (e) {
    case http::LayerError::kNotFound:
      SendError(res, MakeApiError(404, "not_found", "no such endpoint: " + req.method + " " + req.path));
      break;
    case http::LayerError::kMethodNotAllowed:
      SendError(res, MakeApiError(405, "method_not_allowed", req.method + " is not allowed on " + req.path));
      break;
    case http::LayerError::kBodyTooLarge:
      SendError(res, MakeApiError(400, "invalid_argument",
                                  "body: too large (the limit is " + std::to_string(max_body) + " bytes)", "body"));
      break;
    case http::LayerError::kBadTransferEncoding:
      SendError(res, MakeApiError(400, "invalid_argument",
                                  "Transfer-Encoding: only chunked is served, alone and without a Content-Length",
                                  "Transfer-Encoding"));
      break;
    case http::LayerError::kBadContentLength:
      SendError(res, MakeApiError(400, "invalid_argument", "Content-Length: given twice with different values",
                                  "Content-Length"));
      break;
    case http::LayerError::kBusy:
      SendError(res, MakeApiError(503, "unavailable", "the server is busy; retry after a second"));
      break;
    case http::LayerError::kTimeout:
      SendError(res, MakeApiError(504, "timeout", "no answer in time; the request may still take effect"));
      break;
    case http::LayerError::kStopping:
      SendError(res, MakeApiError(503, "unavailable", "the server is shutting down"));
      break;
    case http::LayerError::kInternal:
      SendError(res, MakeApiError(500, "internal", "internal error"));
      break;
  }
  return res;
}

bool UsableRequestId(std::string_view id) {
  return !id.empty() && id.size() <= kMaxRequestIdBytes &&
         std::all_of(id.begin(), id.end(), [](char c) { return c > ' ' && c < 127 && c != '"' && c != '\\'; });
}

// Every request has one X-Request-Id before it is routed: the client's when
// usable (1 to 128 printable characters, no quotes or backslashes), else a
// new one. The audit records it; the answer carries it back.
void AssignRequestId(Request& req) {
  if (UsableRequestId(req.Header("X-Request-Id"))) return;
  std::erase_if(req.headers, [](const auto& h) { return strcasecmp(h.first.c_str(), "X-Request-Id") == 0; });
  req.headers.emplace_back("X-Request-Id", NextRequestId());
}

void TagRequestId(const Request& req, Response& res) {
  std::string id(req.Header("X-Request-Id"));
  if (!UsableRequestId(id)) id = NextRequestId();  // answered before it was prepared
  res.headers.emplace_back("X-Request-Id", std::move(id));
}

std::string HeaderOf(const Response& res, std::string_view name) {
  for (const auto& [k, v] : res.headers) {
    if (k == name) return v;
  }
  return "";
}

// Runs a handler step, answering 500 with the exception's text if it throws
// (the API answered so before; inputs that throw are bugs to fix at the root).
template <class F>
void Guarded(const ExchangePtr& ex, F&& f) {
  try {
    f();
  } catch (const std::exception& e) {
    LogError("request failed", {{"error", e.what()}});
    Response res;
    SendError(res, MakeApiError(500, "internal", e.what()));
    ex->Respond(std::move(res));
  }
}

enum class Method { kGet, kPost, kPut, kDelete };

}  // namespace

http::Limits HttpLimits(const ServerSettings& s) {
  http::Limits l;
  l.max_connections = static_cast<int>(s.http.max_connections);
  l.max_connections_per_client = static_cast<int>(s.http.max_connections_per_client);
  l.max_header_bytes = s.http.max_header_bytes;
  l.max_body_bytes = s.max_body_bytes;
  l.idle_timeout = s.http.idle_timeout;
  l.header_timeout = s.http.header_timeout;
  l.body_timeout = s.http.body_timeout;
  l.request_timeout = s.http.request_timeout;
  return l;
}

HttpApi::HttpApi(ServerCore& core) : core_(core) {
  const ServerSettings& s = core_.settings();
  http::ServerOptions o;
  o.workers.threads = static_cast<int>(s.http_threads);
  const int64_t agent_threads = s.http.agent_threads < 0 ? s.http_threads / 4 : s.http.agent_threads;
  o.workers.reserved = static_cast<int>(std::min(agent_threads, s.http_threads - 1));
  o.workers.queue_length = static_cast<size_t>(s.http.queue_length);
  const int64_t max_body = s.max_body_bytes;
  o.error_response = [max_body](http::LayerError e, const Request& req) {
    return LayerErrorResponse(e, req, max_body);
  };
  o.prepare = AssignRequestId;
  o.decorate = TagRequestId;
  o.on_complete = [this](const http::Completion& c) {
    if (!c.request->route.empty()) {
      core_.metrics().CountRequest(c.request->method, c.request->route, c.status, c.seconds.count());
    }
    if (!RequestLoggingEnabled()) return;
    LogRequest({{"request_id", c.response ? HeaderOf(*c.response, "X-Request-Id") : ""},
                {"method", c.request->method},
                {"path", c.request->path},
                {"status", std::to_string(c.status)},
                {"remote", c.request->remote_addr}});
  };
  o.log = [](const std::string& line) { LogError("http", {{"error", line}}); };
  http_ = std::make_unique<http::Server>(std::move(o));
  // A hold ends well before the layer's request_timeout would answer 504.
  WatchHubOptions w;
  w.max_hold = std::min<std::chrono::milliseconds>(w.max_hold, s.http.request_timeout / 2);
  watches_ = std::make_unique<WatchHub>(core_.agent_incarnation(), w);
  token_rate_ = std::make_unique<RateLimiter>(RateLimit{static_cast<double>(s.http.token_requests_per_s),
                                                        static_cast<double>(s.http.token_request_burst)});
  tenant_rate_ = std::make_unique<RateLimiter>(RateLimit{static_cast<double>(s.http.tenant_requests_per_s),
                                                         static_cast<double>(s.http.tenant_request_burst)});
  failed_auth_rate_ = std::make_unique<RateLimiter>(
      RateLimit{static_cast<double>(s.http.failed_auth_per_s), static_cast<double>(s.http.failed_auth_burst)});
  core_.set_desired_listener([hub = watches_.get()](const std::vector<NodeDesiredPtr>& d) { hub->Publish(d); });
  Routes();
}

HttpApi::~HttpApi() {
  core_.set_desired_listener(nullptr);
  Stop();
}

Result<int> HttpApi::Bind(const std::string& host, int port, std::optional<http::TlsIdentity> tls) {
  return http_->Listen(host, port, HttpLimits(core_.settings()), /*reserved_only=*/false, std::move(tls));
}

Result<int> HttpApi::BindAgent(const std::string& host, int port, std::optional<http::TlsIdentity> tls) {
  return http_->Listen(host, port, HttpLimits(core_.settings()), /*reserved_only=*/true, std::move(tls));
}

Status HttpApi::Serve() {
  {
    std::lock_guard lock(mu_);
    if (stop_) return {};
  }
  GP_TRY(http_->Start());
  std::unique_lock lock(mu_);
  cv_.wait(lock, [&] { return stop_; });
  return {};
}

void HttpApi::Stop() {
  {
    std::lock_guard lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  http_->Stop();
  watches_->Stop();
}

void HttpApi::Routes() {
  struct Entry {
    Method method;
    const char* pattern;  // without ":digits", the route's name in the request metrics
    http::Lane lane;
    SyncHandler sync;    // one of the two
    AsyncHandler async;
  };
  using L = http::Lane;
  static constexpr Entry kRoutes[] = {
      {Method::kGet, "/healthz", L::kReserved, &HttpApi::Health, nullptr},
      {Method::kGet, "/", L::kApi, &HttpApi::Console, nullptr},
      {Method::kGet, "/console/{file}", L::kApi, &HttpApi::Console, nullptr},
      {Method::kGet, "/metrics", L::kApi, &HttpApi::GetMetrics, nullptr},
      {Method::kPost, "/v1/tenants", L::kApi, nullptr, &HttpApi::CreateTenant},
      {Method::kGet, "/v1/tenants", L::kApi, &HttpApi::ListTenants, nullptr},
      {Method::kGet, "/v1/tenants/{name}", L::kApi, &HttpApi::GetTenant, nullptr},
      {Method::kPut, "/v1/tenants/{name}/quota", L::kApi, nullptr, &HttpApi::SetQuota},
      {Method::kPost, "/v1/jobs", L::kApi, nullptr, &HttpApi::SubmitJob},
      {Method::kGet, "/v1/jobs", L::kApi, &HttpApi::ListJobs, nullptr},
      {Method::kGet, "/v1/jobs/{id:digits}", L::kApi, nullptr, &HttpApi::GetJob},
      {Method::kGet, "/v1/jobs/{id:digits}/logs", L::kApi, &HttpApi::JobLogs, nullptr},
      {Method::kDelete, "/v1/jobs/{id:digits}", L::kApi, nullptr, &HttpApi::CancelJob},
      {Method::kPost, "/v1/nodes", L::kApi, nullptr, &HttpApi::AddNode},
      {Method::kPost, "/v1/nodes/{name}/token", L::kApi, nullptr, &HttpApi::IssueNodeToken},
      {Method::kPost, "/v1/tokens", L::kApi, nullptr, &HttpApi::CreateToken},
      {Method::kGet, "/v1/tokens", L::kApi, &HttpApi::ListTokens, nullptr},
      {Method::kDelete, "/v1/tokens/{id}", L::kApi, nullptr, &HttpApi::RevokeToken},
      {Method::kPost, "/v1/agent/register", L::kReserved, nullptr, &HttpApi::RegisterNode},
      {Method::kPost, "/v1/agent/heartbeat", L::kReserved, nullptr, &HttpApi::AgentHeartbeat},
      {Method::kPost, "/v1/agent/watch", L::kReserved, nullptr, &HttpApi::AgentWatch},
      {Method::kPost, "/v1/agent/report", L::kReserved, nullptr, &HttpApi::AgentReport},
      {Method::kGet, "/v1/nodes", L::kApi, &HttpApi::ListNodes, nullptr},
      {Method::kGet, "/v1/nodes/{name}", L::kApi, &HttpApi::GetNode, nullptr},
      {Method::kPost, "/v1/nodes/{name}/cordon", L::kApi, nullptr, &HttpApi::CordonNode},
      {Method::kPost, "/v1/nodes/{name}/uncordon", L::kApi, nullptr, &HttpApi::UncordonNode},
      {Method::kPost, "/v1/nodes/{name}/drain", L::kApi, nullptr, &HttpApi::DrainNode},
      {Method::kDelete, "/v1/nodes/{name}", L::kApi, nullptr, &HttpApi::RemoveNode},
      {Method::kGet, "/v1/pools", L::kApi, &HttpApi::ListPools, nullptr},
      {Method::kGet, "/v1/regions", L::kApi, &HttpApi::GetRegions, nullptr},
      {Method::kPut, "/v1/regions", L::kApi, nullptr, &HttpApi::SetRegions},
      {Method::kGet, "/v1/events", L::kApi, &HttpApi::ListEvents, nullptr},
      {Method::kGet, "/v1/audit", L::kApi, &HttpApi::ListAudit, nullptr},
      {Method::kGet, "/v1/export", L::kApi, &HttpApi::ExportJournal, nullptr},
      {Method::kGet, "/v1/usage", L::kApi, &HttpApi::GetUsage, nullptr},
      {Method::kGet, "/v1/timeseries/pools", L::kApi, &HttpApi::PoolSeries, nullptr},
      {Method::kGet, "/v1/timeseries/tenants", L::kApi, &HttpApi::TenantSeries, nullptr},
      {Method::kGet, "/v1/timeseries/gpus", L::kApi, &HttpApi::GpuSeries, nullptr},
  };
  static constexpr const char* kMethods[] = {"GET", "POST", "PUT", "DELETE"};
  for (const Entry& e : kRoutes) {
    http::Handler h;
    if (e.sync != nullptr) {
      h = [this, f = e.sync](const ExchangePtr& ex) {
        Guarded(ex, [&] {
          Response res;
          (this->*f)(ex->request(), res);
          ex->Respond(std::move(res));
        });
      };
    } else {
      h = [this, f = e.async](const ExchangePtr& ex) { Guarded(ex, [&] { (this->*f)(ex); }); };
    }
    std::string name = e.pattern;
    if (const size_t at = name.find(":digits"); at != std::string::npos) name.erase(at, 7);
    http_->Add(http::Route{kMethods[static_cast<int>(e.method)], e.pattern, std::move(name), e.lane, std::move(h)});
  }
}

void HttpApi::Await(const ExchangePtr& ex, Origin origin, Command cmd, std::function<void(const Reply&, Response&)> then) {
  core_.Execute(std::move(cmd), [this, ex, then = std::move(then)](Reply r) mutable {
    // On the core's publisher thread: hand the rest to a worker.
    http_->Continue([ex, then = std::move(then), r = std::move(r)] {
      Guarded(ex, [&] {
        Response res;
        then(r, res);
        ex->Respond(std::move(res));
      });
    });
  }, std::move(origin));
}

namespace {

std::string PrincipalLabel(const Principal& p) {
  if (p.admin) return p.read_only ? "reader" : "admin";
  if (!p.node.empty()) return std::string(kNodeTokenPrefix) + p.node;
  return "tenant/" + p.tenant;
}

int64_t WholeSeconds(std::chrono::milliseconds d) { return (d.count() + 999) / 1000; }

}  // namespace

Origin HttpApi::OriginOf(const Request& req, const Principal& p) {
  std::string actor = PrincipalLabel(p);
  if (!p.token_name.empty()) actor += ":" + p.token_name;
  return Origin{std::move(actor), std::string(req.Header("X-Request-Id"))};
}

Origin HttpApi::AgentOrigin(const Request& req, const std::string& node) {
  return Origin{std::string(kNodeTokenPrefix) + node, std::string(req.Header("X-Request-Id"))};
}

void HttpApi::Deny(Response& res, const std::string& principal, const std::string& reason, const ApiError& e,
                   const std::string& token) {
  core_.metrics().CountDenied(principal, token, reason);
  SendError(res, e);
}

void HttpApi::DenyRateLimited(Response& res, const std::string& principal, const std::string& what,
                              std::chrono::milliseconds retry_after, const std::string& token) {
  const std::string seconds = std::to_string(WholeSeconds(retry_after));
  Deny(res, principal, "rate_limited", MakeApiError(429, "rate_limited", what + "; retry after " + seconds + " s"),
       token);
  res.headers.emplace_back("Retry-After", seconds);
}

std::optional<Principal> HttpApi::Authenticated(const Request& req, Response& res) {
  const auto now = RateLimiter::Clock::now();
  if (auto wait = failed_auth_rate_->WouldRefuse(req.remote_addr, now)) {
    DenyRateLimited(res, "unknown",
                    "too many requests with a missing or unknown token from " + req.remote_addr +
                        " (server.http.failed_auth_per_s)",
                    *wait);
    return std::nullopt;
  }
  auto p = core_.auth().Authenticate(req.Header("Authorization"), ToMillis(core_.env().Now()));
  if (!p) {
    failed_auth_rate_->Take(req.remote_addr, now);
    Deny(res, "unknown", "unauthorized", Unauthorized());
    return std::nullopt;
  }
  if ((p->admin && !p->read_only) || !p->node.empty()) return p;
  const std::string principal = PrincipalLabel(*p);
  // The token's bucket is looked at first but debited last, so that a
  // request the tenant's bucket refuses costs the token nothing.
  const auto token_refused = [&](std::chrono::milliseconds wait) {
    DenyRateLimited(res, principal, "token " + p->token_name + " is over server.http.token_requests_per_s", wait,
                    p->token_name);
    return std::nullopt;
  };
  if (auto wait = token_rate_->WouldRefuse(p->token_id, now)) return token_refused(*wait);
  if (auto wait = tenant_rate_->Take(principal, now)) {
    DenyRateLimited(res, principal,
                    (p->tenant.empty() ? "the pool readers' tokens are" : "tenant " + p->tenant + "'s tokens are") +
                        std::string(" together over server.http.tenant_requests_per_s"),
                    *wait, p->token_name);
    return std::nullopt;
  }
  if (auto wait = token_rate_->Take(p->token_id, now)) return token_refused(*wait);  // emptied meanwhile
  return p;
}

// Authentication; admin_only refuses tenant tokens.
std::optional<Principal> HttpApi::Auth(const Request& req, Response& res, bool admin_only) {
  auto p = Authenticated(req, res);
  if (!p) return std::nullopt;
  if (!p->node.empty()) {
    Deny(res, PrincipalLabel(*p), "forbidden",
         MakeApiError(403, "forbidden", "a node token may only call the agent endpoints (/v1/agent/...)"), p->token_name);
    return std::nullopt;
  }
  if (p->read_only && req.method != "GET") {
    Deny(res, PrincipalLabel(*p), "forbidden",
         MakeApiError(403, "forbidden", "token '" + p->token_name + "' is read-only (role reader): it may only GET"),
         p->token_name);
    return std::nullopt;
  }
  if (admin_only && !p->admin) {
    Deny(res, PrincipalLabel(*p), "forbidden", Forbidden(), p->token_name);
    return std::nullopt;
  }
  return p;
}

// The agent endpoints take node tokens only, for the node the body names.
std::optional<std::string> HttpApi::AgentAuth(const Request& req, Response& res) {
  auto p = Authenticated(req, res);
  if (!p) return std::nullopt;
  if (p->node.empty()) {
    Deny(res, PrincipalLabel(*p), "forbidden",
         MakeApiError(403, "forbidden", "the agent endpoints take a node token (POST /v1/nodes/{name}/token)"),
         p->token_name);
    return std::nullopt;
  }
  return p->node;
}

std::optional<json> HttpApi::Body(const Request& req, Response& res) {
  const int64_t max_body_bytes = core_.settings().max_body_bytes;
  if (static_cast<int64_t>(req.body.size()) > max_body_bytes) {
    SendError(res, MakeApiError(400, "invalid_argument", "body: too large", "body"));
    return std::nullopt;
  }
  // One strict reader (src/base/json_text.h): a malformed, overflowing, repeated-key or too deep body is a 400
  // naming `body`, never a library exception.
  auto j = ParseJsonText(req.body, JsonLimits{.max_bytes = static_cast<size_t>(max_body_bytes),
                                              .max_depth = static_cast<int>(core_.settings().http.max_json_depth),
                                              .max_values = static_cast<size_t>(core_.settings().http.max_json_values)});
  if (!j) {
    SendError(res, MakeApiError(400, "invalid_argument", "body: " + j.error().message, "body"));
    return std::nullopt;
  }
  return std::move(*j);
}

void HttpApi::Console(const Request& req, Response& res) { ServeConsole(req, res); }

void HttpApi::Health(const Request&, Response& res) {
  std::shared_lock lock(core_.read_model().mu());
  SendJson(res, 200, json{{"status", "ok"}, {"last_seq", core_.read_model().last_seq()}});
}

void HttpApi::GetMetrics(const Request&, Response& res) {
  SendText(res, core_.metrics().Render(core_.read_model()), "text/plain; version=0.0.4; charset=utf-8");
}

// --- tenants ---------------------------------------------------------------------
void HttpApi::CreateTenant(const ExchangePtr& ex) {
  const Request& req = ex->request();
  Response res;
  auto p = Auth(req, res, true);
  if (!p) return (void)ex->Respond(std::move(res));
  auto j = Body(req, res);
  if (!j) return (void)ex->Respond(std::move(res));
  ApiError err;
  FieldReader f;
  CreateTenantCmd cmd;
  auto fail = [&](const ApiError& e) {
    SendError(res, e);
    ex->Respond(std::move(res));
  };
  if (!FieldReader::Open(*j, "", {"name", "quota"}, &f, &err) || !f.Require("name", &err) ||
      !f.String("name", cmd.name, 63, &err)) {
    return fail(err);
  }
  if (!ValidName(cmd.name)) {
    return fail(BadField("name", "expected 1 to 63 characters of a-z, 0-9 and '-', starting "
                                 "with a letter (got \"" + cmd.name + "\")"));
  }
  if (const json* q = f.Find("quota")) {
    if (!q->is_object()) return fail(BadField("quota", "expected an object of pool name -> quota"));
    for (const auto& [pool, value] : q->items()) {
      FieldReader qf;
      Quota quota;
      if (!FieldReader::Open(value, "quota." + pool, {"guaranteed_gpus", "limit_gpus", "weight", "reserved"}, &qf,
                             &err) ||
          !ReadQuota(qf, quota, &err)) {
        return fail(err);
      }
      if (!core_.names().pool_id(pool)) return fail(BadField("quota." + pool, "unknown pool '" + pool + "'"));
      cmd.quotas.emplace_back(pool, quota);
    }
  }
  MintedToken minted = MintToken(cmd.name, "initial", kRoleTenant);
  const std::string token = std::move(minted.token);
  cmd.token = std::move(minted.record);
  const std::string name = cmd.name;  // before cmd is moved
  Await(ex, OriginOf(req, *p), std::move(cmd), [this, name, token](const Reply& r, Response& res) {
    if (ReplyFailed(res, r)) return;
    std::shared_lock lock(core_.read_model().mu());
    const auto& m = core_.read_model();
    json v = TenantView(*m.tenant_id(name), m);
    v["token"] = token;
    SendJson(res, 201, v);
  });
}

void HttpApi::ListTenants(const Request& req, Response& res) {
  if (!Auth(req, res, true)) return;
  std::shared_lock lock(core_.read_model().mu());
  const auto& m = core_.read_model();
  json list = json::array();
  for (size_t t = 0; t < m.tenants().size(); ++t) list.push_back(TenantView(static_cast<TenantId>(t), m));
  SendJson(res, 200, json{{"tenants", list}});
}

void HttpApi::GetTenant(const Request& req, Response& res) {
  auto p = Auth(req, res, false);
  if (!p) return;
  const std::string name = req.captures[0];
  if (!p->admin && p->tenant != name) return SendError(res, MakeApiError(404, "not_found", "no tenant '" + name + "'"));
  std::shared_lock lock(core_.read_model().mu());
  const auto& m = core_.read_model();
  const auto t = m.tenant_id(name);
  if (!t) return SendError(res, MakeApiError(404, "not_found", "no tenant '" + name + "'"));
  SendJson(res, 200, TenantView(*t, m));
}

void HttpApi::SetQuota(const ExchangePtr& ex) {
  const Request& req = ex->request();
  Response res;
  auto p = Auth(req, res, true);
  if (!p) return (void)ex->Respond(std::move(res));
  auto j = Body(req, res);
  if (!j) return (void)ex->Respond(std::move(res));
  ApiError err;
  FieldReader f;
  SetQuotaCmd cmd;
  cmd.tenant = req.captures[0];
  if (!FieldReader::Open(*j, "", {"pool", "guaranteed_gpus", "limit_gpus", "weight", "reserved"}, &f, &err) ||
      !f.Require("pool", &err) || !f.String("pool", cmd.pool, 63, &err) || !ReadQuota(f, cmd.quota, &err)) {
    SendError(res, err);
    return (void)ex->Respond(std::move(res));
  }
  if (!core_.names().pool_id(cmd.pool)) {
    SendError(res, BadField("pool", "unknown pool '" + cmd.pool + "'"));
    return (void)ex->Respond(std::move(res));
  }
  const std::string name = cmd.tenant;  // before cmd is moved
  Await(ex, OriginOf(req, *p), std::move(cmd), [this, name](const Reply& r, Response& res) {
    if (ReplyFailed(res, r)) return;
    std::shared_lock lock(core_.read_model().mu());
    const auto& m = core_.read_model();
    SendJson(res, 200, TenantView(*m.tenant_id(name), m));
  });
}

// --- jobs ------------------------------------------------------------------------
void HttpApi::SubmitJob(const ExchangePtr& ex) {
  const Request& req = ex->request();
  Response res;
  auto fail = [&](const ApiError& e) {
    SendError(res, e);
    ex->Respond(std::move(res));
  };
  auto p = Auth(req, res, false);
  if (!p) return (void)ex->Respond(std::move(res));
  auto j = Body(req, res);
  if (!j) return (void)ex->Respond(std::move(res));
  auto parsed = ParseJobRequest(*j, core_.names(), core_.env().Now());
  if (!parsed.ok()) return fail(parsed.error);
  SubmitJobCmd cmd;
  cmd.spec = std::move(parsed.value->spec);
  if (p->admin) {
    if (parsed.value->tenant.empty()) {
      return fail(BadField("tenant", "required when the admin submits (the tenant the job is for)"));
    }
    cmd.tenant = parsed.value->tenant;
  } else {
    if (!parsed.value->tenant.empty() && parsed.value->tenant != p->tenant) {
      return fail(BadField("tenant", "a tenant token submits only its own jobs (omit tenant or give '" + p->tenant +
                                         "')"));
    }
    cmd.tenant = p->tenant;
  }
  Await(ex, OriginOf(req, *p), std::move(cmd), [this](const Reply& r, Response& res) {
    if (ReplyFailed(res, r)) return;
    std::shared_lock lock(core_.read_model().mu());
    const JobRecord* rec = core_.read_model().job(r.id);
    if (!rec) {
      return SendError(res, MakeApiError(500, "internal", "job " + std::to_string(r.id) + " not in the read model"));
    }
    SendJson(res, 201, JobView(*rec, core_.read_model(), core_.names()));
  });
}
void HttpApi::ListJobs(const Request& req, Response& res) {
  auto p = Auth(req, res, false);
  if (!p) return;
  ApiError err;
  int64_t limit = 100, after = 0, before = 0;
  if (!IntParam(req, "limit", limit, 1, kMaxListLimit, &err) || !IntParam(req, "after", after, 0, INT64_MAX, &err) ||
      !IntParam(req, "before", before, 1, INT64_MAX, &err)) {
    return SendError(res, err);
  }
  const std::string order = req.HasParam("order") ? req.Param("order") : "oldest";
  if (order != "oldest" && order != "newest") {
    return SendError(res, BadField("order", "expected oldest (ascending ids, with after) or newest (with before)"));
  }
  const bool newest = order == "newest";
  if ((newest && req.HasParam("after")) || (!newest && req.HasParam("before"))) {
    return SendError(res, BadField(newest ? "after" : "before",
                                   newest ? "order=newest pages with before" : "before needs order=newest"));
  }
  std::optional<JobState> state;
  if (!StateParam(req, state, &err)) return SendError(res, err);
  std::shared_lock lock(core_.read_model().mu());
  const auto& m = core_.read_model();
  TenantId tenant = -1;
  if (!p->admin) {
    if (req.HasParam("tenant") && req.Param("tenant") != p->tenant) {
      return SendError(res,
                       MakeApiError(403, "forbidden", "tenant: only the admin may list other tenants' jobs", "tenant"));
    }
    const auto t = m.tenant_id(p->tenant);
    if (!t) return SendError(res, Unauthorized());  // a token whose tenant is not published yet
    tenant = *t;
  } else if (req.HasParam("tenant")) {
    const auto t = m.tenant_id(req.Param("tenant"));
    if (!t) {
      return SendError(res, MakeApiError(400, "invalid_argument",
                                         "tenant: no tenant '" + req.Param("tenant").substr(0, 64) + "'",
                                         "tenant"));
    }
    tenant = *t;
  }
  json jobs = json::array();
  JobId last = -1;
  bool more = false;
  const auto each = [&](const JobRecord& r) {
    if (state && r.state != *state) return true;
    if (static_cast<int64_t>(jobs.size()) == limit) {
      more = true;
      return false;
    }
    jobs.push_back(JobView(r, m, core_.names()));
    last = r.id;
    return true;
  };
  if (newest) {
    m.ForEachJobNewestFirst(before, tenant, each);
    return SendJson(res, 200, json{{"jobs", jobs}, {"next_before", more ? json(last) : json(nullptr)}});
  }
  m.ForEachJob(after, tenant, each);
  SendJson(res, 200, json{{"jobs", jobs}, {"next_after", more ? json(last) : json(nullptr)}});
}
JobId HttpApi::FindJob(const Request& req, Response& res, const Principal& p) {
  const std::string idtext = req.captures[0];
  JobId id = -1;
  try {
    id = idtext.size() > 18 ? -1 : std::stoll(idtext);
  } catch (const std::exception&) {
  }
  std::shared_lock lock(core_.read_model().mu());
  const auto& m = core_.read_model();
  const JobRecord* r = id > 0 ? m.job(id) : nullptr;
  if (!r || (!p.admin && m.tenants()[r->spec.tenant] != p.tenant)) {
    SendError(res, MakeApiError(404, "not_found", "no job " + idtext));
    return -1;
  }
  return id;
}

void HttpApi::GetJob(const ExchangePtr& ex) {
  const Request& req = ex->request();
  Response res;
  auto p = Auth(req, res, false);
  if (!p) return (void)ex->Respond(std::move(res));
  const JobId id = FindJob(req, res, *p);
  if (id < 0) return (void)ex->Respond(std::move(res));
  // The job's view, with why it waits when `why` says so (and it still waits).
  auto answer = [this, id](const Reply& why, Response& res) {
    std::shared_lock lock(core_.read_model().mu());
    const JobRecord& rec = *core_.read_model().job(id);
    json v = JobView(rec, core_.read_model(), core_.names());
    v["usage"] = JobUsageView(rec, core_.env().Now());
    if (!why.text.empty() && v["state"] == "pending") {
      v["waiting"] = why.text;
      v["waiting_reasons"] = why.detail;
    }
    SendJson(res, 200, v);
  };
  bool pending;
  {
    std::shared_lock lock(core_.read_model().mu());
    pending = core_.read_model().job(id)->state == JobState::kPending;
  }
  if (pending) return Await(ex, Origin{}, ExplainCmd{id}, std::move(answer));  // read-only
  answer(Reply{}, res);
  ex->Respond(std::move(res));
}
void HttpApi::JobLogs(const Request& req, Response& res) {
  auto p = Auth(req, res, false);
  if (!p) return;
  const JobId id = FindJob(req, res, *p);
  if (id < 0) return;
  ApiError err;
  int64_t tail = 1 << 20;
  const int64_t most = std::max(kDefaultMaxLogBytesPerTask, core_.settings().max_log_bytes_per_task);
  if (!IntParam(req, "tail_bytes", tail, 1, most, &err)) return SendError(res, err);
  const std::string format = req.HasParam("format") ? req.Param("format") : "text";
  if (format != "text" && format != "json") return SendError(res, BadField("format", "expected text or json"));
  auto parts = core_.logs().Read(id, tail);
  if (!parts) return SendError(res, MakeApiError(503, "unavailable", "reading the job's logs: " + parts.error().message));
  if (format == "json") {  // each log apart, with its size: what `gpupool job logs -f` follows
    json list = json::array();
    for (const LogStore::Part& part : *parts) {
      list.push_back({{"replica", part.replica}, {"attempt", part.attempt}, {"bytes", part.bytes}, {"text", part.text}});
    }
    return SendJson(res, 200, json{{"job", id}, {"parts", list}});
  }
  std::string text;
  for (const LogStore::Part& part : *parts) {
    if (parts->size() > 1 || part.attempt > 1) {
      text += "==> replica " + std::to_string(part.replica) + ", attempt " + std::to_string(part.attempt) +
              " (" + std::to_string(part.bytes) + " bytes) <==\n";
    }
    text += part.text;
    if (!text.empty() && text.back() != '\n' && parts->size() > 1) text += '\n';
  }
  SendText(res, std::move(text), "text/plain; charset=utf-8");
}

void HttpApi::CancelJob(const ExchangePtr& ex) {
  const Request& req = ex->request();
  Response res;
  auto p = Auth(req, res, false);
  if (!p) return (void)ex->Respond(std::move(res));
  const JobId id = FindJob(req, res, *p);
  if (id < 0) return (void)ex->Respond(std::move(res));
  {
    std::shared_lock lock(core_.read_model().mu());
    const JobRecord* r = core_.read_model().job(id);
    if (IsTerminal(r->state)) {
      SendError(res, MakeApiError(409, "conflict",
                                  "job " + std::to_string(id) + " already ended (" + JobStateName(r->state) + ")"));
      return (void)ex->Respond(std::move(res));
    }
  }
  Await(ex, OriginOf(req, *p), CancelJobCmd{id, p->admin ? "" : p->tenant}, [this, id](const Reply& r, Response& res) {
    if (r.error && r.error->http_status == 404) {
      // It ended between the check and the command.
      return SendError(res, MakeApiError(409, "conflict", "job " + std::to_string(id) + " already ended"));
    }
    if (ReplyFailed(res, r)) return;
    std::shared_lock lock(core_.read_model().mu());
    SendJson(res, 200, JobView(*core_.read_model().job(id), core_.read_model(), core_.names()));
  });
}

// --- nodes and pools -----------------------------------------------------------------
void HttpApi::AddNode(const ExchangePtr& ex) {
  const Request& req = ex->request();
  Response res;
  auto fail = [&](const ApiError& e) {
    SendError(res, e);
    ex->Respond(std::move(res));
  };
  auto p = Auth(req, res, true);
  if (!p) return (void)ex->Respond(std::move(res));
  auto j = Body(req, res);
  if (!j) return (void)ex->Respond(std::move(res));
  ApiError err;
  FieldReader f;
  AddNodeCmd cmd;
  std::string model, cls;
  int64_t gpus = 0;
  double cores = 0, mem = 0;
  cmd.region = "region-1";
  cmd.zone = "zone-1";
  cmd.rack = "rack-1";
  if (!FieldReader::Open(*j, "", {"name", "model", "gpus", "cpu_cores", "memory_gib", "region", "zone", "rack", "class"},
                         &f, &err) ||
      !f.Require("name", &err) || !f.String("name", cmd.spec.name, 253, &err) ||
      !f.String("model", model, 64, &err) || !f.Int("gpus", gpus, 0, kMaxGpusPerNode, &err) ||
      !f.Require("cpu_cores", &err) || !f.Number("cpu_cores", cores, 0, 1 << 20, &err, true) ||
      !f.Require("memory_gib", &err) || !f.Number("memory_gib", mem, 0, 1 << 24, &err, true) ||
      !f.String("region", cmd.region, 63, &err) || !f.String("zone", cmd.zone, 63, &err) ||
      !f.String("rack", cmd.rack, 63, &err) || !f.String("class", cls, 63, &err)) {
    return fail(err);
  }
  if (cmd.spec.name.empty()) return fail(BadField("name", "must not be empty"));
  if (gpus > 0 && model.empty()) return fail(BadField("model", "required for a node with GPUs"));
  if (!model.empty()) {
    const auto id = Catalog::Builtin().Find(model);
    if (!id) {
      return fail(BadField("model", "unknown GPU model '" + model + "' (known: " + Catalog::Builtin().Names() + ")"));
    }
    if (gpus == 0) return fail(BadField("gpus", "a node with a model needs at least 1 GPU"));
    cmd.spec.gpu_model = *id;
  }
  cmd.spec.gpu_count = static_cast<int>(gpus);
  cmd.spec.cpu_milli = std::llround(cores * 1000);
  cmd.spec.memory_mib = std::llround(mem * 1024);
  if (!cls.empty()) {
    const auto& classes = core_.node_classes();
    auto it = classes.find(cls);
    if (it == classes.end()) {
      std::string known;
      for (const auto& [n, v] : classes) known += (known.empty() ? "" : ", ") + n;
      return fail(BadField("class", "unknown node class '" + cls + "' (known: " +
                                        (known.empty() ? "none configured" : known) + ")"));
    }
    cmd.spec.attr_class = it->second;
  }
  Await(ex, OriginOf(req, *p), std::move(cmd), [this](const Reply& r, Response& res) {
    if (ReplyFailed(res, r)) return;
    std::shared_lock lock(core_.read_model().mu());
    SendJson(res, 201, NodeView(static_cast<NodeIndex>(r.id), core_.read_model()));
  });
}

void HttpApi::IssueNodeToken(const ExchangePtr& ex) {
  const Request& req = ex->request();
  Response res;
  auto p = Auth(req, res, true);
  if (!p) return (void)ex->Respond(std::move(res));
  const std::string node = req.captures[0];
  if (!ValidNodeName(node)) {
    SendError(res, BadField("name", "a node name is 1 to 253 characters: lower-case letters, digits, "
                                    "'-' and '.', starting with a letter or digit"));
    return (void)ex->Respond(std::move(res));
  }
  MintedToken minted = MintToken(std::string(kNodeTokenPrefix) + node, "node", kRoleNode);
  const std::string token = std::move(minted.token);
  Await(ex, OriginOf(req, *p), IssueNodeTokenCmd{node, std::move(minted.record)}, [node, token](const Reply& r, Response& res) {
    if (ReplyFailed(res, r)) return;
    SendJson(res, 201, json{{"node", node}, {"token", token}});
  });
}

// --- tokens ----------------------------------------------------------------------
namespace {

constexpr int64_t kMaxTokenLifetimeMs = int64_t{10} * 365 * 86'400'000;  // ten years

}  // namespace

void HttpApi::CreateToken(const ExchangePtr& ex) {
  const Request& req = ex->request();
  Response res;
  auto fail = [&](const ApiError& e) {
    SendError(res, e);
    ex->Respond(std::move(res));
  };
  auto p = Auth(req, res, false);
  auto j = p ? Body(req, res) : std::nullopt;
  if (!j) return (void)ex->Respond(std::move(res));
  ApiError err;
  FieldReader f;
  std::string name, tenant = p->admin ? "" : p->tenant;
  bool read_only = false;
  Duration expires_in{};
  if (!FieldReader::Open(*j, "", {"name", "tenant", "read_only", "expires_in"}, &f, &err) || !f.Require("name", &err) ||
      !f.String("name", name, 63, &err) || !f.String("tenant", tenant, 63, &err) || !f.Bool("read_only", read_only, &err) ||
      !f.DurationText("expires_in", expires_in, &err)) {
    return fail(err);
  }
  if (!ValidName(name)) {
    return fail(BadField("name", "expected 1 to 63 characters of a-z, 0-9 and '-', starting with a letter"));
  }
  if (!p->admin && tenant != p->tenant) {
    return fail(MakeApiError(403, "forbidden", "tenant: a tenant token makes tokens of its own tenant only", "tenant"));
  }
  if (tenant.empty() && !read_only) {
    return fail(BadField("tenant", "required unless read_only (a token of no tenant is a pool-wide reader)"));
  }
  const int64_t expires_in_ms = ToMillis(expires_in);
  if (f.Has("expires_in") && (expires_in_ms <= 0 || expires_in_ms > kMaxTokenLifetimeMs)) {
    return fail(BadField("expires_in", "expected a duration from 1s to 3650d"));
  }
  const int64_t expires_ms = f.Has("expires_in") ? ToMillis(core_.env().Now()) + expires_in_ms : 0;
  MintedToken minted = MintToken(tenant, name, read_only ? kRoleReader : kRoleTenant, expires_ms);
  Await(ex, OriginOf(req, *p), CreateTokenCmd{std::move(minted.record)}, [token = std::move(minted.token)](const Reply& r, Response& res) {
    if (ReplyFailed(res, r)) return;
    json v = r.detail;
    v["token"] = token;
    SendJson(res, 201, v);
  });
}

void HttpApi::ListTokens(const Request& req, Response& res) {
  auto p = Auth(req, res, false);
  if (!p) return;
  std::string tenant = req.Param("tenant");
  if (!p->admin) {
    if (req.HasParam("tenant") && tenant != p->tenant) {
      return Deny(res, PrincipalLabel(*p), "forbidden",
                  MakeApiError(403, "forbidden", "tenant: only the admin may list other tenants' tokens", "tenant"),
                  p->token_name);
    }
    tenant = p->tenant;
  }
  const bool all = p->admin && !req.HasParam("tenant");
  json list = json::array();
  for (const TokenRecord& t : core_.auth().List()) {
    if (all || t.tenant == tenant) list.push_back(TokenView(t));
  }
  SendJson(res, 200, json{{"tokens", list}});
}

void HttpApi::RevokeToken(const ExchangePtr& ex) {
  const Request& req = ex->request();
  Response res;
  auto p = Auth(req, res, false);
  if (!p) return (void)ex->Respond(std::move(res));
  Await(ex, OriginOf(req, *p), RevokeTokenCmd{req.captures[0], p->admin ? "" : p->tenant}, [](const Reply& r, Response& res) {
    if (ReplyFailed(res, r)) return;
    SendJson(res, 200, r.detail);
  });
}

// The agent endpoints' first steps: a node token, a body `parse` accepts,
// naming the token's node. Answers the exchange when one fails.
template <class T>
std::optional<T> HttpApi::AgentRequest(const ExchangePtr& ex,
                                       ApiResult<T> (*parse)(const nlohmann::json&, UnknownKeys)) {
  const Request& req = ex->request();
  Response res;
  auto node = AgentAuth(req, res);
  auto j = node ? Body(req, res) : std::nullopt;
  if (!j) {
    ex->Respond(std::move(res));
    return std::nullopt;
  }
  auto r = parse(*j, UnknownKeys::kIgnore);
  if (!r.ok()) {
    SendError(res, r.error);
  } else if (r.value->node != *node) {
    Deny(res, std::string(kNodeTokenPrefix) + *node, "forbidden",
         MakeApiError(403, "forbidden", "this token is for node '" + *node + "'", "node"));
  } else {
    return std::move(r.value);
  }
  ex->Respond(std::move(res));
  return std::nullopt;
}

void HttpApi::RegisterNode(const ExchangePtr& ex) {
  auto r = AgentRequest(ex, ParseRegisterRequest);
  if (!r) return;
  RegisterRequest registered = *r;
  Await(ex, AgentOrigin(ex->request(), r->node), RegisterAgentCmd{std::move(*r)},
        [this, registered = std::move(registered)](const Reply& reply, Response& res) {
          if (ReplyFailed(res, reply)) return;
          core_.agent_status().Registered(registered, ToMillis(core_.env().Now()));
          SendJson(res, 200, reply.detail);
        });
}

void HttpApi::AgentHeartbeat(const ExchangePtr& ex) {
  auto r = AgentRequest(ex, ParseHeartbeatRequest);
  if (!r) return;
  std::string name = r->node;
  std::vector<GpuSample> gpus = r->gpus;
  std::map<int, std::vector<MigInstance>> mig = r->mig;
  Await(ex, AgentOrigin(ex->request(), name), AgentHeartbeatCmd{std::move(*r)},
        [this, name = std::move(name), gpus = std::move(gpus), mig = std::move(mig)](const Reply& reply, Response& res) {
          if (ReplyFailed(res, reply)) return;
          for (const GpuSample& g : gpus) {
            core_.metrics().SetGpuUtilization(static_cast<int32_t>(reply.id), g.index, g.util_pct);
          }
          core_.agent_status().Heartbeat(name, gpus, ToMillis(core_.env().Now()));
          core_.agent_status().MigReported(name, mig);
          SendJson(res, 200, reply.detail);
        });
}

void HttpApi::AgentWatch(const ExchangePtr& ex) {
  auto r = AgentRequest(ex, ParseWatchRequest);
  if (!r) return;
  watches_->Watch(*r, ex);  // answered now or when the node's state changes
}

// Task phases between heartbeats: the heartbeat command without GPU samples.
void HttpApi::AgentReport(const ExchangePtr& ex) {
  auto r = AgentRequest(ex, ParseTaskReportRequest);
  if (!r) return;
  HeartbeatRequest h;
  h.protocol = std::max(r->protocol, 2);  // its reply carries no desired state
  h.node = std::move(r->node);
  h.session = std::move(r->session);
  h.tasks = std::move(r->tasks);
  h.scrubs = std::move(r->scrubs);
  h.logs = std::move(r->logs);
  Origin origin = AgentOrigin(ex->request(), h.node);
  Await(ex, std::move(origin), AgentHeartbeatCmd{std::move(h)}, [](const Reply& reply, Response& res) {
    if (ReplyFailed(res, reply)) return;
    SendJson(res, 200, reply.detail);
  });
}

void HttpApi::ListNodes(const Request& req, Response& res) {
  if (!Auth(req, res, true)) return;
  std::shared_lock lock(core_.read_model().mu());
  const auto& m = core_.read_model();
  json list = json::array();
  for (size_t i = 0; i < m.nodes().size(); ++i) {
    json v = NodeView(static_cast<NodeIndex>(i), m);
    if (auto a = core_.agent_status().Json(v["name"].get<std::string>())) v["agent"] = std::move(*a);
    list.push_back(std::move(v));
  }
  SendJson(res, 200, json{{"nodes", list}});
}

void HttpApi::GetNode(const Request& req, Response& res) {
  if (!Auth(req, res, true)) return;
  std::shared_lock lock(core_.read_model().mu());
  const auto& m = core_.read_model();
  const std::string& name = req.captures[0];
  const auto id = m.node_id(name);
  if (!id) return SendError(res, MakeApiError(404, "not_found", "no node '" + name + "'", "name"));
  json v = NodeView(*id, m);
  if (auto a = core_.agent_status().Json(name)) v["agent"] = std::move(*a);
  SendJson(res, 200, v);
}

void HttpApi::CordonNode(const ExchangePtr& ex) { NodeOp(ex, NodeOpCmd::Op::kCordon); }
void HttpApi::UncordonNode(const ExchangePtr& ex) { NodeOp(ex, NodeOpCmd::Op::kUncordon); }
void HttpApi::DrainNode(const ExchangePtr& ex) { NodeOp(ex, NodeOpCmd::Op::kDrain); }
void HttpApi::RemoveNode(const ExchangePtr& ex) { NodeOp(ex, NodeOpCmd::Op::kRemove); }

void HttpApi::NodeOp(const ExchangePtr& ex, NodeOpCmd::Op op) {
  const Request& req = ex->request();
  Response res;
  auto fail = [&](const ApiError& e) {
    SendError(res, e);
    ex->Respond(std::move(res));
  };
  auto p = Auth(req, res, true);
  if (!p) return (void)ex->Respond(std::move(res));
  NodeOpCmd cmd;
  cmd.op = op;
  cmd.node = req.captures[0];
  const Origin origin = OriginOf(req, *p);
  cmd.actor = origin.actor;
  const size_t max_reason = Engine::kMaxOperatorReasonBytes;
  if (op == NodeOpCmd::Op::kRemove) {
    // DELETE takes its options in the query: force=true|false, reason.
    if (req.HasParam("force")) {
      const std::string v = req.Param("force");
      if (v != "true" && v != "false") return fail(BadField("force", "expected true or false (got \"" + v.substr(0, 32) + "\")"));
      cmd.force = v == "true";
    }
    cmd.reason = req.Param("reason");
    if (cmd.reason.size() > max_reason) {
      return fail(BadField("reason", "at most " + std::to_string(max_reason) + " bytes"));
    }
    if (!IsValidUtf8(cmd.reason)) return fail(BadField("reason", "not valid UTF-8"));
  } else if (!req.body.empty()) {  // the body is optional
    auto j = Body(req, res);
    if (!j) return (void)ex->Respond(std::move(res));
    ApiError err;
    FieldReader f;
    int64_t timeout_s = 3600;
    const bool drain = op == NodeOpCmd::Op::kDrain;
    const bool ok = drain ? FieldReader::Open(*j, "", {"reason", "timeout_s"}, &f, &err)
                    : op == NodeOpCmd::Op::kCordon ? FieldReader::Open(*j, "", {"reason"}, &f, &err)
                                                   : FieldReader::Open(*j, "", {}, &f, &err);  // uncordon: {}
    if (!ok || !f.String("reason", cmd.reason, max_reason, &err) ||
        (drain && !f.Int("timeout_s", timeout_s, 0, ToMillis(Engine::kMaxDrainTimeout) / 1000, &err))) {
      return fail(err);
    }
    cmd.timeout = std::chrono::seconds(timeout_s);
  }
  Await(ex, origin, std::move(cmd), [this](const Reply& r, Response& res) {
    if (ReplyFailed(res, r)) return;
    std::shared_lock lock(core_.read_model().mu());
    json v = NodeView(static_cast<NodeIndex>(r.id), core_.read_model());
    v["changed"] = r.detail.value("changed", false);
    SendJson(res, 200, v);
  });
}

void HttpApi::ListPools(const Request& req, Response& res) {
  if (!Auth(req, res, false)) return;
  std::shared_lock lock(core_.read_model().mu());
  const auto& m = core_.read_model();
  json list = json::array();
  for (size_t p = 0; p < m.pools().size(); ++p) list.push_back(PoolView(static_cast<PoolId>(p), m));
  SendJson(res, 200, json{{"pools", list}});
}

// A tenant token sees the regions and only its own tenant's users.
void HttpApi::GetRegions(const Request& req, Response& res) {
  auto p = Auth(req, res, false);
  if (!p) return;
  std::shared_lock lock(core_.read_model().mu());
  json table = RegionPolicyToJson(core_.read_model().regions());
  if (!p->admin) {
    json own = json::array();
    for (const json& u : table["users"]) {
      if (u.value("tenant", "") == p->tenant) own.push_back(u);
    }
    table["users"] = std::move(own);
  }
  SendJson(res, 200, table);
}

void HttpApi::SetRegions(const ExchangePtr& ex) {
  const Request& req = ex->request();
  Response res;
  auto p = Auth(req, res, true);
  if (!p) return (void)ex->Respond(std::move(res));
  auto j = Body(req, res);
  if (!j) return (void)ex->Respond(std::move(res));
  auto parsed = ParseRegionRequest(*j);
  if (!parsed.ok()) {
    SendError(res, parsed.error);
    return (void)ex->Respond(std::move(res));
  }
  Await(ex, OriginOf(req, *p), SetRegionsCmd{std::move(*parsed.value)}, [this](const Reply& r, Response& res) {
    if (ReplyFailed(res, r)) return;
    // The RegionsSet event is in the read model before the reply.
    std::shared_lock lock(core_.read_model().mu());
    SendJson(res, 200, RegionPolicyToJson(core_.read_model().regions()));
  });
}

// --- events ----------------------------------------------------------------------------
namespace {

// The canonical line with the audit's two fields added at its end, when it
// has them.
void AppendWithAudit(std::string& out, const JournalEvent& e) {
  if (e.actor.empty() && e.request_id.empty()) {
    out += e.json;
    return;
  }
  out.append(e.json, 0, e.json.size() - 1);  // without its closing '}'
  const std::string audit = json{{"actor", e.actor}, {"request_id", e.request_id}}.dump(
      -1, ' ', false, json::error_handler_t::replace);
  out += ',';
  out.append(audit, 1);  // without its opening '{'
}

// `filter` empty, the actor itself, or its principal (the actor without ":TOKEN").
bool ActorMatches(const std::string& actor, const std::string& filter) {
  if (filter.empty() || actor == filter) return true;
  return actor.size() > filter.size() && actor.starts_with(filter) && actor[filter.size()] == ':';
}

// `since` and `limit` of a page of journal events (limit 1 to
// kMaxEventLimit); false after answering 400.
bool PageParams(const Request& req, Response& res, int64_t& since, int64_t& limit) {
  ApiError err;
  if (!IntParam(req, "since", since, 0, INT64_MAX, &err) || !IntParam(req, "limit", limit, 1, kMaxEventLimit, &err)) {
    SendError(res, err);
    return false;
  }
  return true;
}

}  // namespace

void HttpApi::ListEvents(const Request& req, Response& res) {
  if (!Auth(req, res, true)) return;
  int64_t since = 0, limit = 1000;
  if (!PageParams(req, res, since, limit)) return;
  std::string out = "{\"events\":[";
  int64_t next = since;
  bool first = true;
  auto ok = core_.journal().ReadEvents(since, limit, [&](const JournalEvent& e) {
    if (!first) out += ',';
    first = false;
    AppendWithAudit(out, e);
    next = e.seq;
    return true;
  });
  if (!ok) return SendError(res, MakeApiError(503, "unavailable", ok.error().message));
  out += "],\"next_since\":" + std::to_string(next) + "}";
  SendText(res, std::move(out), "application/json");
}

// GET /v1/audit: the events that requests caused, with who asked. Scans at
// most `limit` journal events after `since` (so a page costs the same
// whatever the filter); `next_since` continues after the last one scanned.
void HttpApi::ListAudit(const Request& req, Response& res) {
  if (!Auth(req, res, true)) return;
  int64_t since = 0, limit = 1000;
  if (!PageParams(req, res, since, limit)) return;
  const std::string actor = req.Param("actor");
  if (actor.size() > 200) return SendError(res, BadField("actor", "at most 200 characters"));
  std::string out = "{\"entries\":[";
  int64_t next = since;
  bool first = true;
  auto ok = core_.journal().ReadEvents(since, limit, [&](const JournalEvent& e) {
    next = e.seq;
    if (e.actor.empty() || !ActorMatches(e.actor, actor)) return true;
    if (!first) out += ',';
    first = false;
    out += json{{"seq", e.seq},
                {"at", FormatRfc3339(InstantFromMillis(e.at_ms))},
                {"type", e.type},
                {"actor", e.actor},
                {"request_id", e.request_id}}
               .dump(-1, ' ', false, json::error_handler_t::replace);
    out.pop_back();  // '}': the event follows
    out += ",\"event\":" + e.json + "}";
    return true;
  });
  if (!ok) return SendError(res, MakeApiError(503, "unavailable", ok.error().message));
  out += "],\"next_since\":" + std::to_string(next) + "}";
  SendText(res, std::move(out), "application/json");
}

// GET /v1/export: the journal for `gpupool sim replay --from URL`, paged,
// env values redacted, the configuration in force on the first page
// (src/server/export_view.h).
void HttpApi::ExportJournal(const Request& req, Response& res) {
  if (!Auth(req, res, true)) return;
  int64_t since = 0, limit = 1000;
  if (!PageParams(req, res, since, limit)) return;
  auto page = ExportPage(core_.journal(), since, limit);
  if (!page) return SendError(res, MakeApiError(503, "unavailable", page.error().message));
  SendText(res, std::move(*page), "application/json");
}

// GET /v1/usage: GPU usage accounting (src/server/usage_view.h).
void HttpApi::GetUsage(const Request& req, Response& res) {
  auto p = Auth(req, res, false);
  if (!p) return;
  UsageParams q;
  for (auto [name, field] : {std::pair{"tenant", &q.tenant}, {"pool", &q.pool}, {"from", &q.from}, {"to", &q.to},
                             {"by", &q.by}}) {
    if (req.HasParam(name)) *field = req.Param(name);
  }
  std::shared_lock lock(core_.read_model().mu());
  json out;
  ApiError err;
  if (!UsageAnswer(q, p->admin ? "" : p->tenant, core_.read_model(), core_.env().Now(), &out, &err)) {
    return SendError(res, err);
  }
  SendJson(res, 200, out);
}

// --- time series (issue 19) ------------------------------------------------------------
void HttpApi::PoolSeries(const Request& req, Response& res) { Series(req, res, SeriesScope::kPools); }
void HttpApi::TenantSeries(const Request& req, Response& res) { Series(req, res, SeriesScope::kTenants); }
void HttpApi::GpuSeries(const Request& req, Response& res) { Series(req, res, SeriesScope::kGpus); }

void HttpApi::Series(const Request& req, Response& res, SeriesScope scope) {
  auto p = Auth(req, res, /*admin_only=*/scope == SeriesScope::kGpus);
  if (!p) return;
  SeriesParams q;
  for (auto [name, field] : {std::pair{"pool", &q.pool}, {"tenant", &q.tenant}, {"node", &q.node},
                             {"minutes", &q.minutes}}) {
    if (req.HasParam(name)) *field = req.Param(name);
  }
  core_.RecordSeries(/*on_demand=*/true);
  std::shared_lock lock(core_.read_model().mu());
  json out;
  ApiError err;
  if (!SeriesAnswer(scope, q, p->admin ? "" : p->tenant, core_.read_model(), core_.timeseries(), core_.env().Now(),
                    &out, &err)) {
    return SendError(res, err);
  }
  SendJson(res, 200, out);
}

}  // namespace gpupool
