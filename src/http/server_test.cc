#include "src/http/server.h"

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <httplib.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <future>
#include <latch>
#include <thread>

namespace gpupool::http {
namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

// A raw client socket on 127.0.0.1, for what an HTTP client library will not do.
class RawClient {
 public:
  explicit RawClient(int port) {
    fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(static_cast<uint16_t>(port));
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    connected_ = ::connect(fd_, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0;
  }
  ~RawClient() { Close(); }
  void Close() {
    if (fd_ >= 0) ::close(fd_);
    fd_ = -1;
  }
  bool connected() const { return connected_; }
  bool Send(const std::string& s) { return ::send(fd_, s.data(), s.size(), MSG_NOSIGNAL) == static_cast<ssize_t>(s.size()); }
  // Reads until the peer closes, `until` appears, or `timeout` passes. closed() tells which.
  std::string Read(std::chrono::milliseconds timeout, const std::string& until = "") {
    std::string out;
    const auto end = Clock::now() + timeout;
    closed_ = false;
    while (Clock::now() < end) {
      pollfd p{fd_, POLLIN, 0};
      const int left = static_cast<int>(std::chrono::duration_cast<std::chrono::milliseconds>(end - Clock::now()).count());
      if (::poll(&p, 1, std::max(left, 1)) <= 0) continue;
      char buf[4096];
      const ssize_t n = ::recv(fd_, buf, sizeof buf, 0);
      if (n <= 0) {
        closed_ = true;
        break;
      }
      out.append(buf, static_cast<size_t>(n));
      if (!until.empty() && out.find(until) != std::string::npos) break;
    }
    return out;
  }
  bool closed() const { return closed_; }

 private:
  int fd_ = -1;
  bool connected_ = false;
  bool closed_ = false;
};

Response Text(int status, std::string body) {
  Response r;
  r.status = status;
  r.body = std::move(body);
  return r;
}

struct Fixture {
  explicit Fixture(Limits limits = {}, WorkerOptions workers = {}, std::chrono::milliseconds sweep = 20ms) {
    ServerOptions o;
    o.workers = workers;
    o.sweep_every = sweep;
    o.on_complete = [this](const Completion& c) {
      std::lock_guard lock(mu);
      completions.emplace_back(c.request->route, c.status);
    };
    server = std::make_unique<Server>(std::move(o));
    this->limits = limits;
  }
  void Start(bool reserved_only_second = false) {
    auto p = server->Listen("127.0.0.1", 0, limits);
    ASSERT_TRUE(p.has_value()) << p.error().message;
    port = *p;
    if (reserved_only_second) {
      auto q = server->Listen("127.0.0.1", 0, limits, /*reserved_only=*/true);
      ASSERT_TRUE(q.has_value());
      reserved_port = *q;
    }
    ASSERT_TRUE(server->Start().has_value());
  }
  std::vector<std::pair<std::string, int>> Completions() {
    std::lock_guard lock(mu);
    return completions;
  }
  Limits limits;
  std::unique_ptr<Server> server;
  int port = 0, reserved_port = 0;
  std::mutex mu;
  std::vector<std::pair<std::string, int>> completions;
};

Handler Echo() {
  return [](const ExchangePtr& ex) {
    const Request& r = ex->request();
    std::string s = r.method + " " + r.path;
    for (const auto& c : r.captures) s += " [" + c + "]";
    if (r.HasParam("q")) s += " q=" + r.Param("q");
    s += " body=" + std::to_string(r.body.size());
    ex->Respond(Text(200, s));
  };
}

TEST(HttpServerTest, RoutesCapturesKeepAliveAndMetricsHook) {
  Fixture f;
  f.server->Add(Route{"GET", "/things/{id:digits}", "thing", Lane::kApi, Echo()});
  f.server->Add(Route{"POST", "/things", "", Lane::kApi, Echo()});
  f.Start();
  httplib::Client c("127.0.0.1", f.port);
  c.set_keep_alive(true);
  auto r = c.Get("/things/42?q=a%20b");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 200);
  EXPECT_EQ(r->body, "GET /things/42 [42] q=a b body=0");
  r = c.Post("/things", std::string(5000, 'x'), "application/json");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->body, "POST /things body=5000");
  r = c.Get("/things/x1");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 404);
  r = c.Put("/things/7", "", "text/plain");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 405);
  EXPECT_EQ(r->get_header_value("Allow"), "GET");
  r = c.Get("/things/8");  // the same connection still serves after 404 and 405
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 200);
  const auto done = f.Completions();
  ASSERT_EQ(done.size(), 5u);
  EXPECT_EQ(done[0], std::make_pair(std::string("thing"), 200));
  EXPECT_EQ(done[1], std::make_pair(std::string("/things"), 200));
  EXPECT_EQ(done[2], std::make_pair(std::string(""), 404));
  EXPECT_EQ(done[3], std::make_pair(std::string(""), 405));
}

TEST(HttpServerTest, AnswersFromAnotherThreadLater) {
  Fixture f;
  std::mutex mu;
  std::vector<ExchangePtr> held;
  f.server->Add(Route{"GET", "/later", "", Lane::kApi, [&](const ExchangePtr& ex) {
                        std::lock_guard lock(mu);
                        held.push_back(ex);
                      }});
  f.Start();
  std::thread answerer([&] {
    for (int i = 0; i < 500; ++i) {
      std::this_thread::sleep_for(10ms);
      std::lock_guard lock(mu);
      if (held.size() == 3) break;
    }
    std::this_thread::sleep_for(100ms);
    std::lock_guard lock(mu);
    for (size_t i = 0; i < held.size(); ++i) EXPECT_TRUE(held[i]->Respond(Text(200, "answer " + std::to_string(i))));
    for (auto& ex : held) EXPECT_FALSE(ex->Respond(Text(200, "twice")));  // answered once
  });
  // Three requests wait at once on a pool of workers that is not blocked by them.
  std::vector<std::future<httplib::Result>> calls;
  for (int i = 0; i < 3; ++i) {
    calls.push_back(std::async(std::launch::async, [&] { return httplib::Client("127.0.0.1", f.port).Get("/later"); }));
  }
  std::set<std::string> bodies;
  for (auto& c : calls) {
    auto r = c.get();
    ASSERT_TRUE(r);
    EXPECT_EQ(r->status, 200);
    bodies.insert(r->body);
  }
  answerer.join();
  EXPECT_EQ(bodies.size(), 3u);
}

TEST(HttpServerTest, ClientGoingAwayCancelsThePendingExchange) {
  Fixture f;
  std::promise<void> cancelled;
  ExchangePtr held;
  std::latch got(1);
  f.server->Add(Route{"GET", "/watch", "", Lane::kApi, [&](const ExchangePtr& ex) {
                        held = ex;
                        ex->OnCancel([&] { cancelled.set_value(); });
                        got.count_down();
                      }});
  f.Start();
  RawClient c(f.port);
  ASSERT_TRUE(c.Send("GET /watch HTTP/1.1\r\nHost: x\r\n\r\n"));
  got.wait();
  const auto t0 = Clock::now();
  c.Close();
  ASSERT_EQ(cancelled.get_future().wait_for(2s), std::future_status::ready);
  EXPECT_LT(Clock::now() - t0, 1s);
  EXPECT_EQ(held->end(), Exchange::End::kCancelled);
  EXPECT_FALSE(held->Respond(Text(200, "too late")));
  // Counted once Cancel returns (the callback ran inside it).
  for (int i = 0; i < 100 && (f.server->stats().pending > 0 || f.server->stats().clients_gone == 0); ++i) {
    std::this_thread::sleep_for(10ms);
  }
  EXPECT_EQ(f.server->stats().pending, 0);
  EXPECT_EQ(f.server->stats().clients_gone, 1);
}

TEST(HttpServerTest, UnansweredRequestTimesOutWith504) {
  Limits l;
  l.request_timeout = 1s;
  Fixture f(l);
  std::vector<ExchangePtr> held;
  f.server->Add(Route{"GET", "/never", "", Lane::kApi, [&](const ExchangePtr& ex) { held.push_back(ex); }});
  f.Start();
  const auto t0 = Clock::now();
  auto r = httplib::Client("127.0.0.1", f.port).Get("/never");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 504);
  EXPECT_GE(Clock::now() - t0, 1s);
  EXPECT_LT(Clock::now() - t0, 3s);
  // Counted after the answer is handed to the connection, so the client can read it first.
  for (int i = 0; i < 100 && f.server->stats().timed_out == 0; ++i) std::this_thread::sleep_for(10ms);
  EXPECT_EQ(f.server->stats().timed_out, 1);
}

TEST(HttpServerTest, OversizedBodyIsRefusedBeforeItIsReadAndTheConnectionCloses) {
  Limits l;
  l.max_body_bytes = 1000;
  Fixture f(l);
  std::atomic<int> ran{0};
  f.server->Add(Route{"POST", "/in", "", Lane::kApi, [&](const ExchangePtr& ex) {
                        ++ran;
                        ex->Respond(Text(200, "ok"));
                      }});
  f.Start();
  RawClient c(f.port);
  // Headers only: the answer comes without any of the body being sent.
  ASSERT_TRUE(c.Send("POST /in HTTP/1.1\r\nHost: x\r\nContent-Length: 1001\r\n\r\n"));
  const std::string answer = c.Read(2s);
  EXPECT_EQ(answer.rfind("HTTP/1.1 413", 0), 0u) << answer;
  EXPECT_TRUE(c.closed());
  // A chunked body that grows past the limit closes the connection.
  RawClient d(f.port);
  ASSERT_TRUE(d.Send("POST /in HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n"));
  for (int i = 0; i < 3; ++i) d.Send("258\r\n" + std::string(600, 'x') + "\r\n");
  d.Read(2s);
  EXPECT_TRUE(d.closed());
  EXPECT_EQ(ran.load(), 0);
  // At the limit it is served.
  auto r = httplib::Client("127.0.0.1", f.port).Post("/in", std::string(1000, 'x'), "text/plain");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 200);
}

// Issue 22's fuzzer: a Transfer-Encoding other than `chunked` (or
// `chunked, chunked`) left the request waiting for a body until the body
// deadline; one beside a Content-Length, or two different Content-Lengths,
// were read one way and kept alive. Each is refused at once, unread.
TEST(HttpServerTest, ABodyOfAmbiguousLengthIsRefusedAtOnceAndTheConnectionCloses) {
  Fixture f;
  std::atomic<int> ran{0};
  f.server->Add(Route{"POST", "/in", "", Lane::kApi, [&](const ExchangePtr& ex) {
                        ++ran;
                        ex->Respond(Text(200, "ok"));
                      }});
  f.Start();
  const std::vector<std::string> framings = {
      "Transfer-Encoding: gzip\r\n\r\n{}",
      "Transfer-Encoding: identity\r\nContent-Length: 2\r\n\r\n{}",
      "Transfer-Encoding: chunked, chunked\r\n\r\n2\r\n{}\r\n0\r\n\r\n",
      "Transfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n\r\n2\r\n{}\r\n0\r\n\r\n",
      "Content-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n",
      "Content-Length: 2\r\nContent-Length: 3\r\n\r\n{}",
  };
  for (const std::string& framing : framings) {
    RawClient c(f.port);
    ASSERT_TRUE(c.Send("POST /in HTTP/1.1\r\nHost: x\r\n" + framing));
    const auto start = Clock::now();
    const std::string answer = c.Read(5s);
    EXPECT_EQ(answer.rfind("HTTP/1.1 400", 0), 0u) << framing << ": " << answer;
    EXPECT_TRUE(c.closed()) << framing;
    EXPECT_LT(Clock::now() - start, 2s) << framing;
  }
  EXPECT_EQ(ran.load(), 0);
  // One chunked coding, any case, and equal repeated lengths are served.
  for (const std::string framing : {"Transfer-Encoding: Chunked\r\n\r\n2\r\n{}\r\n0\r\n\r\n",
                                    "Content-Length: 2\r\nContent-Length: 2\r\n\r\n{}"}) {
    RawClient c(f.port);
    ASSERT_TRUE(c.Send("POST /in HTTP/1.1\r\nHost: x\r\n" + framing));
    EXPECT_EQ(c.Read(2s, "ok").rfind("HTTP/1.1 200", 0), 0u) << framing;
  }
}

TEST(HttpServerTest, OversizedHeadersGet431AndTheConnectionCloses) {
  Limits l;
  l.max_header_bytes = 4096;
  Fixture f(l);
  f.server->Add(Route{"GET", "/x", "", Lane::kApi, Echo()});
  f.Start();
  RawClient c(f.port);
  ASSERT_TRUE(c.Send("GET /x HTTP/1.1\r\nHost: x\r\nX-Big: " + std::string(3 * 4096, 'a') + "\r\n\r\n"));
  const std::string answer = c.Read(2s);
  EXPECT_EQ(answer.rfind("HTTP/1.1 431", 0), 0u) << answer.substr(0, 80);
  EXPECT_TRUE(c.closed());
  RawClient d(f.port);
  ASSERT_TRUE(d.Send("GET /x HTTP/1.1\r\nHost: x\r\nX-Small: " + std::string(1000, 'a') + "\r\n\r\n"));
  EXPECT_EQ(d.Read(2s, "body=0").rfind("HTTP/1.1 200", 0), 0u);
}

TEST(HttpServerTest, SlowHeadersBodiesAndIdleConnectionsAreClosedAtTheirDeadlines) {
  Limits l;
  l.header_timeout = 1s;
  l.body_timeout = 1s;
  // Longer, so that the library's own inactivity timeout (idle_timeout) does
  // not close the silent and the slow-body connections before their deadlines.
  l.idle_timeout = 2s;
  Fixture f(l);
  f.server->Add(Route{"POST", "/in", "", Lane::kApi, Echo()});
  f.Start();
  RawClient slow_header(f.port), slow_body(f.port), silent(f.port), idle(f.port);
  const auto t0 = Clock::now();
  ASSERT_TRUE(slow_header.Send("POST /in HTTP/1.1\r\nHost: x\r\n"));
  ASSERT_TRUE(slow_body.Send("POST /in HTTP/1.1\r\nHost: x\r\nContent-Length: 10\r\n\r\nabc"));
  ASSERT_TRUE(idle.Send("POST /in HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\n\r\n"));
  EXPECT_NE(idle.Read(1s, "body=0").find("200"), std::string::npos);
  // The slow header keeps trickling: activity does not extend its deadline.
  for (int i = 0; i < 4; ++i) {
    std::this_thread::sleep_for(300ms);
    slow_header.Send("X-A: b\r\n");
  }
  for (RawClient* c : {&slow_header, &slow_body, &silent, &idle}) {
    c->Read(5s);
    EXPECT_TRUE(c->closed());
  }
  EXPECT_LT(Clock::now() - t0, 5s);
  EXPECT_GE(f.server->stats().deadline_closed, 3);
}

TEST(HttpServerTest, ConnectionsPerClientAreCapped) {
  Limits l;
  l.max_connections_per_client = 4;
  Fixture f(l);
  f.server->Add(Route{"GET", "/x", "", Lane::kApi, Echo()});
  f.Start();
  std::vector<std::unique_ptr<RawClient>> held;
  for (int i = 0; i < 4; ++i) held.push_back(std::make_unique<RawClient>(f.port));
  for (int i = 0; i < 50 && f.server->stats().connections < 4; ++i) std::this_thread::sleep_for(10ms);
  EXPECT_EQ(f.server->stats().connections, 4);
  RawClient extra(f.port);
  ASSERT_TRUE(extra.connected());  // the kernel accepts; the server closes it at once
  extra.Send("GET /x HTTP/1.1\r\nHost: x\r\n\r\n");
  extra.Read(2s);
  EXPECT_TRUE(extra.closed());
  held.clear();
  for (int i = 0; i < 100 && f.server->stats().connections > 0; ++i) std::this_thread::sleep_for(10ms);
  auto r = httplib::Client("127.0.0.1", f.port).Get("/x");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 200);
}

TEST(HttpServerTest, FullQueueShedsWith503AndReservedRoutesKeepTheirThreads) {
  Fixture f(Limits{}, WorkerOptions{.threads = 2, .reserved = 1, .queue_length = 1});
  std::promise<void> release;
  std::shared_future<void> gate = release.get_future().share();
  std::atomic<int> blocked{0};
  f.server->Add(Route{"GET", "/slow", "", Lane::kApi, [&, gate](const ExchangePtr& ex) {
                        ++blocked;
                        gate.wait();
                        ex->Respond(Text(200, "slow"));
                      }});
  f.server->Add(Route{"GET", "/healthz", "", Lane::kReserved, Echo()});
  f.Start(/*reserved_only_second=*/true);
  // One API request runs (its lane's one thread), one waits in the queue, the third is shed.
  auto first = std::async(std::launch::async, [&] { return httplib::Client("127.0.0.1", f.port).Get("/slow"); });
  for (int i = 0; i < 200 && blocked.load() < 1; ++i) std::this_thread::sleep_for(5ms);
  auto second = std::async(std::launch::async, [&] { return httplib::Client("127.0.0.1", f.port).Get("/slow"); });
  std::this_thread::sleep_for(100ms);
  auto third = httplib::Client("127.0.0.1", f.port).Get("/slow");
  ASSERT_TRUE(third);
  EXPECT_EQ(third->status, 503);
  EXPECT_EQ(third->get_header_value("Retry-After"), "1");
  // The reserved thread still serves /healthz, on either listener.
  for (int port : {f.port, f.reserved_port}) {
    const auto t0 = Clock::now();
    auto h = httplib::Client("127.0.0.1", port).Get("/healthz");
    ASSERT_TRUE(h);
    EXPECT_EQ(h->status, 200);
    EXPECT_LT(Clock::now() - t0, 500ms);
  }
  // The reserved-only listener serves no API route.
  auto api = httplib::Client("127.0.0.1", f.reserved_port).Get("/slow");
  ASSERT_TRUE(api);
  EXPECT_EQ(api->status, 404);
  release.set_value();
  EXPECT_EQ(first.get()->status, 200);
  EXPECT_EQ(second.get()->status, 200);
  EXPECT_EQ(f.server->stats().shed, 1);
}

TEST(HttpServerTest, IdleConnectionsCostNoThread) {
  Fixture f(Limits{}, WorkerOptions{.threads = 2, .reserved = 1, .queue_length = 16});
  f.server->Add(Route{"GET", "/healthz", "", Lane::kReserved, Echo()});
  f.Start();
  std::vector<std::unique_ptr<RawClient>> idle;
  for (int i = 0; i < 200; ++i) {
    idle.push_back(std::make_unique<RawClient>(f.port));
    if (i % 2) idle.back()->Send("GET /healthz HTTP/1.1\r\nHost: x\r\n");  // headers never finished
  }
  for (int i = 0; i < 5; ++i) {
    const auto t0 = Clock::now();
    auto h = httplib::Client("127.0.0.1", f.port).Get("/healthz");
    ASSERT_TRUE(h);
    EXPECT_EQ(h->status, 200);
    EXPECT_LT(Clock::now() - t0, 100ms);
  }
}

TEST(HttpServerTest, StopAnswersPendingExchanges) {
  Fixture f;
  ExchangePtr held;
  std::latch got(1);
  f.server->Add(Route{"GET", "/hold", "", Lane::kApi, [&](const ExchangePtr& ex) {
                        held = ex;
                        got.count_down();
                      }});
  f.Start();
  RawClient c(f.port);
  ASSERT_TRUE(c.Send("GET /hold HTTP/1.1\r\nHost: x\r\n\r\n"));
  got.wait();
  f.server->Stop();
  EXPECT_EQ(held->end(), Exchange::End::kCancelled);
  EXPECT_FALSE(held->Respond(Text(200, "after stop")));
}

}  // namespace
}  // namespace gpupool::http
