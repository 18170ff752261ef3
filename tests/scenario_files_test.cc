// The scenario files shipped in scenarios/ load and run; the heterogeneous
// one places every job on hardware of its ecosystem.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <map>

#include <nlohmann/json.hpp>

#include "src/sim/scenario.h"
#include "src/sim/runtime_samples.h"
#include "src/sim/scenario_runner.h"
#include "src/config/traces_dir.h"
#include "tests/run_binary.h"

namespace gpupool {
namespace {

const std::string kScenarios = std::string(GPUPOOL_SOURCE_DIR) + "/scenarios";

TEST(ScenarioFilesTest, EveryShippedScenarioLoads) {
  int count = 0;
  for (const auto& entry : std::filesystem::recursive_directory_iterator(kScenarios)) {
    if (entry.path().extension() != ".yaml") continue;
    auto s = LoadScenario(entry.path().string());
    EXPECT_TRUE(s.has_value()) << entry.path() << ": " << (s ? "" : s.error().message);
    ++count;
  }
  EXPECT_GE(count, 3);
}

TEST(ScenarioFilesTest, CudaJobsRunOnlyOnNvidiaAndCannJobsOnlyOnAscend) {
  auto s = LoadScenario(kScenarios + "/heterogeneous.yaml");
  ASSERT_TRUE(s.has_value()) << s.error().message;
  const std::string dir = testing::MakeTempDir();
  RunOptions o;
  o.event_log_path = dir + "/events.jsonl";
  o.check_invariants = true;
  auto r = RunScenario(*s, o);
  ASSERT_TRUE(r.has_value()) << r.error().message;
  // Node index -> family, job -> requirement name, from the event log.
  std::vector<std::string> node_family;
  std::map<int64_t, std::string> job_requirement;
  int checked = 0, ascend_used = 0, nvidia_used = 0;
  std::ifstream log(o.event_log_path);
  for (std::string line; std::getline(log, line);) {
    const auto e = nlohmann::json::parse(line);
    if (e["type"] == "NodeAdded") {
      const int cls = e["attr_class"];
      node_family.push_back(cls == 0 ? "" : s->node_classes[cls - 1].family);
    } else if (e["type"] == "JobSubmitted") {
      const int req = e["spec"]["demand"]["requirement"];
      job_requirement[e["job"]] = req == 0 ? "" : s->requirements[req - 1].name;
    } else if (e["type"] == "JobPlaced") {
      const std::string req = job_requirement.at(e["job"]);
      for (const auto& replica : e["replicas"]) {
        const std::string family = node_family.at(replica["node"].get<size_t>());
        if (req.starts_with("cuda")) {
          EXPECT_TRUE(family.starts_with("nvidia")) << req << " on " << family;
        }
        if (req.starts_with("cann")) {
          EXPECT_EQ(family, "ascend-910") << req << " on " << family;
        }
        ascend_used += family == "ascend-910";
        nvidia_used += family.starts_with("nvidia");
        ++checked;
      }
    }
  }
  EXPECT_GT(checked, 300);
  EXPECT_GT(ascend_used, 20);
  EXPECT_GT(nvidia_used, 20);
  std::filesystem::remove_all(dir);
}

// The sharing example exercises every mode, pipelines, reclamation,
// deadlines and node failures, with every invariant checked after every event.
TEST(ScenarioFilesTest, TheSharingExampleRunsEveryModeReclaimsAndRecovers) {
  auto s = LoadScenario(kScenarios + "/sharing.yaml");
  ASSERT_TRUE(s.has_value()) << s.error().message;
  RunOptions o;
  o.check_invariants = true;
  auto r = RunScenario(*s, o);
  ASSERT_TRUE(r.has_value()) << r.error().message;
  EXPECT_GT(r->sharing.mig_setups, 0);
  EXPECT_GT(r->sharing.scrubs, 0);
  EXPECT_GT(r->sharing.interference_slowdown_pct, 0);
  EXPECT_GT(r->reclaim.idle_reclaims, 0);
  EXPECT_GT(r->reclaim.resumed, 0);
  EXPECT_EQ(r->recovery.node_failures, 2);
  EXPECT_GT(r->recovery.interruptions, 0);
  EXPECT_EQ(r->all.submitted, r->all.rejected + r->all.completed + r->unfinished + r->ended);
}

TEST(ScenarioFilesTest, SimRunPrintsJsonWithTheEventLogHash) {
  auto run = testing::RunGpupool({"sim", "run", kScenarios + "/heterogeneous.yaml", "--json"});
  ASSERT_EQ(run.exit_code, 0) << run.err;
  const auto j = nlohmann::json::parse(run.out);
  EXPECT_EQ(j["event_log_sha256"].get<std::string>().size(), 64u);
  EXPECT_TRUE(j["by_priority"].contains("normal"));
  EXPECT_TRUE(j["by_tenant"].contains("llm"));
  auto again = testing::RunGpupool({"sim", "run", kScenarios + "/heterogeneous.yaml", "--json"});
  EXPECT_EQ(nlohmann::json::parse(again.out)["event_log_sha256"], j["event_log_sha256"]);
}

TEST(ScenarioFilesTest, ABadScenarioIsRefusedWithItsLocation) {
  const std::string dir = testing::MakeTempDir();
  std::ofstream(dir + "/bad.yaml") << "name: bad\ncluster:\n  nodes:\n    - {count: -1, model: A100-80GB, gpus: 8, "
                                      "cpu_cores: 8, memory_gib: 8}\npools: [{name: p}]\ntenants: [{name: t}]\n";
  auto run = testing::RunGpupool({"sim", "run", dir + "/bad.yaml"});
  EXPECT_EQ(run.exit_code, 2);
  EXPECT_NE(run.err.find("bad.yaml:4:"), std::string::npos) << run.err;
  EXPECT_NE(run.err.find("cluster.nodes[0].count"), std::string::npos) << run.err;
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace gpupool

namespace gpupool {
namespace {

TEST(SimClaimsTest, EachClaimReportsTheSeedFigureOursAndABaseline) {
  if (TraceFile(kRuntimeTraceFile).empty()) {
    GTEST_SKIP() << "the Philly run-time trace is not here (../shared/traces or $GPUPOOL_TRACES)";
  }
  auto run = testing::RunGpupool({"sim", "claims", "--json", "--scenarios", kScenarios});
  ASSERT_EQ(run.exit_code, 0) << run.err;
  const auto j = nlohmann::json::parse(run.out);
  ASSERT_TRUE(j.is_array());
  std::map<std::string, nlohmann::json> by_id;
  for (const auto& c : j) by_id[c["id"]] = c;
  ASSERT_TRUE(by_id.contains("C-PRIO"));
  ASSERT_TRUE(by_id.contains("C-LEND"));
  for (const auto& [id, c] : by_id) {
    EXPECT_FALSE(c["seed_claim"].get<std::string>().empty()) << id;
    EXPECT_TRUE(c["baseline"].is_object()) << id;
    EXPECT_TRUE(c["measured"].is_object()) << id;
    // Measured told apart from assumed: the seeds' own figures and our
    // assumptions among the inputs are named, with their values.
    const std::string assumed = c["assumptions"].dump();
    EXPECT_NE(assumed.find("time_slice_overhead 4%: the seeds' figure"), std::string::npos) << id << assumed;
    EXPECT_NE(assumed.find("checkpoint_overhead"), std::string::npos) << id << assumed;
    EXPECT_NE(assumed.find("engine.costs.scrub 0.5 s a GPU: our assumption"), std::string::npos) << id << assumed;
  }
  // Bands, not key presence (issue 16): each lower bound is a little more
  // than half the gain the corrected model measures (in the comment), so a
  // change that halves a gain fails here; a change that moves a claim on
  // purpose updates its band and says why.
  auto figure = [&](const char* id, const char* side, const char* key) {
    return by_id.at(id)[side][key].get<double>();
  };
  EXPECT_GE(figure("C-PRIO", "measured", "high_priority_wait_reduction_pct"), 38.0);  // 64.0
  EXPECT_LE(figure("C-PRIO", "measured", "low_priority_throughput_drop_pct"), 12.0);  // 7.8 (the price)
  EXPECT_GE(figure("C-LEND", "measured", "utilization_gain_pct"), 2.0);               // 3.8 points
  // Sharing: hybrid keeps more of the GPUs busy than whole GPUs only, and
  // slows tasks down less than time-slicing everything.
  const auto& part = by_id.at("C-PART");
  EXPECT_GT(part["measured"]["gpu_utilization_pct"].get<double>(), part["baseline"]["gpu_utilization_pct"].get<double>());
  EXPECT_GE(figure("C-PART", "measured", "gpu_utilization_pct") - figure("C-PART", "baseline", "gpu_utilization_pct"),
            24.0);                                                              // 40.5 points
  EXPECT_GE(figure("C-PART", "measured", "interference_reduction_pct"), 38.0);  // 65.6
  EXPECT_LT(part["measured"]["interference_slowdown_pct"].get<double>(),
            part["baseline"]["time_slice_only_interference_slowdown_pct"].get<double>());
  // Recovery (OPS-4): every interrupted job is placed again within 30 s at
  // p99. One within its tenant's guarantee takes borrowed capacity back
  // (PreemptionTest.AnInterruptedJobWithinItsGuaranteeTakesBorrowedCapacityBack);
  // one that was itself borrowed may take other tenants' unused guarantees
  // (PreemptionTest.AnInterruptedBorrowedJobTakesAnotherTenantsUnusedGuarantee
  // UntilItIsWanted). Running again takes the start latency and the restore
  // on top.
  const auto& rec = by_id.at("C-RECOVERY");
  EXPECT_GT(rec["measured"]["interruptions"].get<int>(), 0);
  EXPECT_EQ(rec["measured"]["not_replaced"].get<int>(), 0);
  EXPECT_LE(rec["measured"]["placement_latency_s_p99"].get<double>(), 30.0);  // 19.8
  EXPECT_LE(rec["measured"]["replace_latency_s_p50"].get<double>(), 60.0);
  EXPECT_GT(rec["measured"]["replace_latency_s_p50"].get<double>(),
            rec["measured"]["placement_latency_s_p50"].get<double>());
  // Topology: keeping gangs together moves fewer bytes between racks and
  // spends less of each step communicating.
  const auto& topo = by_id.at("C-TOPO");
  EXPECT_GE(figure("C-TOPO", "measured", "cross_rack_traffic_reduction_pct"), 55.0);  // 97.9
  EXPECT_GE(figure("C-TOPO", "measured", "comm_overhead_reduction_pct"), 50.0);       // 86.5
  EXPECT_LT(topo["measured"]["spanning_racks_pct"].get<double>(), topo["baseline"]["spanning_racks_pct"].get<double>());
  // The whole system against whole GPUs, static quotas, no reclamation, no
  // scaling: more of the GPUs in service busy, more of the jobs served,
  // fewer GPUs in service, and no operator task left to a person.
  const auto& ops = by_id.at("C-OPS");
  EXPECT_GE(figure("C-OPS", "measured", "gpu_utilization_gain_pct"), 18.0);  // 29.5
  EXPECT_GT(figure("C-OPS", "measured", "jobs_completed"), figure("C-OPS", "baseline", "jobs_completed"));
  EXPECT_LE(figure("C-OPS", "measured", "gpu_hours_in_service_change_pct"), -8.0);  // -15.2
  EXPECT_EQ(ops["measured"]["operator_tasks_left_to_a_person"].get<int>(), 0);
  EXPECT_EQ(ops["baseline"]["operator_tasks_left_to_a_person"].get<int>(), 5);
  ASSERT_EQ(ops["measured"]["operator_tasks"].size(), 5u);
  for (const auto& t : ops["measured"]["operator_tasks"]) EXPECT_TRUE(t["automatic_in_ours"].get<bool>()) << t.dump();
  // Scaling, defragmentation and regions read traces: checked when here.
  for (const char* id : {"C-SCALE", "C-DEFRAG", "C-REGION"}) {
    const auto& c = by_id.at(id);
    if (c.contains("skipped") && c["skipped"].is_string()) {
      EXPECT_NE(c["skipped"].get<std::string>().find("not here"), std::string::npos) << id;
    }
  }
  if (const auto& scale = by_id.at("C-SCALE"); !scale.contains("skipped") || !scale["skipped"].is_string()) {
    // The baseline is the smallest fixed pool that keeps the autoscaled
    // run's queue-wait p99 (found by a search), not the autoscaled peak.
    const auto& fixed = scale["baseline"];
    EXPECT_TRUE(fixed["meets_target"].get<bool>());
    EXPECT_LE(fixed["queue_wait_p99_s"].get<double>(), fixed["target_queue_wait_p99_s"].get<double>());
    EXPECT_LT(fixed["fixed_nodes"].get<double>(), fixed["autoscaled_peak_nodes"].get<double>());
    EXPECT_EQ(scale["measured"]["drained_lost_work_s"].get<double>(), 0);
    // The cost change has the sign of the difference: negative = cheaper.
    const double change = scale["measured"]["cost_change_pct"].get<double>();
    const double diff = scale["measured"]["cost"].get<double>() - fixed["cost"].get<double>();
    EXPECT_NEAR(change, 100.0 * diff / fixed["cost"].get<double>(), 0.01);
  }
  if (const auto& defrag = by_id.at("C-DEFRAG"); !defrag.contains("skipped") || !defrag["skipped"].is_string()) {
    EXPECT_GT(defrag["measured"]["migrations"].get<double>(), 0);
    EXPECT_GE(defrag["measured"]["unallocated_gpu_reduction_pct"].get<double>(), 2.0);  // 3.8
    EXPECT_LE(defrag["measured"]["migrations_per_hour"].get<double>(), 12);
    EXPECT_EQ(defrag["measured"]["migration_lost_work_s"].get<double>(), 0);
    EXPECT_GT(defrag["measured"]["move_downtime_hours"].get<double>(), 0);  // moves are not free
  }
  if (const auto& region = by_id.at("C-REGION"); !region.contains("skipped") || !region["skipped"].is_string()) {
    EXPECT_LE(region["measured"]["cost_change_pct"].get<double>(), -6.5);  // -11.9 (a cost change: negative saves)
    EXPECT_EQ(region["measured"]["latency_slo_violations"].get<int>(), 0);
  }
  // Reclamation needs the GenAI duty cycles: measured when they are here.
  const auto& reclaim = by_id.at("C-RECLAIM");
  if (reclaim.contains("skipped") && reclaim["skipped"].is_string()) {
    EXPECT_NE(reclaim["skipped"].get<std::string>().find("not here"), std::string::npos);
  } else {
    EXPECT_GT(reclaim["measured"]["idle_reclaims"].get<int>(), 0);
    EXPECT_GE(reclaim["measured"]["idle_gpu_time_reduction_pct"].get<double>(), 55.0);  // 93.7
    EXPECT_LT(reclaim["measured"]["idle_gpu_hours"].get<double>(), reclaim["baseline"]["idle_gpu_hours"].get<double>());
  }
}

TEST(SimClaimsTest, ClaimsThatNeedAMissingTraceAreSkippedWithTheReason) {
  setenv("GPUPOOL_TRACES", "/nonexistent-traces", 1);
  auto run = testing::RunGpupool(
      {"sim", "claims", "--json", "--scenarios", kScenarios, "--only", "C-PRIO,C-SCALE,C-DEFRAG,C-TOPO"});
  unsetenv("GPUPOOL_TRACES");
  ASSERT_EQ(run.exit_code, 0) << run.err;
  const auto j = nlohmann::json::parse(run.out);
  ASSERT_EQ(j.size(), 4u);
  for (const auto& c : j) EXPECT_NE(c["skipped"].get<std::string>().find("not here"), std::string::npos) << j.dump();
}

}  // namespace
}  // namespace gpupool
