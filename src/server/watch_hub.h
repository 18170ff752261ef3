// The server's half of the agent protocol's watch (issue 18): each agent of
// protocol 2 keeps one request, POST /v1/agent/watch, that this hub holds
// (no thread waits: the HTTP layer's Exchange is kept and answered later)
// and answers as soon as its node's desired state gets a revision past the
// one the watch names.
//
// What a watch with revision R of incarnation I gets:
//  - I is this server's and R is the node's latest: held until a newer
//    revision is published (then the tasks changed after R, every task's
//    key and every scrub), or until its hold ends (min(wait_ms, max_hold);
//    then `changed: false`, and the agent asks again);
//  - I is this server's and R is older: the changes after R, at once (a
//    reply that was lost is recovered so: the agent still names R);
//  - R from the future or I another incarnation's (a restarted server, a
//    confused agent): the whole state at once (`full`), never an error;
//  - a session other than the node's latest registration's: 409, as for a
//    heartbeat (the agent was superseded); an empty session on the server's
//    side (it restarted and no heartbeat has come yet) accepts any;
//  - a node the server does not know: 404 (the agent registers again);
//    before the first publication after start-up: 503, Retry-After: 1.
// Many changes published together, or while the agent's next watch is on
// its way, go out in one answer: the agent asks with the revision it has.
//
// Reconnect floods are limited per node (a token bucket: `burst` tokens,
// `refill_per_s` back a second): a token is spent by a watch that replaces
// one still held, by a resync, and by a watch that names a revision older
// than the node was last answered with (a repeat); a well-behaved agent
// spends one after a cut connection or a server restart. Without a token:
// 429 with Retry-After: 1.
//
// Threads: every method is safe from any thread. Publish is called by the
// core's publisher thread (before the replies of the same group, so that
// an agent never hears of a revision the hub does not have), Watch by HTTP
// workers; answers are sent on the thread that decides them, outside the
// hub's lock. A sweeper thread ends holds.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "src/http/exchange.h"
#include "src/server/desired_state.h"

namespace gpupool {

struct WatchHubOptions {
  std::chrono::milliseconds max_hold{std::chrono::seconds(25)};  // below the HTTP request_timeout
  double burst = 20;                                              // tokens per node
  double refill_per_s = 2;
  std::chrono::milliseconds sweep_every{200};  // how often ended holds are answered
};

struct WatchHubStats {
  int64_t held = 0;       // watches held now
  int64_t answered = 0;   // answers with changes so far
  int64_t resyncs = 0;    // of which full (bad revision or incarnation)
  int64_t unchanged = 0;  // holds that ended without a change
  int64_t limited = 0;    // 429s
};

class WatchHub {
 public:
  // `incarnation`: this server run's (the one AgentService's replies carry).
  WatchHub(std::string incarnation, WatchHubOptions options);
  ~WatchHub();
  WatchHub(const WatchHub&) = delete;
  WatchHub& operator=(const WatchHub&) = delete;

  const std::string& incarnation() const { return incarnation_; }
  // New revisions of nodes' desired states (each node's newer than the last).
  void Publish(const std::vector<NodeDesiredPtr>& changes);
  // A watch of the node its token names (request.node is checked by the caller).
  void Watch(const WatchRequest& request, const http::ExchangePtr& ex);
  // Ends the sweeper and forgets held watches (the HTTP layer answers them
  // as it stops). Idempotent; the destructor calls it.
  void Stop();
  WatchHubStats stats() const;

 private:
  using SteadyClock = std::chrono::steady_clock;
  struct Held {
    http::ExchangePtr exchange;
    int64_t revision = 0;
    std::string session;
    SteadyClock::time_point until;
  };
  struct Entry {
    NodeDesiredPtr latest;
    Held held;  // exchange null: none
    int64_t last_answered = 0;
    double tokens = 0;
    SteadyClock::time_point refilled{};
  };
  // An answer decided under the lock, built and sent after it is released:
  // `response` as it is, or the changes of `desired`, or (`desired` null
  // and `unchanged`) a hold that ended at `revision`.
  struct Answer {
    http::ExchangePtr exchange;
    http::Response response;
    NodeDesiredPtr desired;
    bool full = false;
    int64_t since = 0;
    bool unchanged = false;
    int64_t revision = 0;
  };

  bool TakeToken(Entry& e, SteadyClock::time_point now);
  http::Response ChangesSince(const NodeDesired& d, bool full, int64_t since) const;
  http::Response Unchanged(int64_t revision) const;
  void Drop(const std::string& node, const http::Exchange* exchange);
  void SweepLoop();
  void Send(std::vector<Answer>& answers) const;

  const std::string incarnation_;
  const WatchHubOptions options_;
  mutable std::mutex mu_;
  std::map<std::string, Entry, std::less<>> nodes_;  // guarded by mu_
  bool ready_ = false;                               // guarded by mu_: a first publication came
  bool stopping_ = false;                            // guarded by mu_
  WatchHubStats stats_;                              // guarded by mu_ (held: counted on demand)
  std::condition_variable cv_;
  std::thread sweeper_;
};

}  // namespace gpupool
