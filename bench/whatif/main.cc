// What-if at pool scale (make bench, issue 20): a month of a 1,000-GPU
// pool (125 servers of 8 H100) run through the daemon's Engine by the
// simulator and written as a server's journal (the synthetic month of
// src/cli/testing/synthetic_history.h), then `gpupool config check
// NEW.yaml --against DIR` run by the real binary: it reads the journal
// through a copy, replays the month under the recorded configuration and
// under the new one, and judges the change. Printed: the wall time beside
// the goal (under 30 s on 2 cores), the peak memory, the replay's
// fidelity under the configuration in force, and the verdict. Then `gpupool
// sim tune` with 64 runs over the journal's last week on both cores (goal
// under 10 minutes).
//
//   gpupool_whatif_bench --binary build/gpupool [--nodes 125] [--days 30] [--load 0.8] [--keep true]
#include <sys/resource.h>
#include <sys/wait.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <string>

#include <nlohmann/json.hpp>

#include "src/cli/testing/synthetic_history.h"

namespace {

struct Flags {
  std::string binary = "build/gpupool";
  int nodes = 125, days = 30;
  double load = 0.8;
  bool keep = false;  // leave the data directory for a look
};

double SecondsSince(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

// Runs `command`, returns its stdout and exit code.
std::pair<std::string, int> Run(const std::string& command) {
  std::string out;
  FILE* p = ::popen(command.c_str(), "r");
  if (p == nullptr) return {"", -1};
  char buf[65536];
  size_t n = 0;
  while ((n = std::fread(buf, 1, sizeof buf, p)) > 0) out.append(buf, n);
  const int status = ::pclose(p);
  return {out, WIFEXITED(status) ? WEXITSTATUS(status) : -1};
}

bool ParseFlags(int argc, char** argv, Flags& f) try {
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string k = argv[i], v = argv[i + 1];
    if (k == "--binary") f.binary = v;
    else if (k == "--nodes") f.nodes = std::stoi(v);
    else if (k == "--days") f.days = std::stoi(v);
    else if (k == "--load") f.load = std::stod(v);
    else if (k == "--keep") f.keep = v == "true";
    else return false;
  }
  return f.nodes > 0 && f.days > 0 && f.load > 0;
} catch (const std::exception&) {  // a number that does not parse
  return false;
}

}  // namespace

int main(int argc, char** argv) {
  Flags f;
  if (!ParseFlags(argc, argv, f) || argc % 2 == 0) {
    std::cerr << "usage: gpupool_whatif_bench --binary PATH [--nodes N] [--days D] [--load L] [--keep true]\n";
    return 2;
  }
  const std::string root = (std::filesystem::temp_directory_path() / "gpupool-whatif-bench").string();
  std::filesystem::remove_all(root);
  const auto month = gpupool::testing::SyntheticMonth(f.nodes, f.days, f.load, /*seed=*/1);
  auto t0 = std::chrono::steady_clock::now();
  auto written = gpupool::testing::WriteSyntheticJournal(month, root + "/data");
  if (!written) {
    std::cerr << "generating the journal: " << written.error().message << "\n";
    return 1;
  }
  std::printf("journal: %d GPUs, %d days, %lld jobs, %lld events, generated in %.1f s (simulator + SQLite)\n",
              f.nodes * 8, f.days, static_cast<long long>(written->jobs), static_cast<long long>(written->events),
              SecondsSince(t0));
  // The new configuration: the interns may borrow a quarter of the pool instead of half.
  std::string next = month.ServerConfigText();
  const std::string from = "limit_gpus: " + std::to_string(f.nodes * 8 / 2) + "}}}";
  if (auto at = next.rfind(from); at != std::string::npos) {
    next.replace(at, from.size(), "limit_gpus: " + std::to_string(f.nodes * 8 / 4) + "}}}");
  }
  std::ofstream(root + "/new.yaml") << next;
  t0 = std::chrono::steady_clock::now();
  const auto [out, rc] = Run(f.binary + " config check " + root + "/new.yaml --against " + root + "/data --json");
  const double wall = SecondsSince(t0);
  rusage ru{};
  ::getrusage(RUSAGE_CHILDREN, &ru);
  if (rc != 0 && rc != 1) {
    std::cerr << "gpupool config check failed (exit " << rc << ")\n";
    return 1;
  }
  const auto j = nlohmann::json::parse(out, nullptr, false);
  if (!j.is_object()) {
    std::cerr << "gpupool config check printed no JSON\n";
    return 1;
  }
  const auto& fid = j["replay"]["fidelity"];
  std::printf("config check (read + replay in force + replay new + objectives): %.1f s (goal < 30 s on 2 cores), "
              "max RSS %ld MiB\n", wall, ru.ru_maxrss / 1024);
  std::printf("fidelity in force: %lld jobs compared, start error p50 %.3f s, p99 %.3f s, max %.3f s, %lld placed "
              "elsewhere, %lld started in only one\n",
              static_cast<long long>(fid["compared"].get<int64_t>()), fid["start_error_p50_s"].get<double>(),
              fid["start_error_p99_s"].get<double>(), fid["start_error_max_s"].get<double>(),
              static_cast<long long>(fid["placement_differs"].get<int64_t>()),
              static_cast<long long>(fid["started_in_one_only"].get<int64_t>()));
  std::printf("verdict: %s\n", j["holds"].get<bool>() ? "every objective holds" : "an objective is broken");

  // sim tune: 64 runs over the journal's last week, on both cores.
  std::ofstream(root + "/space.yaml")
      << "parameters:\n"
         "  - {path: engine.policy, values: [best, FGD, GpuPacking]}\n"
         "  - {path: 'tenants[interns].quota.gpu.limit_gpus', min: " << f.nodes << ", max: " << f.nodes * 8
      << ", integer: true}\n"
         "  - {path: 'tenants[product].quota.gpu.guaranteed_gpus', min: 0, max: " << f.nodes * 4 << ", integer: true}\n";
  t0 = std::chrono::steady_clock::now();
  const auto [tuned, tune_rc] = Run(f.binary + " sim tune --from " + root + "/data --since 7d --space " + root +
                                    "/space.yaml --objective wait_p95_s:priority=high --front allocation_pct "
                                    "--budget 64 --parallel 2 --json");
  const double tune_wall = SecondsSince(t0);
  const auto t = nlohmann::json::parse(tuned, nullptr, false);
  if (tune_rc != 0 || !t.is_object()) {
    std::cerr << "gpupool sim tune failed (exit " << tune_rc << ")\n";
    return 1;
  }
  int failed = 0;
  for (const auto& run : t["runs"]) failed += run.contains("error") ? 1 : 0;
  const auto& best = t["runs"][t["best"][0].get<size_t>()];
  std::printf("sim tune (64 runs over the last 7 days, 2 at once): %.1f s (goal < 600 s on 2 cores), %d failed; "
              "high-priority wait p95 %.0f s as configured, %.0f s at best (%s); front of %zu\n",
              tune_wall, failed, t["runs"][0]["objective"].get<double>(), best["objective"].get<double>(),
              best["values"].dump().c_str(), t["pareto"].size());
  if (f.keep) {
    std::printf("kept %s\n", root.c_str());
  } else {
    std::filesystem::remove_all(root);
  }
  return 0;
}
