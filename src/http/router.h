// The route table: named handlers by method and path pattern.
//
// A pattern is a path of '/'-separated segments; a segment is a literal,
// `{name}` (any one non-empty segment) or `{name:digits}` (one segment of
// 1 to 19 ASCII digits). Captures are handed to the handler in order. A
// path matches at most one pattern per method: literals win over captures
// segment by segment (`/v1/jobs/stats` before `/v1/jobs/{id}`), so the
// order of Add does not matter. HEAD is served by the GET route.
//
// Threads: Add before the server starts; Find from any thread after.
#pragma once

#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "src/http/exchange.h"

namespace gpupool::http {

// Which workers serve a route (src/http/worker_pool.h): kReserved routes
// (the agent protocol, /healthz) have threads of their own that API traffic
// cannot take.
enum class Lane { kApi, kReserved };

// A handler answers through the exchange, now or later (Exchange::Respond).
// It runs on a worker thread and may block briefly (locks, a file read); it
// must not wait for anything unbounded: to wait, keep the exchange and return.
using Handler = std::function<void(const ExchangePtr&)>;

struct Route {
  std::string method;   // "GET", "POST", "PUT", "DELETE", ...
  std::string pattern;  // e.g. "/v1/jobs/{id:digits}/logs"
  std::string name;     // in metrics and Request::route; empty: the pattern
  Lane lane = Lane::kApi;
  Handler handler;
};

class Router {
 public:
  struct Match {
    const Route* route = nullptr;       // null: no route for this method and path
    std::vector<std::string> captures;  // with a route
    std::string allow;                  // no route but the path is known: its methods, e.g. "GET, PUT"
  };

  // GP_CHECKs that the pattern is well formed and not a duplicate of one
  // already added for that method.
  void Add(Route route);
  Match Find(std::string_view method, std::string_view path) const;
  const std::vector<Route>& routes() const { return routes_; }

 private:
  struct Segment {
    enum class Kind { kLiteral, kAny, kDigits } kind = Kind::kLiteral;
    std::string text;  // the literal
  };
  struct Compiled {
    std::vector<Segment> segments;
  };
  // Whether `path`'s segments match; fills captures; `score` ranks literals first.
  static bool Matches(const Compiled& c, const std::vector<std::string_view>& parts,
                      std::vector<std::string>* captures, uint64_t* score);

  std::vector<Route> routes_;
  std::vector<Compiled> compiled_;  // parallel to routes_
};

}  // namespace gpupool::http
