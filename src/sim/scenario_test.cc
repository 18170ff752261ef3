#include "src/sim/scenario.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <optional>
#include <string>

namespace gpupool {
namespace {

using std::chrono::hours;
using std::chrono::minutes;
using std::chrono::seconds;
using ::testing::HasSubstr;
using ::testing::StartsWith;

// Sets an environment variable for the scope of a test.
class ScopedEnv {
 public:
  ScopedEnv(const char* name, const char* value) : name_(name) {
    if (const char* old = std::getenv(name)) old_ = old;
    if (value) {
      setenv(name, value, 1);
    } else {
      unsetenv(name);
    }
  }
  ~ScopedEnv() {
    if (old_) {
      setenv(name_, old_->c_str(), 1);
    } else {
      unsetenv(name_);
    }
  }

 private:
  const char* name_;
  std::optional<std::string> old_;
};

constexpr const char* kFull = R"(name: two-teams
description: |
  Two teams share A100s.
seed: 7
horizon: 1.5d
engine:
  policy: best
  seed: 3
  tick: 15s
  start_latency: 2500ms
  sample_every: 10m
  lending: {enabled: false, window: 90s, threshold: 0.4, fraction: 0.25}
priorities: {low: 0, normal: 100, high: 1000}
node_classes:
  - name: a100-ib
    family: nvidia-ampere
    ecosystem: {cuda: "12.2", nccl: "2.18"}
    gpu: {fp16_tflops: 312, memory_mib: 81920, memory_bandwidth_gbps: 2039, interconnect_gbps: 600}
    storage: {capacity_gib: 7000, iops: 500000, latency_us: 100, durability_nines: 11}
    network: {bandwidth_gbps: 200, latency_us: 5}
requirements:
  - name: cuda-training
    kind: training
    ecosystem: {cuda: "12.0"}
    min: {fp16_tflops: 200, gpu_memory_mib: 40000, interconnect_gbps: 300, storage_iops: 1000,
          network_bandwidth_gbps: 100}
    max: {storage_latency_us: 500, network_latency_us: 20}
    min_storage_durability_nines: 9
    preferred_family: nvidia-hopper
cluster:
  nodes:
    - {count: 16, model: A100-80GB, gpus: 8, cpu_cores: 128, memory_gib: 1024, region: cn-north, zone: a, racks: 4,
       attributes: a100-ib, name_prefix: a100}
    - {count: 4, cpu_cores: 64.5, memory_gib: 256}
pools:
  - {name: a100, models: [A100-80GB], regions: [], dedicated_to: []}
  - {name: cpu}
tenants:
  - name: research
    quota:
      a100: {guaranteed_gpus: 64, limit_gpus: 128, weight: 1, reserved: false}
  - name: product
    quota:
      a100: {guaranteed_gpus: 32.5, weight: 2, reserved: true}
      cpu: {}
workload:
  - tenant: research
    arrivals: {process: poisson, rate_per_hour: 30, start: 0h, stop: 20h}
    jobs:
      - name: pretrain
        weight: 3
        kind: training
        priority: high
        gpus: 8
        cpu_cores: 32
        memory_gib: 256
        replicas: [1, 2, 4]
        checkpointable: true
        checkpoint_interval: 30m
        checkpoint_duration: 45s
        deadline_after: 6h
        pools: [a100]
        requirement: cuda-training
        duration: {philly: {scale: 1.5}, min: 1m, max: 3d}
      - name: notebook
        kind: development
        gpu_fraction: 0.25
        cpu_cores: 0.5
        memory_gib: 1.5
        replicas: 2
        duration: {lognormal: {median: 30m, sigma: 1.5}}
  - tenant: product
    arrivals: {process: diurnal, rate_per_hour: 12, amplitude: 0.8, peak_hour: 15}
    jobs:
      - {name: etl, kind: cpu, gpus: 0, cpu_cores: 8, duration: {fixed: 2h}}
trace:
  pods: $TRACES/alibaba-gpu-2023/openb_pod_list_default.csv
  tenant: research
  limit: 1000
)";

TEST(ScenarioTest, ParsesAFullScenario) {
  ScopedEnv env("GPUPOOL_TRACES", "/data/traces/");
  auto r = ParseScenario(kFull, "full.yaml", "scenarios");
  ASSERT_TRUE(r.has_value()) << r.error().message;
  const Scenario& s = *r;

  EXPECT_EQ(s.name, "two-teams");
  EXPECT_EQ(s.description, "Two teams share A100s.\n");
  EXPECT_EQ(s.seed, 7u);
  EXPECT_EQ(s.horizon, hours(36));
  EXPECT_EQ(s.engine.policy, "best");
  EXPECT_EQ(s.engine.seed, 3u);
  EXPECT_EQ(s.tick, seconds(15));
  EXPECT_EQ(s.start_latency, Duration(2500));
  EXPECT_EQ(s.sample_every, minutes(10));
  EXPECT_FALSE(s.engine.lending.enabled);
  EXPECT_EQ(s.engine.lending.window, seconds(90));
  EXPECT_DOUBLE_EQ(s.engine.lending.threshold, 0.4);
  EXPECT_DOUBLE_EQ(s.engine.lending.lend_fraction, 0.25);
  EXPECT_EQ(s.priorities, (std::map<std::string, int32_t>{{"low", 0}, {"normal", 100}, {"high", 1000}}));

  ASSERT_EQ(s.node_classes.size(), 1u);
  const NodeAttributes& c = s.node_classes[0];
  EXPECT_EQ(c.name, "a100-ib");
  EXPECT_EQ(c.family, "nvidia-ampere");
  ASSERT_EQ(c.ecosystem.size(), 2u);
  EXPECT_EQ(c.ecosystem[0].name, "cuda");
  EXPECT_EQ(c.ecosystem[0].version, (Version{{12, 2, 0}}));
  EXPECT_EQ(c.ecosystem[1].name, "nccl");
  EXPECT_EQ(c.ecosystem[1].version, (Version{{2, 18, 0}}));
  EXPECT_EQ(c.value[kFp16Tflops], 312);
  EXPECT_EQ(c.value[kGpuMemoryMib], 81920);
  EXPECT_EQ(c.value[kMemoryBandwidthGbps], 2039);
  EXPECT_EQ(c.value[kInterconnectGbps], 600);
  EXPECT_EQ(c.value[kStorageCapacityGib], 7000);
  EXPECT_EQ(c.value[kStorageIops], 500000);
  EXPECT_EQ(c.value[kStorageLatencyUs], 100);
  EXPECT_EQ(c.value[kNetworkBandwidthGbps], 200);
  EXPECT_EQ(c.value[kNetworkLatencyUs], 5);
  EXPECT_EQ(c.storage_durability_nines, 11);

  ASSERT_EQ(s.requirements.size(), 1u);
  const Requirement& q = s.requirements[0];
  EXPECT_EQ(q.name, "cuda-training");
  EXPECT_EQ(q.kind, JobKind::kTraining);
  ASSERT_EQ(q.ecosystem.size(), 1u);
  EXPECT_EQ(q.ecosystem[0].name, "cuda");
  EXPECT_EQ(q.ecosystem[0].version, (Version{{12, 0, 0}}));
  EXPECT_EQ(q.minimum[kFp16Tflops], 200);
  EXPECT_EQ(q.minimum[kGpuMemoryMib], 40000);
  EXPECT_EQ(q.minimum[kMemoryBandwidthGbps], 0);
  EXPECT_EQ(q.minimum[kStorageLatencyUs], 500);
  EXPECT_EQ(q.minimum[kNetworkLatencyUs], 20);
  EXPECT_EQ(q.min_storage_durability_nines, 9);
  EXPECT_EQ(q.preferred_family, "nvidia-hopper");

  ASSERT_EQ(s.nodes.size(), 2u);
  EXPECT_EQ(s.nodes[0].count, 16);
  EXPECT_EQ(s.nodes[0].model, "A100-80GB");
  EXPECT_EQ(s.nodes[0].gpus, 8);
  EXPECT_EQ(s.nodes[0].cpu_milli, 128000);
  EXPECT_EQ(s.nodes[0].memory_mib, 1024 * 1024);
  EXPECT_EQ(s.nodes[0].region, "cn-north");
  EXPECT_EQ(s.nodes[0].zone, "a");
  EXPECT_EQ(s.nodes[0].racks, 4);
  EXPECT_EQ(s.nodes[0].attributes, "a100-ib");
  EXPECT_EQ(s.nodes[0].name_prefix, "a100");
  EXPECT_EQ(s.nodes[1].model, "");
  EXPECT_EQ(s.nodes[1].gpus, 0);
  EXPECT_EQ(s.nodes[1].cpu_milli, 64500);
  EXPECT_EQ(s.nodes[1].memory_mib, 256 * 1024);
  EXPECT_EQ(s.nodes[1].region, "region-1");
  EXPECT_EQ(s.nodes[1].racks, 1);
  EXPECT_EQ(s.nodes[1].name_prefix, "cpu");
  EXPECT_EQ(s.trace_nodes_path, "");

  ASSERT_EQ(s.pools.size(), 2u);
  EXPECT_EQ(s.pools[0].name, "a100");
  EXPECT_EQ(s.pools[0].models, std::vector<std::string>{"A100-80GB"});
  EXPECT_TRUE(s.pools[0].regions.empty());
  EXPECT_TRUE(s.pools[1].models.empty());

  ASSERT_EQ(s.tenants.size(), 2u);
  EXPECT_EQ(s.tenants[0].name, "research");
  const QuotaConfig& rq = s.tenants[0].quota.at("a100");
  EXPECT_EQ(rq.guaranteed_gpus, 64);
  EXPECT_EQ(rq.limit_gpus, 128);
  EXPECT_EQ(rq.weight, 1);
  EXPECT_FALSE(rq.reserved);
  const QuotaConfig& pq = s.tenants[1].quota.at("a100");
  EXPECT_EQ(pq.guaranteed_gpus, 32.5);
  EXPECT_EQ(pq.limit_gpus, 32.5);  // defaults to the guarantee
  EXPECT_EQ(pq.weight, 2);
  EXPECT_TRUE(pq.reserved);
  EXPECT_EQ(s.tenants[1].quota.at("cpu").limit_gpus, 0);

  ASSERT_EQ(s.workloads.size(), 2u);
  const TenantWorkload& w0 = s.workloads[0];
  EXPECT_EQ(w0.tenant, "research");
  EXPECT_EQ(w0.arrivals.kind, ArrivalProcess::Kind::kPoisson);
  EXPECT_EQ(w0.arrivals.rate_per_hour, 30);
  EXPECT_EQ(w0.arrivals.start, Duration(0));
  EXPECT_EQ(w0.arrivals.stop, hours(20));
  ASSERT_EQ(w0.jobs.size(), 2u);
  const JobTemplate& pre = w0.jobs[0];
  EXPECT_EQ(pre.name, "pretrain");
  EXPECT_EQ(pre.weight, 3);
  EXPECT_EQ(pre.kind, JobKind::kTraining);
  EXPECT_EQ(pre.priority, "high");
  EXPECT_EQ(pre.gpus, 8);
  EXPECT_EQ(pre.gpu_milli, 1000);
  EXPECT_EQ(pre.cpu_milli, 32000);
  EXPECT_EQ(pre.memory_mib, 256 * 1024);
  EXPECT_EQ(pre.replicas, (std::vector<int32_t>{1, 2, 4}));
  EXPECT_TRUE(pre.checkpointable);
  EXPECT_EQ(pre.checkpoint_interval, minutes(30));
  EXPECT_EQ(pre.checkpoint_duration, seconds(45));
  EXPECT_EQ(pre.deadline_after, std::optional<Duration>(hours(6)));
  EXPECT_EQ(pre.pools, std::vector<std::string>{"a100"});
  EXPECT_EQ(pre.requirement, "cuda-training");
  EXPECT_EQ(pre.duration.kind, DurationModel::Kind::kPhilly);
  EXPECT_EQ(pre.duration.scale, 1.5);
  EXPECT_EQ(pre.duration.min, minutes(1));
  EXPECT_EQ(pre.duration.max, hours(72));

  const JobTemplate& nb = w0.jobs[1];
  EXPECT_EQ(nb.kind, JobKind::kDevelopment);
  EXPECT_EQ(nb.priority, "normal");  // the default class
  EXPECT_EQ(nb.gpus, 1);
  EXPECT_EQ(nb.gpu_milli, 250);
  EXPECT_EQ(nb.cpu_milli, 500);
  EXPECT_EQ(nb.memory_mib, 1536);
  EXPECT_EQ(nb.replicas, std::vector<int32_t>{2});
  EXPECT_FALSE(nb.checkpointable);
  EXPECT_FALSE(nb.deadline_after.has_value());
  EXPECT_TRUE(nb.pools.empty());
  EXPECT_EQ(nb.duration.kind, DurationModel::Kind::kLogNormal);
  EXPECT_EQ(nb.duration.median_s, 1800);
  EXPECT_EQ(nb.duration.sigma, 1.5);

  const TenantWorkload& w1 = s.workloads[1];
  EXPECT_EQ(w1.arrivals.kind, ArrivalProcess::Kind::kDiurnal);
  EXPECT_EQ(w1.arrivals.rate_per_hour, 12);
  EXPECT_EQ(w1.arrivals.amplitude, 0.8);
  EXPECT_EQ(w1.arrivals.peak_hour, 15);
  EXPECT_EQ(w1.arrivals.stop, hours(36));  // defaults to the horizon
  ASSERT_EQ(w1.jobs.size(), 1u);
  EXPECT_EQ(w1.jobs[0].kind, JobKind::kCpu);
  EXPECT_EQ(w1.jobs[0].gpus, 0);
  EXPECT_EQ(w1.jobs[0].gpu_milli, 0);
  EXPECT_EQ(w1.jobs[0].cpu_milli, 8000);
  EXPECT_EQ(w1.jobs[0].memory_mib, 16384);  // the default
  EXPECT_EQ(w1.jobs[0].duration.kind, DurationModel::Kind::kFixed);
  EXPECT_EQ(w1.jobs[0].duration.fixed, hours(2));

  ASSERT_TRUE(s.trace.has_value());
  EXPECT_EQ(s.trace->pods_path, "/data/traces/alibaba-gpu-2023/openb_pod_list_default.csv");
  EXPECT_EQ(s.trace->tenant, "research");
  EXPECT_EQ(s.trace->priority, "normal");
  EXPECT_EQ(s.trace->limit, std::optional<int>(1000));
}

// The reference's example must stay valid.
TEST(ScenarioTest, DocumentedExampleParses) {
  std::ifstream in(std::string(GPUPOOL_SOURCE_DIR) + "/docs/scenarios.md");
  ASSERT_TRUE(in) << "docs/scenarios.md";
  std::string line, yaml;
  bool inside = false;
  while (std::getline(in, line)) {
    if (line == "```yaml") {
      inside = true;
    } else if (inside && line == "```") {
      break;
    } else if (inside) {
      yaml += line + "\n";
    }
  }
  ASSERT_FALSE(yaml.empty());
  auto r = ParseScenario(yaml, "docs/scenarios.md", "docs");
  ASSERT_TRUE(r.has_value()) << r.error().message;
  EXPECT_EQ(r->name, "two-teams");
  ASSERT_EQ(r->workloads.size(), 2u);
  ASSERT_EQ(r->workloads[1].jobs.size(), 3u);
  EXPECT_EQ(r->workloads[1].jobs[0].sharing, "mps");
  EXPECT_EQ(r->workloads[1].jobs[1].stages.size(), 2u);
  EXPECT_TRUE(r->engine.reclaim.idle);
  EXPECT_EQ(r->faults.size(), 1u);
}

// The smallest valid scenario; the error cases below edit one spot of it.
constexpr const char* kBase = R"(name: t
cluster:
  nodes:
    - {count: 2, model: A100-80GB, gpus: 8, cpu_cores: 64, memory_gib: 512}
pools:
  - {name: a100}
tenants:
  - name: r
    quota: {a100: {guaranteed_gpus: 8, limit_gpus: 16}}
workload:
  - tenant: r
    arrivals: {process: poisson, rate_per_hour: 10}
    jobs:
      - {name: j, gpus: 1, duration: {fixed: 1h}}
)";

// Affinity rules (QUOTA-6) in a workload: labels are named from the
// cluster's job_labels and reach each generated job's spec as masks.
TEST(ScenarioTest, JobLabelsAndAffinityRulesReachTheJobs) {
  std::string yaml = kBase;
  yaml.replace(yaml.find("{name: j, gpus: 1,"), 18,
               "{name: j, gpus: 1, labels: [web], affinity: [db], anti_affinity: [web, cache],");
  yaml += "job_labels: [db, web, cache]\n";
  auto r = ParseScenario(yaml, "s.yaml", "");
  ASSERT_TRUE(r.has_value()) << r.error().message;
  EXPECT_EQ(r->job_labels, (std::vector<std::string>{"db", "web", "cache"}));
  const JobTemplate& j = r->workloads[0].jobs[0];
  EXPECT_EQ(j.labels, LabelMask{0b010});
  EXPECT_EQ(j.affinity, LabelMask{0b001});
  EXPECT_EQ(j.anti_affinity, LabelMask{0b110});
  auto run = ParseScenario(std::string(kBase) + "job_labels: [web]\n", "s.yaml", "");
  ASSERT_TRUE(run.has_value()) << run.error().message;
  EXPECT_EQ(run->workloads[0].jobs[0].labels, LabelMask{0});
}

TEST(ScenarioTest, ExpectedDurationsAndThinkTimeAreRead) {
  std::string yaml = kBase;
  yaml.replace(yaml.find("{name: j, gpus: 1,"), 18,
               "{name: j, gpus: 1, expected_duration: {lognormal_error: {sigma: 0.7, bias: 1.5}},");
  yaml += "  - tenant: r\n    arrivals: {process: poisson, rate_per_hour: 1}\n"
          "    jobs: [{name: k, expected_duration: {fixed: 2h}}]\n"
          "think_time: {fixed: 20m}\n";
  auto r = ParseScenario(yaml, "s.yaml", "");
  ASSERT_TRUE(r.has_value()) << r.error().message;
  const EstimateModel& e = r->workloads[0].jobs[0].expected_duration;
  EXPECT_EQ(e.kind, EstimateModel::Kind::kLogNormalError);
  EXPECT_DOUBLE_EQ(e.sigma, 0.7);
  EXPECT_DOUBLE_EQ(e.bias, 1.5);
  EXPECT_EQ(r->workloads[1].jobs[0].expected_duration.kind, EstimateModel::Kind::kFixed);
  EXPECT_EQ(r->workloads[1].jobs[0].expected_duration.fixed, hours(2));
  EXPECT_EQ(r->think_time.kind, DurationModel::Kind::kFixed);
  EXPECT_EQ(r->think_time.fixed, minutes(20));
  // Without them: no estimate, and the default think time.
  auto d = ParseScenario(kBase, "s.yaml", "");
  ASSERT_TRUE(d.has_value());
  EXPECT_EQ(d->workloads[0].jobs[0].expected_duration.kind, EstimateModel::Kind::kNone);
  EXPECT_EQ(d->think_time.kind, DurationModel::Kind::kLogNormal);
  EXPECT_DOUBLE_EQ(d->think_time.median_s, 600);
}

TEST(ScenarioTest, MinimalScenarioUsesDefaults) {
  auto r = ParseScenario(kBase, "s.yaml", "");
  ASSERT_TRUE(r.has_value()) << r.error().message;
  EXPECT_EQ(r->seed, 1u);
  EXPECT_EQ(r->engine.seed, 1u);  // the scenario's seed
  EXPECT_EQ(r->engine.policy, "best");
  EXPECT_EQ(r->horizon, hours(24));
  EXPECT_EQ(r->nodes[0].name_prefix, "a100-80gb");
  EXPECT_EQ(r->workloads[0].jobs[0].priority, "normal");
  EXPECT_EQ(r->workloads[0].jobs[0].replicas, std::vector<int32_t>{1});
  EXPECT_FALSE(r->trace.has_value());
}

// The sharing, pipeline, utilization, reclaim, cost and fault keys.
constexpr const char* kSharing = R"(name: sharing
engine:
  sharing_policy: seed-002
  reclaim: {idle: true, poll: 10s, idle_below_pct: 5.5, idle_polls: 4, grace: 0s, deadlines: false}
  heartbeat_timeout: 40s
  costs: {time_slice_overhead: 0.05, mig_setup: 4s, scrub: 250ms, checkpoint_overhead: 0.03}
cluster:
  nodes:
    - {count: 2, model: A100-80GB, gpus: 8, cpu_cores: 64, memory_gib: 512}
    - {count: 12, model: H100, gpus: 8, cpu_cores: 64, memory_gib: 512, name_prefix: h}
pools:
  - {name: a100}
tenants:
  - name: r
    quota: {a100: {guaranteed_gpus: 8, limit_gpus: 16}}
workload:
  - tenant: r
    arrivals: {process: poisson, rate_per_hour: 10}
    jobs:
      - name: notebook
        kind: development
        gpu_fraction: 0.3
        sharing: mig
        gpu_memory_gib: 9.5
        utilization: {bursty: {busy: 0.8, idle: 0.05, busy_for: 30m, idle_for: 20m, jitter: 1h}}
      - {name: auto, gpus: 2, sharing: auto, gpu_memory_gib: 40, utilization: {trace: genai}}
      - {name: half, gpu_fraction: 0.5, sharing: mps, utilization: {bursty: {}}}
      - name: pipe
        stages:
          - {name: pre, gpu_fraction: 0.25}
          - {name: infer, gpu_fraction: 0.5, gpu_memory_gib: 20, mode: mig, cpu_cores: 4, memory_gib: 16}
        utilization: {constant: 0.6}
      - {name: plain, gpus: 1}
faults:
  - {node: a100-80gb-1, at: 2h, down_for: 30m}
  - {node: h-11, at: 0s}
  - {node: a100-80gb-1, at: 150m, down_for: 1h}
)";

TEST(ScenarioTest, ParsesSharingPipelinesUtilizationReclaimCostsAndFaults) {
  auto r = ParseScenario(kSharing, "s.yaml", "");
  ASSERT_TRUE(r.has_value()) << r.error().message;
  const Scenario& s = *r;

  EXPECT_EQ(s.engine.sharing_policy, "seed-002");
  const ReclaimConfig& rc = s.engine.reclaim;
  EXPECT_TRUE(rc.idle);
  EXPECT_EQ(rc.poll, seconds(10));
  EXPECT_DOUBLE_EQ(rc.idle_below_pct, 5.5);
  EXPECT_EQ(rc.idle_polls, 4);
  EXPECT_EQ(rc.grace, Duration(0));
  EXPECT_FALSE(rc.deadlines);
  EXPECT_EQ(s.engine.heartbeat_timeout, seconds(40));
  EXPECT_DOUBLE_EQ(s.costs.time_slice_overhead, 0.05);
  EXPECT_EQ(s.costs.mig_setup, seconds(4));
  EXPECT_EQ(s.costs.scrub, Duration(250));
  EXPECT_DOUBLE_EQ(s.costs.checkpoint_overhead, 0.03);

  ASSERT_EQ(s.workloads.size(), 1u);
  const auto& jobs = s.workloads[0].jobs;
  ASSERT_EQ(jobs.size(), 5u);

  const JobTemplate& nb = jobs[0];
  EXPECT_EQ(nb.sharing, "mig");
  EXPECT_EQ(nb.gpus, 1);
  EXPECT_EQ(nb.gpu_milli, 300);
  EXPECT_EQ(nb.gpu_memory_mib, 9728);
  EXPECT_TRUE(nb.stages.empty());
  EXPECT_EQ(nb.utilization.kind, UtilizationModel::Kind::kBursty);
  EXPECT_DOUBLE_EQ(nb.utilization.busy, 0.8);
  EXPECT_DOUBLE_EQ(nb.utilization.idle, 0.05);
  EXPECT_EQ(nb.utilization.busy_for, minutes(30));
  EXPECT_EQ(nb.utilization.idle_for, minutes(20));
  EXPECT_EQ(nb.utilization.phase_jitter, hours(1));

  const JobTemplate& au = jobs[1];
  EXPECT_EQ(au.sharing, "auto");
  EXPECT_EQ(au.gpus, 2);
  EXPECT_EQ(au.gpu_milli, 1000);
  EXPECT_EQ(au.gpu_memory_mib, 40 * 1024);
  EXPECT_EQ(au.utilization.kind, UtilizationModel::Kind::kTrace);

  const JobTemplate& half = jobs[2];  // bursty with every default
  EXPECT_EQ(half.sharing, "mps");
  EXPECT_EQ(half.gpu_milli, 500);
  EXPECT_EQ(half.gpu_memory_mib, 0);
  EXPECT_EQ(half.utilization.kind, UtilizationModel::Kind::kBursty);
  EXPECT_DOUBLE_EQ(half.utilization.busy, UtilizationModel{}.busy);
  EXPECT_DOUBLE_EQ(half.utilization.idle, UtilizationModel{}.idle);
  EXPECT_EQ(half.utilization.busy_for, UtilizationModel{}.busy_for);
  EXPECT_EQ(half.utilization.phase_jitter, Duration(0));

  const JobTemplate& pipe = jobs[3];
  EXPECT_EQ(pipe.sharing, "any");
  ASSERT_EQ(pipe.stages.size(), 2u);
  EXPECT_EQ(pipe.stages[0].name, "pre");
  EXPECT_EQ(pipe.stages[0].gpu_milli, 250);
  EXPECT_EQ(pipe.stages[0].gpu_memory_mib, 0);
  EXPECT_EQ(pipe.stages[0].mode, "time-slice");
  EXPECT_EQ(pipe.stages[0].cpu_milli, StageTemplate{}.cpu_milli);
  EXPECT_EQ(pipe.stages[0].memory_mib, StageTemplate{}.memory_mib);
  EXPECT_EQ(pipe.stages[1].name, "infer");
  EXPECT_EQ(pipe.stages[1].gpu_milli, 500);
  EXPECT_EQ(pipe.stages[1].gpu_memory_mib, 20 * 1024);
  EXPECT_EQ(pipe.stages[1].mode, "mig");
  EXPECT_EQ(pipe.stages[1].cpu_milli, 4000);
  EXPECT_EQ(pipe.stages[1].memory_mib, 16 * 1024);
  EXPECT_EQ(pipe.utilization.kind, UtilizationModel::Kind::kConstant);
  EXPECT_DOUBLE_EQ(pipe.utilization.busy, 0.6);

  const JobTemplate& plain = jobs[4];  // the defaults
  EXPECT_EQ(plain.sharing, "any");
  EXPECT_EQ(plain.gpu_memory_mib, 0);
  EXPECT_TRUE(plain.stages.empty());
  EXPECT_EQ(plain.utilization.kind, UtilizationModel::Kind::kConstant);
  EXPECT_DOUBLE_EQ(plain.utilization.busy, 0.9);

  ASSERT_EQ(s.faults.size(), 3u);
  EXPECT_EQ(s.faults[0].node, "a100-80gb-1");
  EXPECT_EQ(s.faults[0].at, hours(2));
  EXPECT_EQ(s.faults[0].down_for, minutes(30));
  EXPECT_EQ(s.faults[1].node, "h-11");
  EXPECT_EQ(s.faults[1].at, Duration(0));
  EXPECT_EQ(s.faults[1].down_for, minutes(10));  // the default
  EXPECT_EQ(s.faults[2].at, minutes(150));       // right after the first one ends
}

TEST(ScenarioTest, NewKeysDefault) {
  auto r = ParseScenario(kBase, "s.yaml", "");
  ASSERT_TRUE(r.has_value()) << r.error().message;
  EXPECT_EQ(r->engine.sharing_policy, "seed-000");
  EXPECT_FALSE(r->engine.reclaim.idle);
  EXPECT_EQ(r->engine.reclaim.poll, seconds(5));
  EXPECT_EQ(r->engine.heartbeat_timeout, Duration(0));
  EXPECT_DOUBLE_EQ(r->costs.time_slice_overhead, 0.04);
  EXPECT_EQ(r->costs.scrub, Duration(500));
  EXPECT_TRUE(r->faults.empty());
}

// With trace_nodes the node names are unknown until the trace is read.
TEST(ScenarioTest, FaultsOnTraceNodesAreNotChecked) {
  std::string yaml = kBase;
  yaml.replace(yaml.find("  nodes:"), yaml.find("pools:") - yaml.find("  nodes:"), "  trace_nodes: nodes.csv\n");
  yaml += "engine: {heartbeat_timeout: 30s}\nfaults:\n  - {node: openb-node-0227, at: 1h}\n";
  auto r = ParseScenario(yaml, "s.yaml", "");
  ASSERT_TRUE(r.has_value()) << r.error().message;
  ASSERT_EQ(r->faults.size(), 1u);
  EXPECT_EQ(r->faults[0].node, "openb-node-0227");
}

TEST(ScenarioTest, DurationsAcceptUnitsAndPlainSeconds) {
  const std::pair<const char*, Duration> cases[] = {
      {"250ms", Duration(250)}, {"90s", seconds(90)}, {"5m", minutes(5)},     {"1.5h", minutes(90)},
      {"2d", hours(48)},        {"45", seconds(45)},  {"0.5", Duration(500)},
  };
  for (const auto& [text, want] : cases) {
    std::string yaml = kBase;
    yaml.replace(yaml.find("name: t\n"), 8, std::string("name: t\nhorizon: ") + text + "\n");
    auto r = ParseScenario(yaml, "s.yaml", "");
    ASSERT_TRUE(r.has_value()) << text << ": " << r.error().message;
    EXPECT_EQ(r->horizon, want) << text;
  }
}

TEST(ScenarioTest, ResolvesPathsAgainstTheScenarioFolder) {
  std::string yaml = kBase;
  yaml.replace(yaml.find("  nodes:"), yaml.find("pools:") - yaml.find("  nodes:"),
               "  trace_nodes: ../traces/nodes.csv\n");
  yaml += "trace: {pods: pods.csv, tenant: r, priority: high}\n";
  auto r = ParseScenario(yaml, "s.yaml", "scenarios/claims");
  ASSERT_TRUE(r.has_value()) << r.error().message;
  EXPECT_TRUE(r->nodes.empty());
  EXPECT_EQ(r->trace_nodes_path, "scenarios/traces/nodes.csv");
  EXPECT_EQ(r->trace->pods_path, "scenarios/claims/pods.csv");
  EXPECT_EQ(r->trace->priority, "high");
  EXPECT_FALSE(r->trace->limit.has_value());

  // Absolute paths stay as they are.
  std::string abs = kBase;
  abs += "trace: {pods: /x/pods.csv, tenant: r}\n";
  auto a = ParseScenario(abs, "s.yaml", "scenarios/claims");
  ASSERT_TRUE(a.has_value()) << a.error().message;
  EXPECT_EQ(a->trace->pods_path, "/x/pods.csv");
}

TEST(ScenarioTest, TracesFolderFallsBackWhenTheVariableIsUnset) {
  ScopedEnv env("GPUPOOL_TRACES", nullptr);
  std::string yaml = kBase;
  yaml += "trace: {pods: $TRACES/openb/pods.csv, tenant: r}\n";
  auto r = ParseScenario(yaml, "s.yaml", "/nonexistent/a/b");
  ASSERT_TRUE(r.has_value()) << r.error().message;
  EXPECT_THAT(r->trace->pods_path, testing::EndsWith("shared/traces/openb/pods.csv"));
}

TEST(ScenarioTest, LoadScenarioReadsAFile) {
  const std::filesystem::path dir = std::filesystem::path(testing::TempDir()) / "scenario_test_load";
  std::filesystem::create_directories(dir);
  const std::string file = (dir / "s.yaml").string();
  {
    std::ofstream out(file);
    out << kBase << "trace: {pods: pods.csv, tenant: r}\n";
  }
  auto r = LoadScenario(file);
  ASSERT_TRUE(r.has_value()) << r.error().message;
  EXPECT_EQ(r->path, file);
  EXPECT_EQ(r->trace->pods_path, (dir / "pods.csv").lexically_normal().string());

  {
    std::ofstream out(file);
    out << kBase << "seed: -4\n";
  }
  auto bad = LoadScenario(file);
  ASSERT_FALSE(bad.has_value());
  EXPECT_EQ(bad.error().message, file + ":15:7: seed: must not be negative");
  std::filesystem::remove_all(dir);
}

TEST(ScenarioTest, LoadScenarioReportsAMissingFile) {
  auto r = LoadScenario("/nonexistent/dir/s.yaml");
  ASSERT_FALSE(r.has_value());
  EXPECT_EQ(r.error().code, ErrorCode::kIo);
  EXPECT_THAT(r.error().message, StartsWith("/nonexistent/dir/s.yaml: cannot open"));
}

TEST(ScenarioTest, MalformedYamlNamesThePosition) {
  auto r = ParseScenario("name: t\npools: [a, b\n", "s.yaml", "");
  ASSERT_FALSE(r.has_value());
  EXPECT_THAT(r.error().message, StartsWith("s.yaml:3:1: malformed YAML: "));
}

TEST(ScenarioTest, EmptyTextIsAnError) {
  auto r = ParseScenario("", "s.yaml", "");
  ASSERT_FALSE(r.has_value());
  EXPECT_THAT(r.error().message, StartsWith("s.yaml:1:1: empty scenario"));
}

// One edit of kBase and the error it must produce.
struct ErrorCase {
  const char* name;
  const char* from;  // replaced in kBase (the first occurrence); "" appends
  const char* to;
  const char* prefix;   // the exact start of the message
  const char* problem;  // a part of the rest
};

void PrintTo(const ErrorCase& c, std::ostream* os) { *os << c.name; }

class ScenarioErrorTest : public testing::TestWithParam<ErrorCase> {};

TEST_P(ScenarioErrorTest, NamesFileLineColumnAndPath) {
  const ErrorCase& c = GetParam();
  std::string yaml = kBase;
  if (std::string(c.from).empty()) {
    yaml += c.to;
  } else {
    const size_t at = yaml.find(c.from);
    ASSERT_NE(at, std::string::npos) << c.from;
    yaml.replace(at, std::string(c.from).size(), c.to);
  }
  auto r = ParseScenario(yaml, "s.yaml", "");
  ASSERT_FALSE(r.has_value()) << yaml;
  EXPECT_EQ(r.error().code, ErrorCode::kInvalidArgument);
  EXPECT_THAT(r.error().message, StartsWith(c.prefix));
  EXPECT_THAT(r.error().message, HasSubstr(c.problem));
}

const ErrorCase kErrorCases[] = {
    {"UnknownTopLevelKey", "", "flavour: x\n", "s.yaml:15:1: flavour: ", "unknown key 'flavour'"},
    {"UnknownNestedKey", "rate_per_hour: 10}", "rate_per_hour: 10, burst: 3}",
     "s.yaml:12:53: workload[0].arrivals.burst: ", "unknown key 'burst'"},
    {"DuplicateKey", "", "name: u\n", "s.yaml:15:1: name: ", "duplicate key 'name'"},
    {"MissingName", "name: t\n", "seed: 1\n", "s.yaml:1:1: name: ", "required"},
    {"CountNotAnInteger", "count: 2", "count: two", "s.yaml:4:15: cluster.nodes[0].count: ", "expected an integer"},
    {"NotANumber", "guaranteed_gpus: 8", "guaranteed_gpus: [8]",
     "s.yaml:9:37: tenants[0].quota.a100.guaranteed_gpus: ", "expected a number"},
    {"NotABool", "limit_gpus: 16}", "limit_gpus: 16, reserved: maybe}",
     "s.yaml:9:66: tenants[0].quota.a100.reserved: ", "expected true or false"},
    {"NegativeGuarantee", "guaranteed_gpus: 8", "guaranteed_gpus: -1",
     "s.yaml:9:37: tenants[0].quota.a100.guaranteed_gpus: ", "must not be negative"},
    {"LimitBelowGuarantee", "limit_gpus: 16", "limit_gpus: 4",
     "s.yaml:9:52: tenants[0].quota.a100.limit_gpus: ", "must be at least guaranteed_gpus"},
    {"GuaranteesExceedThePool", "guaranteed_gpus: 8, limit_gpus: 16", "guaranteed_gpus: 17, limit_gpus: 32",
     "s.yaml:9:37: tenants[0].quota.a100.guaranteed_gpus: ", "pool 'a100' would guarantee 17 GPUs of its 16"},
    {"UnknownModel", "model: A100-80GB", "model: Z9",
     "s.yaml:4:25: cluster.nodes[0].model: ", "unknown GPU model 'Z9' (known: T4, "},
    {"GpusWithoutModel", "model: A100-80GB, ", "", "s.yaml:4:24: cluster.nodes[0].gpus: ", "GPUs need a model"},
    {"ModelWithoutGpus", "gpus: 8, ", "", "s.yaml:4:25: cluster.nodes[0].model: ", "a model needs gpus"},
    {"UnknownQuotaPool", "{a100: {", "{h100: {",
     "s.yaml:9:13: tenants[0].quota.h100: ", "unknown pool 'h100' (known: a100)"},
    {"DuplicatePool", "  - {name: a100}\n", "  - {name: a100}\n  - {name: a100}\n",
     "s.yaml:7:12: pools[1].name: ", "duplicate pool 'a100'"},
    {"DedicatedToUnknownTenant", "  - {name: a100}", "  - {name: a100, dedicated_to: [x]}",
     "s.yaml:6:33: pools[0].dedicated_to[0]: ", "unknown tenant 'x' (known: r)"},
    {"UnknownWorkloadTenant", "tenant: r", "tenant: q", "s.yaml:11:13: workload[0].tenant: ", "unknown tenant 'q'"},
    {"RateNotPositive", "rate_per_hour: 10", "rate_per_hour: 0",
     "s.yaml:12:49: workload[0].arrivals.rate_per_hour: ", "must be positive"},
    {"AmplitudeOutOfRange", "process: poisson, rate_per_hour: 10",
     "process: diurnal, rate_per_hour: 10, amplitude: 1.5",
     "s.yaml:12:64: workload[0].arrivals.amplitude: ", "must be between 0 and 1"},
    {"PeakHourOutOfRange", "process: poisson, rate_per_hour: 10", "process: diurnal, rate_per_hour: 10, peak_hour: 24",
     "s.yaml:12:64: workload[0].arrivals.peak_hour: ", "must be in [0, 24)"},
    {"StopBeforeStart", "rate_per_hour: 10}", "rate_per_hour: 10, start: 5h, stop: 2h}",
     "s.yaml:12:70: workload[0].arrivals.stop: ", "must not be before start"},
    {"UnknownPriority", "{name: j, ", "{name: j, priority: urgent, ",
     "s.yaml:14:29: workload[0].jobs[0].priority: ", "unknown priority class 'urgent' (known: high, low, normal)"},
    {"TooManyGpus", "gpus: 1,", "gpus: 17,", "s.yaml:14:25: workload[0].jobs[0].gpus: ", "must be at most 16"},
    {"ReplicasBelowOne", "gpus: 1,", "gpus: 1, replicas: [2, 0],",
     "s.yaml:14:42: workload[0].jobs[0].replicas[1]: ", "must be at least 1"},
    {"GpuFractionOutOfRange", "gpus: 1,", "gpu_fraction: 1.5,",
     "s.yaml:14:33: workload[0].jobs[0].gpu_fraction: ", "must be between 0 and 1"},
    {"UnknownLabel", "gpus: 1,", "gpus: 1, affinity: [x],",
     "s.yaml:14:39: workload[0].jobs[0].affinity[0]: ", "unknown label 'x' (job_labels: none)"},
    {"LabelsNotAList", "", "job_labels: web\n", "s.yaml:15:13: job_labels: ", "expected a list of names"},
    {"UnknownRequirement", "gpus: 1,", "gpus: 1, requirement: x,",
     "s.yaml:14:41: workload[0].jobs[0].requirement: ", "unknown requirement 'x' (known: none)"},
    {"BadDurationUnit", "fixed: 1h", "fixed: 1w",
     "s.yaml:14:46: workload[0].jobs[0].duration.fixed: ", "expected a duration"},
    {"UnknownPolicy", "", "engine: {policy: nope}\n",
     "s.yaml:15:18: engine.policy: ", "unknown policy 'nope' (known: "},
    {"BadEcosystemVersion", "", "node_classes:\n  - {name: c, ecosystem: {cuda: twelve}}\n",
     "s.yaml:16:33: node_classes[0].ecosystem.cuda: ", "expected a version"},
    {"UnknownNodeClass", "memory_gib: 512}", "memory_gib: 512, attributes: ib}",
     "s.yaml:4:89: cluster.nodes[0].attributes: ", "unknown node class 'ib' (known: none)"},
    {"CpuJobWithGpus", "{name: j, gpus: 1,", "{name: j, kind: cpu, gpus: 1,",
     "s.yaml:14:36: workload[0].jobs[0].gpus: ", "a cpu job takes no GPUs"},
    {"GpusAndFraction", "gpus: 1,", "gpus: 1, gpu_fraction: 0.5,",
     "s.yaml:14:42: workload[0].jobs[0].gpu_fraction: ", "give either gpus or gpu_fraction"},
    {"DuplicateJobName", "", "      - {name: j, duration: {fixed: 1h}}\n",
     "s.yaml:15:16: workload[0].jobs[1].name: ", "duplicate job name 'j'"},
    {"LatencyUnderMin", "", "requirements:\n  - {name: x, min: {storage_latency_us: 3}}\n",
     "s.yaml:16:21: requirements[0].min.storage_latency_us: ", "put it under max"},
    {"NoPoolTakesTheNodes", "{name: a100}", "{name: a100, models: [H100]}",
     "s.yaml:4:7: cluster.nodes[0]: ", "no pool takes A100-80GB nodes in region 'region-1'"},
    // Sharing, pipelines, utilization, reclamation, costs and faults.
    {"UnknownSharingPolicy", "", "engine: {sharing_policy: seed-001}\n",
     "s.yaml:15:26: engine.sharing_policy: ", "unknown sharing-mode policy 'seed-001' (known: seed-000, seed-002)"},
    {"UnknownReclaimKey", "", "engine: {reclaim: {idle_secs: 3}}\n",
     "s.yaml:15:20: engine.reclaim.idle_secs: ", "unknown key 'idle_secs'"},
    {"ReclaimPollNotPositive", "", "engine: {reclaim: {idle: true, poll: 0s}}\n",
     "s.yaml:15:38: engine.reclaim.poll: ", "must be positive"},
    {"IdleBelowPctOutOfRange", "", "engine: {reclaim: {idle_below_pct: 101}}\n",
     "s.yaml:15:36: engine.reclaim.idle_below_pct: ", "must be between 0 and 100"},
    {"IdlePollsBelowOne", "", "engine: {reclaim: {idle_polls: 0}}\n",
     "s.yaml:15:32: engine.reclaim.idle_polls: ", "must be at least 1"},
    {"NegativeHeartbeatTimeout", "", "engine: {heartbeat_timeout: -5s}\n",
     "s.yaml:15:29: engine.heartbeat_timeout: ", "must not be negative"},
    {"LearningHalfLifeZero", "", "engine: {workload_learning: {half_life: 0s}}\n",
     "s.yaml:15:41: engine.workload_learning.half_life: ", "must be positive"},
    {"LearningUnknownKey", "", "engine: {workload_learning: {window: 1h}}\n",
     "s.yaml:15:30: engine.workload_learning.window: ", "unknown key 'window'"},
    {"LearningWarmupZero", "", "engine: {workload_learning: {warmup_arrivals: 0}}\n",
     "s.yaml:15:47: engine.workload_learning.warmup_arrivals: ", "must be at least 1"},
    {"LearningPriorWeightNegative", "", "engine: {workload_learning: {prior_weight: -1}}\n",
     "s.yaml:15:44: engine.workload_learning.prior_weight: ", "must be a positive number"},
    {"TimeSliceOverheadTooLarge", "", "engine: {costs: {time_slice_overhead: 0.6}}\n",
     "s.yaml:15:39: engine.costs.time_slice_overhead: ", "must be between 0 and 0.5"},
    {"MigSetupNotADuration", "", "engine: {costs: {mig_setup: soon}}\n",
     "s.yaml:15:29: engine.costs.mig_setup: ", "expected a duration"},
    {"UnknownSharingMode", "gpus: 1,", "gpus: 1, sharing: vgpu,", "s.yaml:14:37: workload[0].jobs[0].sharing: ",
     "unknown sharing mode 'vgpu' (known: any, time-slice, mps, mig, auto)"},
    {"MigNeedsAShare", "gpus: 1,", "gpus: 1, sharing: mig,",
     "s.yaml:14:37: workload[0].jobs[0].sharing: ", "mig needs a share of one GPU (gpu_fraction)"},
    {"AutoNeedsGpus", "gpus: 1,", "kind: cpu, sharing: auto,",
     "s.yaml:14:39: workload[0].jobs[0].sharing: ", "auto needs a job with GPUs"},
    {"NegativeGpuMemory", "gpus: 1,", "gpu_fraction: 0.5, gpu_memory_gib: -1,",
     "s.yaml:14:54: workload[0].jobs[0].gpu_memory_gib: ", "must not be negative"},
    {"GpuMemoryForWholeGpus", "gpus: 1,", "gpus: 1, gpu_memory_gib: 8,",
     "s.yaml:14:44: workload[0].jobs[0].gpu_memory_gib: ",
     "only for a share of one GPU (gpu_fraction) or with sharing: auto"},
    {"StagesWithGpus", "gpus: 1,", "gpus: 1, stages: [{name: a, gpu_fraction: 0.5}],",
     "s.yaml:14:25: workload[0].jobs[0].gpus: ", "not with stages"},
    {"StagesWithReplicas", "gpus: 1,", "stages: [{name: a, gpu_fraction: 0.5}], replicas: 2,",
     "s.yaml:14:69: workload[0].jobs[0].replicas: ", "not with stages"},
    {"NoStages", "gpus: 1,", "stages: [],",
     "s.yaml:14:27: workload[0].jobs[0].stages: ", "expected a list of 1 to 16 stages"},
    {"TooManyStages", "gpus: 1,",
     "stages: [{name: s0, gpu_fraction: 0.05}, {name: s1, gpu_fraction: 0.05}, "
     "{name: s2, gpu_fraction: 0.05}, {name: s3, gpu_fraction: 0.05}, "
     "{name: s4, gpu_fraction: 0.05}, {name: s5, gpu_fraction: 0.05}, "
     "{name: s6, gpu_fraction: 0.05}, {name: s7, gpu_fraction: 0.05}, "
     "{name: s8, gpu_fraction: 0.05}, {name: s9, gpu_fraction: 0.05}, "
     "{name: s10, gpu_fraction: 0.05}, {name: s11, gpu_fraction: 0.05}, "
     "{name: s12, gpu_fraction: 0.05}, {name: s13, gpu_fraction: 0.05}, "
     "{name: s14, gpu_fraction: 0.05}, {name: s15, gpu_fraction: 0.05}, "
     "{name: s16, gpu_fraction: 0.05}],",
     "s.yaml:14:27: workload[0].jobs[0].stages: ", "at most 16 stages"},
    {"StageWithoutFraction", "gpus: 1,", "stages: [{name: a}],",
     "s.yaml:14:28: workload[0].jobs[0].stages[0].gpu_fraction: ", "required"},
    {"StageFractionWhole", "gpus: 1,", "stages: [{name: a, gpu_fraction: 1}],",
     "s.yaml:14:52: workload[0].jobs[0].stages[0].gpu_fraction: ", "must be between 0 and 1"},
    {"UnknownStageMode", "gpus: 1,", "stages: [{name: a, gpu_fraction: 0.5, mode: vgpu}],",
     "s.yaml:14:63: workload[0].jobs[0].stages[0].mode: ", "unknown mode 'vgpu' (known: time-slice, mps, mig)"},
    {"DuplicateStage", "gpus: 1,", "stages: [{name: a, gpu_fraction: 0.5}, {name: a, gpu_fraction: 0.2}],",
     "s.yaml:14:65: workload[0].jobs[0].stages[1].name: ", "duplicate stage 'a'"},
    {"SharingWithStages", "gpus: 1,", "stages: [{name: a, gpu_fraction: 0.5}], sharing: mps,",
     "s.yaml:14:68: workload[0].jobs[0].sharing: ", "a pipeline's stages choose their own mode"},
    {"CpuPipeline", "gpus: 1,", "kind: cpu, stages: [{name: a, gpu_fraction: 0.5}],",
     "s.yaml:14:38: workload[0].jobs[0].stages: ", "a cpu job takes no GPUs"},
    {"TwoUtilizationModels", "gpus: 1,", "gpus: 1, utilization: {constant: 0.5, trace: genai},",
     "s.yaml:14:57: workload[0].jobs[0].utilization.trace: ",
     "give only one of constant, bursty, trace (already: constant)"},
    {"NoUtilizationModel", "gpus: 1,", "gpus: 1, utilization: {},",
     "s.yaml:14:41: workload[0].jobs[0].utilization: ", "needs one of constant, bursty, trace"},
    {"ConstantUtilizationAboveOne", "gpus: 1,", "gpus: 1, utilization: {constant: 1.2},",
     "s.yaml:14:52: workload[0].jobs[0].utilization.constant: ", "must be between 0 and 1"},
    {"BurstyBusyForNotPositive", "gpus: 1,", "gpus: 1, utilization: {bursty: {busy_for: 0s}},",
     "s.yaml:14:61: workload[0].jobs[0].utilization.bursty.busy_for: ", "must be positive"},
    {"UnknownUtilizationTrace", "gpus: 1,", "gpus: 1, utilization: {trace: philly},",
     "s.yaml:14:49: workload[0].jobs[0].utilization.trace: ", "unknown utilization trace 'philly' (known: genai)"},
    {"UtilizationOfACpuJob", "gpus: 1,", "kind: cpu, utilization: {constant: 0.5},",
     "s.yaml:14:43: workload[0].jobs[0].utilization: ", "the job takes no GPUs"},
    {"FaultOnUnknownNode", "", "engine: {heartbeat_timeout: 30s}\nfaults:\n  - {node: a100-80gb-2, at: 1h}\n",
     "s.yaml:17:12: faults[0].node: ", "unknown node 'a100-80gb-2' (nodes: a100-80gb-0..a100-80gb-1)"},
    {"FaultNodeWithLeadingZero", "", "engine: {heartbeat_timeout: 30s}\nfaults:\n  - {node: a100-80gb-01, at: 1h}\n",
     "s.yaml:17:12: faults[0].node: ", "unknown node 'a100-80gb-01'"},
    {"FaultWithoutAt", "", "engine: {heartbeat_timeout: 30s}\nfaults:\n  - {node: a100-80gb-0}\n", "s.yaml:17:5: faults[0].at: ", "required"},
    {"FaultDownForNotPositive", "", "engine: {heartbeat_timeout: 30s}\nfaults:\n  - {node: a100-80gb-0, at: 1h, down_for: 0s}\n",
     "s.yaml:17:43: faults[0].down_for: ", "must be positive"},
    {"OverlappingFaults", "", "engine: {heartbeat_timeout: 30s}\nfaults:\n  - {node: a100-80gb-0, at: 1h}\n  - {node: a100-80gb-0, at: 65m}\n",
     "s.yaml:18:29: faults[1].at: ", "node 'a100-80gb-0' is already down then (faults[0])"},
    {"FaultsWithoutHeartbeats", "", "faults:\n  - {node: a100-80gb-0, at: 1h}\n", "s.yaml:16:3: faults: ",
     "faults need engine.heartbeat_timeout above 0"},
    {"FaultsNotAList", "", "faults: {node: a100-80gb-0}\n", "s.yaml:15:9: faults: ", "expected a list of faults"},
    {"UnknownRegionPolicy", "", "regions: {policy: cheapest, table: [{name: r, price_per_gpu_hour: 1}]}\n",
     "s.yaml:15:19: regions.policy: ", "expected 'cost-aware', 'nearest' or 'off' (got 'cheapest')"},
    {"UnknownTopology", "", "engine: {topology: nearest}\n", "s.yaml:15:20: engine.topology: ",
     "expected 'aware' or 'blind' (got 'nearest')"},
    {"NegativeModelSize", "gpus: 1,", "gpus: 1, model_gib: -1,", "s.yaml:14:39: workload[0].jobs[0].model_gib: ",
     "must not be negative"},
    {"LinkBandwidthNotPositive", "", "engine: {costs: {links: {inter_rack_gbps: 0}}}\n",
     "s.yaml:15:43: engine.costs.links.inter_rack_gbps: ", "must be positive"},
    {"ExpectedDurationTwoModels", "gpus: 1,", "gpus: 1, expected_duration: {fixed: 1h, lognormal_error: {sigma: 1}},",
     "s.yaml:14:47: workload[0].jobs[0].expected_duration: ", "give exactly one of fixed, lognormal_error"},
    {"ExpectedDurationWithoutSigma", "gpus: 1,", "gpus: 1, expected_duration: {lognormal_error: {bias: 2}},",
     "s.yaml:14:65: workload[0].jobs[0].expected_duration.lognormal_error.sigma: ", "required"},
    {"ThinkTimeFromATrace", "", "think_time: {philly: {}}\n", "s.yaml:15:13: think_time: ",
     "only fixed or lognormal"},

};

INSTANTIATE_TEST_SUITE_P(ScenarioErrors, ScenarioErrorTest, testing::ValuesIn(kErrorCases),
                         [](const testing::TestParamInfo<ErrorCase>& info) { return info.param.name; });

}  // namespace
}  // namespace gpupool
