// gpupool_server_load: the server's load benchmark (`make bench`).
//
// Starts the real `gpupool server` on loopback with a cluster of --nodes
// nodes, then measures:
//  1. durable submissions per second from --clients concurrent clients
//     (keep-alive connections, each POST /v1/jobs acknowledged only once its
//     events are fsynced), for --seconds;
//  2. p50/p99 latency of GET /v1/jobs/{id} from one more client during (1);
//  3. after filling the queue to --queued pending jobs: the server's peak
//     memory (VmHWM of /proc/PID/status);
//  3b. then, at that queue, --hostile-clients clients sending the largest
//     bodies the server takes, shaped to cost the most once parsed
//     (tests/hostile_bodies.h), for --hostile-seconds: the peak again
//     (issue 22: memory stays under its bound at 100k jobs and 10k nodes);
//  4. time to recover after SIGKILL: from the restart to the first answered
//     /healthz (snapshot load + replay + start), and the server's own figure.
// Prints a table and, with --json FILE, the figures as JSON.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <mutex>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <CLI/CLI.hpp>
#include <httplib.h>
#include <nlohmann/json.hpp>

#include "bench/server_child.h"
#include "tests/hostile_bodies.h"

namespace {

using nlohmann::json;
using namespace gpupool::bench;

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"gpupool server load benchmark"};
  std::string binary = "build/gpupool", json_path;
  int clients = 32, nodes = 10000, seconds = 10;
  int64_t queued = 100000;
  app.add_option("--binary", binary, "the gpupool binary")->capture_default_str();
  app.add_option("--clients", clients, "concurrent submitting clients")->capture_default_str();
  app.add_option("--nodes", nodes, "nodes in the cluster (8 H100 each)")->capture_default_str();
  app.add_option("--seconds", seconds, "length of the throughput phase")->capture_default_str();
  app.add_option("--queued", queued, "pending jobs before the memory and recovery phases")->capture_default_str();
  int64_t snapshot_every = 20000;
  app.add_option("--snapshot-every", snapshot_every, "the server's snapshot interval (events)")->capture_default_str();
  int hostile_clients = 64, hostile_seconds = 5;
  app.add_option("--hostile-clients", hostile_clients, "clients sending 1 MiB hostile bodies after the fill (0: none)")
      ->capture_default_str();
  app.add_option("--hostile-seconds", hostile_seconds, "length of that phase")->capture_default_str();
  app.add_option("--json", json_path, "also write the figures to this file");
  CLI11_PARSE(app, argc, argv);

  char templ[] = "/tmp/gpupool-load-XXXXXX";
  const std::string root = mkdtemp(templ);
  Server server{binary, root + "/data", root + "/config.yaml", FreePort()};
  std::filesystem::create_directories(server.dir);
  // Tenant "load" may use 8 GPUs: almost every job waits, so the queue grows.
  std::ofstream(server.config) << "name: load\nengine: {heartbeat_timeout: 0s}\npools:\n  - name: gpu\ntenants:\n  - name: load\n    quota:\n"
                                  "      gpu: {guaranteed_gpus: 8, limit_gpus: 8}\ncluster:\n  nodes:\n"
                                  "    - {count: "
                               << nodes << ", model: H100, gpus: 8, cpu_cores: 96, memory_gib: 1024}\n"
                               << "server:\n  snapshot_every_events: " << snapshot_every << "\n"
                               << "  max_pending_jobs_per_tenant: 10000000\n"  // the queue grows on purpose
                               << "  http: {token_requests_per_s: 0, tenant_requests_per_s: 0}\n";  // the server is measured, not the rate limits
  std::cout << "==> starting the server with " << nodes << " nodes (" << root << ")" << std::endl;
  if (!server.Start()) {
    std::cerr << "server did not start; see " << server.log() << "\n";
    return 1;
  }
  const std::string token = ReadLine(server.dir + "/tokens/load.token");

  // --- 1 and 2: throughput with GET latency ---------------------------------------
  std::atomic<bool> stop{false};
  std::atomic<int64_t> acked{0}, failed{0};
  std::atomic<int64_t> last_id{0};
  std::vector<std::thread> threads;
  const std::string body = R"({"name":"load","gpus":1,"cpu_cores":2,"memory_gib":8})";
  std::atomic<int64_t> tickets{0};  // requests started, for an exact count
  std::mutex failure_mu;
  std::string first_failure;
  auto submitter = [&](int64_t limit) {
    httplib::Client c("127.0.0.1", server.port);
    c.set_keep_alive(true);
    c.set_tcp_nodelay(true);
    c.set_read_timeout(60);
    httplib::Headers h{{"Authorization", "Bearer " + token}};
    while (!stop && (limit < 0 || tickets.fetch_add(1) < limit)) {
      auto r = c.Post("/v1/jobs", h, body, "application/json");
      if (r && r->status == 201) {
        ++acked;
        const auto pos = r->body.find("\"id\":");
        if (pos != std::string::npos) last_id = std::max<int64_t>(last_id, std::stoll(r->body.substr(pos + 5)));
      } else {
        ++failed;
        std::lock_guard lock(failure_mu);
        if (first_failure.empty()) {
          first_failure = r ? "HTTP " + std::to_string(r->status) + " " + r->body.substr(0, 200)
                            : "no response (" + httplib::to_string(r.error()) + ")";
        }
      }
    }
  };
  std::vector<double> get_ms;
  std::cout << "==> " << clients << " clients submit for " << seconds << " s; one more reads GET /v1/jobs/{id}"
            << std::endl;
  const auto t0 = Clock::now();
  for (int i = 0; i < clients; ++i) threads.emplace_back(submitter, -1);
  std::thread reader([&] {
    httplib::Client c("127.0.0.1", server.port);
    c.set_keep_alive(true);
    c.set_tcp_nodelay(true);
    httplib::Headers h{{"Authorization", "Bearer " + token}};
    uint64_t k = 0;
    while (!stop) {
      const int64_t hi = last_id.load();
      if (hi < 1) {
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
        continue;
      }
      const int64_t id = 1 + static_cast<int64_t>((k++ * 2654435761u) % static_cast<uint64_t>(hi));
      const auto s = Clock::now();
      auto r = c.Get("/v1/jobs/" + std::to_string(id), h);
      if (r && r->status == 200) get_ms.push_back(std::chrono::duration<double, std::milli>(Clock::now() - s).count());
    }
  });
  std::this_thread::sleep_for(std::chrono::seconds(seconds));
  stop = true;
  for (auto& t : threads) t.join();
  reader.join();
  const double elapsed = std::chrono::duration<double>(Clock::now() - t0).count();
  const double rate = acked / elapsed;
  threads.clear();

  // --- 3: fill the queue, peak memory --------------------------------------------
  std::cout << "==> filling the queue to " << queued << " pending jobs" << std::endl;
  stop = false;
  tickets = acked.load();
  for (int i = 0; i < clients; ++i) threads.emplace_back(submitter, queued);
  for (auto& t : threads) t.join();
  threads.clear();
  const long rss_kib = server.PeakRssKib();
  const int64_t jobs_at_rss = acked.load();

  // --- 3b: hostile bodies at that queue ---------------------------------------------
  std::cout << "==> " << hostile_clients << " clients send 1 MiB hostile bodies for " << hostile_seconds << " s"
            << std::endl;
  const std::vector<std::string> hostile = gpupool::testing::HostileBodies(1 << 20);  // server.max_body_bytes
  std::atomic<int64_t> hostile_sent{0}, hostile_5xx{0};
  const auto hostile_until = Clock::now() + std::chrono::seconds(hostile_seconds);
  for (int i = 0; i < hostile_clients; ++i) {
    threads.emplace_back([&, i] {
      httplib::Client c("127.0.0.1", server.port);
      c.set_read_timeout(60);
      httplib::Headers h{{"Authorization", "Bearer " + token}};
      for (size_t k = static_cast<size_t>(i); Clock::now() < hostile_until; ++k) {
        auto r = c.Post("/v1/jobs", h, hostile[k % hostile.size()], "application/json");
        ++hostile_sent;
        if (!r || (r->status >= 500 && r->status != 503)) ++hostile_5xx;
      }
    });
  }
  for (auto& t : threads) t.join();
  threads.clear();
  const long hostile_rss_kib = server.PeakRssKib();

  // --- 4: recovery after SIGKILL, at the worst point ------------------------------------
  // A clean stop takes a snapshot; then snapshot_every - 1 more events (one
  // per pending job) are only in the journal when the server is killed, so
  // the restart loads the snapshot and replays all of them.
  std::cout << "==> clean restart, " << snapshot_every - 1 << " more jobs, SIGKILL and restart" << std::endl;
  server.Stop();
  const auto c0 = Clock::now();
  if (!server.Start()) {
    std::cerr << "server did not restart; see " << server.log() << "\n";
    return 1;
  }
  const double clean_start_s = std::chrono::duration<double>(Clock::now() - c0).count();
  tickets = 0;
  const int64_t before_extra = acked.load();
  for (int i = 0; i < clients; ++i) threads.emplace_back(submitter, snapshot_every - 1);
  for (auto& t : threads) t.join();
  const int64_t extra = acked.load() - before_extra;
  server.Kill();
  const auto r0 = Clock::now();
  if (!server.Start()) {
    std::cerr << "server did not restart; see " << server.log() << "\n";
    return 1;
  }
  const double recover_s = std::chrono::duration<double>(Clock::now() - r0).count();
  double server_recover_s = -1;
  int64_t replayed = -1;
  {
    std::ifstream in(server.log());
    std::string line;
    while (std::getline(in, line)) {
      auto j = json::parse(line, nullptr, false);
      if (j.is_object() && j.value("msg", "") == "recovered") {
        server_recover_s = std::stod(j.value("seconds", "-1"));
        replayed = std::stoll(j.value("replayed_events", "-1"));
      }
    }
  }
  httplib::Client c("127.0.0.1", server.port);
  auto health = c.Get("/healthz");
  server.Stop();

  const json out{{"clients", clients},
                 {"nodes", nodes},
                 {"submissions", acked.load()},
                 {"failed_requests", failed.load()},
                 {"durable_submissions_per_s", rate},
                 {"get_job_p50_ms", Percentile(get_ms, 0.5)},
                 {"get_job_p99_ms", Percentile(get_ms, 0.99)},
                 {"get_job_samples", get_ms.size()},
                 {"jobs_at_peak_rss", jobs_at_rss},
                 {"max_rss_mib", rss_kib / 1024.0},
                 {"hostile_requests", hostile_sent.load()},
                 {"hostile_unanswered_or_5xx", hostile_5xx.load()},
                 {"max_rss_with_hostile_bodies_mib", hostile_rss_kib / 1024.0},
                 {"clean_restart_to_healthy_s", clean_start_s},
                 {"jobs_after_snapshot", extra},
                 {"recovery_to_healthy_s", recover_s},
                 {"recovery_server_s", server_recover_s},
                 {"replayed_events", replayed}};
  std::printf("%-44s %12.0f /s   (goal >= 5000)\n", "durable submissions, 32 clients", rate);
  std::printf("%-44s %12.2f ms  (p50 %.2f ms, %zu samples)\n", "GET /v1/jobs/{id} p99 under that load",
              Percentile(get_ms, 0.99), Percentile(get_ms, 0.5), get_ms.size());
  std::printf("%-44s %12.0f MiB (goal < 1024; %lld jobs, %d nodes)\n", "server max RSS", rss_kib / 1024.0,
              static_cast<long long>(jobs_at_rss), nodes);
  if (hostile_clients > 0) {
    std::printf("%-44s %12.0f MiB (goal < 1024; %lld requests of ~1 MiB from %d clients, %lld unanswered or 5xx)\n",
                "server max RSS, then hostile bodies", hostile_rss_kib / 1024.0,
                static_cast<long long>(hostile_sent.load()), hostile_clients,
                static_cast<long long>(hostile_5xx.load()));
  }
  std::printf("%-44s %12.2f s   (goal < 2; server's own: %.2f s, %lld events replayed after the snapshot)\n",
              "recovery after SIGKILL, to first /healthz", recover_s, server_recover_s,
              static_cast<long long>(replayed));
  std::printf("%-44s %12.2f s   (after a clean stop, from its snapshot)\n", "clean restart, to first /healthz",
              clean_start_s);
  if (failed > 0) {
    std::printf("%-44s %12lld     (first: %s)\n", "failed requests", static_cast<long long>(failed.load()),
                first_failure.c_str());
  }
  if (!json_path.empty()) std::ofstream(json_path) << out.dump(2) << "\n";
  std::filesystem::remove_all(root);
  return health && health->status == 200 ? 0 : 1;
}
