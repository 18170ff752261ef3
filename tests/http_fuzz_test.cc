// The API fuzzer (issue 22, "no 5xx on bad input"): the real server binary,
// and requests drawn from a seeded Rng over every operation of
// docs/api/openapi.yaml (and the agent routes beyond it), methods a path
// does not declare, odd paths and malformed HTTP, with each kind of token
// (tests/http_fuzz_requests.h), sent over raw sockets
// (tests/http_fuzz_client.h) with a 5 s deadline each.
//
// It checks, for every request:
// - no answer of 500 or more (the API documents 503 only for a full queue,
//   a stopping server and a failing journal, none of which a fuzzer
//   causes), and no hang (no answer within the deadline). The one 5xx
//   allowed is the HTTP library's own 505 to a request line that names
//   another major version than 1 (HTTP/0.9, HTTP/2.0): RFC 9110's answer
//   to a version the server does not speak, which libmicrohttpd gives
//   before any code of ours runs;
// - every 4xx of the API (an answer carrying X-Request-Id, which the API
//   puts on all of its own) has the JSON error body: {"error": {"code",
//   "message", optional "field"}}, and every 400 `invalid_argument` names
//   its field; a JSON 2xx parses;
// - the HTTP library answers alone (no X-Request-Id) only requests that are
//   not well-formed HTTP, and then with a 4xx; a connection closes without
//   an answer only where the request's framing allows it (a body cut
//   short, one over the size limit, a malformed request);
// and, throughout, that /healthz answers every probe (one each 100 ms, on
// its own connection) within 100 ms, and that the server is alive at the
// end.
//
// GPUPOOL_HTTP_FUZZ_REQUESTS (default 10,000: `make test`; `make fuzz`
// sends 100,000), GPUPOOL_HTTP_FUZZ_SEED (default 22), and
// GPUPOOL_HTTP_FUZZ_CLIENTS (parallel connections, default 2);
// GPUPOOL_HTTP_FUZZ_TRACE="POST /v1/jobs" prints every answer to one kind
// of request with the request (to see how deep the requests reach);
// GPUPOOL_HTTP_FUZZ_ONLY=I sends request I alone. Request i
// is drawn from its own Rng (the seed and i), so a failure report (seed,
// index and the request's bytes) reproduces it. The rate limits are raised
// far above what the fuzzer sends (the limits have their own test,
// tests/server_rate_limit_test.cc), so that requests reach the handlers;
// request_timeout is 4 s (a held agent watch then ends within 2 s, inside
// the client's deadline), header_timeout and body_timeout 2 s: a request
// that never completes (a body shorter than its Content-Length, then the
// end of the stream; empty lines and no request line) is parked on its
// connection and must be answered or closed by that deadline (the HTTP
// library does not notice the end of a stream mid-body; the deadline
// closes it).
#include <gtest/gtest.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <deque>
#include <functional>
#include <fstream>
#include <iostream>
#include <map>
#include <mutex>
#include <sstream>
#include <thread>

#include "src/client/json_yaml.h"
#include "tests/configured_server.h"
#include "tests/http_fuzz_client.h"
#include "tests/http_fuzz_requests.h"

namespace gpupool::testing {
namespace {

using nlohmann::json;
using Clock = std::chrono::steady_clock;
using namespace std::chrono_literals;

constexpr auto kDeadline = 5s;             // per request: past it, a hang
constexpr auto kProbeEvery = 100ms;
constexpr auto kProbeBudget = 100ms;
constexpr size_t kMaxReported = 20;        // failures printed in full
constexpr size_t kSlowest = 5;             // the slowest answers, in the summary
constexpr size_t kMaxProbeTimes = 100000;  // /healthz times kept for the quantiles (2.8 h of probes)
constexpr int64_t kCoverageRequests = 5000;
constexpr int kClientNice = 10;             // the client threads' niceness (the probe's stays 0)  // runs of at least this many must get a 2xx from every operation

constexpr const char* kConfig = R"(name: http-fuzz
engine: {heartbeat_timeout: 0s}
job_labels: [web, db]
node_classes:
  - name: nvlink
    gpu: {interconnect_gbps: 900}
requirements:
  - name: nvlink
    min: {interconnect_gbps: 600}
pools:
  - name: default
server:
  tick: 200ms
  default_image: host
  http:
    request_timeout: 4s
    header_timeout: 2s
    body_timeout: 2s
    token_requests_per_s: 1000000
    token_request_burst: 10000000
    failed_auth_per_s: 1000000
    failed_auth_burst: 10000000
)";

int64_t EnvInt(const char* name, int64_t fallback) {
  const char* v = std::getenv(name);
  if (v == nullptr || *v == '\0') return fallback;
  char* end = nullptr;
  const long long x = std::strtoll(v, &end, 10);
  return end != nullptr && *end == '\0' && x >= 0 ? x : fallback;
}

// Request i's own Rng: the seed and the index, mixed by the Rng's seeding.
Rng RngFor(uint64_t seed, uint64_t i) { return Rng(seed * 0x9e3779b97f4a7c15ULL + i); }

// What is wrong with an API answer's body, or empty: a 4xx without the
// error object, a 400 invalid_argument naming no field, a JSON 2xx that
// does not parse.
std::string BodyProblem(const RawAnswer& a) {
  const std::string body = a.body.substr(0, 300);
  const json j = json::parse(a.body, nullptr, false);
  if (a.status < 400) {
    const bool json_type = a.Header("Content-Type").starts_with("application/json");
    return json_type && j.is_discarded() ? "status " + std::to_string(a.status) + " with a body that is not JSON: " + body
                                         : "";
  }
  const json* e = j.is_object() && j.contains("error") ? &j["error"] : nullptr;
  if (e == nullptr || !e->is_object() || !e->contains("code") || !(*e)["code"].is_string() ||
      !e->contains("message") || !(*e)["message"].is_string() || (e->contains("field") && !(*e)["field"].is_string())) {
    return "status " + std::to_string(a.status) + " without the JSON error body: " + body;
  }
  if (a.status == 400 && (*e)["code"] == "invalid_argument" && !e->contains("field")) {
    return "a 400 invalid_argument that names no field: " + body;
  }
  return "";
}

// What is wrong with one answer to `r` (the first, or one to its trailing
// bytes), or empty.
std::string Problem(const FuzzRequest& r, const RawAnswer& a, bool first) {
  using O = RawAnswer::Outcome;
  if (a.outcome == O::kTimeout) return "no answer within 5 s (a hang)";
  if (a.outcome == O::kConnectFailed) return "could not connect: " + a.detail;
  if (a.outcome == O::kMalformed) return "a malformed answer: " + a.detail;
  if (a.outcome == O::kClosed) {
    const bool allowed = !first || r.expect.may_close || r.expect.library_answers;
    return allowed ? "" : "the connection closed without an answer";
  }
  const bool from_api = a.Has("X-Request-Id");  // the API tags every answer of its own
  if (a.status == 505 && !from_api && r.expect.other_http_version) return "";
  if (a.status >= 500) return "status " + std::to_string(a.status) + ": " + a.body.substr(0, 300);
  if (!from_api) {
    if (first && !r.expect.library_answers) {
      return "the HTTP library answered, not the API (no X-Request-Id): " + std::to_string(a.status);
    }
    return a.status >= 400 ? "" : "the HTTP library answered " + std::to_string(a.status) + " to a malformed request";
  }
  return first && r.method == "HEAD" ? "" : BodyProblem(a);
}

// Counts and failures, shared by the client threads.
struct Tally {
  std::mutex mu;
  std::map<int, int64_t> statuses;                   // first answers by status
  std::map<std::string, std::map<int, int64_t>> by_kind;
  int64_t library = 0, trailing = 0, retried = 0, failures = 0;
  std::vector<std::string> reports;
  std::multimap<double, std::string> slowest;  // the slowest answers (ms), at most kSlowest

  void Count(const FuzzRequest& r, const RawAnswer& a, double ms) {
    std::lock_guard lock(mu);
    slowest.emplace(ms, r.kind + ": " + r.method + " " + r.target.substr(0, 80));
    if (slowest.size() > kSlowest) slowest.erase(slowest.begin());
    const int status = a.outcome == RawAnswer::Outcome::kAnswered ? a.status : 0;
    ++statuses[status];
    ++by_kind[r.kind][status];
    if (status != 0 && !a.Has("X-Request-Id")) ++library;
  }
  void Fail(uint64_t seed, uint64_t index, const FuzzRequest& r, const std::string& what) {
    std::lock_guard lock(mu);
    ++failures;
    if (reports.size() < kMaxReported) {
      reports.push_back("GPUPOOL_HTTP_FUZZ_SEED=" + std::to_string(seed) + " GPUPOOL_HTTP_FUZZ_ONLY=" +
                        std::to_string(index) + " (replays it): " + what + "\n  " + r.Describe());
    }
  }
};

// /healthz on a connection of its own every 100 ms until stopped.
class HealthProbe {
 public:
  HealthProbe(std::string host, int port) : host_(std::move(host)), port_(port) {}
  void Start() {
    thread_ = std::thread([this] { Loop(); });
  }
  void Stop() {
    stop_ = true;
    if (thread_.joinable()) thread_.join();
  }
  int64_t probes() const { return probes_; }
  double max_ms() const { return max_ms_; }
  // The q-quantile of the probes' times (0 without probes).
  double QuantileMs(double q) const {
    if (times_ms_.empty()) return 0;
    std::vector<double> t = times_ms_;
    const size_t k = std::min(t.size() - 1, static_cast<size_t>(q * static_cast<double>(t.size())));
    std::nth_element(t.begin(), t.begin() + static_cast<std::ptrdiff_t>(k), t.end());
    return t[k];
  }
  const std::vector<std::string>& problems() const { return problems_; }

 private:
  void Loop() {
    while (!stop_) {
      const auto start = Clock::now();
      RawConnection c(host_, port_);
      std::string detail;
      RawAnswer a;
      if (c.Connect(start + 1s, &detail) &&
          c.Send("GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n", start + 1s)) {
        a = c.Read(false, start + 1s);
      }
      const double ms = std::chrono::duration<double, std::milli>(Clock::now() - start).count();
      ++probes_;
      max_ms_ = std::max(max_ms_, ms);
      if (times_ms_.size() < kMaxProbeTimes) times_ms_.push_back(ms);
      if (a.outcome != RawAnswer::Outcome::kAnswered || a.status != 200 || ms > kProbeBudget.count()) {
        if (problems_.size() < kMaxReported) {
          problems_.push_back("probe " + std::to_string(probes_) + ": " + OutcomeName(a.outcome) + ", status " +
                              std::to_string(a.status) + " in " + std::to_string(ms) + " ms" + detail);
        }
      }
      std::this_thread::sleep_until(start + kProbeEvery);
    }
  }

  std::string host_;
  int port_;
  std::thread thread_;
  std::atomic<bool> stop_{false};
  int64_t probes_ = 0;  // the fields below: the probe thread's until Stop
  double max_ms_ = 0;
  std::vector<double> times_ms_;
  std::vector<std::string> problems_;
};

// One client thread's requests: a kept-alive connection for ordinary
// requests, a fresh one for those that need it, and incomplete requests
// parked on their own connections until the server answers or closes them
// (at its body deadline), so that the stream of requests never waits for one.
class FuzzClient {
 public:
  using Learn = std::function<void(const FuzzRequest&, const RawAnswer&)>;
  FuzzClient(std::string host, int port, uint64_t seed, Tally& tally, Learn learn)
      : host_(std::move(host)), port_(port), seed_(seed), tally_(tally), learn_(std::move(learn)), main_(host_, port_) {}

  void Send(uint64_t index, const FuzzRequest& r) {
    Harvest();
    if (r.expect.incomplete) return Park(index, r);
    std::vector<RawAnswer> more;
    const auto start = Clock::now();
    const RawAnswer first = Exchange(r, more);
    Judge(index, r, first, more, std::chrono::duration<double, std::milli>(Clock::now() - start).count());
  }
  // Waits for every parked request (at the end of a run).
  void Finish() {
    while (!parked_.empty()) Resolve(parked_.front()), parked_.pop_front();
  }

 private:
  static constexpr size_t kMaxParked = 32;  // well under server.http.max_connections_per_client
  struct Parked {
    uint64_t index;
    FuzzRequest request;
    std::unique_ptr<RawConnection> connection;
    Clock::time_point deadline;
  };

  // Sends on the kept-alive connection (again once on a fresh one when it
  // turns out closed: a server may close an idle one at any time), or on a
  // fresh one; the first answer, and with trailing bytes every later one.
  RawAnswer Exchange(const FuzzRequest& r, std::vector<RawAnswer>& more) {
    RawAnswer first;
    for (int attempt = 0; attempt < 2; ++attempt) {
      const bool reused = main_.connected() && !r.fresh_connection;
      if (r.fresh_connection) main_.Close();
      const auto deadline = Clock::now() + kDeadline;
      if (!main_.Connect(deadline, &first.detail)) {
        first.outcome = RawAnswer::Outcome::kConnectFailed;
        return first;
      }
      main_.Send(r.bytes, deadline);
      first = main_.Read(r.method == "HEAD", deadline);
      if (first.outcome == RawAnswer::Outcome::kClosed && !first.bytes_seen && reused && attempt == 0) {
        main_.Close();
        std::lock_guard lock(tally_.mu);
        ++tally_.retried;
        continue;
      }
      break;
    }
    if (r.expect.trailing && first.outcome == RawAnswer::Outcome::kAnswered && !first.Closes()) {
      main_.HalfClose();
      more = main_.ReadUntilClosed(Clock::now() + kDeadline);
    }
    if (r.fresh_connection || r.expect.trailing || first.Closes()) main_.Close();
    return first;
  }

  void Park(uint64_t index, const FuzzRequest& r) {
    if (parked_.size() >= kMaxParked) Resolve(parked_.front()), parked_.pop_front();
    auto c = std::make_unique<RawConnection>(host_, port_);
    const auto deadline = Clock::now() + kDeadline;
    RawAnswer failed;
    if (!c->Connect(deadline, &failed.detail)) {
      failed.outcome = RawAnswer::Outcome::kConnectFailed;
      return Judge(index, r, failed, {});
    }
    c->Send(r.bytes, deadline);
    c->HalfClose();
    parked_.push_back(Parked{index, r, std::move(c), deadline});
  }

  // Resolves the parked requests that have an answer, an end or a passed deadline; does not wait.
  void Harvest() {
    for (auto it = parked_.begin(); it != parked_.end();) {
      if (it->connection->Readable() || Clock::now() >= it->deadline) {
        Resolve(*it);
        it = parked_.erase(it);
      } else {
        ++it;
      }
    }
  }
  void Resolve(Parked& p) {
    const RawAnswer a = p.connection->Read(p.request.method == "HEAD", p.deadline);
    Judge(p.index, p.request, a, {});
  }

  // `ms`: how long the answer took (0 for a parked request).
  void Judge(uint64_t index, const FuzzRequest& r, const RawAnswer& first, const std::vector<RawAnswer>& more,
             double ms = 0) {
    if (const char* trace = std::getenv("GPUPOOL_HTTP_FUZZ_TRACE"); trace != nullptr && r.kind == trace) {
      std::lock_guard lock(tally_.mu);
      std::cout << "request " << index << ": " << first.status << " " << first.body.substr(0, 200) << "\n  "
                << r.Describe() << "\n";
    }
    tally_.Count(r, first, ms);
    learn_(r, first);
    if (std::string p = Problem(r, first, true); !p.empty()) tally_.Fail(seed_, index, r, p);
    for (const RawAnswer& a : more) {
      if (std::string p = Problem(r, a, false); !p.empty()) tally_.Fail(seed_, index, r, "a later answer: " + p);
    }
    std::lock_guard lock(tally_.mu);
    tally_.trailing += static_cast<int64_t>(more.size());
  }

  std::string host_;
  int port_;
  uint64_t seed_;
  Tally& tally_;
  Learn learn_;
  RawConnection main_;
  std::deque<Parked> parked_;
};

class HttpFuzzTest : public ConfiguredServerTest {
 protected:
  void SetUp() override {
    ASSERT_NO_FATAL_FAILURE(StartServer(kConfig));
    ASSERT_NO_FATAL_FAILURE(Populate());
    std::ifstream in(std::string(GPUPOOL_SOURCE_DIR) + "/docs/api/openapi.yaml");
    std::stringstream text;
    text << in.rdbuf();
    auto doc = YamlToJson(text.str(), "docs/api/openapi.yaml");
    ASSERT_TRUE(doc) << doc.error().message;
    auto maker = RequestMaker::FromOpenApi(std::move(*doc));
    ASSERT_TRUE(maker) << maker.error().message;
    maker_ = std::make_unique<RequestMaker>(std::move(*maker));
  }

  // Two tenants with a job each, a node with GPUs, and a node token whose
  // agent has registered: what lets requests past the first checks.
  void Populate() {
    ctx_.admin_token = admin_;
    ctx_.tenant = "fz-team";
    ctx_.other_tenant = "fz-other";
    ctx_.node = "fz-agent";
    ctx_.pools = {"default"};
    ctx_.models = {"H100", "A100-80GB", "T4"};
    ctx_.node_classes = {"nvlink"};
    ctx_.requirements = {"nvlink"};
    ctx_.labels = {"web", "db"};
    ctx_.priorities = {"low", "normal", "high"};
    const json quota = {{"default", {{"guaranteed_gpus", 0}, {"limit_gpus", 64}}}};
    for (auto [name, token] : {std::pair{ctx_.tenant, &ctx_.tenant_token}, std::pair{ctx_.other_tenant, &ctx_.other_token}}) {
      auto t = Http(*server_, "POST", "/v1/tenants", admin_, json{{"name", name}, {"quota", quota}});
      ASSERT_EQ(t.status, 201) << t.text;
      *token = t.body["token"].get<std::string>();
    }
    auto n = Http(*server_, "POST", "/v1/nodes", admin_,
                  json{{"name", "fz-static"}, {"model", "H100"}, {"gpus", 8}, {"cpu_cores", 64}, {"memory_gib", 512}});
    ASSERT_EQ(n.status, 201) << n.text;
    for (const std::string& name : {ctx_.spare_node, ctx_.doomed_node}) {  // for the node commands
      auto spare = Http(*server_, "POST", "/v1/nodes", admin_,
                        json{{"name", name}, {"model", "T4"}, {"gpus", 1}, {"cpu_cores", 8}, {"memory_gib", 32}});
      ASSERT_EQ(spare.status, 201) << spare.text;
    }
    auto t = Http(*server_, "POST", "/v1/nodes/" + ctx_.node + "/token", admin_, json::object());
    ASSERT_EQ(t.status, 201) << t.text;
    ctx_.node_token = t.body["token"].get<std::string>();
    const json reg = {{"protocol", 2}, {"node", ctx_.node}, {"cpu_milli", 64000}, {"memory_mib", 262144},
                      {"backend", "fake"}, {"isolation", "none"},
                      {"gpus", {{{"index", 0}, {"uuid", "GPU-0"}, {"model", "H100"}, {"memory_mib", 81920}}}}};
    auto r = Http(*server_, "POST", "/v1/agent/register", ctx_.node_token, reg);
    ASSERT_EQ(r.status, 200) << r.text;
    ctx_.session = r.body.value("session", "");
    ctx_.incarnation = r.body.value("incarnation", "");
    ctx_.known_bodies["POST /v1/agent/register"] = {reg};
    for (int i = 0; i < 8; ++i) {  // tokens the fuzz may revoke
      auto spare = Http(*server_, "POST", "/v1/tokens", admin_,
                        json{{"tenant", i % 2 ? ctx_.tenant : ctx_.other_tenant}, {"name", "fz-spare-" + std::to_string(i)}});
      ASSERT_EQ(spare.status, 201) << spare.text;
      ctx_.spare_token_ids.push_back(spare.body["id"].get<std::string>());
    }
    for (auto [token, id] : {std::pair{ctx_.tenant_token, &ctx_.tenant_job}, std::pair{ctx_.other_token, &ctx_.other_job}}) {
      auto j = Http(*server_, "POST", "/v1/jobs", token, json{{"name", "fz-job"}, {"gpus", 1}});
      ASSERT_EQ(j.status, 201) << j.text;
      *id = j.body["id"].get<int64_t>();
    }
    KnownBodies();
  }

  // Bodies that go past every check, for the generator to start from besides the schemas.
  void KnownBodies() {
    const std::string team = ctx_.tenant;
    ctx_.known_bodies["POST /v1/jobs"] = {
        {{"name", "fz"}, {"tenant", team}, {"gpus", 1}},
        {{"name", "fz"}, {"tenant", team}, {"gpu_fraction", 0.5}, {"sharing", "mps"}, {"command", {"sleep", "1"}}},
        {{"name", "fz"}, {"tenant", team}, {"kind", "cpu"}, {"gpus", 0}, {"cpu_cores", 1}},
        {{"name", "fz"}, {"tenant", team}, {"replicas", 2}, {"max_replicas", 4}, {"checkpointable", true},
         {"checkpoint_interval", "10m"}, {"labels", {"web"}}, {"priority", "high"}},
        {{"name", "fz"}, {"tenant", team}, {"stages", {{{"gpus", 1}}, {{"gpu_fraction", 0.25}}}},
         {"deadline_after", "1h"}},
        // Valid, at the edges of every range.
        {{"name", std::string(253, 'n')}, {"tenant", team}, {"replicas", 4096}, {"gpus", 16},
         {"cpu_cores", 1 << 20}, {"memory_gib", 1 << 24}, {"priority", 1000}, {"deadline", "9999-12-31T23:59:59Z"}},
        {{"name", "fz"}, {"tenant", team}, {"gpu_fraction", 0.001}, {"sharing", "mps"}, {"gpu_memory_gib", 4096},
         {"cpu_cores", 0}, {"memory_gib", 0}, {"priority", 0}, {"deadline", "0000-01-01T00:00:00Z"}},
        {{"name", "fz"}, {"tenant", team}, {"replicas", 1}, {"max_replicas", 4096}, {"checkpointable", true},
         {"checkpoint_interval", "1ms"}, {"checkpoint_duration", "0s"}, {"expected_duration", "11000000d"},
         {"deadline_after", "1ms"}}};
    ctx_.known_bodies["POST /v1/nodes"] = {
        {{"name", "fz-big"}, {"model", "H100"}, {"gpus", 16}, {"cpu_cores", 1 << 20}, {"memory_gib", 1 << 24},
         {"class", "nvlink"}},
        {{"name", "fz-cpu"}, {"gpus", 0}, {"cpu_cores", 0.001}, {"memory_gib", 0.001}}};
    ctx_.known_bodies["PUT /v1/tenants/{name}/quota"] = {
        {{"pool", "default"}, {"guaranteed_gpus", 1e6}, {"limit_gpus", 1e6}, {"weight", 1e6}, {"reserved", true}},
        {{"pool", "default"}, {"guaranteed_gpus", 0}, {"limit_gpus", 0}, {"weight", 1e-300}}};
    ctx_.known_bodies["POST /v1/agent/heartbeat"] = {
        {{"node", ctx_.node}, {"session", ctx_.session},
         {"logs", {{{"job", ctx_.tenant_job}, {"offset", INT64_MAX}, {"data", "x"}},
                   {{"job", ctx_.tenant_job}, {"offset", 0}, {"data", std::string((1 << 20) - 1024, 'l')}}}},
         {"gpus", {{{"index", 0}, {"util_pct", 100}, {"temperature_c", 1000}, {"healthy", false}}}}}};
    ctx_.known_bodies["PUT /v1/regions"] = {
        {{"policy", "off"}},
        {{"policy", "cost-aware"}, {"regions", {{{"name", "region-1"}, {"price_per_gpu_hour", 1}}}}},
        {{"policy", "nearest"},
         {"regions", {{{"name", "region-1"}, {"price_per_gpu_hour", 1.7976931348623157e308},
                       {"latency_ms", {{"eu", 1.7976931348623157e308}, {"us", 0}}}}}},
         {"users", {{{"tenant", team}, {"location", "eu"}, {"latency_budget_ms", 1e-300}}}}}};
  }

  FuzzContext Context() {
    std::lock_guard lock(ctx_mu_);
    return ctx_;
  }
  // A registration the fuzzer made replaced the agent's session: later requests use the new one.
  void Learn(const FuzzRequest& r, const RawAnswer& a) {
    if (r.kind != "POST /v1/agent/register" || a.status != 200) return;
    const json j = json::parse(a.body, nullptr, false);
    if (!j.is_object() || !j.contains("session") || !j["session"].is_string()) return;
    std::lock_guard lock(ctx_mu_);
    ctx_.session = j["session"].get<std::string>();
    if (j.contains("incarnation") && j["incarnation"].is_string()) ctx_.incarnation = j["incarnation"].get<std::string>();
  }

  std::unique_ptr<RequestMaker> maker_;
  std::mutex ctx_mu_;
  FuzzContext ctx_;  // guarded by ctx_mu_ once the clients run
};

std::string Summary(const Tally& t, int64_t requests, double seconds, int clients, uint64_t seed,
                    const HealthProbe& probe) {
  std::ostringstream out;
  out << "HTTP fuzz: seed " << seed << ", " << requests << " requests in " << seconds << " s ("
      << static_cast<int64_t>(requests / std::max(seconds, 1e-9)) << "/s, " << clients << " clients); statuses:";
  for (const auto& [status, n] : t.statuses) out << " " << (status == 0 ? "closed" : std::to_string(status)) << " x" << n;
  out << "; library answers " << t.library << ", later answers " << t.trailing << ", retried " << t.retried
      << "; failures " << t.failures << "; /healthz: " << probe.probes() << " probes, median "
      << probe.QuantileMs(0.5) << " ms, p99 " << probe.QuantileMs(0.99) << " ms, max " << probe.max_ms() << " ms (limit "
      << kProbeBudget.count() << " ms)\n  slowest answers:";
  for (auto it = t.slowest.rbegin(); it != t.slowest.rend(); ++it) out << " " << it->first << " ms (" << it->second << ");";
  out << "\n";
  for (const auto& [kind, statuses] : t.by_kind) {
    out << "  " << kind << ":";
    for (const auto& [status, n] : statuses) out << " " << (status == 0 ? "closed" : std::to_string(status)) << " x" << n;
    out << "\n";
  }
  return out.str();
}

TEST_F(HttpFuzzTest, EveryEndpointAnswersHostileRequestsWithA4xxAndHealthzStaysFast) {
  const int64_t requests = EnvInt("GPUPOOL_HTTP_FUZZ_REQUESTS", 10000);
  const auto seed = static_cast<uint64_t>(EnvInt("GPUPOOL_HTTP_FUZZ_SEED", 22));
  const int clients = static_cast<int>(std::clamp<int64_t>(EnvInt("GPUPOOL_HTTP_FUZZ_CLIENTS", 2), 1, 64));
  // GPUPOOL_HTTP_FUZZ_ONLY=I replays request I alone (after the same set-up).
  const int64_t only = EnvInt("GPUPOOL_HTTP_FUZZ_ONLY", -1);
  Tally tally;
  HealthProbe probe(server_->host(), server_->port());
  probe.Start();
  std::atomic<int64_t> next{0};
  const auto start = Clock::now();
  std::vector<std::thread> threads;
  for (int k = 0; k < clients; ++k) {
    threads.emplace_back([&] {
      // The load yields to the observer: on a busy machine the probe, not the fuzzer, gets the CPU first.
      ::setpriority(PRIO_PROCESS, static_cast<id_t>(::gettid()), kClientNice);
      FuzzClient client(server_->host(), server_->port(), seed, tally,
                        [this](const FuzzRequest& r, const RawAnswer& a) { Learn(r, a); });
      for (int64_t n = next++; n < (only >= 0 ? 1 : requests); n = next++) {
        const auto i = static_cast<uint64_t>(only >= 0 ? only : n);
        Rng rng = RngFor(seed, i);
        client.Send(i, maker_->Make(rng, Context()));
      }
      client.Finish();
    });
  }
  for (std::thread& t : threads) t.join();
  const double seconds = std::chrono::duration<double>(Clock::now() - start).count();
  probe.Stop();
  std::cout << Summary(tally, only >= 0 ? 1 : requests, seconds, clients, seed, probe);
  for (const std::string& r : tally.reports) ADD_FAILURE() << r;
  EXPECT_EQ(tally.failures, 0);
  // Every operation was reached, and got past every check at least once (a run long enough to say).
  for (const std::string& op : maker_->OperationNames()) {
    const auto it = tally.by_kind.find(op);
    ASSERT_NE(it, tally.by_kind.end()) << op << " was never fuzzed";
    if (only >= 0 || requests < kCoverageRequests) continue;
    int64_t ok = 0;
    for (const auto& [status, n] : it->second) ok += status >= 200 && status < 300 ? n : 0;
    EXPECT_GT(ok, 0) << op << " never answered 2xx: the requests do not reach its handler's end";
  }
  for (const std::string& p : probe.problems()) ADD_FAILURE() << "/healthz: " << p;
  EXPECT_LE(probe.max_ms(), static_cast<double>(kProbeBudget.count()));
  auto alive = Http(*server_, "GET", "/healthz", "");
  EXPECT_EQ(alive.status, 200) << alive.text << "\n" << server_->log().substr(0, 4000);
  // Nothing the fuzzer sent is an error of the server's own (a handler that threw, a journal that failed).
  std::istringstream log(server_->log());
  int errors = 0;
  for (std::string line; std::getline(log, line);) {
    if (line.find("\"level\":\"error\"") != std::string::npos && ++errors <= 5) ADD_FAILURE() << "server log: " << line;
  }
  EXPECT_EQ(errors, 0);
}

}  // namespace
}  // namespace gpupool::testing
