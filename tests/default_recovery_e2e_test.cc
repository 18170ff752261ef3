// OPS-4 with the default configuration (issue 16): a server with no engine
// section (heartbeats every reclaim.poll, 5 s; a node silent for the
// default heartbeat_timeout is down) and real agents with fake GPUs. A
// node dies with a checkpointable task on it; the task's process starts
// again on the other node within 30 s of the death (that it resumes from
// its checkpoint is AgentE2eTest.KilledAgentsTaskResumesFromItsCheckpoint-
// Elsewhere's part). The time is the surviving agent's own `start` line (its
// action log), not the server's placement decision.
#include <gtest/gtest.h>

#include <chrono>

#include "tests/agent_e2e_fixture.h"

namespace gpupool::testing {
namespace {

class DefaultRecoveryE2eTest : public AgentE2eTest {
 protected:
  std::string Config() const override {
    return R"(name: ops4-defaults
pools:
  - name: gpu
server:
  default_image: host
)";
  }
};

// The unix_ms of the first `start` of job `id` in an agent's action log.
std::optional<int64_t> StartOf(const AgentProcess& agent, int64_t id) {
  const std::vector<json> starts = StartLines(agent, id);
  if (starts.empty()) return std::nullopt;
  return starts.front().value("unix_ms", int64_t{0});
}

int64_t NowUnixMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}

TEST_F(DefaultRecoveryE2eTest, AFailedNodesCheckpointableTaskRunsAgainElsewhereWithin30Seconds) {
  StartAgent("node-a", "1xH100");
  StartAgent("node-b", "1xH100");
  CreateTenant("team-a", 2, 2);
  const int64_t id = Submit(
      {{"name", "trainer"},
       {"tenant", "team-a"},
       {"gpus", 1},
       {"checkpointable", true},
       {"command", CheckpointingTrainer()}});
  ASSERT_TRUE(WaitState(id, "running", std::chrono::seconds(20)));
  const std::string first = Job(id)["placements"][0]["node"];
  const std::string second = first == "node-a" ? "node-b" : "node-a";
  AgentProcess& victim = *agents_[first == "node-a" ? 0 : 1];
  const AgentProcess& survivor = *agents_[first == "node-a" ? 1 : 0];
  ASSERT_TRUE(WaitFor([&] { return StartOf(victim, id).has_value(); }, std::chrono::seconds(20))) << victim.log();
  ASSERT_FALSE(StartOf(survivor, id).has_value());
  // The node dies: its agent and its task.
  const int64_t died_ms = NowUnixMs();
  victim.Kill();
  ASSERT_GT(KillTasksOf(victim), 0);
  std::optional<int64_t> started;
  ASSERT_TRUE(WaitFor([&] { return (started = StartOf(survivor, id)).has_value(); }, std::chrono::seconds(60)))
      << Job(id).dump() << survivor.log();
  const int64_t took_ms = *started - died_ms;
  std::printf("[ ops4 ] a dead node's task started again elsewhere after %.1f s (goal 30 s)\n", took_ms / 1000.0);
  EXPECT_LE(took_ms, 30'000) << Job(id).dump();
  EXPECT_EQ(Events({"NodeDown"}).size(), 1u);
  EXPECT_EQ(Job(id)["placements"][0]["node"], second);
}

}  // namespace
}  // namespace gpupool::testing
