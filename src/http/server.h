// The HTTP/1.1 server of gpupool's daemons: GNU libmicrohttpd's event loop
// (epoll, one event thread per listener) in front of a bounded pool of
// worker threads (src/http/worker_pool.h) that run the route table's
// handlers (src/http/router.h). docs/server.md lists the limits and their
// defaults.
//
// What a connection costs: an idle, slow or keep-alive connection is a
// socket and at most Limits::max_header_bytes x 2 of buffer on the event
// thread, never a thread. A request becomes a handler's task only once its
// headers and body have arrived within their deadlines; while a handler's
// answer is pending (Exchange) the connection is suspended: no thread waits.
//
// Limits, each per listener (Limits):
// - connections in all (more are accepted and closed at once) and per
//   client address (the same);
// - the request line and headers (beyond: 414 / 431, closed);
// - the body: a Content-Length over max_body_bytes is refused before any
//   of it is read (kBodyTooLarge, closed); a chunked body that grows past
//   it closes the connection; bodies are buffered only up to the limit; a
//   body whose length is ambiguous (a Transfer-Encoding other than one
//   `chunked`, or beside a Content-Length; Content-Lengths that differ) is
//   refused before any of it is read (kBadTransferEncoding,
//   kBadContentLength; closed);
// - deadlines: a new connection, and a keep-alive one once its next request
//   line arrives, must complete its headers within header_timeout; the body
//   must arrive within body_timeout of the headers; a connection idle
//   (between requests, or not reading an answer) for idle_timeout is
//   closed; an answer pending longer than request_timeout is kTimeout (504);
// - one request in flight per connection (HTTP/1.1 without concurrent
//   pipelining: the next request is read once the answer is queued);
// - the workers' queues (WorkerOptions): a full lane sheds with kBusy (503,
//   Retry-After: 1).
// A client that closes its connection while its answer is pending is
// noticed within sweep_every: the exchange is cancelled (Exchange::OnCancel).
//
// Reserved capacity: routes of Lane::kReserved (the agent protocol,
// /healthz) have worker threads of their own; a listener opened with
// `reserved_only` serves only those routes (gpupool server --agent-listen),
// so that agents keep their own connection limits too.
//
// TLS (src/http/tls.h): a listener given a TlsIdentity serves only TLS
// (GnuTLS, on the same event loop; the handshake counts against
// header_timeout like the headers do); with client CAs it also requires and
// verifies a client certificate in the handshake. A plain-HTTP request to a
// TLS listener fails its handshake and is closed.
//
// A handler that throws is answered kInternal, and the exception's text
// goes to ServerOptions::log.
//
// Threads: Add and Listen before Start; Start and Stop from one thread;
// Stop is idempotent and also run by the destructor. Handlers run on
// workers; error_response, decorate and on_complete run on whichever
// thread answers (event thread, worker, sweeper) and must not block.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "src/base/status.h"
#include "src/http/exchange.h"
#include "src/http/router.h"
#include "src/http/tls.h"
#include "src/http/worker_pool.h"

namespace gpupool::http {

struct Limits {
  int max_connections = 4096;            // 1..1,000,000 open connections on this listener
  int max_connections_per_client = 256;  // 1..1,000,000 open connections from one client address
  int64_t max_header_bytes = 16384;      // 1 KiB..1 MiB: request line and headers
  int64_t max_body_bytes = 1 << 20;      // 0..1 GiB
  std::chrono::milliseconds idle_timeout{std::chrono::seconds(30)};
  std::chrono::milliseconds header_timeout{std::chrono::seconds(10)};
  std::chrono::milliseconds body_timeout{std::chrono::seconds(30)};
  std::chrono::milliseconds request_timeout{std::chrono::seconds(60)};
};

// Whether `limits` are in their ranges (every timeout at least 1 s); the
// error names the field as `prefix` + its name.
Status CheckLimits(const Limits& limits, const std::string& prefix);

// One answered request, for metrics and access logs.
struct Completion {
  const Request* request = nullptr;  // the method, path, route name (empty: none matched), remote address
  const Response* response = nullptr;  // as sent (after decorate), its body moved out; null when none could be sent
  int status = 0;
  std::chrono::duration<double> seconds{0};  // from the end of the headers to the answer being queued
};

struct ServerOptions {
  WorkerOptions workers;
  std::chrono::milliseconds sweep_every{100};  // deadlines and gone clients are checked this often
  // The layer's own answers; default: DefaultStatus(e) with a line of text.
  std::function<Response(LayerError e, const Request& request)> error_response;
  // Called once per request as soon as its headers are in, before it is
  // routed or refused (e.g. to give it a request id).
  std::function<void(Request& request)> prepare;
  // After this many bytes of request bodies are freed, and after at least
  // 1 MiB once no more are, the sweeper returns free heap pages to the
  // system (malloc_trim). 0: never.
  int64_t release_memory_after_bytes = int64_t{32} << 20;
  // Called on every answer just before it is sent (headers such as a request id).
  std::function<void(const Request& request, Response& response)> decorate;
  std::function<void(const Completion& c)> on_complete;
  // Handlers that threw (one line each); default: dropped.
  std::function<void(const std::string& line)> log;
};

struct ServerStats {
  int64_t connections = 0;       // open now, all listeners
  int64_t pending = 0;           // exchanges awaiting an answer now
  int64_t shed = 0;              // kBusy answers so far
  int64_t timed_out = 0;         // kTimeout answers so far (counted just after the answer is handed over)
  int64_t deadline_closed = 0;   // connections closed by header, body or idle deadlines so far
  int64_t clients_gone = 0;      // pending exchanges whose client went away so far
  int64_t memory_releases = 0;   // malloc_trim calls so far (ServerOptions::release_memory_after_bytes)
};

class Server {
 public:
  explicit Server(ServerOptions options);
  ~Server();
  Server(const Server&) = delete;
  Server& operator=(const Server&) = delete;

  void Add(Route route);
  // Runs `task` on a worker ahead of new requests (WorkerPool::Continue):
  // for the second half of a handler, such as building the answer once a
  // command is durable. Any thread; dropped once the server is stopping.
  void Continue(WorkerPool::Task task);
  // Binds HOST:PORT (port 0: any free one; a host name or an IPv4/IPv6
  // literal) and returns the bound port; it serves from Start on. Fails
  // with "cannot listen on HOST:PORT: reason", a limit out of range, or
  // "cannot serve TLS on HOST:PORT: ..." when `tls` is given and the
  // library has no TLS. `tls` is copied; check its files with
  // LoadTlsIdentity first (a bad identity makes Start fail).
  Result<int> Listen(const std::string& host, int port, const Limits& limits, bool reserved_only = false,
                     std::optional<TlsIdentity> tls = std::nullopt);
  // Starts the workers, the sweeper and every listener's event thread.
  Status Start();
  // Stops accepting, answers pending exchanges with kStopping, stops the
  // workers (queued tasks are dropped), closes every connection.
  void Stop();

  ServerStats stats() const;
  const Router& router() const { return router_; }

 private:
  struct Listener;
  struct Conn;
  struct RequestCtx;
  struct PendingEntry {
    std::weak_ptr<Exchange> exchange;
    int fd = -1;
    std::chrono::steady_clock::time_point deadline;
  };

  // libmicrohttpd's callbacks and the steps of a request (server.cc).
  friend struct Glue;

  // Registers a suspended request's exchange for the sweeper; false when
  // stopping (the caller answers kStopping).
  bool AddPending(const ExchangePtr& exchange, int fd, std::chrono::steady_clock::time_point deadline);
  void RemovePending(const Exchange* exchange);
  Response LayerAnswer(LayerError e, const Request& request) const;

  void SweepLoop();
  void SweepConnections(std::chrono::steady_clock::time_point now);
  void SweepPending(std::chrono::steady_clock::time_point now);
  void ReleaseMemory();

  ServerOptions options_;
  Router router_;
  std::vector<std::unique_ptr<Listener>> listeners_;
  std::unique_ptr<WorkerPool> workers_;
  bool started_ = false;

  mutable std::mutex pending_mu_;
  std::map<const Exchange*, PendingEntry> pending_;  // guarded by pending_mu_
  bool stopping_ = false;                            // guarded by pending_mu_

  std::mutex sweep_mu_;
  std::condition_variable sweep_cv_;
  bool sweep_stop_ = false;  // guarded by sweep_mu_
  std::thread sweeper_;

  std::atomic<int64_t> shed_{0}, timed_out_{0}, deadline_closed_{0}, clients_gone_{0};
  std::atomic<int64_t> body_bytes_since_trim_{0};  // request body bytes freed since the last malloc_trim
  int64_t body_bytes_at_last_sweep_ = 0;            // the sweeper's only
  std::atomic<int64_t> memory_releases_{0};
};

}  // namespace gpupool::http
