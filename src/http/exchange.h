// One request in flight and its answer, which may come later and from any
// thread: a handler keeps the shared_ptr (in a callback of a command that
// waits to be durable, or of a held watch) and answers when it can.
//
// Contract:
// - Answered exactly once. The first of Respond (a handler), Expire (the
//   layer, at the request's deadline) and Cancel (the layer, when the client
//   went away or the server stops) wins; every later call returns false and
//   does nothing. A handler need not know which happened: Respond returning
//   false is normal.
// - OnCancel's callback runs at most once, and only when the exchange ends
//   without the handler's answer (Expire or Cancel): it lets a held request
//   drop what it holds (a watch registration). It runs on the thread that
//   ended the exchange, after the exchange's lock is released.
// - The object outlives every holder (shared ownership); the network
//   connection is not touched after the answer was handed to `deliver`.
//
// Threads: every method is safe from any thread. Callbacks (deliver,
// on_cancel) must not block and must not call back into this exchange
// except through its public methods.
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>

#include "src/http/message.h"

namespace gpupool::http {

class Exchange {
 public:
  enum class End { kAnswered, kExpired, kCancelled };
  // `deliver` takes the final answer to the network (the layer's; a test's).
  // It is called once, with the lock released, by whichever thread ended the
  // exchange.
  Exchange(Request request, std::function<void(Exchange&)> deliver);
  Exchange(const Exchange&) = delete;
  Exchange& operator=(const Exchange&) = delete;

  const Request& request() const { return request_; }
  std::chrono::steady_clock::time_point received() const { return received_; }

  // The handler's answer; false when the exchange had already ended.
  bool Respond(Response response);
  // The layer's: `response` is the timeout answer (kExpired) or the answer a
  // gone client will not read, or the stopping answer (kCancelled).
  bool Expire(Response response);
  bool Cancel(Response response);

  // Runs `f` when the exchange ends by Expire or Cancel (at once, on this
  // thread, when it already has); never after a Respond. One callback: a
  // second call replaces the first.
  void OnCancel(std::function<void()> f);

  bool ended() const;
  // How it ended; empty while in flight.
  std::optional<End> end() const;
  // The answer, once ended (the layer reads it to send it).
  std::optional<Response> TakeResponse();

 private:
  bool Finish(Response response, End end);

  const Request request_;
  const std::chrono::steady_clock::time_point received_;
  mutable std::mutex mu_;
  std::optional<End> end_;                     // guarded by mu_
  std::optional<Response> response_;           // guarded by mu_
  std::function<void()> on_cancel_;            // guarded by mu_
  std::function<void(Exchange&)> deliver_;     // guarded by mu_; taken by the ending call
};

using ExchangePtr = std::shared_ptr<Exchange>;

}  // namespace gpupool::http
