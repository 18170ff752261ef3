// gpupool_agent_load: the agent protocol at scale (`make bench`).
//
// Starts the real `gpupool server` on loopback, issues --agents node
// tokens, registers as many simulated agents (lightweight: one request
// state machine each, no processes, spread over a few threads) with
// --gpus 8-GPU nodes each, and lets them heartbeat at the server's
// interval (engine.reclaim.poll, 5 s by default) for --seconds, while a
// client submits --job-rate jobs per second. Each simulated agent acts on
// its desired state as the real agent does: a task it is told to run
// reports running (50% utilization) and exits 0 after --job-seconds; a
// checkpoint is acknowledged; a scrub is reported done. So jobs churn
// through submit, place, run, finish.
//
// With --protocol 2 (issue 18) the agents speak the watch protocol: a
// heartbeat's reply carries no desired state, and each heartbeat is
// followed by a watch asked with wait_ms 0 from the agent's revision
// (answered at once with the changes since), so the figures include the
// cost of building watch answers at scale; held watches (idle connections
// answered on a change) are not simulated here.
//
// Reports heartbeat latency (p50, p99, max) over the measured window,
// heartbeats per second, failed requests, jobs finished, and the server's
// CPU use over the window (from /proc/PID/stat), as a table and, with
// --json FILE, as JSON.
#include <sys/stat.h>

#include <atomic>
#include <filesystem>
#include <iostream>
#include <map>
#include <mutex>
#include <set>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "bench/server_child.h"
#include "src/api/agent_protocol.h"

namespace {

using nlohmann::json;
using namespace gpupool;
using namespace gpupool::bench;

struct SimTask {
  Clock::time_point started;
};

struct SimAgent {
  std::string name, token, session;
  Clock::time_point next;
  std::map<std::tuple<int64_t, int32_t, int32_t>, SimTask> tasks;
  std::set<int64_t> scrubs;  // orders to report done
  std::vector<TaskOrder> orders;
  std::string incarnation;  // protocol 2: the desired state's revision held
  int64_t revision = 0;
};

struct Totals {
  std::mutex mu;
  std::vector<double> latency_ms, watch_ms;
  int64_t heartbeats = 0, failed = 0;
  std::string first_error;
};

// Applies a watch's answer to the orders held (protocol 2).
void ApplyWatch(SimAgent& a, const WatchReply& w) {
  a.incarnation = w.incarnation;
  a.revision = w.revision;
  if (!w.changed) return;
  std::map<std::tuple<int64_t, int32_t, int32_t>, TaskOrder> held;
  if (!w.full) {
    for (const TaskOrder& o : a.orders) held[{o.job, o.replica, o.attempt}] = o;
  }
  for (const TaskOrder& o : w.tasks) held[{o.job, o.replica, o.attempt}] = o;
  a.orders.clear();
  for (const TaskRef& k : w.task_keys) {
    if (auto it = held.find({k.job, k.replica, k.attempt}); it != held.end()) a.orders.push_back(it->second);
  }
  a.scrubs.clear();
  for (const ScrubOrder& s : w.scrubs) a.scrubs.insert(s.id);
}

// A watch answered at once (wait_ms 0): the changes since the agent's revision.
std::string Watch(SimAgent& a, httplib::Client& c, double* ms) {
  const WatchRequest w{kAgentProtocol, a.name, a.session, a.incarnation, a.revision, 0};
  const auto t0 = Clock::now();
  auto res = c.Post("/v1/agent/watch", ToJson(w).dump(), "application/json");
  *ms = std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
  if (!res) return "watch: no answer: " + httplib::to_string(res.error());
  if (res->status != 200) return "watch: HTTP " + std::to_string(res->status) + ": " + res->body.substr(0, 200);
  auto reply = ParseWatchReply(json::parse(res->body, nullptr, false));
  if (!reply.ok()) return "watch: bad reply: " + reply.error.message;
  ApplyWatch(a, *reply.value);
  return "";
}

// One heartbeat: reports from the agent's view of its tasks, then applies
// the reply (protocol 2: then watches).
void Beat(SimAgent& a, int port, double job_seconds, bool measure, int protocol, Totals& totals) {
  HeartbeatRequest r;
  r.protocol = protocol;
  r.node = a.name;
  r.session = a.session;
  const auto now = Clock::now();
  for (const TaskOrder& o : a.orders) {
    const auto key = std::make_tuple(o.job, o.replica, o.attempt);
    auto it = a.tasks.find(key);
    if (it == a.tasks.end()) it = a.tasks.emplace(key, SimTask{now}).first;
    TaskReport t;
    t.job = o.job;
    t.replica = o.replica;
    t.attempt = o.attempt;
    if (o.action == TaskAction::kCheckpoint) {
      t.phase = TaskPhase::kCheckpointed;
      t.checkpoint_acked = true;
    } else if (std::chrono::duration<double>(now - it->second.started).count() >= job_seconds) {
      t.phase = TaskPhase::kExited;
    } else {
      t.phase = TaskPhase::kRunning;
      t.util_pct = 50;
    }
    r.tasks.push_back(t);
  }
  for (int64_t id : a.scrubs) r.scrubs.push_back(ScrubReport{id, true, 1, 0.0, ""});
  for (int g = 0; g < 8; ++g) {
    GpuSample s;
    s.index = g;
    s.util_pct = 40;
    s.memory_total_mib = 81920;
    r.gpus.push_back(s);
  }
  httplib::Client c("127.0.0.1", port);  // a connection per heartbeat, as real agents do
  c.set_bearer_token_auth(a.token);
  c.set_read_timeout(30);
  const auto t0 = Clock::now();
  auto res = c.Post("/v1/agent/heartbeat", ToJson(r).dump(), "application/json");
  const double ms = std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
  std::string error;
  if (!res) {
    error = "no answer: " + httplib::to_string(res.error());
  } else if (res->status != 200) {
    error = "HTTP " + std::to_string(res->status) + ": " + res->body.substr(0, 200);
  } else {
    auto reply = ParseAgentReply(json::parse(res->body, nullptr, false));
    if (!reply.ok()) {
      error = "bad reply: " + reply.error.message;
    } else if (!reply.value->has_desired) {  // protocol 2
      double watch_ms = 0;
      error = Watch(a, c, &watch_ms);
      if (measure) {
        std::lock_guard lock(totals.mu);
        totals.watch_ms.push_back(watch_ms);
      }
    } else {
      a.orders = reply.value->tasks;
      a.scrubs.clear();
      for (const ScrubOrder& s : reply.value->scrubs) a.scrubs.insert(s.id);
      std::set<std::tuple<int64_t, int32_t, int32_t>> live;
      for (const TaskOrder& o : a.orders) live.insert({o.job, o.replica, o.attempt});
      for (auto it = a.tasks.begin(); it != a.tasks.end();) it = live.count(it->first) ? std::next(it) : a.tasks.erase(it);
    }
  }
  std::lock_guard lock(totals.mu);
  if (measure) {
    ++totals.heartbeats;
    totals.latency_ms.push_back(ms);
  }
  if (!error.empty()) {
    ++totals.failed;
    if (totals.first_error.empty()) totals.first_error = error;
  }
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"gpupool agent protocol load benchmark"};
  std::string binary = "build/gpupool", json_path;
  int agents = 1000, threads = 16, seconds = 60, warmup = 10;
  double job_rate = 20, job_seconds = 30;
  app.add_option("--binary", binary, "the gpupool binary")->capture_default_str();
  app.add_option("--agents", agents, "simulated agents (one 8xH100 node each)")->capture_default_str();
  app.add_option("--threads", threads, "client threads driving the agents")->capture_default_str();
  app.add_option("--seconds", seconds, "measured window")->capture_default_str();
  app.add_option("--warmup", warmup, "seconds of heartbeats before the window")->capture_default_str();
  app.add_option("--job-rate", job_rate, "jobs submitted per second")->capture_default_str();
  app.add_option("--job-seconds", job_seconds, "how long each task runs")->capture_default_str();
  app.add_option("--json", json_path, "also write the figures to this file");
  int protocol = 1;
  app.add_option("--protocol", protocol, "agent protocol: 1 (desired state in heartbeat replies) or 2 (and watches)")
      ->check(CLI::Range(1, 2))
      ->capture_default_str();
  CLI11_PARSE(app, argc, argv);

  const std::string root = std::filesystem::temp_directory_path() / ("gpupool-agent-load-" + std::to_string(getpid()));
  std::filesystem::create_directories(root);
  std::ofstream(root + "/config.yaml") << "name: agent-load\npools:\n  - name: gpu\ntenants:\n  - name: load\n"
                                          "    quota:\n      gpu: {guaranteed_gpus: 0, limit_gpus: 100000}\n"
                                          "server:\n  default_image: host\n";
  Server server{binary, root + "/data", root + "/config.yaml", FreePort()};
  if (!server.Start()) {
    std::cerr << "the server did not start; see " << server.log() << "\n";
    return 1;
  }
  const std::string admin = ReadLine(server.dir + "/admin.token");
  httplib::Client admin_client("127.0.0.1", server.port);
  admin_client.set_bearer_token_auth(admin);
  admin_client.set_read_timeout(60);

  // Tokens and registrations.
  std::vector<SimAgent> sims(agents);
  const auto reg0 = Clock::now();
  for (int i = 0; i < agents; ++i) {
    SimAgent& a = sims[i];
    a.name = "sim-" + std::to_string(i);
    auto t = admin_client.Post("/v1/nodes/" + a.name + "/token", "{}", "application/json");
    if (!t || t->status != 201) {
      std::cerr << "token for " << a.name << " failed\n";
      return 1;
    }
    a.token = json::parse(t->body)["token"];
  }
  {
    std::atomic<int> next{0}, bad{0};
    std::vector<std::thread> workers;
    for (int w = 0; w < threads; ++w) {
      workers.emplace_back([&] {
        for (int i; (i = next++) < agents;) {
          RegisterRequest r;
          r.protocol = protocol;
          r.node = sims[i].name;
          r.backend = "fake";
          r.cpu_milli = 96000;
          r.memory_mib = 1 << 20;
          for (int g = 0; g < 8; ++g) {
            GpuDevice d;
            d.index = g;
            d.uuid = "GPU-sim-" + std::to_string(i) + "-" + std::to_string(g);
            d.model = "H100";
            d.memory_mib = 81920;
            r.gpus.push_back(d);
          }
          httplib::Client c("127.0.0.1", server.port);
          c.set_bearer_token_auth(sims[i].token);
          c.set_read_timeout(60);
          auto res = c.Post("/v1/agent/register", ToJson(r).dump(), "application/json");
          if (!res || res->status != 200) {
            ++bad;
            continue;
          }
          const json reply = json::parse(res->body);
          sims[i].session = reply.value("session", "");
          sims[i].incarnation = reply.value("incarnation", "");
          sims[i].revision = reply.value("revision", int64_t{0});
        }
      });
    }
    for (auto& w : workers) w.join();
    if (bad > 0) {
      std::cerr << bad << " registrations failed; see " << server.log() << "\n";
      return 1;
    }
  }
  const double register_s = std::chrono::duration<double>(Clock::now() - reg0).count();

  // Heartbeats, spread evenly over the interval.
  const auto interval = std::chrono::milliseconds(5000);
  const auto start = Clock::now();
  for (int i = 0; i < agents; ++i) sims[i].next = start + interval * i / agents;
  const auto window_start = start + std::chrono::seconds(warmup);
  const auto window_end = window_start + std::chrono::seconds(seconds);
  Totals totals;
  std::atomic<bool> done{false};
  std::vector<std::thread> workers;
  for (int w = 0; w < threads; ++w) {
    workers.emplace_back([&, w] {
      while (!done) {
        Clock::time_point soonest = Clock::now() + std::chrono::milliseconds(50);
        for (int i = w; i < agents; i += threads) {
          SimAgent& a = sims[i];
          const auto now = Clock::now();
          if (now >= a.next) {
            Beat(a, server.port, job_seconds, now >= window_start && now < window_end, protocol, totals);
            a.next += interval;
          }
          soonest = std::min(soonest, a.next);
        }
        std::this_thread::sleep_until(soonest);
      }
    });
  }
  // Job churn.
  int64_t submitted = 0;
  std::thread submitter([&] {
    httplib::Client c("127.0.0.1", server.port);
    c.set_bearer_token_auth(admin);
    c.set_keep_alive(true);
    const std::string body = R"({"name":"churn","tenant":"load","gpus":1,"cpu_cores":2,"memory_gib":8,)"
                             R"("command":["sleep","3600"]})";
    auto next = Clock::now();
    while (!done) {
      if (auto r = c.Post("/v1/jobs", body, "application/json"); r && r->status == 201) ++submitted;
      next += std::chrono::microseconds(static_cast<int64_t>(1e6 / job_rate));
      std::this_thread::sleep_until(next);
    }
  });
  std::this_thread::sleep_until(window_start);
  const double cpu0 = ProcessCpuSeconds(server.pid);
  const auto wall0 = Clock::now();
  std::this_thread::sleep_until(window_end);
  const double cpu1 = ProcessCpuSeconds(server.pid);
  const double wall = std::chrono::duration<double>(Clock::now() - wall0).count();
  done = true;
  for (auto& w : workers) w.join();
  submitter.join();

  auto finished = admin_client.Get("/v1/jobs?state=succeeded&limit=1000");
  int64_t succeeded = 0;
  if (finished && finished->status == 200) {
    succeeded = static_cast<int64_t>(json::parse(finished->body).value("jobs", json::array()).size());
  }
  const long rss = server.PeakRssKib();
  server.Stop();

  const double p50 = Percentile(totals.latency_ms, 0.5), p99 = Percentile(totals.latency_ms, 0.99);
  const double max = totals.latency_ms.empty() ? 0 : *std::max_element(totals.latency_ms.begin(), totals.latency_ms.end());
  const double cpu_pct = (cpu1 - cpu0) / wall * 100;
  std::printf("agents %d (8xH100 each, protocol %d), heartbeat every %lld ms, %d client threads, jobs submitted %.1f/s\n",
              agents, protocol, static_cast<long long>(interval.count()), threads, job_rate);
  std::printf("  registration of %d nodes      %8.2f s\n", agents, register_s);
  std::printf("  heartbeats in %d s window     %8lld (%.0f/s)\n", seconds, static_cast<long long>(totals.heartbeats),
              totals.heartbeats / wall);
  std::printf("  heartbeat latency p50         %8.2f ms\n", p50);
  std::printf("  heartbeat latency p99         %8.2f ms\n", p99);
  std::printf("  heartbeat latency max         %8.2f ms\n", max);
  const double watch_p50 = Percentile(totals.watch_ms, 0.5), watch_p99 = Percentile(totals.watch_ms, 0.99);
  if (protocol >= 2) {
    std::printf("  watch latency p50 / p99       %8.2f / %.2f ms (%zu watches, answered at once)\n", watch_p50,
                watch_p99, totals.watch_ms.size());
  }
  std::printf("  failed requests               %8lld %s\n", static_cast<long long>(totals.failed),
              totals.first_error.c_str());
  std::printf("  server CPU over the window    %8.1f %% of one core\n", cpu_pct);
  std::printf("  server peak RSS               %8.1f MiB\n", rss / 1024.0);
  std::printf("  jobs submitted / succeeded    %8lld / %lld (first 1000 listed)\n", static_cast<long long>(submitted),
              static_cast<long long>(succeeded));
  if (!json_path.empty()) {
    std::ofstream(json_path) << json{{"agents", agents},
                                     {"protocol", protocol},
                                     {"watch_p50_ms", watch_p50},
                                     {"watch_p99_ms", watch_p99},
                                     {"heartbeat_interval_ms", interval.count()},
                                     {"registration_s", register_s},
                                     {"heartbeats", totals.heartbeats},
                                     {"heartbeat_p50_ms", p50},
                                     {"heartbeat_p99_ms", p99},
                                     {"heartbeat_max_ms", max},
                                     {"failed", totals.failed},
                                     {"server_cpu_pct", cpu_pct},
                                     {"server_peak_rss_mib", rss / 1024.0},
                                     {"jobs_submitted", submitted},
                                     {"jobs_succeeded_listed", succeeded}}
                                    .dump(2)
                             << "\n";
  }
  std::filesystem::remove_all(root);
  return totals.failed > 0 ? 1 : 0;
}
