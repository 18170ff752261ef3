#include "src/agent/metrics_listener.h"

namespace gpupool {

MetricsListener::MetricsListener() {
  http::ServerOptions o;
  o.workers = http::WorkerOptions{.threads = kMetricsThreads, .reserved = 0, .queue_length = 64};
  http_ = std::make_unique<http::Server>(std::move(o));
}

MetricsListener::~MetricsListener() { http_->Stop(); }

Result<std::unique_ptr<MetricsListener>> MetricsListener::Start(const std::string& host, int port,
                                                                std::optional<http::TlsIdentity> tls) {
  std::unique_ptr<MetricsListener> l(new MetricsListener());
  MetricsListener* self = l.get();
  l->http_->Add(http::Route{"GET", "/metrics", "", http::Lane::kApi,
                            [self](const http::ExchangePtr& ex) { self->Scrape(ex); }});
  http::Limits limits;
  limits.max_connections = kMetricsConnections;
  limits.max_connections_per_client = kMetricsConnectionsPerClient;
  limits.max_body_bytes = 1024;
  limits.idle_timeout = kMetricsIoTimeout;
  limits.header_timeout = kMetricsIoTimeout;
  limits.body_timeout = kMetricsIoTimeout;
  limits.request_timeout = kMetricsIoTimeout;
  GP_ASSIGN_OR_RETURN(l->port_, l->http_->Listen(host, port, limits, /*reserved_only=*/false, std::move(tls)));
  GP_TRY(l->http_->Start());
  return l;
}

void MetricsListener::Scrape(const http::ExchangePtr& ex) {
  http::Response res;
  {
    std::lock_guard lock(mu_);
    if (!published_) {
      res.status = 503;
      res.body = "no reading yet: the agent publishes its first at its first heartbeat\n";
      ex->Respond(std::move(res));
      return;
    }
    res.body = text_;
  }
  ++scrapes_;
  res.content_type = "text/plain; version=0.0.4; charset=utf-8";
  ex->Respond(std::move(res));
}

void MetricsListener::Publish(std::string text) {
  std::lock_guard lock(mu_);
  text_ = std::move(text);
  published_ = true;
}

}  // namespace gpupool
