// The agent's MIG lifecycle (agent_mig.cc) against a scripted server: the
// test plays the server's side of the agent protocol, handing the agent
// task orders with MIG placements as the Engine plans them (or as no Engine
// would, to see the driver refuse them), and watches what the agent does to
// its GPUs (the fake backend's MIG operations, in order), what its tasks
// see, and what its heartbeats report.
#include "src/agent/agent.h"

#include <gtest/gtest.h>
#include <httplib.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <mutex>
#include <optional>
#include <set>
#include <sstream>
#include <thread>

#include "src/agent/fake_backend.h"
#include "src/agent/nvml_backend.h"

namespace gpupool {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

bool WaitFor(const std::function<bool()>& pred, std::chrono::milliseconds timeout = std::chrono::seconds(15)) {
  const auto until = std::chrono::steady_clock::now() + timeout;
  while (std::chrono::steady_clock::now() < until) {
    if (pred()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  return pred();
}

std::string ReadAll(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// The server's side: replies carry the tasks the test sets; requests are kept.
class ScriptedServer {
 public:
  ScriptedServer() {
    server_.Post("/v1/agent/register", [this](const httplib::Request& req, httplib::Response& res) {
      auto r = ParseRegisterRequest(json::parse(req.body));
      std::lock_guard lock(mu_);
      if (r.ok()) registered_ = *r.value;
      res.set_content(ToJson(reply_).dump(), "application/json");
    });
    server_.Post("/v1/agent/heartbeat", [this](const httplib::Request& req, httplib::Response& res) {
      auto r = ParseHeartbeatRequest(json::parse(req.body));
      std::lock_guard lock(mu_);
      if (!r.ok()) {
        bad_ = r.error.field + ": " + r.error.message;
        res.status = 400;
        return;
      }
      for (const TaskReport& t : r.value->tasks) reports_[t.job] = t;
      mig_ = r.value->mig;
      ++beats_;
      res.set_content(ToJson(reply_).dump(), "application/json");
    });
    port_ = server_.bind_to_any_port("127.0.0.1");
    thread_ = std::thread([this] { server_.listen_after_bind(); });
    reply_.node_index = 0;
    reply_.session = "s";
    reply_.heartbeat_interval_ms = 100;
  }
  ~ScriptedServer() {
    server_.stop();
    thread_.join();
  }
  std::string url() const { return "http://127.0.0.1:" + std::to_string(port_); }
  void SetTasks(std::vector<TaskOrder> tasks) {
    std::lock_guard lock(mu_);
    reply_.tasks = std::move(tasks);
  }
  std::optional<TaskReport> Report(JobId job) {
    std::lock_guard lock(mu_);
    auto it = reports_.find(job);
    return it == reports_.end() ? std::nullopt : std::optional<TaskReport>(it->second);
  }
  // GPU 0's instances as the last heartbeat reported them.
  std::optional<std::vector<MigInstance>> Mig0() {
    std::lock_guard lock(mu_);
    auto it = mig_.find(0);
    return it == mig_.end() ? std::nullopt : std::optional<std::vector<MigInstance>>(it->second);
  }
  // Waits for `n` more heartbeats.
  bool Beats(int n) {
    int start = 0;
    {
      std::lock_guard lock(mu_);
      start = beats_;
    }
    return WaitFor([&] {
      std::lock_guard lock(mu_);
      return beats_ >= start + n;
    });
  }
  RegisterRequest registered() {
    std::lock_guard lock(mu_);
    return registered_;
  }
  std::string bad() {
    std::lock_guard lock(mu_);
    return bad_;
  }

 private:
  httplib::Server server_;
  int port_ = 0;
  std::thread thread_;
  std::mutex mu_;
  AgentReply reply_;
  RegisterRequest registered_;
  std::map<JobId, TaskReport> reports_;
  std::map<int, std::vector<MigInstance>> mig_;
  int beats_ = 0;
  std::string bad_;
};

TaskOrder MigOrder(JobId job, const std::string& profile, int start, std::string script, int attempt = 1) {
  TaskOrder o;
  o.job = job;
  o.attempt = attempt;
  o.name = "mig-" + std::to_string(job);
  o.tenant = "team-a";
  o.gpus = {0};
  o.gpu_mode = "mig";
  o.mig_profile = profile;
  o.mig_start = start;
  o.task.command = {"sh", "-c", std::move(script)};
  o.task.stop_grace = std::chrono::seconds(2);
  return o;
}

class AgentMigTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string templ = (fs::temp_directory_path() / "gpupool-agent-mig-XXXXXX").string();
    ASSERT_NE(mkdtemp(templ.data()), nullptr);
    dir_ = templ;
  }
  void TearDown() override {
    StopAgent();
    agent_.reset();
    unsetenv("GPUPOOL_FAKE_NVML_SCRIPT");
    fs::remove_all(dir_);
  }
  void StartAgent(std::unique_ptr<DeviceBackend> backend) {
    AgentOptions o;
    o.server_url = server_.url();
    o.token = "t";
    o.node = "node-a";
    o.work_dir = dir_ + "/work";
    o.quiet = true;
    o.runtime = "process";
    o.cpu_milli = 4000;
    o.memory_mib = 4096;
    agent_ = std::make_unique<Agent>(o, std::move(backend));
    thread_ = std::thread([this] { agent_->Run(); });
  }
  FakeBackend* StartFake(const std::string& spec) {
    auto gpus = ParseFakeGpus(spec, "node-a");
    EXPECT_TRUE(gpus.has_value()) << gpus.error().message;
    auto backend = std::make_unique<FakeBackend>(*gpus);
    FakeBackend* raw = backend.get();
    StartAgent(std::move(backend));
    return raw;
  }
  // Stops it; the agent and its backend live on until the test ends.
  void StopAgent() {
    if (!thread_.joinable()) return;
    agent_->Stop();
    thread_.join();
  }
  std::string TaskLog(JobId job, int attempt = 1) {
    return ReadAll(dir_ + "/work/logs/" + std::to_string(job) + ".0." + std::to_string(attempt) + ".log");
  }
  // The agent's action lines of these kinds, in order, as "action uuid".
  std::vector<std::string> Actions(const std::set<std::string>& kinds) {
    std::vector<std::string> out;
    std::istringstream in(ReadAll(dir_ + "/work/agent.log"));
    for (std::string line; std::getline(in, line);) {
      const json j = json::parse(line, nullptr, false);
      if (!j.is_object() || !kinds.count(j.value("action", ""))) continue;
      out.push_back(j.value("action", "") + " " + j.value("uuid", j.value("mig_uuid", j.value("job", ""))));
    }
    return out;
  }
  std::optional<TaskReport> WaitReport(JobId job, TaskPhase phase) {
    std::optional<TaskReport> r;
    WaitFor([&] {
      r = server_.Report(job);
      return r && r->phase == phase;
    });
    return r;
  }

  std::string dir_;
  ScriptedServer server_;
  std::unique_ptr<Agent> agent_;
  std::thread thread_;
};

TEST_F(AgentMigTest, CreatesThePlannedInstanceAndDestroysItWhenTheLastTaskLeaves) {
  FakeBackend* fake = StartFake("H100:mig");
  server_.SetTasks({MigOrder(1, "3g.40gb", 4, "echo uuid=$CUDA_VISIBLE_DEVICES end; sleep 30")});
  ASSERT_TRUE(WaitFor([&] { return TaskLog(1).find(" end") != std::string::npos; })) << TaskLog(1);
  const std::string log = TaskLog(1);
  const std::string uuid = log.substr(log.find("uuid=") + 5, log.find(" end") - log.find("uuid=") - 5);
  EXPECT_EQ(uuid.rfind("MIG-", 0), 0u) << log;
  // The heartbeats report it where the Engine planned it.
  ASSERT_TRUE(WaitFor([&] {
    auto m = server_.Mig0();
    return m && m->size() == 1 && (*m)[0].uuid == uuid;
  }));
  EXPECT_EQ(server_.Mig0()->at(0).profile, "3g.40gb");
  EXPECT_EQ(server_.Mig0()->at(0).start, 4);
  EXPECT_EQ(server_.Mig0()->at(0).memory_mib, 40448);
  // The task leaves: the instance is scrubbed, then destroyed.
  server_.SetTasks({});
  ASSERT_TRUE(WaitFor([&] {
    auto m = server_.Mig0();
    return m && m->empty();
  }));
  EXPECT_EQ(server_.bad(), "");
  StopAgent();
  const std::vector<std::string> ops = {"create 0 3g.40gb@4 " + uuid, "destroy 0 3g.40gb@4 " + uuid};
  EXPECT_EQ(fake->MigOps(), ops);
  ASSERT_EQ(fake->Scrubs().size(), 1u);
  EXPECT_EQ(fake->Scrubs()[0].mig_uuid, uuid);
  EXPECT_EQ(Actions({"mig_create", "scrub", "mig_destroy"}),
            (std::vector<std::string>{"mig_create " + uuid, "scrub " + uuid, "mig_destroy " + uuid}));
}

TEST_F(AgentMigTest, IdleInstancesInThePlannedPlaceGoFirstAndTheRestStay) {
  FakeBackend* fake = StartFake("H100:mig=2g.20gb@0/1g.10gb@4/1g.10gb@5");
  ASSERT_TRUE(server_.Beats(1));
  // Registration reports the layout that was there before the agent.
  const RegisterRequest reg = server_.registered();
  ASSERT_EQ(reg.gpus.size(), 1u);
  EXPECT_TRUE(reg.gpus[0].mig_enabled);
  ASSERT_EQ(reg.gpus[0].mig.size(), 3u);
  EXPECT_EQ(reg.gpus[0].mig[0].profile, "2g.20gb");
  EXPECT_EQ(reg.gpus[0].mig[2].start, 5);
  const std::string old4 = reg.gpus[0].mig[1].uuid, old5 = reg.gpus[0].mig[2].uuid, kept = reg.gpus[0].mig[0].uuid;
  ASSERT_EQ(server_.Mig0()->size(), 3u);

  server_.SetTasks({MigOrder(1, "3g.40gb", 4, "echo uuid=$CUDA_VISIBLE_DEVICES end; sleep 30")});
  ASSERT_TRUE(WaitFor([&] { return TaskLog(1).find(" end") != std::string::npos; })) << TaskLog(1);
  server_.SetTasks({});
  ASSERT_TRUE(WaitFor([&] {
    auto m = server_.Mig0();
    return m && m->size() == 1;
  }));
  EXPECT_EQ(server_.Mig0()->at(0).uuid, kept);  // found there, not in the way: kept
  StopAgent();
  const auto& ops = fake->MigOps();
  ASSERT_EQ(ops.size(), 4u) << ::testing::PrintToString(ops);
  EXPECT_EQ(ops[0], "destroy 0 1g.10gb@4 " + old4);
  EXPECT_EQ(ops[1], "destroy 0 1g.10gb@5 " + old5);
  EXPECT_EQ(ops[2].rfind("create 0 3g.40gb@4 MIG-", 0), 0u) << ops[2];
  EXPECT_EQ(ops[3].rfind("destroy 0 3g.40gb@4 MIG-", 0), 0u) << ops[3];
  EXPECT_NE(TaskLog(1).find("uuid=" + ops[2].substr(std::string("create 0 3g.40gb@4 ").size()) + " end"),
            std::string::npos);
}

TEST_F(AgentMigTest, AnInvalidPlacementFailsTheTaskWithTheDriversReason) {
  FakeBackend* fake = StartFake("H100:mig");
  server_.SetTasks({MigOrder(1, "3g.40gb", 2, "echo never")});  // a 3g starts at slice 0 or 4
  auto r = WaitReport(1, TaskPhase::kStartFailed);
  ASSERT_TRUE(r && r->phase == TaskPhase::kStartFailed);
  EXPECT_NE(r->error.find("Invalid Argument"), std::string::npos) << r->error;
  EXPECT_NE(r->error.find("0, 4"), std::string::npos) << r->error;
  EXPECT_NE(TaskLog(1).find("Invalid Argument"), std::string::npos);  // what `job logs` shows
  ASSERT_TRUE(server_.Beats(1));
  EXPECT_TRUE(server_.Mig0()->empty());
  StopAgent();
  EXPECT_TRUE(fake->MigOps().empty());
  EXPECT_EQ(Actions({"mig_create_failed"}).size(), 1u);
}

TEST_F(AgentMigTest, ABusyInstanceInTheWayFailsTheTask) {
  FakeBackend* fake = StartFake("A100-80GB:mig");
  server_.SetTasks({MigOrder(1, "1g.10gb", 4, "echo running; sleep 30")});
  ASSERT_TRUE(WaitReport(1, TaskPhase::kRunning));
  server_.SetTasks({MigOrder(1, "1g.10gb", 4, "echo running; sleep 30"), MigOrder(2, "4g.40gb", 4, "echo never")});
  auto r = WaitReport(2, TaskPhase::kStartFailed);
  ASSERT_TRUE(r && r->phase == TaskPhase::kStartFailed);
  EXPECT_NE(r->error.find("overlaps MIG instance"), std::string::npos) << r->error;
  EXPECT_NE(r->error.find("job 1"), std::string::npos) << r->error;
  StopAgent();
  ASSERT_EQ(fake->MigOps().size(), 1u);
}

TEST_F(AgentMigTest, AGpuNotInMigModeIsNeverSwitched) {
  FakeBackend* fake = StartFake("H100");
  server_.SetTasks({MigOrder(1, "3g.40gb", 0, "echo never")});
  auto r = WaitReport(1, TaskPhase::kStartFailed);
  ASSERT_TRUE(r && r->phase == TaskPhase::kStartFailed);
  EXPECT_NE(r->error.find("not in MIG mode"), std::string::npos) << r->error;
  ASSERT_TRUE(server_.Beats(1));
  EXPECT_FALSE(server_.Mig0().has_value());  // no MIG GPU, no report
  StopAgent();
  EXPECT_TRUE(fake->MigOps().empty());
}

// A re-cut as the Engine runs it (mig_recut.h): the moved task checkpoints,
// is stopped, and only then does its instance make room for the new one.
TEST_F(AgentMigTest, AReCutCheckpointsThenDestroysThenCreates) {
  FakeBackend* fake = StartFake("H100:mig");
  const std::string checkpointable =
      "trap 'touch $GPUPOOL_CHECKPOINT_DIR/ack' USR1; echo uuid=$CUDA_VISIBLE_DEVICES end; "
      "while :; do sleep 0.1; done";
  TaskOrder moved = MigOrder(1, "3g.40gb", 0, checkpointable);
  const TaskOrder stays = MigOrder(2, "3g.40gb", 4, "sleep 30");
  server_.SetTasks({moved, stays});
  ASSERT_TRUE(WaitReport(1, TaskPhase::kRunning));
  ASSERT_TRUE(WaitReport(2, TaskPhase::kRunning));
  moved.action = TaskAction::kCheckpoint;
  server_.SetTasks({moved, stays});
  auto cp = WaitReport(1, TaskPhase::kCheckpointed);
  ASSERT_TRUE(cp && cp->phase == TaskPhase::kCheckpointed);
  EXPECT_TRUE(cp->checkpoint_acked);
  // The Engine's next step: the moved task stops and the new 4g takes slices 0-3.
  server_.SetTasks({stays, MigOrder(3, "4g.40gb", 0, "echo uuid=$CUDA_VISIBLE_DEVICES end; sleep 30")});
  ASSERT_TRUE(WaitFor([&] { return TaskLog(3).find(" end") != std::string::npos; })) << TaskLog(3);
  StopAgent();
  const auto& ops = fake->MigOps();
  ASSERT_EQ(ops.size(), 4u) << ::testing::PrintToString(ops);
  EXPECT_EQ(ops[0].rfind("create 0 3g.40gb@0 ", 0), 0u);
  EXPECT_EQ(ops[1].rfind("create 0 3g.40gb@4 ", 0), 0u);
  EXPECT_EQ(ops[2], "destroy 0 3g.40gb@0 " + ops[0].substr(std::string("create 0 3g.40gb@0 ").size()));
  EXPECT_EQ(ops[3].rfind("create 0 4g.40gb@0 ", 0), 0u);
  // In the agent's own record: the checkpoint came before the destroy.
  const auto actions = Actions({"checkpoint", "checkpointed", "mig_destroy", "mig_create"});
  const auto at = [&](const std::string& a) { return std::find(actions.begin(), actions.end(), a) - actions.begin(); };
  const std::string old_uuid = ops[2].substr(std::string("destroy 0 3g.40gb@0 ").size());
  EXPECT_LT(at("checkpointed 1"), at("mig_destroy " + old_uuid)) << ::testing::PrintToString(actions);
  EXPECT_NE(TaskLog(3).find("uuid=" + ops[3].substr(std::string("create 0 4g.40gb@0 ").size()) + " end"),
            std::string::npos);
}

// The same through the NVML backend and the fake driver library.
TEST_F(AgentMigTest, TheDriversRefusalReachesTheTaskThroughNvml) {
  const std::string script = dir_ + "/nvml.json";
  std::ofstream(script) << R"({"devices": [{"uuid": "GPU-h100-0", "name": "NVIDIA H100 80GB HBM3",
                                "memory_total_mib": 81559, "mig_mode": 1}]})";
  setenv("GPUPOOL_FAKE_NVML_SCRIPT", script.c_str(), 1);
  NvmlOptions options;
  options.library = GPUPOOL_FAKE_NVML_LIBRARY;
  // The scrub tool's part (zeroing the instance before it is destroyed),
  // recording the instance it was pointed at.
  options.scrub_tool = dir_ + "/scrub.sh";
  std::ofstream(options.scrub_tool) << "#!/bin/sh\necho \"$CUDA_VISIBLE_DEVICES\" >> " << dir_
                                    << "/scrubbed\necho '{\"bytes\":4096,\"seconds\":0.1}'\n";
  fs::permissions(options.scrub_tool, fs::perms::owner_all);
  auto backend = OpenNvmlBackend(options);
  ASSERT_TRUE(backend.has_value()) << backend.error().message;
  StartAgent(std::move(*backend));
  server_.SetTasks({MigOrder(1, "3g.40gb", 2, "echo never"), MigOrder(2, "3g.40gb", 4, "echo uuid=$CUDA_VISIBLE_DEVICES end; sleep 30")});
  auto r = WaitReport(1, TaskPhase::kStartFailed);
  ASSERT_TRUE(r && r->phase == TaskPhase::kStartFailed);
  EXPECT_NE(r->error.find("nvmlDeviceCreateGpuInstanceWithPlacement on GPU 0: Invalid Argument"), std::string::npos)
      << r->error;
  ASSERT_TRUE(WaitFor([&] { return TaskLog(2).find(" end") != std::string::npos; })) << TaskLog(2);
  ASSERT_TRUE(WaitFor([&] {
    auto m = server_.Mig0();
    return m && m->size() == 1 && TaskLog(2).find("uuid=" + (*m)[0].uuid + " end") != std::string::npos;
  }));
  EXPECT_EQ(server_.Mig0()->at(0).start, 4);
  server_.SetTasks({});
  const std::string uuid = server_.Mig0()->at(0).uuid;
  ASSERT_TRUE(WaitFor([&] {
    auto m = server_.Mig0();
    return m && m->empty();
  })) << ReadAll(dir_ + "/work/agent.log");
  EXPECT_EQ(ReadAll(dir_ + "/scrubbed"), uuid + "\n");  // scrubbed by its UUID before it went
}

}  // namespace
}  // namespace gpupool
