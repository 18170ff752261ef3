#include "src/server/http_api.h"

#include <httplib.h>
#include <sys/socket.h>

#include <atomic>
#include <chrono>
#include <cmath>
#include <shared_mutex>
#include <thread>

#include "src/api/region_request.h"
#include "src/base/time_text.h"
#include "src/model/gpu_catalog.h"
#include "src/server/log.h"
#include "src/server/views.h"

namespace gpupool {
namespace {

using nlohmann::json;
using httplib::Request;
using httplib::Response;

constexpr int64_t kMaxListLimit = 1000;
constexpr int64_t kMaxEventLimit = 10000;

std::string NextRequestId() {
  static std::atomic<uint64_t> n{0};
  static const std::string prefix = NewToken().substr(4, 8);
  return prefix + "-" + std::to_string(++n);
}

void SendJson(Response& res, int status, const json& body) {
  res.status = status;
  res.set_content(body.dump(-1, ' ', false, json::error_handler_t::replace), "application/json");
}

void SendError(Response& res, const ApiError& e) {
  json err{{"code", e.code}, {"message", e.message}};
  if (!e.field.empty()) err["field"] = e.field;
  SendJson(res, e.http_status, json{{"error", err}});
}


ApiError Unauthorized() {
  return MakeApiError(401, "unauthorized", "missing or unknown bearer token (Authorization: Bearer TOKEN)");
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
  if (!req.has_param(name)) return true;
  const std::string v = req.get_param_value(name);
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

// Before routing: tags the request and its response with an X-Request-Id (the client's when usable), and refuses a
// request whose Content-Length is over the body limit, closing the connection.
httplib::Server::HandlerResponse PreRoute(const Request& req, Response& res, int64_t max_body) {
  auto& r = const_cast<Request&>(req);
  std::string id = req.get_header_value("X-Request-Id");
  if (id.empty() || id.size() > 128) id = NextRequestId();
  r.set_header("X-Request-Id", id);
  res.set_header("X-Request-Id", id);
  const std::string len = req.get_header_value("Content-Length");
  if (!len.empty()) {
    char* end = nullptr;
    const unsigned long long n = std::strtoull(len.c_str(), &end, 10);
    if (end && *end == '\0' && n > static_cast<unsigned long long>(max_body)) {
      res.set_header("Connection", "close");
      SendError(res, MakeApiError(400, "invalid_argument",
                                  "body: too large (" + len + " bytes; the limit is " + std::to_string(max_body) + ")",
                                  "body"));
      return httplib::Server::HandlerResponse::Handled;
    }
  }
  return httplib::Server::HandlerResponse::Unhandled;
}

void LogAccess(const Request& req, const Response& res) {
  if (!RequestLoggingEnabled()) return;
  LogRequest({{"request_id", req.get_header_value("X-Request-Id")},
              {"method", req.method},
              {"path", req.path},
              {"status", std::to_string(res.status)},
              {"remote", req.remote_addr}});
}

// httplib's own failures (no route, a body too large to read, ...) answered in the API's error shape.
void SendHttpError(const Request& req, Response& res) {
  if (!res.body.empty()) return;
  if (res.status == 404) {
    SendError(res, MakeApiError(404, "not_found", "no such endpoint: " + req.method + " " + req.path));
  } else if (res.status == 413) {
    SendError(res, MakeApiError(400, "invalid_argument", "body: too large", "body"));
  } else {
    SendError(res, MakeApiError(res.status, "error", "HTTP " + std::to_string(res.status)));
  }
}

void SendException(const Request&, Response& res, std::exception_ptr ep) {
  std::string what = "internal error";
  try {
    std::rethrow_exception(ep);
  } catch (const std::exception& e) {
    what = e.what();
  } catch (...) {
  }
  LogError("request failed", {{"error", what}});
  SendError(res, MakeApiError(500, "internal", what));
}

enum class Method { kGet, kPost, kPut, kDelete };

}  // namespace

HttpApi::HttpApi(ServerCore& core) : core_(core), http_(std::make_unique<httplib::Server>()) {
  ConfigureServer();
  Routes();
}
HttpApi::~HttpApi() = default;

Result<int> HttpApi::Bind(const std::string& host, int port) {
  // cpp-httplib 0.11 listens with a backlog of 5: a burst of new
  // connections (clients reconnecting after a restart) overflows it and
  // some of them are dropped. Keep the socket's descriptor and listen again
  // with the system's maximum.
  int listen_fd = -1;
  http_->set_socket_options([&listen_fd](int sock) {
    int yes = 1;
    ::setsockopt(sock, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof yes);
    listen_fd = sock;
  });
  int bound = port;
  if (port == 0) {
    bound = http_->bind_to_any_port(host);
    if (bound < 0) return IoError("cannot listen on " + host + ": no free port");
  } else if (!http_->bind_to_port(host, port)) {
    return IoError("cannot listen on " + host + ":" + std::to_string(port));
  }
  if (listen_fd >= 0) ::listen(listen_fd, SOMAXCONN);
  return bound;
}

void HttpApi::Serve() {
  http_->listen_after_bind();
  served_ = true;
}
void HttpApi::Stop() {
  // stop() does nothing until the server runs: wait for it (a signal may
  // arrive during a long recovery, before Serve).
  while (!http_->is_running() && !served_) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  http_->stop();
}

void HttpApi::ConfigureServer() {
  httplib::Server& s = *http_;
  const size_t threads = static_cast<size_t>(core_.settings().http_threads);
  s.new_task_queue = [threads] { return new httplib::ThreadPool(threads); };
  s.set_tcp_nodelay(true);  // responses go out at once (no Nagle / delayed-ACK stalls)
  s.set_keep_alive_max_count(100000);
  s.set_keep_alive_timeout(30);
  const int64_t max_body = core_.settings().max_body_bytes;
  // A body a little over the limit is read and refused by the handler (400
  // naming "body"); far over it, the HTTP layer refuses to read it (413).
  s.set_payload_max_length(static_cast<size_t>(max_body) * 4);

  s.set_pre_routing_handler([max_body](const Request& req, Response& res) { return PreRoute(req, res, max_body); });
  s.set_logger(LogAccess);
  s.set_error_handler(SendHttpError);
  s.set_exception_handler(SendException);
}

void HttpApi::Routes() {
  struct Route {
    Method method;
    const char* pattern;  // a regex for httplib; captures are the handler's req.matches
    const char* metric;   // the route's name in the request metrics
    Handler handler;
  };
  // httplib tries a method's routes in the order they were registered, so keep this order.
  static constexpr Route kRoutes[] = {
      {Method::kGet, "/healthz", "/healthz", &HttpApi::Health},
      {Method::kGet, "/metrics", "/metrics", &HttpApi::GetMetrics},
      {Method::kPost, "/v1/tenants", "/v1/tenants", &HttpApi::CreateTenant},
      {Method::kGet, "/v1/tenants", "/v1/tenants", &HttpApi::ListTenants},
      {Method::kGet, R"(/v1/tenants/([^/]+))", "/v1/tenants/{name}", &HttpApi::GetTenant},
      {Method::kPut, R"(/v1/tenants/([^/]+)/quota)", "/v1/tenants/{name}/quota", &HttpApi::SetQuota},
      {Method::kPost, "/v1/jobs", "/v1/jobs", &HttpApi::SubmitJob},
      {Method::kGet, "/v1/jobs", "/v1/jobs", &HttpApi::ListJobs},
      {Method::kGet, R"(/v1/jobs/(\d+))", "/v1/jobs/{id}", &HttpApi::GetJob},
      {Method::kGet, R"(/v1/jobs/(\d+)/logs)", "/v1/jobs/{id}/logs", &HttpApi::JobLogs},
      {Method::kDelete, R"(/v1/jobs/(\d+))", "/v1/jobs/{id}", &HttpApi::CancelJob},
      {Method::kPost, "/v1/nodes", "/v1/nodes", &HttpApi::AddNode},
      {Method::kPost, R"(/v1/nodes/([^/]+)/token)", "/v1/nodes/{name}/token", &HttpApi::IssueNodeToken},
      {Method::kPost, "/v1/agent/register", "/v1/agent/register", &HttpApi::RegisterNode},
      {Method::kPost, "/v1/agent/heartbeat", "/v1/agent/heartbeat", &HttpApi::AgentHeartbeat},
      {Method::kGet, "/v1/nodes", "/v1/nodes", &HttpApi::ListNodes},
      {Method::kGet, "/v1/pools", "/v1/pools", &HttpApi::ListPools},
      {Method::kGet, "/v1/regions", "/v1/regions", &HttpApi::GetRegions},
      {Method::kPut, "/v1/regions", "/v1/regions", &HttpApi::SetRegions},
      {Method::kGet, "/v1/events", "/v1/events", &HttpApi::ListEvents},
  };
  httplib::Server& s = *http_;
  for (const Route& r : kRoutes) {
    const std::string metric = r.metric;
    const Handler handler = r.handler;
    httplib::Server::Handler h = [this, metric, handler](const Request& req, Response& res) {
      Timed(metric, handler, req, res);
    };
    switch (r.method) {
      case Method::kGet: s.Get(r.pattern, std::move(h)); break;
      case Method::kPost: s.Post(r.pattern, std::move(h)); break;
      case Method::kPut: s.Put(r.pattern, std::move(h)); break;
      case Method::kDelete: s.Delete(r.pattern, std::move(h)); break;
    }
  }
}

// Wraps a handler: timing, metrics.
void HttpApi::Timed(const std::string& metric, Handler handler, const Request& req, Response& res) {
  const auto t0 = std::chrono::steady_clock::now();
  (this->*handler)(req, res);
  core_.metrics().CountRequest(req.method, metric, res.status,
                               std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
}

// Authentication; admin_only refuses tenant tokens.
std::optional<Principal> HttpApi::Auth(const Request& req, Response& res, bool admin_only) {
  auto p = core_.auth().Authenticate(req.get_header_value("Authorization"));
  if (!p) {
    SendError(res, Unauthorized());
    return std::nullopt;
  }
  if (!p->node.empty()) {
    SendError(res, MakeApiError(403, "forbidden", "a node token may only call the agent endpoints (/v1/agent/...)"));
    return std::nullopt;
  }
  if (admin_only && !p->admin) {
    SendError(res, Forbidden());
    return std::nullopt;
  }
  return p;
}

// The agent endpoints take node tokens only, for the node the body names.
std::optional<std::string> HttpApi::AgentAuth(const Request& req, Response& res) {
  auto p = core_.auth().Authenticate(req.get_header_value("Authorization"));
  if (!p) {
    SendError(res, Unauthorized());
    return std::nullopt;
  }
  if (p->node.empty()) {
    SendError(res,
              MakeApiError(403, "forbidden", "the agent endpoints take a node token (POST /v1/nodes/{name}/token)"));
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
  json j = json::parse(req.body, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) {
    try {
      // Parsed again to throw the error that says where it failed ((void) does not silence GCC's warn_unused_result).
      [[maybe_unused]] const json again = json::parse(req.body);
    } catch (const json::parse_error& e) {
      SendError(res, MakeApiError(400, "invalid_argument", std::string("body: malformed JSON: ") + e.what(), "body"));
      return std::nullopt;
    }
    SendError(res, MakeApiError(400, "invalid_argument", "body: malformed JSON", "body"));
    return std::nullopt;
  }
  return j;
}

void HttpApi::Health(const Request&, Response& res) {
  std::shared_lock lock(core_.read_model().mu());
  SendJson(res, 200, json{{"status", "ok"}, {"last_seq", core_.read_model().last_seq()}});
}

void HttpApi::GetMetrics(const Request&, Response& res) {
  res.set_content(core_.metrics().Render(core_.read_model()), "text/plain; version=0.0.4; charset=utf-8");
}

// --- tenants ---------------------------------------------------------------------
void HttpApi::CreateTenant(const Request& req, Response& res) {
  if (!Auth(req, res, true)) return;
  auto j = Body(req, res);
  if (!j) return;
  ApiError err;
  FieldReader f;
  CreateTenantCmd cmd;
  if (!FieldReader::Open(*j, "", {"name", "quota"}, &f, &err) || !f.Require("name", &err) ||
      !f.String("name", cmd.name, 63, &err)) {
    return SendError(res, err);
  }
  if (!ValidName(cmd.name)) {
    return SendError(res, BadField("name", "expected 1 to 63 characters of a-z, 0-9 and '-', starting "
                                           "with a letter (got \"" + cmd.name + "\")"));
  }
  if (const json* q = f.Find("quota")) {
    if (!q->is_object()) return SendError(res, BadField("quota", "expected an object of pool name -> quota"));
    for (const auto& [pool, value] : q->items()) {
      FieldReader qf;
      Quota quota;
      if (!FieldReader::Open(value, "quota." + pool, {"guaranteed_gpus", "limit_gpus", "weight", "reserved"},
                             &qf, &err) ||
          !ReadQuota(qf, quota, &err)) {
        return SendError(res, err);
      }
      if (!core_.names().pool_id(pool)) {
        return SendError(res, BadField("quota." + pool, "unknown pool '" + pool + "'"));
      }
      cmd.quotas.emplace_back(pool, quota);
    }
  }
  const std::string token = NewToken();
  cmd.token_hash = HashToken(token);
  const std::string name = cmd.name;
  const Reply r = core_.Call(std::move(cmd));
  if (ReplyFailed(res, r)) return;
  std::shared_lock lock(core_.read_model().mu());
  const auto& m = core_.read_model();
  json v = TenantView(*m.tenant_id(name), m);
  v["token"] = token;
  SendJson(res, 201, v);
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
  const std::string name = req.matches[1];
  if (!p->admin && p->tenant != name) return SendError(res, MakeApiError(404, "not_found", "no tenant '" + name + "'"));
  std::shared_lock lock(core_.read_model().mu());
  const auto& m = core_.read_model();
  const auto t = m.tenant_id(name);
  if (!t) return SendError(res, MakeApiError(404, "not_found", "no tenant '" + name + "'"));
  SendJson(res, 200, TenantView(*t, m));
}

void HttpApi::SetQuota(const Request& req, Response& res) {
  if (!Auth(req, res, true)) return;
  auto j = Body(req, res);
  if (!j) return;
  ApiError err;
  FieldReader f;
  SetQuotaCmd cmd;
  cmd.tenant = req.matches[1];
  if (!FieldReader::Open(*j, "", {"pool", "guaranteed_gpus", "limit_gpus", "weight", "reserved"}, &f, &err) ||
      !f.Require("pool", &err) || !f.String("pool", cmd.pool, 63, &err) || !ReadQuota(f, cmd.quota, &err)) {
    return SendError(res, err);
  }
  if (!core_.names().pool_id(cmd.pool)) return SendError(res, BadField("pool", "unknown pool '" + cmd.pool + "'"));
  const std::string name = cmd.tenant;
  const Reply r = core_.Call(std::move(cmd));
  if (ReplyFailed(res, r)) return;
  std::shared_lock lock(core_.read_model().mu());
  const auto& m = core_.read_model();
  SendJson(res, 200, TenantView(*m.tenant_id(name), m));
}

// --- jobs ------------------------------------------------------------------------
void HttpApi::SubmitJob(const Request& req, Response& res) {
  auto p = Auth(req, res, false);
  if (!p) return;
  auto j = Body(req, res);
  if (!j) return;
  auto parsed = ParseJobRequest(*j, core_.names(), WallNow());
  if (!parsed.ok()) return SendError(res, parsed.error);
  SubmitJobCmd cmd;
  cmd.spec = std::move(parsed.value->spec);
  if (p->admin) {
    if (parsed.value->tenant.empty()) {
      return SendError(res, BadField("tenant", "required when the admin submits (the tenant the job is for)"));
    }
    cmd.tenant = parsed.value->tenant;
  } else {
    if (!parsed.value->tenant.empty() && parsed.value->tenant != p->tenant) {
      return SendError(res, BadField("tenant", "a tenant token submits only its own jobs (omit tenant or give '" +
                                                   p->tenant + "')"));
    }
    cmd.tenant = p->tenant;
  }
  const Reply r = core_.Call(std::move(cmd));
  if (ReplyFailed(res, r)) return;
  std::shared_lock lock(core_.read_model().mu());
  const JobRecord* rec = core_.read_model().job(r.id);
  if (!rec) {
    return SendError(res, MakeApiError(500, "internal", "job " + std::to_string(r.id) + " not in the read model"));
  }
  SendJson(res, 201, JobView(*rec, core_.read_model(), core_.names()));
}

void HttpApi::ListJobs(const Request& req, Response& res) {
  auto p = Auth(req, res, false);
  if (!p) return;
  ApiError err;
  int64_t limit = 100, after = 0;
  if (!IntParam(req, "limit", limit, 1, kMaxListLimit, &err) || !IntParam(req, "after", after, 0, INT64_MAX, &err)) {
    return SendError(res, err);
  }
  std::optional<JobState> state;
  if (req.has_param("state")) {
    const std::string v = req.get_param_value("state");
    for (int i = 0; i <= static_cast<int>(JobState::kEvicted); ++i) {
      if (v == JobStateName(static_cast<JobState>(i))) state = static_cast<JobState>(i);
    }
    if (!state) {
      return SendError(res, MakeApiError(400, "invalid_argument",
                                         "state: unknown job state '" + v.substr(0, 32) +
                                             "' (known: pending, running, checkpointing, succeeded, failed, "
                                             "cancelled, rejected, evicted)",
                                         "state"));
    }
  }
  std::shared_lock lock(core_.read_model().mu());
  const auto& m = core_.read_model();
  TenantId tenant = -1;
  if (!p->admin) {
    if (req.has_param("tenant") && req.get_param_value("tenant") != p->tenant) {
      return SendError(res,
                       MakeApiError(403, "forbidden", "tenant: only the admin may list other tenants' jobs", "tenant"));
    }
    const auto t = m.tenant_id(p->tenant);
    if (!t) return SendError(res, Unauthorized());  // a token whose tenant is not published yet
    tenant = *t;
  } else if (req.has_param("tenant")) {
    const auto t = m.tenant_id(req.get_param_value("tenant"));
    if (!t) {
      return SendError(res, MakeApiError(400, "invalid_argument",
                                         "tenant: no tenant '" + req.get_param_value("tenant").substr(0, 64) + "'",
                                         "tenant"));
    }
    tenant = *t;
  }
  json jobs = json::array();
  JobId last = -1;
  bool more = false;
  m.ForEachJob(after, tenant, [&](const JobRecord& r) {
    if (state && r.state != *state) return true;
    if (static_cast<int64_t>(jobs.size()) == limit) {
      more = true;
      return false;
    }
    jobs.push_back(JobView(r, m, core_.names()));
    last = r.id;
    return true;
  });
  SendJson(res, 200, json{{"jobs", jobs}, {"next_after", more ? json(last) : json(nullptr)}});
}

JobId HttpApi::FindJob(const Request& req, Response& res, const Principal& p) {
  const std::string idtext = req.matches[1];
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

void HttpApi::GetJob(const Request& req, Response& res) {
  auto p = Auth(req, res, false);
  if (!p) return;
  const JobId id = FindJob(req, res, *p);
  if (id < 0) return;
  Reply why;
  bool pending;
  {
    std::shared_lock lock(core_.read_model().mu());
    pending = core_.read_model().job(id)->state == JobState::kPending;
  }
  if (pending) why = core_.Call(ExplainCmd{id});
  std::shared_lock lock(core_.read_model().mu());
  json v = JobView(*core_.read_model().job(id), core_.read_model(), core_.names());
  if (!why.text.empty() && v["state"] == "pending") {
    v["waiting"] = why.text;
    v["waiting_reasons"] = std::move(why.detail);
  }
  SendJson(res, 200, v);
}

void HttpApi::JobLogs(const Request& req, Response& res) {
  auto p = Auth(req, res, false);
  if (!p) return;
  const JobId id = FindJob(req, res, *p);
  if (id < 0) return;
  ApiError err;
  int64_t tail = 1 << 20;
  if (!IntParam(req, "tail_bytes", tail, 1, kMaxLogBytes, &err)) return SendError(res, err);
  auto parts = core_.logs().Read(id, tail);
  if (!parts) return SendError(res, MakeApiError(500, "internal", parts.error().message));
  std::string text;
  for (const LogStore::Part& part : *parts) {
    if (parts->size() > 1 || part.attempt > 1) {
      text += "==> replica " + std::to_string(part.replica) + ", attempt " + std::to_string(part.attempt) +
              " (" + std::to_string(part.bytes) + " bytes) <==\n";
    }
    text += part.text;
    if (!text.empty() && text.back() != '\n' && parts->size() > 1) text += '\n';
  }
  res.status = 200;
  res.set_content(text, "text/plain; charset=utf-8");
}

void HttpApi::CancelJob(const Request& req, Response& res) {
  auto p = Auth(req, res, false);
  if (!p) return;
  const JobId id = FindJob(req, res, *p);
  if (id < 0) return;
  {
    std::shared_lock lock(core_.read_model().mu());
    const JobRecord* r = core_.read_model().job(id);
    if (IsTerminal(r->state)) {
      return SendError(res, MakeApiError(409, "conflict",
                                         "job " + std::to_string(id) + " already ended (" +
                                             JobStateName(r->state) + ")"));
    }
  }
  const Reply r = core_.Call(CancelJobCmd{id, p->admin ? "" : p->tenant});
  if (r.error && r.error->http_status == 404) {
    // It ended between the check and the command.
    return SendError(res, MakeApiError(409, "conflict", "job " + std::to_string(id) + " already ended"));
  }
  if (ReplyFailed(res, r)) return;
  std::shared_lock lock(core_.read_model().mu());
  SendJson(res, 200, JobView(*core_.read_model().job(id), core_.read_model(), core_.names()));
}

// --- nodes and pools -----------------------------------------------------------------
void HttpApi::AddNode(const Request& req, Response& res) {
  if (!Auth(req, res, true)) return;
  auto j = Body(req, res);
  if (!j) return;
  ApiError err;
  FieldReader f;
  AddNodeCmd cmd;
  std::string model, cls;
  int64_t gpus = 0;
  double cores = 0, mem = 0;
  cmd.region = "region-1";
  cmd.zone = "zone-1";
  cmd.rack = "rack-1";
  if (!FieldReader::Open(*j, "",
                         {"name", "model", "gpus", "cpu_cores", "memory_gib", "region", "zone", "rack",
                          "class"},
                         &f, &err) ||
      !f.Require("name", &err) || !f.String("name", cmd.spec.name, 253, &err) ||
      !f.String("model", model, 64, &err) || !f.Int("gpus", gpus, 0, kMaxGpusPerNode, &err) ||
      !f.Require("cpu_cores", &err) || !f.Number("cpu_cores", cores, 0, 1 << 20, &err, true) ||
      !f.Require("memory_gib", &err) || !f.Number("memory_gib", mem, 0, 1 << 24, &err, true) ||
      !f.String("region", cmd.region, 63, &err) || !f.String("zone", cmd.zone, 63, &err) ||
      !f.String("rack", cmd.rack, 63, &err) || !f.String("class", cls, 63, &err)) {
    return SendError(res, err);
  }
  if (cmd.spec.name.empty()) return SendError(res, BadField("name", "must not be empty"));
  if (gpus > 0 && model.empty()) return SendError(res, BadField("model", "required for a node with GPUs"));
  if (!model.empty()) {
    const auto id = Catalog::Builtin().Find(model);
    if (!id) {
      return SendError(res, BadField("model", "unknown GPU model '" + model + "' (known: " +
                                                  Catalog::Builtin().Names() + ")"));
    }
    if (gpus == 0) return SendError(res, BadField("gpus", "a node with a model needs at least 1 GPU"));
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
      return SendError(res, BadField("class", "unknown node class '" + cls + "' (known: " +
                                                  (known.empty() ? "none configured" : known) + ")"));
    }
    cmd.spec.attr_class = it->second;
  }
  const Reply r = core_.Call(std::move(cmd));
  if (ReplyFailed(res, r)) return;
  std::shared_lock lock(core_.read_model().mu());
  SendJson(res, 201, NodeView(static_cast<NodeIndex>(r.id), core_.read_model()));
}

void HttpApi::IssueNodeToken(const Request& req, Response& res) {
  if (!Auth(req, res, true)) return;
  const std::string node = req.matches[1];
  if (!ValidNodeName(node)) {
    return SendError(res, BadField("name", "a node name is 1 to 253 characters: lower-case letters, digits, "
                                           "'-' and '.', starting with a letter or digit"));
  }
  const std::string token = NewToken();
  const Reply r = core_.Call(IssueNodeTokenCmd{node, HashToken(token)});
  if (ReplyFailed(res, r)) return;
  SendJson(res, 201, json{{"node", node}, {"token", token}});
}

void HttpApi::RegisterNode(const Request& req, Response& res) {
  auto node = AgentAuth(req, res);
  if (!node) return;
  auto j = Body(req, res);
  if (!j) return;
  auto r = ParseRegisterRequest(*j);
  if (!r.ok()) return SendError(res, r.error);
  if (r.value->node != *node) {
    return SendError(res, MakeApiError(403, "forbidden", "this token is for node '" + *node + "'", "node"));
  }
  const RegisterRequest registered = *r.value;
  const Reply reply = core_.Call(RegisterAgentCmd{std::move(*r.value)});
  if (ReplyFailed(res, reply)) return;
  core_.agent_status().Registered(registered, ToMillis(WallNow()));
  SendJson(res, 200, reply.detail);
}

void HttpApi::AgentHeartbeat(const Request& req, Response& res) {
  auto node = AgentAuth(req, res);
  if (!node) return;
  auto j = Body(req, res);
  if (!j) return;
  auto r = ParseHeartbeatRequest(*j);
  if (!r.ok()) return SendError(res, r.error);
  if (r.value->node != *node) {
    return SendError(res, MakeApiError(403, "forbidden", "this token is for node '" + *node + "'", "node"));
  }
  const std::vector<GpuSample> gpus = r.value->gpus;
  const std::map<int, std::vector<MigInstance>> mig = r.value->mig;
  const Reply reply = core_.Call(AgentHeartbeatCmd{std::move(*r.value)});
  if (ReplyFailed(res, reply)) return;
  for (const GpuSample& g : gpus) {
    core_.metrics().SetGpuUtilization(static_cast<int32_t>(reply.id), g.index, g.util_pct);
  }
  core_.agent_status().Heartbeat(*node, gpus, ToMillis(WallNow()));
  core_.agent_status().MigReported(*node, mig);
  SendJson(res, 200, reply.detail);
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

void HttpApi::ListPools(const Request& req, Response& res) {
  if (!Auth(req, res, false)) return;
  std::shared_lock lock(core_.read_model().mu());
  const auto& m = core_.read_model();
  json list = json::array();
  for (size_t p = 0; p < m.pools().size(); ++p) list.push_back(PoolView(static_cast<PoolId>(p), m));
  SendJson(res, 200, json{{"pools", list}});
}

// --- regions (TOPO-2) -----------------------------------------------------------------
void HttpApi::GetRegions(const Request& req, Response& res) {
  if (!Auth(req, res, false)) return;
  std::shared_lock lock(core_.read_model().mu());
  SendJson(res, 200, RegionPolicyToJson(core_.read_model().regions()));
}

void HttpApi::SetRegions(const Request& req, Response& res) {
  if (!Auth(req, res, true)) return;
  auto j = Body(req, res);
  if (!j) return;
  auto parsed = ParseRegionRequest(*j);
  if (!parsed.ok()) return SendError(res, parsed.error);
  const Reply r = core_.Call(SetRegionsCmd{std::move(*parsed.value)});
  if (ReplyFailed(res, r)) return;
  // The RegionsSet event is in the read model before the reply.
  std::shared_lock lock(core_.read_model().mu());
  SendJson(res, 200, RegionPolicyToJson(core_.read_model().regions()));
}

// --- events ----------------------------------------------------------------------------
void HttpApi::ListEvents(const Request& req, Response& res) {
  if (!Auth(req, res, true)) return;
  ApiError err;
  int64_t since = 0, limit = 1000;
  if (!IntParam(req, "since", since, 0, INT64_MAX, &err) ||
      !IntParam(req, "limit", limit, 1, kMaxEventLimit, &err)) {
    return SendError(res, err);
  }
  std::string out = "{\"events\":[";
  int64_t next = since;
  bool first = true;
  auto ok = core_.journal().ReadEvents(since, limit, [&](const JournalEvent& e) {
    if (!first) out += ',';
    first = false;
    out += e.json;
    next = e.seq;
    return true;
  });
  if (!ok) return SendError(res, MakeApiError(503, "unavailable", ok.error().message));
  out += "],\"next_since\":" + std::to_string(next) + "}";
  res.status = 200;
  res.set_content(out, "application/json");
}

}  // namespace gpupool
