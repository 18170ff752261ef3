// gpupool_lifecycle: how fast a trivial job goes through the whole system
// (`make bench`, issue 18's acceptance figures).
//
// A real `gpupool server` on loopback, real `gpupool agent`s with fake GPUs
// (8 H100 each) and real task processes (--runtime process, or oci where
// runc works). Every job is trivial: `command: [true]`, a quarter GPU.
//  1. Latency on an idle node (one agent): --latency-jobs jobs one after
//     the other; per job, submit -> process started (the agent's `start`
//     line in WORK/agent.log, wall clock in ms) and submit -> `succeeded`
//     as a client sees it (GET /v1/jobs/{id} polled every --poll-ms).
//  2. Sustained throughput through one agent with 8 GPUs in quarter shares
//     (32 tasks at once), and through --agents agents: the queue is kept
//     full (the submitters keep slots + backlog jobs outstanding) and jobs
//     that end are counted from the journal (JobFinished events) over a
//     --seconds window after --warmup seconds.
// With each figure: the server's CPU, the agents' own CPU and their tasks'
// (reaped children), as % of one core over the window. Each figure is
// printed beside the issue's goal; --json FILE also writes them.
//
// The machine's load sets the tails: run it on an otherwise idle machine,
// and alternate runs when comparing two builds.
#include <fcntl.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <filesystem>
#include <iostream>
#include <map>
#include <mutex>
#include <random>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "bench/server_child.h"

namespace {

using nlohmann::json;
using namespace gpupool::bench;
namespace fs = std::filesystem;

constexpr int kGpusPerAgent = 8;
constexpr int kSlotsPerAgent = kGpusPerAgent * 4;  // quarter shares
const char* const kJobBody = R"({"name":"trivial","tenant":"bench","gpu_fraction":0.25,"cpu_cores":1,)"
                             R"("memory_gib":1,"command":["true"]})";

// A keep-alive client of the server with the admin token.
std::unique_ptr<httplib::Client> AdminClient(int port, const std::string& token) {
  auto c = std::make_unique<httplib::Client>("127.0.0.1", port);
  c->set_bearer_token_auth(token);
  c->set_keep_alive(true);
  c->set_tcp_nodelay(true);  // a POST's headers and body are two writes: no 40 ms wait for an ACK
  c->set_read_timeout(60);
  return c;
}

double WallMs() {
  return std::chrono::duration<double, std::milli>(std::chrono::system_clock::now().time_since_epoch()).count();
}

struct AgentChild {
  std::string node, dir;
  pid_t pid = -1;
};

struct Cluster {
  Server server;
  std::string admin;
  std::vector<AgentChild> agents;
};

// Starts the server and `count` agents, and waits until every node is ready.
bool StartCluster(const std::string& binary, const std::string& root, const std::string& runtime, int count,
                  Cluster& c) {
  fs::create_directories(root);
  std::ofstream(root + "/config.yaml") << "name: lifecycle\npools:\n  - name: gpu\ntenants:\n  - name: bench\n"
                                          "    quota:\n      gpu: {guaranteed_gpus: 0, limit_gpus: 100000}\n"
                                          "server:\n  default_image: host\n";
  c.server = Server{binary, root + "/data", root + "/config.yaml", FreePort()};
  if (!c.server.Start()) {
    std::cerr << "the server did not start; see " << c.server.log() << "\n";
    return false;
  }
  c.admin = ReadLine(c.server.dir + "/admin.token");
  httplib::Client admin("127.0.0.1", c.server.port);
  admin.set_bearer_token_auth(c.admin);
  admin.set_read_timeout(60);
  const std::string url = "http://127.0.0.1:" + std::to_string(c.server.port);
  for (int i = 0; i < count; ++i) {
    AgentChild a{"node-" + std::to_string(i), root + "/agent-" + std::to_string(i)};
    fs::create_directories(a.dir);
    auto t = admin.Post("/v1/nodes/" + a.node + "/token", "{}", "application/json");
    if (!t || t->status != 201) {
      std::cerr << "token for " << a.node << " failed\n";
      return false;
    }
    std::ofstream(a.dir + "/token") << json::parse(t->body)["token"].get<std::string>() << "\n";
    std::fflush(nullptr);
    a.pid = fork();
    if (a.pid == 0) {
      const int err = open((a.dir + "/stderr.log").c_str(), O_WRONLY | O_CREAT | O_APPEND, 0600);
      dup2(err, 2);
      const int null = open("/dev/null", O_WRONLY);
      dup2(null, 1);
      execl(binary.c_str(), binary.c_str(), "agent", "--server", url.c_str(), "--token-file",
            (a.dir + "/token").c_str(), "--node", a.node.c_str(), "--work-dir", (a.dir + "/work").c_str(),
            "--fake-gpus", (std::to_string(kGpusPerAgent) + "xH100").c_str(), "--cpu-cores", "64", "--memory-gib",
            "512", "--runtime", runtime.c_str(), "--quiet", nullptr);
      _exit(127);
    }
    c.agents.push_back(a);
  }
  const auto deadline = Clock::now() + std::chrono::seconds(60 + count);
  while (Clock::now() < deadline) {
    auto r = admin.Get("/v1/nodes");
    int ready = 0;
    if (r && r->status == 200) {
      for (const json& n : json::parse(r->body).value("nodes", json::array())) ready += n.value("condition", "") == "ready";
    }
    if (ready == count) return true;
    for (const AgentChild& a : c.agents) {
      int status;
      if (waitpid(a.pid, &status, WNOHANG) == a.pid) {
        std::cerr << "agent " << a.node << " exited (" << WEXITSTATUS(status) << "); see " << a.dir
                  << "/stderr.log\n";
        return false;
      }
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  std::cerr << "the agents did not all register in time\n";
  return false;
}

void StopCluster(Cluster& c) {
  for (const AgentChild& a : c.agents) kill(a.pid, SIGTERM);
  for (const AgentChild& a : c.agents) {
    int status;
    waitpid(a.pid, &status, 0);
  }
  c.agents.clear();
  c.server.Stop();
}

struct Cpu {
  double server = 0, agents = 0, tasks = 0, client = 0;
};
double SelfCpuSeconds() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return static_cast<double>(u.ru_utime.tv_sec + u.ru_stime.tv_sec) +
         static_cast<double>(u.ru_utime.tv_usec + u.ru_stime.tv_usec) / 1e6;
}
Cpu CpuOf(const Cluster& c) {
  Cpu x;
  x.client = SelfCpuSeconds();
  x.server = ProcessCpuSeconds(c.server.pid);
  for (const AgentChild& a : c.agents) {
    x.agents += ProcessCpuSeconds(a.pid);
    x.tasks += ChildrenCpuSeconds(a.pid);
  }
  return x;
}

// The `start` lines of an agent's action log, read incrementally: job -> unix ms.
class StartLog {
 public:
  explicit StartLog(std::string path) : path_(std::move(path)) {}
  std::optional<double> Find(int64_t job) {
    std::ifstream in(path_);
    in.seekg(offset_);
    std::string line;
    while (std::getline(in, line)) {
      if (in.eof()) break;  // a line still being written
      offset_ += static_cast<std::streamoff>(line.size() + 1);
      const json j = json::parse(line, nullptr, false);
      if (!j.is_object() || j.value("action", "") != "start") continue;
      starts_[std::stoll(j.value("job", "0"))] = j.value("unix_ms", 0.0);
    }
    auto it = starts_.find(job);
    if (it == starts_.end()) return std::nullopt;
    return it->second;
  }

 private:
  std::string path_;
  std::streamoff offset_ = 0;
  std::map<int64_t, double> starts_;
};

struct Latency {
  std::vector<double> start_ms, succeeded_ms;
  int failed = 0;
};

// One job at a time on an idle node.
Latency MeasureLatency(const Cluster& c, int jobs, int poll_ms, int pause_ms, std::chrono::seconds budget) {
  Latency out;
  std::minstd_rand random(42);
  auto client_ptr = AdminClient(c.server.port, c.admin);
  httplib::Client& client = *client_ptr;
  StartLog starts(c.agents[0].dir + "/work/agent.log");
  const auto until = Clock::now() + budget;
  for (int i = 0; i < jobs && Clock::now() < until; ++i) {
    const double t0 = WallMs();
    auto r = client.Post("/v1/jobs", kJobBody, "application/json");
    if (!r || r->status != 201) {
      ++out.failed;
      continue;
    }
    const int64_t id = json::parse(r->body).value("id", int64_t{-1});
    std::string state;
    double seen = 0;
    while (Clock::now() < until) {
      auto g = client.Get("/v1/jobs/" + std::to_string(id));
      if (g && g->status == 200) state = json::parse(g->body).value("state", "");
      if (state == "succeeded" || state == "failed" || state == "cancelled") {
        seen = WallMs();
        break;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(poll_ms));
    }
    if (state.empty() || state == "pending" || state == "running") break;  // the budget ran out
    if (state != "succeeded") {
      ++out.failed;
      continue;
    }
    out.succeeded_ms.push_back(seen - t0);
    std::optional<double> started;
    for (int k = 0; k < 200 && !(started = starts.Find(id)); ++k) {
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    if (started) out.start_ms.push_back(*started - t0);
    // Idle again; a random pause puts the next submission at a random point
    // of the agent's cycle (heartbeats, without the watch).
    const int pause = 20 + (pause_ms > 0 ? static_cast<int>(random() % static_cast<unsigned>(pause_ms)) : 0);
    std::this_thread::sleep_for(std::chrono::milliseconds(pause));
  }
  return out;
}

struct Throughput {
  double jobs_per_s = 0;
  double submitted_per_s = 0;  // durable submissions over the window: the queue must not run dry
  int64_t finished = 0, failed = 0;
  double window_s = 0;
  double server_cpu_pct = 0, agents_cpu_pct = 0, tasks_cpu_pct = 0;
  double client_cpu_pct = 0;  // this benchmark's own submitters and event reader
};

// Keeps slots + backlog jobs outstanding and counts JobFinished events.
Throughput MeasureThroughput(const Cluster& c, int seconds, int warmup, int submitters) {
  const int64_t slots = static_cast<int64_t>(c.agents.size()) * kSlotsPerAgent;
  // Enough queued that every slot freed finds a job, without a queue so long
  // that filling it takes the warm-up.
  const int64_t outstanding_target = slots + std::max<int64_t>(64, slots / 4);
  std::atomic<int64_t> submitted{0}, finished{0}, failed{0}, submit_errors{0};
  std::atomic<bool> done{false};
  std::vector<std::thread> threads;
  for (int s = 0; s < submitters; ++s) {
    threads.emplace_back([&] {
      auto client_ptr = AdminClient(c.server.port, c.admin);
      httplib::Client& client = *client_ptr;
      while (!done) {
        if (submitted - finished >= outstanding_target) {
          std::this_thread::sleep_for(std::chrono::milliseconds(1));
          continue;
        }
        ++submitted;
        auto r = client.Post("/v1/jobs", kJobBody, "application/json");
        if (!r || r->status != 201) {
          --submitted;
          ++submit_errors;
          std::this_thread::sleep_for(std::chrono::milliseconds(10));
        }
      }
    });
  }
  threads.emplace_back([&] {
    auto client_ptr = AdminClient(c.server.port, c.admin);
    httplib::Client& client = *client_ptr;
    int64_t since = 0;
    while (!done) {
      auto r = client.Get("/v1/events?since=" + std::to_string(since) + "&limit=10000");
      size_t got = 0;
      if (r && r->status == 200) {
        const json j = json::parse(r->body, nullptr, false);
        for (const json& e : j.value("events", json::array())) {
          ++got;
          since = std::max(since, e.value("seq", int64_t{0}));
          if (e.value("type", "") != "JobFinished") continue;
          ++finished;
          if (!e.value("succeeded", true)) ++failed;
        }
      }
      if (got < 10000) std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
  });
  std::this_thread::sleep_for(std::chrono::seconds(warmup));
  const Cpu cpu0 = CpuOf(c);
  const int64_t f0 = finished, s0 = submitted;
  const auto t0 = Clock::now();
  std::this_thread::sleep_for(std::chrono::seconds(seconds));
  const Cpu cpu1 = CpuOf(c);
  const int64_t f1 = finished, s1 = submitted;
  const double wall = std::chrono::duration<double>(Clock::now() - t0).count();
  done = true;
  for (auto& t : threads) t.join();
  Throughput out;
  out.window_s = wall;
  out.finished = f1 - f0;
  out.failed = failed;
  out.jobs_per_s = static_cast<double>(f1 - f0) / wall;
  out.submitted_per_s = static_cast<double>(s1 - s0) / wall;
  out.server_cpu_pct = (cpu1.server - cpu0.server) / wall * 100;
  out.agents_cpu_pct = (cpu1.agents - cpu0.agents) / wall * 100;
  out.tasks_cpu_pct = (cpu1.tasks - cpu0.tasks) / wall * 100;
  out.client_cpu_pct = (cpu1.client - cpu0.client) / wall * 100;
  if (submit_errors > 0) std::cerr << "  (" << submit_errors << " submissions refused)\n";
  return out;
}

json ThroughputJson(const Throughput& t) {
  return json{{"jobs_per_s", t.jobs_per_s},         {"submitted_per_s", t.submitted_per_s},
              {"finished_in_window", t.finished},
              {"failed", t.failed},                 {"window_s", t.window_s},
              {"server_cpu_pct", t.server_cpu_pct}, {"agents_cpu_pct", t.agents_cpu_pct},
              {"tasks_cpu_pct", t.tasks_cpu_pct}, {"client_cpu_pct", t.client_cpu_pct}};
}

// The figure at before[runtime][phase][key] as text ("-" when absent).
std::string Before(const json& before, const std::string& runtime, const char* phase, const char* key,
                   const char* unit) {
  const json* v = &before;
  for (const char* k : {runtime.c_str(), phase, key}) {
    if (!v->is_object() || !v->contains(k)) return "-";
    v = &(*v)[k];
  }
  if (!v->is_number()) return "-";
  char text[64];
  std::snprintf(text, sizeof text, "%.1f%s", v->get<double>(), unit);
  return text;
}

void PrintThroughput(const char* what, const Throughput& t, const char* goal, const std::string& before) {
  std::printf("  %-36s %8.1f jobs/s  %-16s before: %s\n", what, t.jobs_per_s, goal, before.c_str());
  std::printf("  %-36s server CPU %5.1f%%, agents %5.1f%%, tasks %5.1f%%, this client %5.1f%% of a core%s\n", "",
              t.server_cpu_pct, t.agents_cpu_pct, t.tasks_cpu_pct, t.client_cpu_pct,
              t.failed > 0 ? " (some jobs failed)" : "");
  std::printf("  %-36s %8.1f submitted/s (the queue stays full when this keeps up)\n", "", t.submitted_per_s);
}

// The filesystem under `path` as /proc/mounts names it, and for ext4
// whether it keeps a journal: without one (as on some VM images), ext4
// skips every inode freed in the last minute when it allocates a new one,
// so each file and directory a task start creates costs a scan of the
// recently freed ones, and agents that start hundreds of tasks a second
// are slowed by the filesystem rather than by gpupool.
std::string DescribeFilesystem(const std::string& path) {
  std::ifstream mounts("/proc/mounts");
  std::string dev, dir, type, best_dev, best_dir, best_type, rest;
  const std::string canonical = fs::weakly_canonical(path).string();
  while (mounts >> dev >> dir >> type && std::getline(mounts, rest)) {
    const bool under = canonical == dir || canonical.rfind(dir == "/" ? dir : dir + "/", 0) == 0;
    if (under && dir.size() >= best_dir.size()) best_dev = dev, best_dir = dir, best_type = type;
  }
  std::string out = best_type.empty() ? "unknown filesystem" : best_type + " on " + best_dev + " at " + best_dir;
  if (best_type == "ext4") {
    std::ifstream task("/sys/fs/ext4/" + fs::path(best_dev).filename().string() + "/journal_task");
    std::string name;
    if (task >> name && name == "<none>") {
      out += ", WITHOUT a journal: every new file scans inodes freed in the last minute (ext4 recently_deleted); "
             "on such a disk give --work-root a journaled filesystem or tmpfs to measure gpupool itself";
    } else if (!name.empty()) {
      out += ", journaled";
    }
  }
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"gpupool job lifecycle benchmark: submit -> started -> succeeded, and jobs per second"};
  std::string binary = "build/gpupool", json_path, runtimes = "process", phases = "latency,one,many";
  int latency_jobs = 100, poll_ms = 2, agents = 100, seconds = 20, warmup = 10, submitters = 16, latency_budget_s = 300;
  app.add_option("--binary", binary, "the gpupool binary")->capture_default_str();
  app.add_option("--runtimes", runtimes, "task runtimes to measure, in order: process, oci (oci: latency and one agent)")
      ->capture_default_str();
  app.add_option("--phases", phases, "latency, one (agent), many (agents)")->capture_default_str();
  app.add_option("--latency-jobs", latency_jobs, "jobs measured one at a time on an idle node")->capture_default_str();
  app.add_option("--latency-budget", latency_budget_s, "seconds at most for those")->capture_default_str();
  app.add_option("--poll-ms", poll_ms, "how often the client looks at a job's state")->capture_default_str();
  int pause_ms = 0;
  app.add_option("--latency-pause-ms", pause_ms, "a random pause up to this long between latency jobs")
      ->capture_default_str();
  app.add_option("--agents", agents, "agents (8 fake H100s each) of the many-agents phase")->capture_default_str();
  app.add_option("--seconds", seconds, "measured window of each throughput phase")->capture_default_str();
  app.add_option("--warmup", warmup, "seconds before that window")->capture_default_str();
  app.add_option("--submitters", submitters, "client threads submitting")->capture_default_str();
  app.add_option("--json", json_path, "also write the figures to this file");
  std::string work_root = fs::temp_directory_path().string();
  app.add_option("--work-root", work_root,
                 "where the server's data and the agents' work directories go (a node's local disk)")
      ->capture_default_str();
  std::string before_path;
  app.add_option("--before", before_path,
                 "figures of an earlier build (a --json file) to print beside these: bench/lifecycle/before.json "
                 "holds those of the server before the watch (heartbeats only)");
  CLI11_PARSE(app, argc, argv);
  json before = json::object();
  if (!before_path.empty()) {
    std::ifstream in(before_path);
    before = json::parse(in, nullptr, false);
    if (before.is_discarded()) {
      std::cerr << before_path << ": not JSON\n";
      return 2;
    }
  }

  const std::string root = (fs::path(work_root) / ("gpupool-lifecycle-" + std::to_string(getpid()))).string();
  fs::create_directories(root);
  std::printf("work directories under %s: %s\n", work_root.c_str(), DescribeFilesystem(root).c_str());
  json figures = json::object();
  int rc = 0;
  for (const std::string& runtime : {std::string("process"), std::string("oci")}) {
    if (runtimes.find(runtime) == std::string::npos) continue;
    json& fig = figures[runtime];
    std::printf("task runtime %s; server defaults (heartbeat every engine.reclaim.poll, 5 s)\n", runtime.c_str());
    const bool latency = phases.find("latency") != std::string::npos, one = phases.find("one") != std::string::npos;
    if (latency || one) {
      Cluster c;
      if (!StartCluster(binary, root + "/" + runtime + "-one", runtime, 1, c)) {
        std::printf("  %s runtime: the agent did not come up (for oci: runc must work here); skipped\n",
                    runtime.c_str());
        StopCluster(c);
        if (runtime == "process") rc = 1;
        continue;
      }
      if (latency) {
        const Latency l = MeasureLatency(c, runtime == "oci" ? std::min(latency_jobs, 30) : latency_jobs, poll_ms,
                                         pause_ms, std::chrono::seconds(latency_budget_s));
        std::printf("  %-36s p50 %8.1f ms  p99 %8.1f ms   (goal p50 <= 20 ms, p99 <= 100 ms; %zu jobs)"
                    "  before: p50 %s, p99 %s\n",
                    "submit -> process started", Percentile(l.start_ms, 0.5), Percentile(l.start_ms, 0.99),
                    l.start_ms.size(), Before(before, runtime, "latency", "start_p50_ms", " ms").c_str(),
                    Before(before, runtime, "latency", "start_p99_ms", " ms").c_str());
        std::printf("  %-36s p50 %8.1f ms  p99 %8.1f ms   (goal p50 <= 50 ms; polled every %d ms)"
                    "  before: p50 %s, p99 %s\n",
                    "submit -> succeeded", Percentile(l.succeeded_ms, 0.5), Percentile(l.succeeded_ms, 0.99),
                    poll_ms, Before(before, runtime, "latency", "succeeded_p50_ms", " ms").c_str(),
                    Before(before, runtime, "latency", "succeeded_p99_ms", " ms").c_str());
        if (l.failed > 0) std::printf("  %d jobs did not succeed\n", l.failed);
        fig["latency"] = json{{"jobs", l.succeeded_ms.size()},
                              {"failed", l.failed},
                              {"start_p50_ms", Percentile(l.start_ms, 0.5)},
                              {"start_p99_ms", Percentile(l.start_ms, 0.99)},
                              {"succeeded_p50_ms", Percentile(l.succeeded_ms, 0.5)},
                              {"succeeded_p99_ms", Percentile(l.succeeded_ms, 0.99)}};
      }
      if (one) {
        const Throughput t = MeasureThroughput(c, seconds, warmup, submitters);
        PrintThroughput("one agent, 8 GPUs in quarter shares", t, "(goal >= 500)",
                        Before(before, runtime, "one_agent", "jobs_per_s", " jobs/s"));
        fig["one_agent"] = ThroughputJson(t);
      }
      StopCluster(c);
    }
    if (runtime == "process" && phases.find("many") != std::string::npos) {
      Cluster c;
      if (!StartCluster(binary, root + "/" + runtime + "-many", runtime, agents, c)) {
        StopCluster(c);
        rc = 1;
        continue;
      }
      const Throughput t = MeasureThroughput(c, seconds, warmup, submitters);
      const std::string what = std::to_string(agents) + " agents, 8 GPUs each in quarters";
      PrintThroughput(what.c_str(), t, "(goal >= 1000)", Before(before, runtime, "many_agents", "jobs_per_s", " jobs/s"));
      fig["many_agents"] = ThroughputJson(t);
      fig["many_agents"]["agents"] = agents;
      StopCluster(c);
    }
  }
  if (!json_path.empty()) std::ofstream(json_path) << figures.dump(2) << "\n";
  fs::remove_all(root);
  return rc;
}
