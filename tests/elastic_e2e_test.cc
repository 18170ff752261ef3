// Elastic training on real agents (issue 16, SCALE-7 in the daemon): an
// elastic job grows onto a second node when the pool is free and shrinks
// off it when another tenant's job needs the GPU, and neither resize
// restarts the replica that stays (the same process throughout). Each
// replica learns the membership from its environment at start and from
// its membership file, which the agent rewrites on every resize.
#include <gtest/gtest.h>

#include "tests/agent_e2e_fixture.h"

namespace gpupool::testing {
namespace {

class ElasticE2eTest : public AgentE2eTest {
 protected:
  std::string Config() const override {
    return R"(name: elastic-e2e
engine:
  reclaim: {poll: 500ms}  # the agents' heartbeat interval
  heartbeat_timeout: 3s
  elastic: {resize_every: 1s}
pools:
  - name: gpu
server:
  tick: 100ms
  default_image: host
)";
  }

  // The pids of job `id`'s `start` lines in an agent's action log.
  static std::vector<std::string> StartPids(const AgentProcess& agent, int64_t id) {
    std::vector<std::string> pids;
    for (const json& start : StartLines(agent, id)) pids.push_back(start.value("pid", ""));
    return pids;
  }
  // A replica's membership file, parsed (null while there is none).
  json Membership(const std::string& node, int64_t id, int replica) {
    return json::parse(ReadFile(root_ + "/agent-" + node + "/tasks/job-" + std::to_string(id) + "/replica-" +
                                std::to_string(replica) + "/membership.json"),
                       nullptr, false);
  }
};

TEST_F(ElasticE2eTest, AJobGrowsAndShrinksWithoutRestartingItsSurvivingReplica) {
  StartAgent("node-a", "1xH100");
  StartAgent("node-b", "1xH100");
  CreateTenant("train", 1, 2);  // alone in the pool: it may borrow the second GPU
  // Each replica says who it is and what it was told, then keeps reading
  // its membership file (as a rendezvous would).
  const json command = {"sh", "-c",
                        "echo replica=$GPUPOOL_REPLICA of $GPUPOOL_REPLICAS members=$GPUPOOL_MEMBERS; "
                        "while true; do cat \"$GPUPOOL_MEMBERSHIP_FILE\" > /dev/null; sleep 0.2; done"};
  const int64_t id = Submit({{"name", "elastic"},
                             {"tenant", "train"},
                             {"gpus", 1},
                             {"replicas", 1},
                             {"max_replicas", 2},
                             {"checkpointable", true},
                             {"command", command}});
  ASSERT_TRUE(WaitState(id, "running", std::chrono::seconds(20)));
  const std::string first = Job(id)["placements"][0]["node"];
  const std::string second = first == "node-a" ? "node-b" : "node-a";
  const AgentProcess& home = *agents_[first == "node-a" ? 0 : 1];
  const AgentProcess& other = *agents_[first == "node-a" ? 1 : 0];

  // The pool has room and nothing waits: the job grows onto the other node.
  ASSERT_TRUE(WaitFor([&] { return Job(id)["placements"].size() == 2; }, std::chrono::seconds(20))) << Job(id).dump();
  ASSERT_TRUE(WaitFor([&] { return StartPids(other, id).size() == 1; }, std::chrono::seconds(20))) << other.log();
  ASSERT_TRUE(WaitFor([&] { return Membership(first, id, 0).value("generation", 0) == 1; }, std::chrono::seconds(10)))
      << Membership(first, id, 0).dump();
  const json grown = Membership(first, id, 0);
  EXPECT_EQ(grown["members"], json::parse(R"([{"replica":0,"node":")" + first + R"("},{"replica":1,"node":")" +
                                          second + R"("}])"));
  EXPECT_EQ(Membership(second, id, 1)["members"], grown["members"]);  // the new replica has it from the start
  const std::vector<std::string> pids = StartPids(home, id);
  ASSERT_EQ(pids.size(), 1u) << home.action_log();

  // A second tenant joins with a guarantee of one GPU and a job within it:
  // the elastic job gives back its borrowed replica above the minimum
  // instead of anything being preempted.
  CreateTenant("urgent", 1, 1);
  const int64_t urgent = Submit({{"name", "urgent"},
                                 {"tenant", "urgent"},
                                 {"gpus", 1},
                                 {"command", {"sh", "-c", "sleep 1000"}}});
  ASSERT_TRUE(WaitState(urgent, "running", std::chrono::seconds(20))) << Job(urgent).dump();
  const json shrunk_job = Job(id);
  ASSERT_EQ(shrunk_job["state"], "running") << shrunk_job.dump();
  ASSERT_EQ(shrunk_job["placements"].size(), 1u) << shrunk_job.dump();
  const std::string kept = shrunk_job["placements"][0]["node"];
  const AgentProcess& kept_agent = *agents_[kept == "node-a" ? 0 : 1];
  const int kept_replica = kept == first ? 0 : 1;
  ASSERT_TRUE(WaitFor([&] { return Membership(kept, id, kept_replica).value("generation", 0) == 2; },
                      std::chrono::seconds(10)))
      << Membership(kept, id, kept_replica).dump();
  EXPECT_EQ(Membership(kept, id, kept_replica)["members"],
            json::parse(R"([{"replica":)" + std::to_string(kept_replica) + R"(,"node":")" + kept + R"("}])"));
  // No restart on either node: one start each, the survivor's process the same.
  EXPECT_EQ(StartPids(home, id), pids) << home.action_log();
  EXPECT_EQ(StartPids(other, id).size(), 1u) << other.action_log();
  EXPECT_EQ(Events({"JobResized"}).size(), 2u);
  EXPECT_TRUE(Events({"JobPreempted"}).empty());
  EXPECT_NE(kept_agent.action_log().find("\"membership\""), std::string::npos) << kept_agent.action_log();
  // What the first replica printed at start (logs travel with heartbeats).
  const std::string said = "replica=0 of 1 members=0@" + first;
  EXPECT_TRUE(WaitFor([&] { return Logs(id).find(said) != std::string::npos; }, std::chrono::seconds(10))) << Logs(id);
}

}  // namespace
}  // namespace gpupool::testing
