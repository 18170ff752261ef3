// End-to-end MIG lifecycle (issue 15): a real server and agents with fake
// GPUs in MIG mode. The Engine plans the instance; the agent creates it,
// hands its UUID to the task, reports it in heartbeats (GET /v1/nodes) and
// destroys it after the job; a layout that was there before the agent is
// reported at registration and adopted (used, never cut into); a MIG job
// waits for a GPU in MIG mode; a placement the driver refuses fails the job
// with the driver's reason.
#include <chrono>
#include <cstdlib>
#include <string>
#include <thread>

#include "tests/agent_e2e_fixture.h"

namespace gpupool::testing {
namespace {

class MigE2eTest : public AgentE2eTest {
 protected:
  // Idle reclamation off: these tests are about MIG instances, and a busy
  // loop starved of CPU on a loaded machine (ctest -j2 on two cores) looked
  // idle to the fake GPU and was reclaimed mid-test.
  std::string Config() const override {
    std::string c = kE2eConfig;
    const std::string on = "reclaim: {idle: true,";
    c.replace(c.find(on), on.size(), "reclaim: {idle: false,");
    return c;
  }
  // GPU `gpu`'s MIG instances on `node` as GET /v1/nodes shows them, or
  // null when it shows none.
  json MigOf(const std::string& node, int gpu = 0) {
    auto nodes = Http(*server_, "GET", "/v1/nodes", admin_);
    for (const json& n : nodes.body.value("nodes", json::array())) {
      if (n.value("name", "") != node) continue;
      for (const json& g : n.value("agent", json::object()).value("gpus", json::array())) {
        if (g.value("index", -1) == gpu && g.contains("mig")) return g["mig"];
      }
    }
    return nullptr;
  }
  // A job on a MIG share that prints its instance and keeps busy for `busy_s`.
  int64_t SubmitMig(double fraction, int memory_gib, int busy_s) {
    return Submit({{"name", "mig"},
                   {"tenant", "team-a"},
                   {"gpu_fraction", fraction},
                   {"gpu_memory_gib", memory_gib},
                   {"sharing", "mig"},
                   {"command",
                    {"sh", "-c",
                     "echo uuid=$CUDA_VISIBLE_DEVICES end; end=$(($(date +%s)+" + std::to_string(busy_s) +
                         ")); while [ $(date +%s) -lt $end ]; do :; done"}}});
  }
  std::string UuidIn(int64_t id) {
    const std::string out = Logs(id);
    const size_t at = out.find("uuid=");
    if (at == std::string::npos) return "";
    return out.substr(at + 5, out.find(" end", at) - at - 5);
  }
  // The agent's action lines of one kind.
  std::vector<json> Actions(const AgentProcess& agent, const std::string& kind) {
    std::vector<json> out;
    std::istringstream in(agent.action_log());
    for (std::string line; std::getline(in, line);) {
      json j = json::parse(line, nullptr, false);
      if (j.is_object() && j.value("action", "") == kind) out.push_back(std::move(j));
    }
    return out;
  }
};

TEST_F(MigE2eTest, AMigJobGetsAnInstanceAtThePlannedPlacementAndItsUuid) {
  AgentProcess& agent = StartAgent("node-a", "1xH100:mig");
  CreateTenant("team-a", 1, 1);
  // In MIG mode, no instance yet (as the first heartbeat reports).
  EXPECT_TRUE(WaitFor([&] { return MigOf("node-a") == json::array(); }, std::chrono::seconds(10)));
  // 0.4 of a 7-slice H100 is 3 compute slices: 3g.40gb, first fit at slice 0.
  const int64_t id = SubmitMig(0.4, 30, 4);
  ASSERT_TRUE(WaitFor([&] { return !UuidIn(id).empty(); }, std::chrono::seconds(20))) << Job(id).dump() << Logs(id);
  const std::string uuid = UuidIn(id);
  EXPECT_EQ(uuid.rfind("MIG-", 0), 0u) << Logs(id);
  ASSERT_TRUE(WaitFor([&] { return MigOf("node-a").size() == 1; }, std::chrono::seconds(10)));
  const json m = MigOf("node-a")[0];
  EXPECT_EQ(m.value("uuid", ""), uuid);
  EXPECT_EQ(m.value("profile", ""), "3g.40gb");
  EXPECT_EQ(m.value("start", -1), 0);
  ASSERT_TRUE(WaitState(id, "succeeded", std::chrono::seconds(30))) << Job(id).dump() << Logs(id);
  // The job gone, its instance goes too.
  EXPECT_TRUE(WaitFor([&] { return MigOf("node-a") == json::array(); }, std::chrono::seconds(15)))
      << MigOf("node-a").dump() << agent.action_log();
  const auto created = Actions(agent, "mig_create"), destroyed = Actions(agent, "mig_destroy");
  ASSERT_EQ(created.size(), 1u) << agent.action_log();
  EXPECT_EQ(created[0].value("uuid", ""), uuid);
  EXPECT_EQ(created[0].value("job", ""), std::to_string(id));
  ASSERT_EQ(destroyed.size(), 1u) << agent.action_log();
  EXPECT_EQ(destroyed[0].value("uuid", ""), uuid);
}

TEST_F(MigE2eTest, ARegistrationWithAPreexistingLayoutIsReportedAndKept) {
  AgentProcess& agent = StartAgent("node-b", "1xA100-80GB:mig=3g.40gb@4/1g.10gb@0");
  CreateTenant("team-a", 1, 1);
  const json before = MigOf("node-b");
  ASSERT_EQ(before.size(), 2u) << before.dump();
  EXPECT_EQ(before[0].value("profile", ""), "1g.10gb");
  EXPECT_EQ(before[0].value("start", -1), 0);
  EXPECT_EQ(before[1].value("profile", ""), "3g.40gb");
  EXPECT_EQ(before[1].value("start", -1), 4);
  // The Engine adopts the reported layout: a 2g.20gb goes between the
  // instances (slice 2), never into them, and both stay.
  const int64_t id = SubmitMig(0.25, 10, 3);
  ASSERT_TRUE(WaitState(id, "succeeded", std::chrono::seconds(30))) << Job(id).dump() << Logs(id);
  const auto created = Actions(agent, "mig_create");
  ASSERT_EQ(created.size(), 1u) << agent.action_log();
  EXPECT_EQ(created[0].value("profile", ""), "2g.20gb");
  EXPECT_EQ(created[0].value("start", ""), "2");
  ASSERT_TRUE(WaitFor([&] { return Actions(agent, "mig_destroy").size() == 1; }, std::chrono::seconds(15)))
      << agent.action_log();
  EXPECT_EQ(Actions(agent, "mig_destroy")[0].value("uuid", ""), UuidIn(id)) << "only the job's own instance";
  ASSERT_TRUE(WaitFor([&] { return MigOf("node-b").size() == 2; }, std::chrono::seconds(15)))
      << MigOf("node-b").dump();
  EXPECT_EQ(MigOf("node-b"), before);
}

// A re-cut through the real Engine: a waiting 3g.40gb finds both halves of
// the GPU blocked by 1g tasks (slices 2 and 6); the Engine checkpoints one, the agent
// destroys its instance, creates the 3g, and the moved task comes back on
// a new instance: checkpoint, destroy, create, in the plan's order.
TEST_F(MigE2eTest, AReCutCheckpointsDestroysAndCreatesInThePlannedOrder) {
  AgentProcess& agent = StartAgent("node-r", "1xA100-80GB:mig");
  CreateTenant("team-a", 1, 1);
  auto submit = [&](const std::string& name, double fraction, int memory_gib, bool lasts) {
    const std::string body = lasts ? "trap 'touch \"$GPUPOOL_CHECKPOINT_DIR/ack\"; echo got-checkpoint' USR1; "
                                     "echo uuid=$CUDA_VISIBLE_DEVICES end; while :; do :; done"
                                   : "echo uuid=$CUDA_VISIBLE_DEVICES end; end=$(($(date +%s)+8)); "
                                     "while [ $(date +%s) -lt $end ]; do :; done";
    json r = {{"name", name},     {"tenant", "team-a"},        {"gpu_fraction", fraction},
              {"sharing", "mig"}, {"gpu_memory_gib", memory_gib}, {"command", {"sh", "-c", body}}};
    if (lasts) r["checkpointable"] = true;
    const int64_t id = Submit(r);
    EXPECT_TRUE(WaitFor([&] { return !UuidIn(id).empty(); }, std::chrono::seconds(20))) << Job(id).dump();
    return id;
  };
  // 2g@0, 1g@2, 1g@3, 2g@4, 1g@6 by first fit; all but the 1g at 2 and 6 end.
  const int64_t short_a = submit("short-a", 0.25, 10, false);
  const int64_t moved = submit("small-1", 0.1, 5, true);
  const int64_t short_c = submit("short-c", 0.1, 5, false);
  const int64_t short_b = submit("short-b", 0.25, 10, false);
  const int64_t stays = submit("small-2", 0.1, 5, true);
  for (int64_t s : {short_a, short_b, short_c}) {
    ASSERT_TRUE(WaitState(s, "succeeded", std::chrono::seconds(30))) << Job(s).dump() << Logs(s);
  }
  const std::string moved_uuid = UuidIn(moved);
  // Slices 0, 1, 3, 4, 5 and 7 are free, but a 3g needs 0-3 or 4-7.
  const int64_t big = submit("big", 0.4, 30, false);
  // Its log holds both attempts' lines: the second names a new instance.
  auto attempts = [&] {
    const std::string out = Logs(moved);
    size_t n = 0;
    for (size_t at = out.find("uuid="); at != std::string::npos; at = out.find("uuid=", at + 1)) ++n;
    return n;
  };
  ASSERT_TRUE(WaitFor([&] { return Job(moved)["state"] == "running" && attempts() == 2; }, std::chrono::seconds(30)))
      << Job(moved).dump() << agent.action_log();
  EXPECT_EQ(Job(stays)["preemptions"], 0) << "one move is enough";
  EXPECT_EQ(Job(moved)["preemptions"], 1);
  const std::string log = agent.action_log();
  const size_t checkpoint = log.find("\"action\":\"checkpoint\"");
  const size_t destroy = log.find("\"uuid\":\"" + moved_uuid + "\"", log.find("\"action\":\"mig_destroy\""));
  const size_t create = log.find("\"profile\":\"3g.40gb\"");
  ASSERT_NE(checkpoint, std::string::npos) << log;
  ASSERT_NE(destroy, std::string::npos) << log;
  ASSERT_NE(create, std::string::npos) << log;
  EXPECT_LT(checkpoint, destroy) << log;
  EXPECT_LT(destroy, create) << log;
  EXPECT_NE(Logs(moved).find("got-checkpoint"), std::string::npos) << Logs(moved);
  ASSERT_TRUE(WaitState(big, "succeeded", std::chrono::seconds(30))) << Job(big).dump();
}

// A GPU the operator has not put in MIG mode: the Engine places no MIG job
// there (the registration said so), and the agent never switches the mode.
TEST_F(MigE2eTest, AMigJobWaitsForAGpuInMigMode) {
  AgentProcess& agent = StartAgent("node-c", "1xH100");
  CreateTenant("team-a", 1, 1);
  const int64_t id = SubmitMig(0.4, 30, 1);
  std::this_thread::sleep_for(std::chrono::seconds(2));
  EXPECT_EQ(Job(id)["state"], "pending") << Job(id).dump();
  EXPECT_TRUE(Actions(agent, "mig_create").empty());
  EXPECT_TRUE(MigOf("node-c").is_null());
}

// Through NVML (the fake driver library) with a placement the driver
// refuses: the job fails with NVML's error string, and the heartbeats go on
// reporting the layout as it is.
TEST_F(MigE2eTest, APlacementTheDriverRefusesFailsTheJobWithItsReason) {
  const std::string script = root_ + "/nvml.json";
  std::ofstream(script) << R"({"devices": [{"uuid": "GPU-h100-0", "name": "NVIDIA H100 80GB HBM3",
                                "memory_total_mib": 81559, "mig_mode": 1,
                                "mig": [{"uuid": "MIG-operator", "name": "NVIDIA H100 80GB HBM3 MIG 1g.10gb",
                                         "gpu_instance_id": 13, "start": 6, "size": 1, "memory_mib": 9984}],
                                "fail": {"nvmlDeviceCreateGpuInstanceWithPlacement": 2}}]})";
  setenv("GPUPOOL_FAKE_NVML_SCRIPT", script.c_str(), 1);
  auto t = Http(*server_, "POST", "/v1/nodes/node-n/token", admin_, json::object());
  ASSERT_EQ(t.status, 201) << t.text;
  std::ofstream(root_ + "/node-n.token") << t.body.value("token", "") << "\n";
  agents_.push_back(std::make_unique<AgentProcess>(
      server_->url(), root_ + "/node-n.token", "node-n", root_ + "/agent-node-n",
      std::vector<std::string>{"--nvml-library", GPUPOOL_FAKE_NVML_LIBRARY, "--cpu-cores", "8", "--memory-gib", "16",
                               "--checkpoint-root", root_ + "/checkpoints", "--quiet", "--runtime", "process"}));
  agents_.back()->Start();
  unsetenv("GPUPOOL_FAKE_NVML_SCRIPT");
  ASSERT_TRUE(WaitFor([&] { return MigOf("node-n").size() == 1; }, std::chrono::seconds(20))) << agents_.back()->log();
  EXPECT_EQ(MigOf("node-n")[0].value("uuid", ""), "MIG-operator");
  CreateTenant("team-a", 1, 1);
  const int64_t id = SubmitMig(0.4, 30, 1);
  ASSERT_TRUE(WaitState(id, "failed", std::chrono::seconds(20))) << Job(id).dump() << agents_.back()->action_log();
  const std::string job = Job(id).dump();
  EXPECT_NE(job.find("nvmlDeviceCreateGpuInstanceWithPlacement on GPU 0: Invalid Argument"), std::string::npos)
      << job;
  EXPECT_NE(Logs(id).find("Invalid Argument"), std::string::npos) << Logs(id);
  EXPECT_EQ(Actions(*agents_.back(), "mig_create_failed").size(), 1u) << agents_.back()->action_log();
  ASSERT_EQ(MigOf("node-n").size(), 1u);  // what is there, reported; nothing else touched
  EXPECT_EQ(MigOf("node-n")[0].value("uuid", ""), "MIG-operator");
}

}  // namespace
}  // namespace gpupool::testing
