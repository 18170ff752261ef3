#include "src/cli/sim_fgd.h"

#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <iostream>
#include <memory>
#include <thread>

#include <nlohmann/json.hpp>

#include "src/cli/parse.h"
#include "src/cli/progress.h"
#include "src/sim/html_report.h"
#include "src/sim/fgd_protocol.h"
#include "src/sim/fgd_reference.h"
#include "src/config/alibaba_gpu_trace.h"
#include "src/config/traces_dir.h"
#include "src/sim/synthetic.h"

namespace gpupool {
namespace {

struct Options {
  std::string nodes_path;
  std::string pods_path;
  std::string policies = "best";
  std::string seeds = "42-51";
  std::string compare_path;
  bool json = false;
  bool generate = false;
  int generate_nodes = 1200;
  int generate_pods = 8000;
  double tune_ratio = 1.3;
  int threads = 0;
  std::string target = "pod-list";  // or "learned"
  std::string report;
};

int Fail(const std::string& message) {
  std::cerr << "gpupool sim fgd: " << message << "\n";
  return 2;
}

Result<std::vector<PolicySpec>> ResolvePolicies(const std::string& text) {
  GP_ASSIGN_OR_RETURN(auto names, ParseNameList("--policy", text));
  std::vector<PolicySpec> out;
  for (const std::string& name : names) {
    if (name == "all") {
      for (const PolicySpec& p : BuiltinPolicies()) {
        if (p.name != "best") out.push_back(p);  // an alias: already listed under its own name
      }
      continue;
    }
    auto p = FindPolicy(name);
    if (!p) return InvalidArgument("--policy: " + p.error().message);
    out.push_back(*p);
  }
  return out;
}

nlohmann::json NumberOrNull(double v) { return std::isnan(v) ? nlohmann::json(nullptr) : nlohmann::json(v); }

std::string Fixed(double v, int decimals = 2) {
  if (std::isnan(v)) return "-";
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.*f", decimals, v);
  return buf;
}

struct Workload {
  std::vector<NodeSpec> nodes;
  std::vector<TracePod> pods;
  std::string name;
};

// The cluster and pods: generated, or the openb trace's files.
Result<Workload> LoadWorkload(const Options& o) {
  const Catalog& catalog = Catalog::Builtin();
  Workload w;
  if (o.generate) {
    if (!o.nodes_path.empty() || !o.pods_path.empty()) return InvalidArgument("--generate excludes --nodes and --pods");
    w.nodes = GenerateMixedCluster(o.generate_nodes, 1, catalog);
    w.pods = GeneratePods(o.generate_pods, 2);
    w.name = "generated";
    return w;
  }
  if (o.nodes_path.empty() || o.pods_path.empty()) {
    return InvalidArgument("--nodes and --pods are required (or --generate for a generated cluster and workload)");
  }
  for (const auto& [flag, path] : {std::pair{"--nodes", &o.nodes_path}, std::pair{"--pods", &o.pods_path}}) {
    if (!std::filesystem::exists(*path)) return NotFound(std::string(flag) + ": " + MissingTraceFile(*path));
  }
  GP_ASSIGN_OR_RETURN(w.nodes, LoadOpenbNodesFile(o.nodes_path, catalog));
  GP_ASSIGN_OR_RETURN(w.pods, LoadOpenbPodsFile(o.pods_path, catalog));
  w.name = std::filesystem::path(o.pods_path).stem().string();
  return w;
}

struct Runs {
  std::vector<FgdPolicySummary> summaries;  // by policy
  size_t count = 0;
  int threads = 0;
  double elapsed_s = 0;
};

// Every (policy, seed) run; they are independent, so they run on a small pool.
Result<Runs> RunAll(const Options& o, const Workload& w, const std::vector<PolicySpec>& policies,
                    const std::vector<uint64_t>& seeds) {
  const bool learned = o.target == "learned";
  std::vector<Demand> demands;
  demands.reserve(w.pods.size());
  for (const auto& p : w.pods) demands.push_back(p.demand);
  int64_t cluster_cpu = 0, cluster_gpu = 0;
  for (const NodeSpec& n : w.nodes) {
    cluster_cpu += n.cpu_milli;
    cluster_gpu += int64_t{n.gpu_count} * kMilliPerGpu;
  }
  GP_ASSIGN_OR_RETURN(const auto target, TargetWorkloadOf(demands, cluster_cpu, cluster_gpu));
  struct Job {
    size_t policy;
    uint64_t seed;
    Result<FgdRunResult> result = InvalidArgument("not run");
  };
  std::vector<Job> jobs;
  for (size_t p = 0; p < policies.size(); ++p) {
    for (uint64_t s : seeds) jobs.push_back(Job{p, s});
  }
  Runs out;
  out.count = jobs.size();
  out.threads = o.threads > 0 ? o.threads : std::max(1u, std::thread::hardware_concurrency());
  const auto started = std::chrono::steady_clock::now();
  std::atomic<size_t> next{0}, done{0};
  {
    std::vector<std::jthread> workers;
    for (int t = 0; t < out.threads; ++t) {
      workers.emplace_back([&] {
        for (size_t j; (j = next.fetch_add(1)) < jobs.size();) {
          const PolicySpec& policy = policies[jobs[j].policy];
          const FgdRunOptions options{o.tune_ratio, jobs[j].seed};
          jobs[j].result = learned ? RunFgdProtocolLearning(w.nodes, w.pods, target.frag, policy, {}, options)
                                   : RunFgdProtocol(w.nodes, w.pods, target, policy, options);
          done.fetch_add(1);
        }
      });
    }
    ProgressLine progress;
    while (progress.enabled() && done.load() < jobs.size()) {
      const size_t d = done.load();
      progress.Update(static_cast<double>(d) / static_cast<double>(jobs.size()),
                      std::to_string(d) + " of " + std::to_string(jobs.size()) + " runs (policy x seed) done");
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
  }
  out.elapsed_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  for (size_t p = 0; p < policies.size(); ++p) {
    std::vector<FgdRunResult> runs;
    for (auto& j : jobs) {
      if (j.policy != p) continue;
      if (!j.result) return std::unexpected(j.result.error());
      runs.push_back(std::move(*j.result));
    }
    out.summaries.push_back(SummarizeFgdRuns(runs));
  }
  return out;
}

const FgdReferenceRow* Published(const FgdReference& reference, const std::string& workload,
                                 const std::string& policy) {
  auto it = reference.find({workload, policy});
  return it == reference.end() ? nullptr : &it->second;
}

Status WriteReport(const Options& o, const Workload& w, const Runs& runs, const FgdReference& reference) {
  const bool learned = o.target == "learned";
  FgdReportInput in{w.name, {}, runs.summaries, {}};
  in.setup = std::to_string(w.nodes.size()) + " nodes; " + std::to_string(w.pods.size()) + " pods (" + w.name +
             ") inflated to " + Fixed(o.tune_ratio * 100, 0) + " % of GPU capacity; seeds " + o.seeds + "; target " +
             (learned ? "learned from the pods as they arrive" : "built from the whole pod list (the paper's setup)") +
             ". Allocation is the seed mean.";
  for (const auto& sm : runs.summaries) {
    if (const auto* ref = Published(reference, w.name, sm.policy)) {
      in.published_unallocated_pct_at_100[sm.policy] = ref->unallocated_pct_at_100;
    }
  }
  return WriteHtmlReport(o.report, HtmlFgdReport(in));
}

void PrintJson(const Options& o, const Workload& w, const Runs& runs, const FgdReference& reference) {
  nlohmann::json out = nlohmann::json::array();
  for (const auto& s : runs.summaries) {
    nlohmann::json alloc = nlohmann::json::object();
    for (int k = 0; k < kFgdBins; ++k) alloc[std::to_string(k)] = NumberOrNull(s.allocated_pct[k]);
    nlohmann::json j = {
        {"policy", s.policy},
        {"workload", w.name},
        {"seeds", s.seeds},
        {"allocated_pct_at", alloc},
        {"unallocated_pct_at_100", NumberOrNull(s.unallocated_pct_at_100)},
        {"unallocated_pct_sd_at_100", NumberOrNull(s.unallocated_pct_sd_at_100)},
        {"fragmentation_pct_at_100", NumberOrNull(s.fragmentation_pct_at_100)},
        {"fragmentation_ratio_pct_at_100", NumberOrNull(s.fragmentation_ratio_pct_at_100)},
        {"pods_failed_mean", s.pods_failed_mean},
        {"wall_seconds", s.wall_seconds},
    };
    if (o.target == "learned") j["target"] = "learned";
    if (const auto* ref = Published(reference, w.name, s.policy)) {
      j["published"] = {{"unallocated_pct_at_100", ref->unallocated_pct_at_100},
                        {"unallocated_pct_sd_at_100", ref->allocated_pct_sd_at_100},
                        {"fragmentation_pct_at_100", ref->frag_amount_pct_at_100}};
    }
    out.push_back(std::move(j));
  }
  std::cout << out.dump(2) << "\n";
}

void PrintTableHeader(const Options& o, const Workload& w, size_t seeds, bool with_reference) {
  int64_t gpus = 0;
  for (const auto& n : w.nodes) gpus += n.gpu_count;
  std::printf("FGD protocol: %zu nodes, %lld GPUs; %zu pods (%s) inflated to %.0f%% of GPU capacity; %zu seeds\n",
              w.nodes.size(), static_cast<long long>(gpus), w.pods.size(), w.name.c_str(), o.tune_ratio * 100,
              seeds);
  if (o.target == "learned") {
    std::printf("--target learned: FGD's and FGD+'s target workload is learned from the pods as they arrive (the "
                "daemon's learner, from its default prior); fragmentation is still measured against the pod "
                "list's typical demands.\n");
  } else {
    std::printf("The paper's setup: the whole pod list is known in advance, and FGD's and FGD+'s target workload "
                "is built from it (not learned from arrivals; --target learned learns it).\n");
  }
  std::printf("Unallocated GPU %% when arrived requests reach 100%% of capacity (lower is better), seed mean.\n\n");
  std::printf("%-14s %8s %6s | %6s %6s %6s %6s %6s | %8s %8s | %7s %7s", "policy", "unalloc", "sd", "@80",
              "@90", "@100", "@110", "@130", "frag", "frag/idle", "failed", "wall-s");
  if (with_reference) std::printf(" | %9s %6s", "published", "diff");
  std::printf("\n%-14s %8s %6s | %34s | %8s %8s | %7s %7s", "", "@100 %", "", "GPU allocation % at arrived %",
              "@100 %", "@100 %", "pods", "");
  if (with_reference) std::printf(" | %9s %6s", "unalloc", "points");
  std::printf("\n");
}

void PrintTable(const Options& o, const Workload& w, size_t seeds, const Runs& runs, const FgdReference& reference) {
  PrintTableHeader(o, w, seeds, !reference.empty());
  for (const auto& s : runs.summaries) {
    std::printf("%-14s %8s %6s | %6s %6s %6s %6s %6s | %8s %8s | %7.0f %7.2f", s.policy.c_str(),
                Fixed(s.unallocated_pct_at_100).c_str(), Fixed(s.unallocated_pct_sd_at_100).c_str(),
                Fixed(s.allocated_pct[80]).c_str(), Fixed(s.allocated_pct[90]).c_str(),
                Fixed(s.allocated_pct[100]).c_str(), Fixed(s.allocated_pct[110]).c_str(),
                Fixed(s.allocated_pct[130]).c_str(), Fixed(s.fragmentation_pct_at_100).c_str(),
                Fixed(s.fragmentation_ratio_pct_at_100).c_str(), s.pods_failed_mean, s.wall_seconds);
    if (!reference.empty()) {
      if (const auto* ref = Published(reference, w.name, s.policy)) {
        std::printf(" | %9s %+6.2f", Fixed(ref->unallocated_pct_at_100).c_str(),
                    s.unallocated_pct_at_100 - ref->unallocated_pct_at_100);
      } else {
        std::printf(" | %9s %6s", "-", "");
      }
    }
    std::printf("\n");
  }
  std::printf("\n%zu runs on %d threads in %.2f s wall.\n", runs.count, runs.threads, runs.elapsed_s);
}

int Run(const Options& o) {
  auto w = LoadWorkload(o);
  if (!w) return Fail(w.error().message);
  if (!(o.tune_ratio > 0 && o.tune_ratio <= 10)) return Fail("--tune: must be in (0, 10]");
  if (o.target != "pod-list" && o.target != "learned") {
    return Fail("--target: '" + o.target + "' is not pod-list or learned");
  }
  auto seeds = ParseSeedList("--seeds", o.seeds);
  if (!seeds) return Fail(seeds.error().message);
  auto policies = ResolvePolicies(o.policies);
  if (!policies) return Fail(policies.error().message);
  FgdReference reference;
  if (!o.compare_path.empty()) {
    auto ref = LoadFgdReference(o.compare_path);
    if (!ref) return Fail(ref.error().message);
    reference = std::move(*ref);
  }
  auto runs = RunAll(o, *w, *policies, *seeds);
  if (!runs) return Fail(runs.error().message);
  if (!o.report.empty()) {
    if (auto written = WriteReport(o, *w, *runs, reference); !written) return Fail("--report: " + written.error().message);
  }
  if (o.json) {
    PrintJson(o, *w, *runs, reference);
  } else {
    PrintTable(o, *w, seeds->size(), *runs, reference);
  }
  return 0;
}

}  // namespace

void AddSimFgdCommand(CLI::App& sim) {
  auto o = std::make_shared<Options>();
  CLI::App* cmd = sim.add_subcommand("fgd", "Run the FGD paper's placement protocol on an openb trace");
  cmd->add_option("--nodes", o->nodes_path, "openb node list CSV (sn,cpu_milli,memory_mib,gpu,model)");
  cmd->add_option("--pods", o->pods_path, "openb pod list CSV (11- or 5-column layout)");
  cmd->add_option("--policy", o->policies,
                  "comma-separated policies: Random, DotProd, GpuClustering, GpuPacking, BestFit, FGD, FGD+, "
                  "best (our best, the default), or all")
      ->capture_default_str();
  cmd->add_option("--seeds", o->seeds, "seeds: a range like 42-51 or a list like 42,43")->capture_default_str();
  cmd->add_option("--tune", o->tune_ratio, "inflate arrivals to this multiple of cluster GPU capacity")
      ->capture_default_str();
  cmd->add_option("--compare", o->compare_path,
                  "published per-policy results (fgd_policy_summary.csv) to print beside ours");
  cmd->add_option("--threads", o->threads, "parallel runs (default: one per core)");
  cmd->add_option("--target", o->target,
                  "the FGD-family policies' target workload: pod-list (the paper's setup: built from the whole "
                  "pod list) or learned (learned from the pods as they arrive, as the daemon does)")
      ->capture_default_str();
  cmd->add_flag("--json", o->json, "print one JSON array, one object per policy");
  cmd->add_option("--report", o->report, "also write a self-contained HTML report (the curves inline) to this file");
  cmd->add_flag("--generate", o->generate, "use a generated cluster and workload instead of trace files");
  cmd->add_option("--generate-nodes", o->generate_nodes, "nodes in the generated cluster")->capture_default_str();
  cmd->add_option("--generate-pods", o->generate_pods, "pods in the generated workload")->capture_default_str();
  cmd->callback([o] {
    const int rc = Run(*o);
    if (rc != 0) throw CLI::RuntimeError(rc);
  });
}

}  // namespace gpupool
