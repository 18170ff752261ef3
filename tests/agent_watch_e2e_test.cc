// End to end, the agent protocol's push path (issue 18): with heartbeats
// 30 s apart, a task start order still reaches the agent through its watch
// within a second, and its exit reaches the server at once (a report, not
// the next heartbeat); an agent of the previous protocol (heartbeats only,
// replies read strictly) still runs jobs against this server.
#include <gtest/gtest.h>

#include <chrono>
#include <sstream>

#include "src/base/time_text.h"
#include "tests/agent_e2e_fixture.h"

namespace gpupool::testing {
namespace {

using namespace std::chrono_literals;

// The server's configuration with heartbeats `poll` apart and nodes down after `timeout`.
std::string ConfigWith(const std::string& poll, const std::string& timeout) {
  return "name: watch\nengine:\n  reclaim: {idle: false, poll: " + poll + "}\n  heartbeat_timeout: " + timeout +
         "\npools:\n  - name: gpu\nserver:\n  tick: 100ms\n  default_image: host\n";
}

class AgentWatchE2eTest : public AgentE2eTest {
 protected:
  std::string Config() const override { return ConfigWith("30s", "90s"); }
  std::vector<std::string> AgentFlags() const override { return {"--runtime", "process"}; }

  // The wall-clock ms of the agent's first action line `action` for `job`; -1: none.
  static int64_t ActionAt(const AgentProcess& agent, const std::string& action, int64_t job) {
    std::istringstream in(agent.action_log());
    std::string line;
    while (std::getline(in, line)) {
      const json j = json::parse(line, nullptr, false);
      if (j.is_object() && j.value("action", "") == action && j.value("job", "") == std::to_string(job)) {
        return j.value("unix_ms", int64_t{-1});
      }
    }
    return -1;
  }
};

TEST_F(AgentWatchE2eTest, AStartOrderArrivesWithinASecondWithHeartbeats30SecondsApart) {
  AgentProcess& agent = StartAgent("push-node", "2xH100");
  CreateTenant("team-a", 2, 2);
  EXPECT_NE(agent.action_log().find(R"("protocol":"2")"), std::string::npos) << agent.action_log();
  for (int i = 0; i < 3; ++i) {
    const int64_t submitted = ToMillis(WallNow());
    const int64_t job = Submit({{"name", "quick"}, {"tenant", "team-a"}, {"gpu_fraction", 0.25},
                                {"command", {"sh", "-c", "sleep 0.2"}}});
    ASSERT_TRUE(WaitFor([&] { return ActionAt(agent, "start", job) >= 0; }, 5s)) << agent.action_log();
    const int64_t started = ActionAt(agent, "start", job);
    EXPECT_LT(started - submitted, 1000) << "job " << job;
    // The exit is reported at once, not at the heartbeat 30 s later.
    ASSERT_TRUE(WaitState(job, "succeeded", 5s)) << Job(job).dump() << agent.action_log();
    std::cout << "job " << job << ": started " << started - submitted << " ms after its submission, succeeded by "
              << ToMillis(WallNow()) - submitted << " ms\n";
  }
  EXPECT_TRUE(Events({"NodeDown", "JobInterrupted"}).empty());
}

// A pool upgraded server first: an agent of protocol 1 (heartbeats every
// 500 ms here; it learns its orders from their replies) beside one of this
// build's, against this server.
class MixedProtocolE2eTest : public AgentWatchE2eTest {
 protected:
  std::string Config() const override { return ConfigWith("500ms", "5s"); }
};

TEST_F(MixedProtocolE2eTest, AnAgentOfThePreviousProtocolStillRunsJobs) {
  AgentProcess& old = StartAgent("old-node", "H100", {"--protocol", "1"});
  AgentProcess& now = StartAgent("new-node", "H100");
  CreateTenant("team-a", 2, 2);
  EXPECT_NE(old.action_log().find(R"("protocol":"1")"), std::string::npos) << old.action_log();
  EXPECT_NE(now.action_log().find(R"("protocol":"2")"), std::string::npos) << now.action_log();
  // Two one-GPU jobs: one on each node.
  const int64_t a = Submit({{"name", "a"}, {"tenant", "team-a"}, {"gpus", 1}, {"command", {"sh", "-c", "sleep 1"}}});
  const int64_t b = Submit({{"name", "b"}, {"tenant", "team-a"}, {"gpus", 1}, {"command", {"sh", "-c", "sleep 1"}}});
  ASSERT_TRUE(WaitState(a, "succeeded", 20s)) << Job(a).dump() << old.log() << old.action_log();
  ASSERT_TRUE(WaitState(b, "succeeded", 20s)) << Job(b).dump() << now.log();
  EXPECT_TRUE(ActionAt(old, "start", a) >= 0 || ActionAt(old, "start", b) >= 0) << "the old agent ran neither";
  EXPECT_EQ(old.action_log().find("watch"), std::string::npos);  // it never watched
  // Its strict reader never met a field it does not know.
  EXPECT_EQ(old.log().find("bad reply"), std::string::npos) << old.log();
  EXPECT_EQ(old.action_log().find("heartbeat_failed"), std::string::npos) << old.action_log();
}

}  // namespace
}  // namespace gpupool::testing
