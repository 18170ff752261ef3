// The agent's own metrics listener (--metrics-listen, EXEC-10): serves
// GET /metrics in the Prometheus text format (0.0.4), like the DCGM
// exporter runs one per node, so that a pool's device metrics are scraped
// node by node and never through the server.
//
// The agent reads the field set once per heartbeat and publishes the text
// here; a scrape answers the latest text and never touches the driver, so
// its cost does not grow with the scrape rate. Before the first publish a
// scrape gets 503 ("no reading yet"). Anything but GET /metrics is 404 (405
// for another method on /metrics).
//
// Served by the HTTP layer (src/http/server.h), plain or TLS, with small limits:
// kMetricsThreads handler threads, kMetricsConnections connections
// (kMetricsConnectionsPerClient from one address), kMetricsIoTimeout for
// idle connections, headers and bodies, bodies refused beyond 1 KiB.
//
// Thread-safety: Publish from any thread; scrapes run on the layer's threads.
#pragma once

#include <atomic>
#include <chrono>
#include <memory>
#include <mutex>
#include <optional>
#include <string>

#include "src/base/status.h"
#include "src/http/server.h"

namespace gpupool {

inline constexpr int kMetricsThreads = 2;
inline constexpr int kMetricsConnections = 64;
inline constexpr int kMetricsConnectionsPerClient = 16;
inline constexpr std::chrono::seconds kMetricsIoTimeout{5};

class MetricsListener {
 public:
  // Binds `host`:`port` (port 0: any free one) and starts serving, over
  // TLS when `tls` is given. Fails with "cannot listen on HOST:PORT: reason".
  static Result<std::unique_ptr<MetricsListener>> Start(const std::string& host, int port,
                                                        std::optional<http::TlsIdentity> tls = std::nullopt);
  ~MetricsListener();  // stops serving
  MetricsListener(const MetricsListener&) = delete;
  MetricsListener& operator=(const MetricsListener&) = delete;

  int port() const { return port_; }
  // What GET /metrics answers from now on.
  void Publish(std::string text);
  // Scrapes answered with 200 so far.
  int64_t scrapes() const { return scrapes_.load(); }

 private:
  MetricsListener();
  void Scrape(const http::ExchangePtr& ex);

  std::unique_ptr<http::Server> http_;
  int port_ = 0;
  mutable std::mutex mu_;
  std::string text_;        // guarded by mu_
  bool published_ = false;  // guarded by mu_
  std::atomic<int64_t> scrapes_{0};
};

}  // namespace gpupool
