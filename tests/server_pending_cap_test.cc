// The per-tenant cap on pending jobs (issue 22, limits on everything):
// the real server binary with server.max_pending_jobs_per_tenant 3 and no
// capacity for the tenant, so every accepted job waits.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "tests/run_binary.h"
#include "tests/server_process.h"

namespace gpupool::testing {
namespace {

using nlohmann::json;

constexpr const char* kConfig = R"(name: cap
engine: {heartbeat_timeout: 0s}
pools:
  - name: gpu
cluster:
  nodes:
    - {count: 1, model: H100, gpus: 8, cpu_cores: 96, memory_gib: 1024}
server:
  tick: 200ms
  max_pending_jobs_per_tenant: 3
)";

TEST(ServerPendingCapTest, SubmissionsBeyondTheTenantsPendingCapGet429UntilOneLeavesTheQueue) {
  const std::string root = MakeTempDir();
  std::ofstream(root + "/config.yaml") << kConfig;
  ServerProcess server(root + "/data", {"--config", root + "/config.yaml"});
  ASSERT_TRUE(server.Start()) << server.log();
  const std::string admin = server.admin_token();
  // One 8-GPU node, taken by the other tenant's job: team's 8-GPU jobs wait.
  const json quota = {{"gpu", {{"guaranteed_gpus", 0}, {"limit_gpus", 8}}}};
  auto t = Http(server, "POST", "/v1/tenants", admin, json{{"name", "team"}, {"quota", quota}});
  ASSERT_EQ(t.status, 201) << t.text;
  const std::string token = t.body["token"];
  auto other = Http(server, "POST", "/v1/tenants", admin, json{{"name", "other"}, {"quota", quota}});
  ASSERT_EQ(other.status, 201) << other.text;
  const std::string other_token = other.body["token"];
  const json job = {{"name", "wait"}, {"gpus", 8}};
  ASSERT_EQ(Http(server, "POST", "/v1/jobs", other_token, job).status, 201);
  std::vector<int64_t> ids;
  for (int i = 0; i < 3; ++i) {
    auto r = Http(server, "POST", "/v1/jobs", token, job);
    ASSERT_EQ(r.status, 201) << r.text;
    ids.push_back(r.body["id"]);
  }
  auto refused = Http(server, "POST", "/v1/jobs", token, job);
  EXPECT_EQ(refused.status, 429) << refused.text;
  EXPECT_EQ(refused.body["error"]["field"], "tenant");
  EXPECT_NE(refused.text.find("max_pending_jobs_per_tenant"), std::string::npos) << refused.text;
  // Another tenant's queue is its own.
  EXPECT_EQ(Http(server, "POST", "/v1/jobs", other_token, job).status, 201);
  // One leaves the queue: there is room for one more, and only one.
  auto c = Http(server, "DELETE", "/v1/jobs/" + std::to_string(ids[0]), token);
  ASSERT_LT(c.status, 300) << c.text;
  EXPECT_EQ(Http(server, "POST", "/v1/jobs", token, job).status, 201);
  EXPECT_EQ(Http(server, "POST", "/v1/jobs", token, job).status, 429);
  server.Stop();
  std::filesystem::remove_all(root);
}

}  // namespace
}  // namespace gpupool::testing
