// See synthetic_history.h.
#include "src/cli/testing/synthetic_history.h"

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <vector>

#include "src/server/config_record.h"
#include "src/server/data_dir.h"
#include "src/server/journal.h"
#include "src/server/server_config.h"
#include "src/sim/scenario.h"
#include "src/sim/scenario_runner.h"

namespace gpupool::testing {
namespace {

constexpr size_t kEventsPerBatch = 20'000;

// The job mix's mean GPU-hours per job: 2.6 GPUs x 2.75 h (lognormal,
// median 2 h, sigma 0.8, before the 24 h cap).
constexpr double kGpuHoursPerJob = 2.6 * 2.75;

}  // namespace

SyntheticHistory SyntheticMonth(int nodes, int days, double load, uint64_t seed) {
  const int gpus = nodes * 8;
  const auto n = [](double v) { return std::to_string(static_cast<int64_t>(v)); };
  SyntheticHistory h;
  // The seed is the world's: it seeds the engine's tie-breaks too.
  h.world = "name: synthetic-month\nseed: " + std::to_string(seed) + "\n"
            "engine: {policy: best, reclaim: {deadlines: false}}\n"
            "cluster:\n  nodes:\n    - {count: " + n(nodes) + ", model: H100, gpus: 8, cpu_cores: 192, "
            "memory_gib: 2048, racks: " + n(std::max(1, nodes / 16)) + "}\n"
            "pools:\n  - {name: gpu}\n"
            "tenants:\n"
            "  - {name: research, quota: {gpu: {guaranteed_gpus: " + n(gpus / 2) + ", limit_gpus: " + n(gpus) + "}}}\n"
            "  - {name: product, quota: {gpu: {guaranteed_gpus: " + n(gpus / 4) + ", limit_gpus: " + n(gpus) + "}}}\n"
            "  - {name: interns, quota: {gpu: {guaranteed_gpus: 0, limit_gpus: " + n(gpus / 2) + "}}}\n";
  const double per_tenant_rate = load * gpus / kGpuHoursPerJob / 3;
  char rate[32];
  std::snprintf(rate, sizeof rate, "%.3f", per_tenant_rate);
  std::string workload = "horizon: " + n(days * 24) + "h\nworkload:\n";
  for (const char* tenant : {"research", "product", "interns"}) {
    workload += std::string("  - tenant: ") + tenant + "\n" +
                "    arrivals: {process: diurnal, rate_per_hour: " + rate + ", amplitude: 0.4, peak_hour: 14}\n"
                "    jobs:\n"
                "      - {name: retrain, weight: 0.1, kind: training, priority: high, gpus: 8, cpu_cores: 64, "
                "memory_gib: 512, checkpointable: true, duration: {lognormal: {median: 2h, sigma: 0.8}, max: 24h}}\n"
                "      - {name: exp-4, weight: 0.2, kind: training, priority: normal, gpus: 4, cpu_cores: 32, "
                "memory_gib: 256, checkpointable: true, duration: {lognormal: {median: 2h, sigma: 0.8}, max: 24h}}\n"
                "      - {name: exp-2, weight: 0.3, kind: training, priority: normal, gpus: 2, cpu_cores: 16, "
                "memory_gib: 128, duration: {lognormal: {median: 2h, sigma: 0.8}, max: 24h}}\n"
                "      - {name: sweep, weight: 0.4, kind: training, priority: low, gpus: 1, cpu_cores: 8, "
                "memory_gib: 64, duration: {lognormal: {median: 2h, sigma: 0.8}, max: 24h}}\n";
  }
  h.workload = workload;
  h.server = "server: {tick: 30s}\n";
  return h;
}

Result<SyntheticJournal> WriteSyntheticJournal(const SyntheticHistory& h, const std::string& dir) {
  const std::string config_text = h.ServerConfigText();
  GP_TRY(ParseServerConfig(config_text, "synthetic server configuration", "."));
  GP_ASSIGN_OR_RETURN(const Scenario scenario, ParseScenario(h.world + h.workload, "synthetic scenario", "."));
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (std::filesystem::exists(std::filesystem::path(dir) / kDatabaseFile)) {
    return FailedPrecondition(dir + " already holds a journal");
  }
  GP_ASSIGN_OR_RETURN(auto journal, OpenSqliteJournal(dir));
  SyntheticJournal out;
  JournalBatch batch;
  Status written;
  const auto flush = [&] {
    if (written && !batch.events.empty()) written = journal->Commit(batch);
    batch.events.clear();
  };
  RunOptions o;
  o.on_event = [&](const Event& e) {
    batch.events.push_back(JournalEvent{e.seq, ToMillis(e.at), EventName(e.body), ToJsonLine(e)});
    out.events++;
    if (std::holds_alternative<JobSubmitted>(e.body)) out.jobs++;
    if (batch.events.size() >= kEventsPerBatch) flush();
  };
  GP_TRY(RunScenario(scenario, o));
  flush();
  GP_TRY(written);
  GP_TRY(RecordConfigInForce(*journal, config_text, dir + "/server.yaml", 1, 0));
  std::ofstream(dir + "/server.yaml") << config_text;
  return out;
}

}  // namespace gpupool::testing
