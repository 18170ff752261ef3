// Affinity rules (QUOTA-6) from a scenario file through the Engine: jobs
// labelled `web` with anti-affinity to `web` never share a node, and a job
// with affinity to `db` lands only where a `db` job runs.
#include <gtest/gtest.h>

#include <map>
#include <set>

#include "src/sim/scenario.h"
#include "src/sim/scenario_runner.h"

namespace gpupool {
namespace {

constexpr std::string_view kScenario = R"(
name: affinity
seed: 5
horizon: 3h
job_labels: [web, db]
cluster:
  nodes:
    - {count: 4, model: H100, gpus: 8, cpu_cores: 192, memory_gib: 2048}
pools:
  - {name: gpu, models: [H100]}
tenants:
  - name: ml
    quota: {gpu: {guaranteed_gpus: 0, limit_gpus: 32}}
workload:
  - tenant: ml
    arrivals: {process: poisson, rate_per_hour: 30, stop: 2h}
    jobs:
      - {name: web, weight: 2, gpus: 1, labels: [web], anti_affinity: [web], duration: {fixed: 1h}}
      - {name: db, gpus: 1, labels: [db], duration: {fixed: 4h}}
      - {name: near-db, gpus: 1, affinity: [db], duration: {fixed: 30m}}
)";

TEST(AffinityScenarioTest, AntiAffinitySpreadsAndAffinityFollowsTheLabel) {
  auto s = ParseScenario(kScenario, "affinity.yaml", "");
  ASSERT_TRUE(s.has_value()) << s.error().message;
  std::map<JobId, JobSpec> specs;
  std::map<NodeIndex, std::multiset<JobId>> on_node;  // running jobs per node
  std::map<JobId, NodeIndex> node_of;
  int web_placed = 0, near_db_placed = 0;
  RunOptions o;
  o.check_invariants = true;
  o.on_event = [&](const Event& e) {
    if (const auto* sub = std::get_if<JobSubmitted>(&e.body)) specs[sub->job] = sub->spec;
    if (const auto* p = std::get_if<JobPlaced>(&e.body)) {
      const JobSpec& spec = specs.at(p->job);
      const NodeIndex n = p->replicas.at(0).node;
      auto runs = [&](LabelMask m) {
        for (JobId other : on_node[n]) {
          if (specs.at(other).labels & m) return true;
        }
        return false;
      };
      if (spec.anti_affinity) {
        EXPECT_FALSE(runs(spec.anti_affinity)) << "job " << p->job << " on node " << n;
        ++web_placed;
      }
      if (spec.affinity) {
        EXPECT_TRUE(runs(spec.affinity)) << "job " << p->job << " on node " << n;
        ++near_db_placed;
      }
      on_node[n].insert(p->job);
      node_of[p->job] = n;
    }
    auto leave = [&](JobId j) {
      if (auto it = node_of.find(j); it != node_of.end()) {
        on_node[it->second].erase(on_node[it->second].find(j));
        node_of.erase(it);
      }
    };
    if (const auto* f = std::get_if<JobFinished>(&e.body)) leave(f->job);
    if (const auto* c = std::get_if<JobCancelled>(&e.body)) leave(c->job);
    if (const auto* v = std::get_if<JobPreempted>(&e.body)) leave(v->victim);
    if (const auto* r = std::get_if<JobReclaimed>(&e.body)) leave(r->job);
    if (const auto* i = std::get_if<JobInterrupted>(&e.body)) leave(i->job);
  };
  auto report = RunScenario(*s, o);
  ASSERT_TRUE(report.has_value()) << report.error().message;
  // Enough of each kind ran for the checks above to mean something.
  EXPECT_GE(web_placed, 8);
  EXPECT_GE(near_db_placed, 3);
}

}  // namespace
}  // namespace gpupool
