#include "src/agent/metrics_listener.h"

#include <httplib.h>

#include <chrono>

namespace gpupool {

MetricsListener::MetricsListener() : http_(std::make_unique<httplib::Server>()) {}

MetricsListener::~MetricsListener() {
  if (thread_.joinable()) {
    // stop() does nothing until the server runs.
    while (!http_->is_running() && !done_) std::this_thread::sleep_for(std::chrono::milliseconds(5));
    http_->stop();
    thread_.join();
  }
}

Result<std::unique_ptr<MetricsListener>> MetricsListener::Start(const std::string& host, int port) {
  std::unique_ptr<MetricsListener> l(new MetricsListener());
  httplib::Server& s = *l->http_;
  s.new_task_queue = [] { return new httplib::ThreadPool(kMetricsThreads); };
  s.set_read_timeout(kMetricsIoTimeoutS, 0);
  s.set_write_timeout(kMetricsIoTimeoutS, 0);
  s.set_idle_interval(0, 100000);
  s.set_keep_alive_max_count(kMetricsKeepAlive);
  s.set_keep_alive_timeout(kMetricsIoTimeoutS);
  s.set_payload_max_length(1024);
  MetricsListener* self = l.get();
  s.Get("/metrics", [self](const httplib::Request&, httplib::Response& res) {
    std::string text;
    {
      std::lock_guard lock(self->mu_);
      if (!self->published_) {
        res.status = 503;
        res.set_content("no reading yet: the agent publishes its first at its first heartbeat\n", "text/plain");
        return;
      }
      text = self->text_;
    }
    ++self->scrapes_;
    res.set_content(std::move(text), "text/plain; version=0.0.4; charset=utf-8");
  });
  const int bound = port == 0 ? s.bind_to_any_port(host) : (s.bind_to_port(host, port) ? port : -1);
  if (bound < 0) return IoError("cannot listen on " + host + ":" + std::to_string(port));
  l->port_ = bound;
  l->thread_ = std::thread([self] {
    self->http_->listen_after_bind();
    self->done_ = true;
  });
  return l;
}

void MetricsListener::Publish(std::string text) {
  std::lock_guard lock(mu_);
  text_ = std::move(text);
  published_ = true;
}

}  // namespace gpupool
