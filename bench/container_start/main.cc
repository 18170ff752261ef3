// make bench: how long a task takes to start as a container (issue 14's
// goal: p50 <= 150 ms on a 2-core machine), beside a bare process start, and
// what a running container costs the node.
//
//   container start: from the agent's call to TaskRuntime::Start (bundle,
//     shim, runc create + start) to the first instruction of the task: the
//     task is `date +%s%N` run by the container's init, whose printed wall
//     clock is compared with the clock read before Start;
//   bare process start: the same `date +%s%N` started with the process
//     runtime (posix_spawn), for reference;
//   per running container: the shim's resident memory, and the agent's CPU
//     for polling it (Poll and Alive for each container every 50 ms, as the
//     agent's loop does) over 10 s with 20 sleeping containers.
//
// Needs root and runc; says so and exits 0 otherwise.
#include <signal.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <string>
#include <thread>
#include <vector>

#include "src/agent/oci_runtime.h"
#include "src/agent/process_runtime.h"
#include "src/base/time.h"

namespace gpupool {
namespace {

namespace fs = std::filesystem;

int64_t NowNs() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}

TaskLaunch Launch(const std::string& dir, int job, std::vector<std::string> argv) {
  TaskLaunch l;
  l.job = job;
  l.argv = std::move(argv);
  l.log_file = dir + "/logs/" + std::to_string(job) + ".log";
  l.checkpoint_dir = dir + "/ckpt/" + std::to_string(job);
  l.scratch_dir = dir + "/scratch/" + std::to_string(job);
  l.task_dir = dir + "/task/" + std::to_string(job);
  l.image = "host";
  l.uid = 1'000'000;
  l.uid_count = 65536;
  l.memory_mib = 256;
  l.cpu_milli = 1000;
  l.pids_limit = 64;
  return l;
}

// Waits for the task to end; the nanoseconds it printed (0 if none).
int64_t WaitPrinted(RunningTask& t, const std::string& log) {
  for (int i = 0; i < 2000; ++i) {
    if (t.Poll()) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  t.Signal(SIGKILL);
  for (int i = 0; i < 500 && t.Alive(); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(2));
  t.Remove();
  std::ifstream in(log);
  int64_t ns = 0;
  in >> ns;
  return ns;
}

struct Stats {
  double p50_ms = 0, p99_ms = 0;
  int failures = 0;
};

Stats Measure(TaskRuntime& runtime, const std::string& dir, int n, int first_job) {
  std::vector<double> ms;
  Stats s;
  for (int i = 0; i < n; ++i) {
    const TaskLaunch l = Launch(dir, first_job + i, {"date", "+%s%N"});
    fs::create_directories(fs::path(l.log_file).parent_path());
    fs::create_directories(l.task_dir);
    const int64_t before = NowNs();
    auto t = runtime.Start(l);
    if (!t) {
      std::cerr << "start failed: " << t.error().message << "\n";
      ++s.failures;
      continue;
    }
    const int64_t printed = WaitPrinted(**t, l.log_file);
    if (printed <= before) {
      ++s.failures;
      continue;
    }
    ms.push_back(static_cast<double>(printed - before) / 1e6);
  }
  if (ms.empty()) return s;
  std::sort(ms.begin(), ms.end());
  s.p50_ms = ms[ms.size() / 2];
  s.p99_ms = ms[std::min(ms.size() - 1, static_cast<size_t>(0.99 * static_cast<double>(ms.size())))];
  return s;
}

double CpuSeconds() {
  rusage u{};
  ::getrusage(RUSAGE_SELF, &u);
  return static_cast<double>(u.ru_utime.tv_sec + u.ru_stime.tv_sec) +
         static_cast<double>(u.ru_utime.tv_usec + u.ru_stime.tv_usec) / 1e6;
}

int64_t RssKib(int pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/status");
  std::string key;
  int64_t kib = 0;
  while (in >> key) {
    if (key == "VmRSS:") {
      in >> kib;
      return kib;
    }
    in.ignore(1 << 10, '\n');
  }
  return 0;
}

// The shims of the running containers: children of this process.
std::vector<int> ShimPids() {
  std::vector<int> out;
  std::ifstream in("/proc/self/task/" + std::to_string(::getpid()) + "/children");
  for (int p = 0; in >> p;) out.push_back(p);
  return out;
}

int Run() {
  OciRuntimeOptions o;
  o.runc = FindOnPath("runc");
  o.shim = FindShim();
  if (::geteuid() != 0 || o.runc.empty() || o.shim.empty()) {
    std::cout << "container start: skipped (needs root, runc and gpupool-shim beside this binary)\n";
    return 0;
  }
  const std::string dir = (fs::temp_directory_path() / ("gpupool-bench-" + std::to_string(::getpid()))).string();
  o.work_dir = dir + "/agent";
  fs::create_directories(o.work_dir);
  auto oci = MakeOciRuntime(o);
  auto process = MakeProcessRuntime(dir + "/process", [](int) {});
  constexpr int kStarts = 100;
  Measure(*oci, dir, 3, 100000);  // warm the page cache
  const Stats c = Measure(*oci, dir, kStarts, 0);
  const Stats p = Measure(*process, dir, kStarts, 1000);
  std::printf("%-58s %10s %10s %12s\n", "start to first instruction (100 starts)", "p50 ms", "p99 ms", "goal");
  std::printf("%-58s %10.1f %10.1f %12s\n", "container (oci runtime: bundle, shim, runc create+start)", c.p50_ms,
              c.p99_ms, "p50 <= 150");
  std::printf("%-58s %10.2f %10.2f %12s\n", "bare process (process runtime, posix_spawn)", p.p50_ms, p.p99_ms, "-");
  if (c.failures + p.failures > 0) std::printf("failures: %d container, %d process\n", c.failures, p.failures);

  // What running containers cost: 20 sleeping ones, polled as the agent does.
  constexpr int kRunning = 20;
  std::vector<std::unique_ptr<RunningTask>> tasks;
  for (int i = 0; i < kRunning; ++i) {
    TaskLaunch l = Launch(dir, 5000 + i, {"sleep", "60"});
    fs::create_directories(fs::path(l.log_file).parent_path());
    fs::create_directories(l.task_dir);
    if (auto t = oci->Start(l)) tasks.push_back(std::move(*t));
  }
  int64_t rss = 0;
  const std::vector<int> shims = ShimPids();
  for (int pid : shims) rss += RssKib(pid);
  const double cpu0 = CpuSeconds();
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (std::chrono::steady_clock::now() < until) {
    for (auto& t : tasks) {
      (void)t->Poll();
      (void)t->Alive();
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  const double cpu = CpuSeconds() - cpu0;
  std::printf("running containers: %zu; shim resident memory %.0f KiB each; agent polling CPU %.3f%% of a core "
              "per container\n",
              tasks.size(), shims.empty() ? 0.0 : static_cast<double>(rss) / static_cast<double>(shims.size()),
              tasks.empty() ? 0.0 : 100.0 * cpu / 10.0 / static_cast<double>(tasks.size()));
  for (auto& t : tasks) {
    t->Signal(SIGKILL);
    for (int i = 0; i < 500 && t->Alive(); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(2));
    t->Remove();
  }
  std::error_code ec;
  fs::remove_all(dir, ec);
  return 0;
}

}  // namespace
}  // namespace gpupool

int main() { return gpupool::Run(); }
