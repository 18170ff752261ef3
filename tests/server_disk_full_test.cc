// A full disk (issue 22): the server refuses writes with 503 naming the
// cause, acknowledges nothing it could not persist, keeps serving reads,
// and takes writes again once space returns. In process on the test Env
// (a journal whose commits fail as on a full disk), checked against a
// replay of the journal; and once through the real binary on a small tmpfs
// (skipped, saying so, where mounting is refused).
#include <gtest/gtest.h>
#include <sys/mount.h>

#include <filesystem>
#include <cstring>
#include <fstream>
#include <shared_mutex>

#include "src/server/testing/invariants.h"
#include "src/server/testing/test_server.h"
#include "tests/run_binary.h"
#include "tests/server_process.h"

namespace gpupool {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

constexpr const char* kConfig = R"(name: disk-full
engine: {heartbeat_timeout: 0s}
pools:
  - name: gpu
cluster:
  nodes:
    - {count: 2, model: H100, gpus: 8, cpu_cores: 96, memory_gib: 1024}
server:
  tick: 100ms
  snapshot_every_events: 10
)";

JobSpec OneGpu(const std::string& name) {
  JobSpec s;
  s.name = name;
  s.demand = Demand{1000, 1024, 1, kMilliPerGpu};
  return s;
}

TEST(ServerDiskFullTest, WritesGet503NamingTheDiskAndNothingRefusedIsKeptThenWritesResume) {
  const std::string root = testing::MakeTempDir();
  TestEnv env;
  TestServer server(env, ServerOptions{.data_dir = root + "/data", .config_text = kConfig});
  ASSERT_TRUE(server.Start().has_value());
  ASSERT_FALSE(server.Call(CreateTenantCmd{"t", MintToken("t", "initial", kRoleTenant).record, {{"gpu", Quota{16000, 16000}}}}).error);
  Acknowledged acknowledged;
  auto submit = [&](const std::string& name) {
    Reply r = server.Call(SubmitJobCmd{"t", OneGpu(name)});
    if (!r.error) acknowledged.jobs[r.id] = name;
    return r;
  };
  const Reply first = submit("before");
  ASSERT_FALSE(first.error) << first.error->message;

  env.set_disk_full(true);
  for (int i = 0; i < 3; ++i) {
    const Reply refused = submit("refused-" + std::to_string(i));
    ASSERT_TRUE(refused.error.has_value());
    EXPECT_EQ(refused.error->http_status, 503);
    EXPECT_EQ(refused.error->code, "unavailable");
    EXPECT_NE(refused.error->message.find("disk full: "), std::string::npos) << refused.error->message;
    EXPECT_NE(refused.error->message.find("nothing of this request was written"), std::string::npos);
    EXPECT_EQ(refused.error->retry_after_s, 5);
  }
  // The server is up and reads are served (the published read model).
  EXPECT_TRUE(env.halts().empty());
  {
    std::shared_lock lock(server.core().read_model().mu());
    EXPECT_NE(server.core().read_model().job(first.id), nullptr);
    EXPECT_EQ(server.core().read_model().job(first.id + 1), nullptr);
  }

  env.set_disk_full(false);
  const Reply after = submit("after");
  ASSERT_FALSE(after.error) << after.error->message;
  EXPECT_EQ(after.id, first.id + 1) << "a refused submission used up a job id";
  // Enough events for a snapshot, written once there is room.
  for (int i = 0; i < 6; ++i) ASSERT_FALSE(submit("more-" + std::to_string(i)).error);

  server.core().Stop();
  const Status ok = CheckAcknowledged(server.core().read_model(), acknowledged);
  EXPECT_TRUE(ok.has_value()) << ok.error().message;
  const Status replay = CheckEqualsReplay(server.core(), server.options());
  EXPECT_TRUE(replay.has_value()) << replay.error().message;
  // The refused submissions are nowhere: ids 1.. are "before", "after", "more-*".
  {
    std::shared_lock lock(server.core().read_model().mu());
    for (JobId id = 1; id <= first.id + 7; ++id) {
      const JobRecord* j = server.core().read_model().job(id);
      ASSERT_NE(j, nullptr) << id;
      EXPECT_EQ(j->spec.name.rfind("refused", 0), std::string::npos) << j->spec.name;
    }
  }
  server.Stop();
  fs::remove_all(root);
}

// Writes to `path` until the disk is full; true when it filled.
bool Fill(const std::string& path) {
  std::ofstream out(path, std::ios::binary);
  const std::string block(64 << 10, 'x');
  for (int i = 0; i < 100000; ++i) {
    out.write(block.data(), static_cast<std::streamsize>(block.size()));
    out.flush();
    if (!out) return true;
  }
  return false;
}

TEST(ServerDiskFullTest, OnARealFullTmpfsTheServerAnswers503StaysUpAndRecoversWhenSpaceReturns) {
  const std::string root = testing::MakeTempDir();
  const std::string mnt = root + "/small";
  fs::create_directories(mnt);
  if (::mount("tmpfs", mnt.c_str(), "tmpfs", 0, "size=8m,mode=0700") != 0) {
    fs::remove_all(root);
    GTEST_SKIP() << "cannot mount a tmpfs here (" << std::strerror(errno) << "): the in-process test covers it";
  }
  {
    testing::ServerProcess server(mnt + "/data");
    ASSERT_TRUE(server.Start()) << server.log();
    const std::string admin = server.admin_token();
    auto t = testing::Http(server, "POST", "/v1/tenants", admin,
                           json{{"name", "team"}, {"quota", {{"default", {{"guaranteed_gpus", 0}, {"limit_gpus", 8}}}}}});
    ASSERT_EQ(t.status, 201) << t.text;
    const json job = {{"name", "j"}, {"tenant", "team"}, {"gpus", 1}};
    auto before = testing::Http(server, "POST", "/v1/jobs", admin, job);
    ASSERT_EQ(before.status, 201) << before.text;

    ASSERT_TRUE(Fill(mnt + "/filler"));
    // SQLite may still fit a commit into pages it holds: a few tries fill those too.
    int status = 0;
    testing::HttpResult refused;
    for (int i = 0; i < 50 && status != 503; ++i) {
      refused = testing::Http(server, "POST", "/v1/jobs", admin, job);
      status = refused.status;
    }
    ASSERT_EQ(status, 503) << refused.text;
    EXPECT_NE(refused.text.find("disk full"), std::string::npos) << refused.text;
    EXPECT_EQ(refused.retry_after, "5");
    // Up, and reads are served.
    EXPECT_EQ(testing::Http(server, "GET", "/v1/jobs/" + std::to_string(before.body["id"].get<int64_t>()), admin).status, 200);
    EXPECT_EQ(testing::Http(server, "GET", "/healthz", "").status, 200);

    fs::remove(mnt + "/filler");
    auto after = testing::Http(server, "POST", "/v1/jobs", admin, job);
    ASSERT_EQ(after.status, 201) << after.text << "\n" << server.log();
    const int64_t after_id = after.body["id"];
    // Killed: everything acknowledged is there after a restart.
    server.Kill();
    ASSERT_TRUE(server.Start()) << server.log();
    auto list = testing::Http(server, "GET", "/v1/jobs/" + std::to_string(after_id), admin);
    EXPECT_EQ(list.status, 200) << list.text;
    EXPECT_EQ(testing::Http(server, "GET", "/v1/jobs/" + std::to_string(after_id + 1), admin).status, 404);
    server.Kill();
  }
  ::umount2(mnt.c_str(), MNT_DETACH);
  fs::remove_all(root);
}

}  // namespace
}  // namespace gpupool
