#include "src/server/watch_hub.h"

#include <algorithm>

namespace gpupool {
namespace {

using nlohmann::json;

http::Response JsonResponse(int status, const json& body) {
  http::Response r;
  r.status = status;
  r.content_type = "application/json";
  r.body = body.dump(-1, ' ', false, json::error_handler_t::replace);
  return r;
}

http::Response ErrorResponse(int status, const std::string& code, const std::string& message,
                             const std::string& field = "") {
  json err{{"code", code}, {"message", message}};
  if (!field.empty()) err["field"] = field;
  return JsonResponse(status, json{{"error", err}});
}

http::Response RetryLater(int status, const std::string& code, const std::string& message) {
  http::Response r = ErrorResponse(status, code, message);
  r.headers.emplace_back("Retry-After", "1");
  return r;
}

}  // namespace

WatchHub::WatchHub(std::string incarnation, WatchHubOptions options)
    : incarnation_(std::move(incarnation)), options_(options) {
  sweeper_ = std::thread([this] { SweepLoop(); });
}

WatchHub::~WatchHub() { Stop(); }

void WatchHub::Stop() {
  {
    std::lock_guard lock(mu_);
    if (stopping_) return;
    stopping_ = true;
    for (auto& [name, e] : nodes_) e.held = Held{};
  }
  cv_.notify_all();
  if (sweeper_.joinable()) sweeper_.join();
}

WatchHubStats WatchHub::stats() const {
  std::lock_guard lock(mu_);
  WatchHubStats s = stats_;
  s.held = 0;
  for (const auto& [name, e] : nodes_) s.held += e.held.exchange != nullptr;
  return s;
}

void WatchHub::Send(std::vector<Answer>& answers) const {
  for (Answer& a : answers) {
    if (a.desired) {
      a.response = ChangesSince(*a.desired, a.full, a.since);
    } else if (a.unchanged) {
      a.response = Unchanged(a.revision);
    }
    a.exchange->Respond(std::move(a.response));
  }
  answers.clear();
}

http::Response WatchHub::ChangesSince(const NodeDesired& d, bool full, int64_t since) const {
  return JsonResponse(200, ToJson(WatchReplyOf(d, incarnation_, full, since)));
}

http::Response WatchHub::Unchanged(int64_t revision) const {
  WatchReply r;
  r.incarnation = incarnation_;
  r.revision = revision;
  r.changed = false;
  return JsonResponse(200, ToJson(r));
}

bool WatchHub::TakeToken(Entry& e, SteadyClock::time_point now) {
  if (e.refilled == SteadyClock::time_point{}) {
    e.tokens = options_.burst;
  } else {
    const double seconds = std::chrono::duration<double>(now - e.refilled).count();
    e.tokens = std::min(options_.burst, e.tokens + seconds * options_.refill_per_s);
  }
  e.refilled = now;
  if (e.tokens < 1) return false;
  e.tokens -= 1;
  return true;
}

void WatchHub::Publish(const std::vector<NodeDesiredPtr>& changes) {
  std::vector<Answer> answers;
  {
    std::lock_guard lock(mu_);
    ready_ = true;
    for (const NodeDesiredPtr& d : changes) {
      Entry& e = nodes_[d->node];
      e.latest = d;
      Held& h = e.held;
      if (!h.exchange) continue;
      if (!d->session.empty() && h.session != d->session) {
        answers.push_back({std::move(h.exchange),
                           ErrorResponse(409, "conflict",
                                         "another agent registered for node '" + d->node +
                                             "' after this one; only the latest may act for it",
                                         "session")});
      } else if (d->revision > h.revision) {
        answers.push_back(Answer{.exchange = std::move(h.exchange), .desired = d, .since = h.revision});
        e.last_answered = std::max(e.last_answered, d->revision);
        ++stats_.answered;
      } else {
        continue;
      }
      h = Held{};
    }
  }
  Send(answers);
}

void WatchHub::Watch(const WatchRequest& r, const http::ExchangePtr& ex) {
  std::vector<Answer> answers;
  const auto now = SteadyClock::now();
  bool hold = false;
  {
    std::lock_guard lock(mu_);
    auto it = nodes_.find(r.node);
    if (stopping_) {
      answers.push_back({ex, RetryLater(503, "unavailable", "the server is shutting down")});
    } else if (!ready_) {
      answers.push_back({ex, RetryLater(503, "unavailable", "the server is starting; retry after a second")});
    } else if (it == nodes_.end() || !it->second.latest) {
      answers.push_back({ex, ErrorResponse(404, "not_found",
                                           "node '" + r.node + "' is not registered (the agent registers first)")});
    } else {
      Entry& e = it->second;
      const NodeDesired& d = *e.latest;
      const bool ours = r.incarnation == incarnation_ && r.revision <= d.revision;
      const bool repeat = ours && r.revision < e.last_answered;
      const bool replaces = e.held.exchange != nullptr;
      if (!d.session.empty() && r.session != d.session) {
        answers.push_back({ex, ErrorResponse(409, "conflict",
                                             "another agent registered for node '" + r.node +
                                                 "' after this one; only the latest may act for it",
                                             "session")});
      } else if ((!ours || repeat || replaces) && !TakeToken(e, now)) {
        ++stats_.limited;
        answers.push_back({ex, RetryLater(429, "rate_limited",
                                          "too many watches for node '" + r.node + "'; retry after a second")});
      } else {
        if (replaces) {  // one watch per node: the newer one stays
          answers.push_back(Answer{.exchange = std::move(e.held.exchange), .unchanged = true,
                                   .revision = e.held.revision});
          e.held = Held{};
        }
        if (!ours || r.revision < d.revision) {
          answers.push_back(Answer{.exchange = ex, .desired = e.latest, .full = !ours, .since = r.revision});
          e.last_answered = std::max(e.last_answered, d.revision);
          ++stats_.answered;
          stats_.resyncs += !ours;
        } else if (r.wait_ms <= 0) {
          answers.push_back(Answer{.exchange = ex, .unchanged = true, .revision = d.revision});
          ++stats_.unchanged;
        } else {
          const auto wait = std::min<std::chrono::milliseconds>(std::chrono::milliseconds(r.wait_ms), options_.max_hold);
          e.held = Held{ex, r.revision, r.session, now + wait};
          hold = true;
        }
      }
    }
  }
  Send(answers);
  // Outside the lock: a watch whose client is gone already runs Drop at once.
  if (hold) ex->OnCancel([this, node = r.node, raw = ex.get()] { Drop(node, raw); });
}

void WatchHub::Drop(const std::string& node, const http::Exchange* exchange) {
  std::lock_guard lock(mu_);
  auto it = nodes_.find(node);
  if (it != nodes_.end() && it->second.held.exchange.get() == exchange) it->second.held = Held{};
}

void WatchHub::SweepLoop() {
  std::unique_lock lock(mu_);
  while (!stopping_) {
    cv_.wait_for(lock, options_.sweep_every, [&] { return stopping_; });
    if (stopping_) break;
    const auto now = SteadyClock::now();
    std::vector<Answer> answers;
    for (auto& [name, e] : nodes_) {
      if (!e.held.exchange || e.held.until > now) continue;
      answers.push_back(Answer{.exchange = std::move(e.held.exchange), .unchanged = true, .revision = e.held.revision});
      e.held = Held{};
      ++stats_.unchanged;
    }
    lock.unlock();
    Send(answers);
    lock.lock();
  }
}

}  // namespace gpupool
