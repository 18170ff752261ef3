#include "src/client/resource_tables.h"

#include <gtest/gtest.h>

namespace gpupool {
namespace {

using nlohmann::json;

constexpr int64_t kNow = 1795953600000LL;  // 2026-11-29T12:00:00Z

json Jobs() {
  return json::parse(R"([
    {"id": 1, "name": "llm-7b-pretrain", "tenant": "team-a", "state": "running", "kind": "training",
     "priority": 1000, "replicas": 1, "submitted_at": "2026-11-29T09:30:00.000Z",
     "started_at": "2026-11-29T09:31:00.000Z", "pool": "default", "borrowed": false,
     "placements": [{"node": "h100-0", "gpus": [0,1,2,3,4,5,6,7]}], "preemptions": 0, "interruptions": 0,
     "request": {"name": "llm-7b-pretrain", "replicas": 1, "gpus": 8}},
    {"id": 2, "name": "embeddings-serve", "tenant": "team-b", "state": "pending", "kind": "online-inference",
     "priority": 100, "replicas": 4, "submitted_at": "2026-11-29T11:59:15.000Z", "borrowed": false,
     "placements": [], "preemptions": 0, "interruptions": 0, "waiting": "no pool has 4 x 0.25 GPU free",
     "request": {"name": "embeddings-serve", "replicas": 4, "gpu_fraction": 0.25}},
    {"id": 13, "name": "pipe", "tenant": "team-a", "state": "rejected", "priority": 0,
     "submitted_at": "2026-11-26T12:00:00.000Z", "placements": [], "reason": "unknown requirement",
     "request": {"name": "pipe", "stages": [{"gpus": 1}, {"gpu_fraction": 0.5}]}},
    {"id": 14, "name": "gang", "tenant": "team-a", "state": "running", "priority": 100,
     "submitted_at": "bad time",
     "placements": [{"node": "a"}, {"node": "b"}, {"node": "a"}, {"node": "c"}, {"node": "d"}, {"node": "e"}],
     "request": {"replicas": 6, "gpus": 1}}
  ])");
}

TEST(ResourceTablesTest, JobsTable) {
  EXPECT_EQ(FormatJobsTable(Jobs(), kNow),
            "ID   NAME               TENANT   STATE      PRIORITY   GPUS             AGE     NODES      REASON\n"
            "1    llm-7b-pretrain    team-a   running    1000       8                2h30m   h100-0\n"
            "2    embeddings-serve   team-b   pending    100        4x0.25           45s     -          no pool has 4 "
            "x 0.25 GPU free\n"
            "13   pipe               team-a   rejected   0          1.5 (2 stages)   3d      -          unknown "
            "requirement\n"
            "14   gang               team-a   running    100        6x1              -       a,b,c,+2\n");
}

TEST(ResourceTablesTest, JobGpusFallsBackToTheJobsReplicas) {
  EXPECT_EQ(JobGpus(json::parse(R"({"replicas": 2, "request": {"gpus": 4}})")), "2x4");
  EXPECT_EQ(JobGpus(json::parse(R"({"request": {"gpus": 0}})")), "0");
  EXPECT_EQ(JobGpus(json::parse(R"({})")), "-");
}

TEST(ResourceTablesTest, JobDetail) {
  const json job = json::parse(R"({
    "id": 1, "name": "gang", "tenant": "team-a", "state": "running", "kind": "training", "priority": 100,
    "replicas": 2, "submitted_at": "2026-11-29T11:00:00.000Z", "started_at": "2026-11-29T11:58:00.000Z",
    "pool": "default", "borrowed": true,
    "placements": [{"node": "n1", "gpus": [0, 1]}, {"node": "n2", "gpus": [3]}],
    "preemptions": 1, "interruptions": 0,
    "request": {"name": "gang", "replicas": 2, "gpus": 2, "checkpointable": true, "checkpoint_interval": "30m"}})");
  EXPECT_EQ(FormatJobDetail(job, kNow),
            "id:             1\n"
            "name:           gang\n"
            "tenant:         team-a\n"
            "state:          running\n"
            "kind:           training\n"
            "priority:       100\n"
            "gpus:           2x2\n"
            "pool:           default\n"
            "borrowed:       true\n"
            "submitted:      2026-11-29T11:00:00.000Z (1h ago)\n"
            "started:        2026-11-29T11:58:00.000Z (2m ago)\n"
            "ended:          -\n"
            "preemptions:    1\n"
            "interruptions:  0\n"
            "placements:     n1 GPUs 0,1\n"
            "                n2 GPUs 3\n"
            "request:\n"
            "  checkpoint_interval: 30m\n"
            "  checkpointable: true\n"
            "  gpus: 2\n"
            "  name: gang\n"
            "  replicas: 2\n");
}

TEST(ResourceTablesTest, JobDetailSaysWhyTheJobLastStopped) {
  const json job = json::parse(R"({
    "id": 3, "name": "low", "tenant": "team-a", "state": "pending", "kind": "training", "priority": 0,
    "replicas": 1, "submitted_at": "2026-11-29T11:00:00.000Z", "borrowed": false, "placements": [],
    "preemptions": 1, "interruptions": 0,
    "last_stop": {"cause": "preempted", "reason": "priority", "at": "2026-11-29T11:50:00.000Z", "by_job": 4}})");
  const std::string detail = FormatJobDetail(job, kNow);
  EXPECT_NE(detail.find("last stop:      preempted (priority) for job 4, 2026-11-29T11:50:00.000Z (10m ago)\n"),
            std::string::npos)
      << detail;
}

TEST(ResourceTablesTest, NodesTable) {
  const json nodes = json::parse(R"([
    {"name": "h100-0", "pool": "default", "model": "H100", "gpus": 8, "cpu_cores": 96, "memory_gib": 1024,
     "region": "r1", "zone": "z1", "rack": "rack-1", "condition": "ready", "free_gpus": 3.5, "gpu": [],
     "agent": {"backend": "nvml", "isolation": "container", "gpus": []}},
    {"name": "t4-9", "pool": "inference", "model": "T4", "gpus": 1, "cpu_cores": 7.5, "memory_gib": 30,
     "region": "r2", "zone": "z3", "rack": "", "condition": "cordoned", "free_gpus": 0, "unhealthy_gpus": [0],
     "cordons": [{"by": "operator", "actor": "admin", "reason": "fan", "since": "2026-11-29T12:00:00.000Z",
                  "drain": "draining", "drain_deadline": "2026-11-29T13:00:00.000Z"},
                 {"by": "hotspot", "reason": "GPU 0 temperature 95 C above 85 C for 300 s",
                  "since": "2026-11-29T12:05:00.000Z"}]}
  ])");
  EXPECT_EQ(FormatNodesTable(nodes),
            "NAME     POOL        MODEL   GPUS   FREE   CPU   MEMORY_GIB   REGION   ZONE   RACK     CONDITION   "
            "CORDONED_BY                 UNHEALTHY   ISOLATION\n"
            "h100-0   default     H100    8      3.5    96    1024         r1       z1     rack-1   ready       "
            "-                           -           container\n"
            "t4-9     inference   T4      1      0      7.5   30           r2       z3     -        cordoned    "
            "operator:draining,hotspot   0           -\n");
  EXPECT_EQ(FormatCordons(nodes[1]),
            "cordoned by operator (admin) since 2026-11-29T12:00:00.000Z, draining (deadline 2026-11-29T13:00:00.000Z): "
            "fan\n"
            "cordoned by hotspot since 2026-11-29T12:05:00.000Z: GPU 0 temperature 95 C above 85 C for 300 s\n");
  EXPECT_EQ(FormatCordons(nodes[0]), "");
}

TEST(ResourceTablesTest, PoolsTableShowsCapacity) {
  const json pools = json::parse(R"([
    {"name": "default", "models": [], "regions": [], "dedicated_to": [], "nodes": 12,
     "capacity": {"total_gpus": 96, "allocated_gpus": 40.25, "reserved_gpus": 8, "fragmented_gpus": 0.75,
                  "available_gpus": 47}},
    {"name": "h100", "models": ["H100", "H200"], "regions": ["r1"], "dedicated_to": ["team-a"], "nodes": 2,
     "capacity": {"total_gpus": 16, "allocated_gpus": 0, "reserved_gpus": 0, "fragmented_gpus": 0,
                  "available_gpus": 16}}
  ])");
  EXPECT_EQ(FormatPoolsTable(pools),
            "NAME      MODELS      REGIONS   NODES   TOTAL   ALLOCATED   RESERVED   FRAGMENTED   AVAILABLE   "
            "DEDICATED_TO\n"
            "default   -           -         12      96      40.25       8          0.75         47          -\n"
            "h100      H100,H200   r1        2       16      0           0          0            16          team-a\n");
}

TEST(ResourceTablesTest, RegionsTableShowsPricesLatenciesAndUsers) {
  const json table = json::parse(R"({"policy": "cost-aware",
    "regions": [{"name": "east", "price_per_gpu_hour": 2.5, "latency_ms": {"nyc": 10, "sf": 70}},
                {"name": "west", "price_per_gpu_hour": 3, "latency_ms": {}}],
    "users": [{"tenant": "team-a", "location": "nyc", "latency_budget_ms": 50}]})");
  EXPECT_EQ(FormatRegionsTable(table),
            "policy: cost-aware\n"
            "REGION   PRICE_PER_GPU_HOUR   LATENCY_MS\n"
            "east     2.5                  nyc=10,sf=70\n"
            "west     3                    -\n"
            "\n"
            "TENANT   LOCATION   LATENCY_BUDGET_MS\n"
            "team-a   nyc        50\n");
  EXPECT_EQ(FormatRegionsTable(json::parse(R"({"policy": "off", "regions": [], "users": []})")),
            "policy: off\nREGION   PRICE_PER_GPU_HOUR   LATENCY_MS\n");
}

TEST(ResourceTablesTest, TenantsTableHasOneLinePerPool) {
  const json tenants = json::parse(R"([
    {"name": "team-a",
     "quota": {"default": {"guaranteed_gpus": 2, "limit_gpus": 4, "weight": 1.0, "reserved": false},
               "h100": {"guaranteed_gpus": 8, "limit_gpus": 8, "weight": 2, "reserved": true}},
     "usage": {"default": {"used_gpus": 1.25, "borrowed_gpus": 0, "lent_gpus": 0.6}}},
    {"name": "team-b", "quota": {}, "usage": {}}
  ])");
  EXPECT_EQ(FormatTenantsTable(tenants),
            "NAME     POOL      GUARANTEED   LIMIT   WEIGHT   RESERVED   USED   BORROWED   LENT\n"
            "team-a   default   2            4       1        false      1.25   0          0.6\n"
            "team-a   h100      8            8       2        true       -      -          -\n"
            "team-b   -         -            -       -        -          -      -          -\n");
}

TEST(ResourceTablesTest, MalformedInputPrintsDashesInsteadOfFailing) {
  EXPECT_EQ(FormatJobsTable(json::parse(R"([{"id": "x", "placements": 3}, 5])"), kNow),
            "ID   NAME   TENANT   STATE   PRIORITY   GPUS   AGE   NODES   REASON\n"
            "x    -      -        -       -          -      -     -\n"
            "-    -      -        -       -          -      -     -\n");
  EXPECT_EQ(FormatNodesTable(json("not a list")),
            "NAME   POOL   MODEL   GPUS   FREE   CPU   MEMORY_GIB   REGION   ZONE   RACK   CONDITION   CORDONED_BY   UNHEALTHY   "
            "ISOLATION\n");
}

}  // namespace
}  // namespace gpupool
