// The agent's own metrics listener (--metrics-listen, EXEC-10): serves
// GET /metrics in the Prometheus text format (0.0.4), like the DCGM
// exporter runs one per node, so that a pool's device metrics are scraped
// node by node and never through the server.
//
// The agent reads the field set once per heartbeat and publishes the text
// here; a scrape answers the latest text and never touches the driver, so
// its cost does not grow with the scrape rate. Before the first publish a
// scrape gets 503 ("no reading yet"). Anything but GET /metrics is 404.
//
// Limits: kMetricsThreads connections are served at a time (more wait in
// the kernel's backlog), reads and writes time out after kMetricsIoTimeoutS,
// a connection serves at most kMetricsKeepAlive requests and idles at most
// kMetricsIoTimeoutS, and request bodies are refused beyond 1 KiB.
//
// Thread-safety: Publish from any thread; scrapes run on the listener's own.
#pragma once

#include <atomic>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "src/base/status.h"

namespace httplib {
class Server;
}

namespace gpupool {

inline constexpr int kMetricsThreads = 2;
inline constexpr int kMetricsIoTimeoutS = 5;
inline constexpr int kMetricsKeepAlive = 100;

class MetricsListener {
 public:
  // Binds `host`:`port` (port 0: any free one) and starts serving. Fails
  // with "cannot listen on HOST:PORT".
  static Result<std::unique_ptr<MetricsListener>> Start(const std::string& host, int port);
  ~MetricsListener();  // stops serving and joins its thread
  MetricsListener(const MetricsListener&) = delete;
  MetricsListener& operator=(const MetricsListener&) = delete;

  int port() const { return port_; }
  // What GET /metrics answers from now on.
  void Publish(std::string text);
  // Scrapes answered with 200 so far.
  int64_t scrapes() const { return scrapes_.load(); }

 private:
  MetricsListener();
  std::unique_ptr<httplib::Server> http_;
  std::thread thread_;
  int port_ = 0;
  mutable std::mutex mu_;
  std::string text_;  // guarded by mu_
  bool published_ = false;  // guarded by mu_
  std::atomic<int64_t> scrapes_{0};
  std::atomic<bool> done_{false};  // the serving thread returned
};

}  // namespace gpupool
