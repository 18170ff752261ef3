#include "src/http/server.h"

#include <malloc.h>

#include <arpa/inet.h>
#include <fcntl.h>
#include <gnutls/gnutls.h>
#include <microhttpd.h>
#include <netdb.h>
#include <poll.h>
#include <strings.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <list>
#include <optional>

#include "src/base/check.h"

namespace gpupool::http {
namespace {

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

int64_t Ms(Clock::time_point t) { return std::chrono::duration_cast<milliseconds>(t.time_since_epoch()).count(); }

// What a gone client is "answered" (never read): nginx's "client closed request".
constexpr int kClientGoneStatus = 499;

std::string AddressText(const sockaddr* sa) {
  char buf[INET6_ADDRSTRLEN] = {0};
  if (sa == nullptr) return "";
  if (sa->sa_family == AF_INET) {
    ::inet_ntop(AF_INET, &reinterpret_cast<const sockaddr_in*>(sa)->sin_addr, buf, sizeof buf);
  } else if (sa->sa_family == AF_INET6) {
    ::inet_ntop(AF_INET6, &reinterpret_cast<const sockaddr_in6*>(sa)->sin6_addr, buf, sizeof buf);
  }
  return buf;
}

MHD_Result CollectPair(void* cls, MHD_ValueKind, const char* key, const char* value) {
  auto* out = static_cast<std::vector<std::pair<std::string, std::string>>*>(cls);
  out->emplace_back(key ? key : "", value ? value : "");
  return MHD_YES;
}

// A Content-Length as sent; nullopt when absent or not a plain decimal
// (libmicrohttpd has already refused a malformed one with 400).
std::optional<uint64_t> ContentLength(MHD_Connection* c) {
  const char* v = MHD_lookup_connection_value(c, MHD_HEADER_KIND, MHD_HTTP_HEADER_CONTENT_LENGTH);
  if (v == nullptr || *v == '\0') return std::nullopt;
  uint64_t n = 0;
  for (const char* p = v; *p; ++p) {
    if (*p < '0' || *p > '9') return std::nullopt;
    if (n > (UINT64_MAX - 9) / 10) return UINT64_MAX;
    n = n * 10 + static_cast<uint64_t>(*p - '0');
  }
  return n;
}

bool SameNoCase(std::string_view a, std::string_view b) {
  return a.size() == b.size() && ::strncasecmp(a.data(), b.data(), a.size()) == 0;
}

std::string_view TrimSpace(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

// Whether the body's length is unambiguous (RFC 9112 section 6): at most
// one Transfer-Encoding, and it is `chunked` (the only coding served) with
// no Content-Length beside it; Content-Length values all alike.
// libmicrohttpd takes the first of repeated headers and waits for a body
// of an unknown coding until the body deadline; a request with two
// readings of its length is the stuff of request smuggling.
std::optional<LayerError> FramingError(const Request& req) {
  int codings = 0;
  std::string_view coding;
  std::vector<std::string_view> lengths;
  for (const auto& [name, value] : req.headers) {
    if (SameNoCase(name, "Transfer-Encoding")) {
      ++codings;
      coding = value;
    } else if (SameNoCase(name, "Content-Length")) {
      lengths.push_back(value);
    }
  }
  if (codings > 1 || (codings == 1 && (!SameNoCase(TrimSpace(coding), "chunked") || !lengths.empty()))) {
    return LayerError::kBadTransferEncoding;
  }
  for (std::string_view l : lengths) {
    if (TrimSpace(l) != TrimSpace(lengths[0])) return LayerError::kBadContentLength;
  }
  return std::nullopt;
}

}  // namespace

// One TCP connection (libmicrohttpd's socket context).
struct Server::Conn {
  int fd = -1;
  std::string remote;
  std::atomic<int64_t> deadline_ms{0};  // steady clock; 0: none (a request is being handled)
  std::list<Conn*>::iterator self;
};

struct Server::Listener {
  Server* server = nullptr;
  Limits limits;
  bool reserved_only = false;
  std::optional<TlsIdentity> tls;  // none: plain HTTP
  std::string where;  // HOST:PORT, for messages
  int fd = -1;
  MHD_Daemon* daemon = nullptr;
  std::mutex conns_mu;
  std::list<Conn*> conns;  // guarded by conns_mu
};

// One request (libmicrohttpd's request context), from its request line on.
struct Server::RequestCtx {
  Request request;  // moved into `exchange` at dispatch
  const Route* route = nullptr;
  std::optional<LayerError> refuse;  // answered once the body is read
  std::string allow;                 // with kMethodNotAllowed
  bool headers_seen = false;
  Clock::time_point headers_at;
  ExchangePtr exchange;
};

// libmicrohttpd's callbacks (all on a listener's event thread) and the steps of a request.
struct Glue {
  using Listener = Server::Listener;
  using Conn = Server::Conn;
  using Ctx = Server::RequestCtx;

  static Conn* ConnOf(MHD_Connection* c) {
    const MHD_ConnectionInfo* info = MHD_get_connection_info(c, MHD_CONNECTION_INFO_SOCKET_CONTEXT);
    return info ? static_cast<Conn*>(info->socket_context) : nullptr;
  }
  static void SetDeadline(MHD_Connection* c, std::optional<Clock::time_point> at, bool keep_earlier = false) {
    Conn* conn = ConnOf(c);
    if (conn == nullptr) return;
    const int64_t ms = at ? Ms(*at) : 0;
    const int64_t old = conn->deadline_ms.load();
    if (keep_earlier && old != 0 && old < ms) return;
    conn->deadline_ms = ms;
  }

  static void OnConnection(void* cls, MHD_Connection* c, void** socket_ctx, MHD_ConnectionNotificationCode code) {
    auto* l = static_cast<Listener*>(cls);
    if (code == MHD_CONNECTION_NOTIFY_STARTED) {
      auto* conn = new Conn();
      const MHD_ConnectionInfo* fd = MHD_get_connection_info(c, MHD_CONNECTION_INFO_CONNECTION_FD);
      const MHD_ConnectionInfo* addr = MHD_get_connection_info(c, MHD_CONNECTION_INFO_CLIENT_ADDRESS);
      conn->fd = fd ? fd->connect_fd : -1;
      conn->remote = addr ? AddressText(addr->client_addr) : "";
      conn->deadline_ms = Ms(Clock::now() + l->limits.header_timeout);
      if (l->tls && !l->tls->client_ca_pem.empty()) RequireClientCertificate(c);
      std::lock_guard lock(l->conns_mu);
      conn->self = l->conns.insert(l->conns.end(), conn);
      *socket_ctx = conn;
      return;
    }
    auto* conn = static_cast<Conn*>(*socket_ctx);
    if (conn == nullptr) return;
    {
      std::lock_guard lock(l->conns_mu);
      l->conns.erase(conn->self);
    }
    delete conn;
    *socket_ctx = nullptr;
  }

  // libmicrohttpd only asks for a client certificate (GNUTLS_CERT_REQUEST)
  // and leaves checking it to the application; the session exists, its
  // handshake not yet begun, when the connection is announced. Requiring
  // the certificate and letting GnuTLS verify it against the trust list
  // (MHD_OPTION_HTTPS_MEM_TRUST) fails the handshake of a client without a
  // good one, before any request is read.
  static void RequireClientCertificate(MHD_Connection* c) {
    const MHD_ConnectionInfo* info = MHD_get_connection_info(c, MHD_CONNECTION_INFO_GNUTLS_SESSION);
    GP_CHECK(info != nullptr && info->tls_session != nullptr) << "a TLS connection without a GnuTLS session";
    auto session = static_cast<gnutls_session_t>(info->tls_session);
    gnutls_certificate_server_set_request(session, GNUTLS_CERT_REQUIRE);
    gnutls_session_set_verify_cert(session, nullptr, 0);
  }

  static void* OnUri(void* cls, const char*, MHD_Connection* c) {
    auto* l = static_cast<Listener*>(cls);
    SetDeadline(c, Clock::now() + l->limits.header_timeout, /*keep_earlier=*/true);
    return new Ctx();
  }

  static void OnCompleted(void* cls, MHD_Connection* c, void** req_cls, MHD_RequestTerminationCode) {
    auto* l = static_cast<Listener*>(cls);
    auto* ctx = static_cast<Ctx*>(*req_cls);
    if (ctx != nullptr) {
      // Counted once its memory is freed (ReleaseMemory).
      const Request& req = ctx->exchange ? ctx->exchange->request() : ctx->request;
      const auto bytes = static_cast<int64_t>(req.body.capacity());
      delete ctx;
      l->server->body_bytes_since_trim_ += bytes;
    }
    *req_cls = nullptr;
    SetDeadline(c, Clock::now() + l->limits.idle_timeout + l->limits.header_timeout);
  }

  static MHD_Result OnAccess(void* cls, MHD_Connection* c, const char* url, const char* method, const char*,
                             const char* upload, size_t* upload_size, void** req_cls) {
    auto* l = static_cast<Listener*>(cls);
    if (*req_cls == nullptr) *req_cls = new Ctx();
    Ctx& ctx = *static_cast<Ctx*>(*req_cls);
    if (!ctx.headers_seen) return Headers(*l, c, ctx, url, method);
    if (*upload_size != 0) return Body(*l, ctx, upload, upload_size);
    if (ctx.exchange) {  // resumed: the answer is in
      std::optional<Response> r = ctx.exchange->TakeResponse();
      return Queue(*l, c, ctx, r ? std::move(*r) : Response{});
    }
    if (ctx.refuse) {
      Response r = l->server->LayerAnswer(*ctx.refuse, ctx.request);
      if (!ctx.allow.empty()) r.headers.emplace_back("Allow", ctx.allow);
      return Queue(*l, c, ctx, std::move(r));
    }
    return Dispatch(*l, c, ctx);
  }

  // The first call: headers are in. Routes, and refuses an oversized body before reading it.
  static MHD_Result Headers(Listener& l, MHD_Connection* c, Ctx& ctx, const char* url, const char* method) {
    ctx.headers_seen = true;
    ctx.headers_at = Clock::now();
    Request& req = ctx.request;
    req.method = method ? method : "";
    req.path = url ? url : "";
    MHD_get_connection_values(c, MHD_HEADER_KIND, &CollectPair, &req.headers);
    MHD_get_connection_values(c, MHD_GET_ARGUMENT_KIND, &CollectPair, &req.params);
    if (Conn* conn = ConnOf(c)) req.remote_addr = conn->remote;
    if (l.server->options_.prepare) l.server->options_.prepare(req);
    SetDeadline(c, ctx.headers_at + l.limits.body_timeout);
    if (const std::optional<LayerError> e = FramingError(req)) {
      return Queue(l, c, ctx, l.server->LayerAnswer(*e, req));  // before any of the body; closes after
    }
    const std::optional<uint64_t> length = ContentLength(c);
    if (length && *length > static_cast<uint64_t>(l.limits.max_body_bytes)) {
      // Answered now, before any of the body is read; the connection closes after it.
      return Queue(l, c, ctx, l.server->LayerAnswer(LayerError::kBodyTooLarge, req));
    }
    if (length) req.body.reserve(static_cast<size_t>(*length));  // one allocation of the size sent
    Router::Match m = l.server->router_.Find(req.method, req.path);
    if (m.route != nullptr && l.reserved_only && m.route->lane != Lane::kReserved) m = Router::Match{};
    if (m.route == nullptr) {
      ctx.refuse = m.allow.empty() ? LayerError::kNotFound : LayerError::kMethodNotAllowed;
      ctx.allow = std::move(m.allow);
      return MHD_YES;
    }
    ctx.route = m.route;
    req.route = m.route->name;
    req.captures = std::move(m.captures);
    return MHD_YES;
  }

  // A piece of the body (chunked bodies have no Content-Length to check first).
  static MHD_Result Body(Listener& l, Ctx& ctx, const char* upload, size_t* upload_size) {
    std::string& body = ctx.request.body;
    if (body.size() + *upload_size > static_cast<size_t>(l.limits.max_body_bytes)) {
      // Too late for an answer (the request is being read): close the connection.
      if (l.server->options_.on_complete) {
        l.server->options_.on_complete(Completion{&ctx.request, nullptr, DefaultStatus(LayerError::kBodyTooLarge),
                                                  Clock::now() - ctx.headers_at});
      }
      return MHD_NO;
    }
    if (!ctx.refuse) body.append(upload, *upload_size);
    *upload_size = 0;
    return MHD_YES;
  }

  // The request is complete: suspend the connection and hand it to a worker.
  static MHD_Result Dispatch(Listener& l, MHD_Connection* c, Ctx& ctx) {
    Server& s = *l.server;
    SetDeadline(c, std::nullopt);  // the exchange has its own deadline
    Listener* lp = &l;
    ctx.exchange = std::make_shared<Exchange>(std::move(ctx.request), [lp, c](Exchange& ex) {
      lp->server->RemovePending(&ex);
      MHD_resume_connection(c);
    });
    MHD_suspend_connection(c);
    const Conn* conn = ConnOf(c);
    const ExchangePtr ex = ctx.exchange;
    if (!s.AddPending(ex, conn ? conn->fd : -1, Clock::now() + l.limits.request_timeout)) {
      ex->Cancel(s.LayerAnswer(LayerError::kStopping, ex->request()));
      return MHD_YES;
    }
    const Route* route = ctx.route;
    Server* sp = &s;
    auto task = [sp, route, ex] {
      try {
        route->handler(ex);
      } catch (const std::exception& e) {
        if (sp->options_.log) sp->options_.log(std::string("handler of ") + route->name + " threw: " + e.what());
        ex->Respond(sp->LayerAnswer(LayerError::kInternal, ex->request()));
      } catch (...) {
        ex->Respond(sp->LayerAnswer(LayerError::kInternal, ex->request()));
      }
    };
    if (!s.workers_->Submit(route->lane, std::move(task))) {
      ++s.shed_;
      ex->Respond(s.LayerAnswer(LayerError::kBusy, ex->request()));
    }
    return MHD_YES;
  }

  static MHD_Result Queue(Listener& l, MHD_Connection* c, Ctx& ctx, Response r) {
    const Server& s = *l.server;
    const Request& req = ctx.exchange ? ctx.exchange->request() : ctx.request;
    if (s.options_.decorate) s.options_.decorate(req, r);
    auto* body = new std::string(std::move(r.body));
    MHD_Response* resp = MHD_create_response_from_buffer_with_free_callback_cls(
        body->size(), body->data(), [](void* p) { delete static_cast<std::string*>(p); }, body);
    if (resp == nullptr) {
      delete body;
      return MHD_NO;
    }
    MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE, r.content_type.c_str());
    for (const auto& [k, v] : r.headers) MHD_add_response_header(resp, k.c_str(), v.c_str());
    if (r.close) MHD_add_response_header(resp, MHD_HTTP_HEADER_CONNECTION, "close");
    const MHD_Result ok = MHD_queue_response(c, static_cast<unsigned int>(r.status), resp);
    MHD_destroy_response(resp);
    if (s.options_.on_complete) s.options_.on_complete(Completion{&req, &r, r.status, Clock::now() - ctx.headers_at});
    return ok;
  }
};

Status CheckLimits(const Limits& l, const std::string& prefix) {
  auto bad = [&](const char* name, const std::string& range) {
    return InvalidArgument(prefix + name + ": must be " + range);
  };
  if (l.max_connections < 1 || l.max_connections > 1000000) return bad("max_connections", "1..1000000");
  if (l.max_connections_per_client < 1 || l.max_connections_per_client > 1000000) {
    return bad("max_connections_per_client", "1..1000000");
  }
  if (l.max_header_bytes < 1024 || l.max_header_bytes > (1 << 20)) return bad("max_header_bytes", "1024..1048576");
  if (l.max_body_bytes < 0 || l.max_body_bytes > (1 << 30)) return bad("max_body_bytes", "0..1073741824");
  const std::pair<const char*, milliseconds> timeouts[] = {{"idle_timeout", l.idle_timeout},
                                                           {"header_timeout", l.header_timeout},
                                                           {"body_timeout", l.body_timeout},
                                                           {"request_timeout", l.request_timeout}};
  for (const auto& [name, t] : timeouts) {
    if (t < std::chrono::seconds(1) || t > std::chrono::hours(24)) return bad(name, "between 1s and 24h");
  }
  return {};
}

Server::Server(ServerOptions options) : options_(std::move(options)) {}

Server::~Server() { Stop(); }

void Server::Add(Route route) {
  GP_CHECK(!started_) << "routes are added before Start";
  router_.Add(std::move(route));
}

void Server::Continue(WorkerPool::Task task) {
  if (workers_) workers_->Continue(std::move(task));
}

Result<int> Server::Listen(const std::string& host, int port, const Limits& limits, bool reserved_only,
                           std::optional<TlsIdentity> tls) {
  GP_CHECK(!started_) << "listeners are added before Start";
  GP_TRY(CheckLimits(limits, ""));
  const std::string where = host + ":" + std::to_string(port);
  if (tls && !TlsSupported()) {
    return FailedPrecondition("cannot serve TLS on " + where + ": this libmicrohttpd was built without TLS");
  }
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
  addrinfo* found = nullptr;
  if (int rc = ::getaddrinfo(host.c_str(), std::to_string(port).c_str(), &hints, &found); rc != 0) {
    return IoError("cannot listen on " + where + ": " + ::gai_strerror(rc));
  }
  const int fd = ::socket(found->ai_family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  int yes = 1;
  const bool ok = fd >= 0 && ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof yes) == 0 &&
                  ::bind(fd, found->ai_addr, found->ai_addrlen) == 0 && ::listen(fd, SOMAXCONN) == 0;
  const int err = errno;
  ::freeaddrinfo(found);
  if (!ok) {
    if (fd >= 0) ::close(fd);
    return IoError("cannot listen on " + where + ": " + std::strerror(err));
  }
  sockaddr_storage bound{};
  socklen_t len = sizeof bound;
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&bound), &len);
  const int bound_port = ntohs(bound.ss_family == AF_INET6 ? reinterpret_cast<sockaddr_in6*>(&bound)->sin6_port
                                                           : reinterpret_cast<sockaddr_in*>(&bound)->sin_port);
  auto l = std::make_unique<Listener>();
  l->server = this;
  l->limits = limits;
  l->reserved_only = reserved_only;
  l->tls = std::move(tls);
  l->where = where;
  l->fd = fd;
  listeners_.push_back(std::move(l));
  return bound_port;
}

Status Server::Start() {
  GP_CHECK(!started_) << "Start once";
  started_ = true;
  workers_ = std::make_unique<WorkerPool>(options_.workers);
  for (auto& l : listeners_) {
    // No MHD_USE_ERROR_LOG: the library would log every connection a
    // deadline or a limit closes, which a flood turns into a log flood.
    unsigned int flags = MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_EPOLL | MHD_ALLOW_SUSPEND_RESUME;
    // TLS options ride in an array so that one call serves both kinds of listener.
    std::vector<MHD_OptionItem> tls_options;
    if (l->tls) {
      flags |= MHD_USE_TLS;
      tls_options.push_back({MHD_OPTION_HTTPS_MEM_CERT, 0, const_cast<char*>(l->tls->cert_pem.c_str())});
      tls_options.push_back({MHD_OPTION_HTTPS_MEM_KEY, 0, const_cast<char*>(l->tls->key_pem.c_str())});
      if (!l->tls->client_ca_pem.empty()) {
        tls_options.push_back({MHD_OPTION_HTTPS_MEM_TRUST, 0, const_cast<char*>(l->tls->client_ca_pem.c_str())});
      }
    }
    tls_options.push_back({MHD_OPTION_END, 0, nullptr});
    const auto idle_s = static_cast<unsigned int>(
        std::chrono::ceil<std::chrono::seconds>(l->limits.idle_timeout).count());
    l->daemon = MHD_start_daemon(
        flags, 0, nullptr, nullptr, &Glue::OnAccess, l.get(), MHD_OPTION_LISTEN_SOCKET, static_cast<MHD_socket>(l->fd),
        MHD_OPTION_CONNECTION_LIMIT, static_cast<unsigned int>(l->limits.max_connections),
        MHD_OPTION_PER_IP_CONNECTION_LIMIT, static_cast<unsigned int>(l->limits.max_connections_per_client),
        MHD_OPTION_CONNECTION_MEMORY_LIMIT, static_cast<size_t>(2 * l->limits.max_header_bytes),
        MHD_OPTION_CONNECTION_TIMEOUT, idle_s, MHD_OPTION_URI_LOG_CALLBACK, &Glue::OnUri, l.get(),
        MHD_OPTION_NOTIFY_COMPLETED, &Glue::OnCompleted, l.get(), MHD_OPTION_NOTIFY_CONNECTION,
        &Glue::OnConnection, l.get(), MHD_OPTION_ARRAY, tls_options.data(), MHD_OPTION_END);
    if (l->daemon == nullptr) {
      Stop();
      return IoError("cannot serve on " + l->where + ": the HTTP library refused to start" +
                     (l->tls ? " (with TLS: check the certificate and key)" : ""));
    }
  }
  sweeper_ = std::thread([this] { SweepLoop(); });
  return {};
}

void Server::Stop() {
  std::vector<ExchangePtr> pending;
  {
    std::lock_guard lock(pending_mu_);
    if (stopping_) return;
    stopping_ = true;
    for (auto& [key, e] : pending_) {
      if (ExchangePtr ex = e.exchange.lock()) pending.push_back(std::move(ex));
    }
  }
  for (auto& l : listeners_) {
    if (l->daemon != nullptr) {
      const MHD_socket fd = MHD_quiesce_daemon(l->daemon);
      if (fd != MHD_INVALID_SOCKET) ::close(fd);
    } else if (l->fd >= 0) {
      ::close(l->fd);
    }
    l->fd = -1;
  }
  for (const ExchangePtr& ex : pending) ex->Cancel(LayerAnswer(LayerError::kStopping, ex->request()));
  if (workers_) workers_->Stop();
  for (auto& l : listeners_) {
    if (l->daemon != nullptr) MHD_stop_daemon(l->daemon);
    l->daemon = nullptr;
  }
  {
    std::lock_guard lock(sweep_mu_);
    sweep_stop_ = true;
  }
  sweep_cv_.notify_all();
  if (sweeper_.joinable()) sweeper_.join();
}

bool Server::AddPending(const ExchangePtr& exchange, int fd, Clock::time_point deadline) {
  std::lock_guard lock(pending_mu_);
  if (stopping_) return false;
  pending_[exchange.get()] = PendingEntry{exchange, fd, deadline};
  return true;
}

void Server::RemovePending(const Exchange* exchange) {
  std::lock_guard lock(pending_mu_);
  pending_.erase(exchange);
}

Response Server::LayerAnswer(LayerError e, const Request& request) const {
  Response r;
  if (options_.error_response) {
    r = options_.error_response(e, request);
  } else {
    r.status = DefaultStatus(e);
    r.body = std::string(LayerErrorName(e)) + "\n";
  }
  if (e == LayerError::kBusy) r.headers.emplace_back("Retry-After", "1");
  if (e == LayerError::kBodyTooLarge || e == LayerError::kBadTransferEncoding || e == LayerError::kBadContentLength ||
      e == LayerError::kStopping) {
    r.close = true;
  }
  return r;
}

void Server::SweepLoop() {
  std::unique_lock lock(sweep_mu_);
  while (!sweep_stop_) {
    sweep_cv_.wait_for(lock, options_.sweep_every);
    if (sweep_stop_) break;
    lock.unlock();
    const Clock::time_point now = Clock::now();
    SweepConnections(now);
    SweepPending(now);
    ReleaseMemory();
    lock.lock();
  }
}

// Request bodies and what handlers parse from them are freed into the
// allocator's arenas, which keep the pages: after many bytes of bodies have
// been freed (options_.release_memory_after_bytes), or some once no more
// are, the free pages go back to the system (glibc's malloc_trim), so that
// a flood of large bodies does not leave the server at its peak. An
// exchange still held by a worker frees its body later: it is counted then.
void Server::ReleaseMemory() {
  const int64_t since = body_bytes_since_trim_.load();
  const int64_t threshold = options_.release_memory_after_bytes;
  const bool quiet = since == body_bytes_at_last_sweep_ && since >= (int64_t{1} << 20);
  body_bytes_at_last_sweep_ = since;
  if (threshold <= 0 || (since < threshold && !quiet)) return;
  body_bytes_since_trim_ -= since;
  body_bytes_at_last_sweep_ = 0;
  ::malloc_trim(0);
  ++memory_releases_;
}

// Connections past their header, body or idle deadline are shut down; the
// event thread then sees the end of the stream and closes them.
void Server::SweepConnections(Clock::time_point now) {
  const int64_t now_ms = Ms(now);
  for (auto& l : listeners_) {
    std::lock_guard lock(l->conns_mu);  // held: a listed connection's fd is open
    for (Conn* conn : l->conns) {
      const int64_t d = conn->deadline_ms.load();
      if (d == 0 || d > now_ms) continue;
      conn->deadline_ms = 0;
      ++deadline_closed_;  // before the client can see the close
      ::shutdown(conn->fd, SHUT_RDWR);
    }
  }
}

// Pending exchanges past their deadline get kTimeout; those whose client
// hung up are cancelled (a suspended connection is not watched by the event
// thread, so the sweeper polls them).
void Server::SweepPending(Clock::time_point now) {
  std::vector<ExchangePtr> live;
  std::vector<pollfd> fds;
  std::vector<ExchangePtr> expired;
  {
    std::lock_guard lock(pending_mu_);
    for (auto it = pending_.begin(); it != pending_.end();) {
      ExchangePtr ex = it->second.exchange.lock();
      if (!ex) {
        it = pending_.erase(it);
        continue;
      }
      if (it->second.deadline <= now) {
        expired.push_back(std::move(ex));
      } else if (it->second.fd >= 0) {
        fds.push_back(pollfd{it->second.fd, POLLRDHUP, 0});
        live.push_back(std::move(ex));
      }
      ++it;
    }
  }
  // An exchange that ends meanwhile is resumed and its fd may be closed and
  // reused; Cancel on an ended exchange does nothing, so a stale result is harmless.
  if (!fds.empty()) ::poll(fds.data(), fds.size(), 0);
  for (size_t i = 0; i < fds.size(); ++i) {
    if ((fds[i].revents & (POLLRDHUP | POLLHUP | POLLERR)) == 0) continue;
    Response gone;
    gone.status = kClientGoneStatus;
    gone.close = true;
    if (live[i]->Cancel(std::move(gone))) ++clients_gone_;
  }
  for (const ExchangePtr& ex : expired) {
    if (ex->Expire(LayerAnswer(LayerError::kTimeout, ex->request()))) ++timed_out_;
  }
}

ServerStats Server::stats() const {
  ServerStats s;
  for (const auto& l : listeners_) {
    std::lock_guard lock(l->conns_mu);
    s.connections += static_cast<int64_t>(l->conns.size());
  }
  {
    std::lock_guard lock(pending_mu_);
    s.pending = static_cast<int64_t>(pending_.size());
  }
  s.shed = shed_;
  s.timed_out = timed_out_;
  s.deadline_closed = deadline_closed_;
  s.clients_gone = clients_gone_;
  s.memory_releases = memory_releases_;
  return s;
}

}  // namespace gpupool::http
