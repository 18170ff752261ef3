// `gpupool job logs -f` against a real server and agent: started while the
// job runs, it prints each line the job writes once, in order, as the agent
// uploads them, and ends by itself once the job has ended.
#include <gtest/gtest.h>

#include "tests/agent_e2e_fixture.h"
#include "tests/run_binary.h"

namespace gpupool {
namespace {

using nlohmann::json;

// The end-to-end fixture without idle reclaim (the job uses no GPU).
class JobLogsFollowTest : public testing::AgentE2eTest {
 protected:
  std::string Config() const override {
    return "name: follow\nengine: {heartbeat_timeout: 3s}\npools: [{name: gpu}]\n"
           "server: {tick: 100ms, default_image: host}\n";
  }
};

TEST_F(JobLogsFollowTest, PrintsEachLineOnceAndEndsWithTheJob) {
  StartAgent("node-a", "1xH100");
  CreateTenant("team-a", 1, 1);
  const int64_t id = Submit({{"name", "talker"}, {"tenant", "team-a"}, {"gpus", 1},
                             {"command", {"sh", "-c", "for i in 1 2 3 4; do echo line-$i; sleep 0.7; done"}}});
  ASSERT_GT(id, 0);
  ASSERT_TRUE(testing::WaitFor([&] { return State(id) == "running"; }, std::chrono::seconds(20))) << Job(id).dump();
  const auto t0 = std::chrono::steady_clock::now();
  const testing::BinaryRun run = testing::RunGpupool({"job", "logs", std::to_string(id), "-f", "--interval", "0.2",
                                                      "--addr", server_->url(), "--token", admin_});
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  ASSERT_EQ(run.exit_code, 0) << run.err;
  EXPECT_EQ(State(id), "succeeded");
  EXPECT_EQ(run.out, "line-1\nline-2\nline-3\nline-4\n") << run.out;
  EXPECT_LT(seconds, 20) << "it should end soon after the job";
  // -o json and --follow do not mix; --interval needs --follow.
  EXPECT_NE(testing::RunGpupool({"job", "logs", std::to_string(id), "-f", "-o", "json", "--addr", server_->url(),
                                 "--token", admin_})
                .exit_code,
            0);
  EXPECT_NE(testing::RunGpupool({"job", "logs", std::to_string(id), "--interval", "1", "--addr", server_->url(),
                                 "--token", admin_})
                .exit_code,
            0);
  auto bad = testing::Http(*server_, "GET", "/v1/jobs/" + std::to_string(id) + "/logs?format=xml", admin_);
  EXPECT_EQ(bad.status, 400);
  EXPECT_EQ(bad.body["error"]["field"], "format");
}

}  // namespace
}  // namespace gpupool
