// Tenant isolation on the node (issue 14, EXEC-1..6), end to end: a real
// server, a real agent with the oci runtime (runc), fake GPUs with real
// device nodes, and two tenants talking through the API. Each test says
// which guarantee of docs/agent.md ("Tenant isolation") it checks. Skipped
// with the reason where runc does not work (the agent then runs plain
// processes and says so).
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/stat.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "src/agent/oci_runtime.h"
#include "tests/agent_e2e_fixture.h"

namespace gpupool {
namespace {

using nlohmann::json;
using testing::AgentE2eTest;
using testing::Http;
using testing::ReadFile;
using testing::WaitFor;

class IsolationE2eTest : public AgentE2eTest {
 protected:
  std::vector<std::string> AgentFlags() const override { return {"--runtime", "oci", "--pids-limit", "64"}; }

  void SetUp() override {
    if (FindOnPath("runc").empty()) GTEST_SKIP() << "runc is not installed (scripts/install-deps.sh installs it)";
    if (::geteuid() != 0) GTEST_SKIP() << "containers with device nodes and user namespaces need root";
    AgentE2eTest::SetUp();
  }

  int64_t SubmitAs(const std::string& tenant, const std::string& name, const std::string& script,
                   json extra = json::object()) {
    json r{{"name", name}, {"tenant", tenant}, {"gpus", 1}, {"image", "host"}, {"command", {"sh", "-c", script}}};
    for (auto& [k, v] : extra.items()) {
      if (v.is_null()) {
        r.erase(k);  // null drops a default field (gpus, for a share)
      } else {
        r[k] = v;
      }
    }
    return Submit(r);
  }
  bool LogHas(int64_t id, const std::string& text, std::chrono::milliseconds timeout = std::chrono::seconds(20)) {
    return WaitFor([&] { return Logs(id).find(text) != std::string::npos; }, timeout);
  }
  std::string CheckpointDir(int64_t id) { return root_ + "/checkpoints/job-" + std::to_string(id) + "/replica-0"; }
};

// What one tenant's task can reach of another's: nothing of its files, its
// processes, the agent's or the server's.
TEST_F(IsolationE2eTest, ATaskSeesNothingOfAnotherTenantNorOfTheNode) {
  StartAgent("node-a", "2xH100");
  CreateTenant("team-a", 1, 1);
  CreateTenant("team-b", 1, 1);
  const int64_t a = SubmitAs("team-a", "a",
                             "echo secret-a > $GPUPOOL_CHECKPOINT_DIR/secret; echo a-pid=$$; echo a-ready; "
                             "while true; do sleep 0.2; done",
                             json{{"env", {{"SECRET_TOKEN", "hunter2"}}}});
  ASSERT_TRUE(LogHas(a, "a-ready")) << Logs(a) << agents_[0]->log();
  const std::string ckpt_a = CheckpointDir(a);
  const std::string agent_dir = agents_[0]->work_dir();
  // A's host pid, as the agent started it.
  const std::string b_script =
      "echo ckpt-a:; ls " + ckpt_a + " 2>&1; cat " + ckpt_a + "/secret 2>&1; " +
      "echo agent-dir:; ls " + agent_dir + " 2>&1; cat " + agent_dir + "/agent.log 2>&1 | head -c 100; " +
      "echo admin-token:; cat " + root_ + "/data/admin.token 2>&1; " +
      "echo logs-a:; cat " + agent_dir + "/logs/" + std::to_string(a) + ".0.1.log 2>&1; " +
      "echo procs:; ls /proc | grep -c '^[0-9]' ; ps -e -o pid=,comm= 2>&1; " +
      "grep -l hunter2 /proc/*/environ 2>/dev/null | head -1; echo environ-scan-done; " +
      "echo my-ckpt:; touch $GPUPOOL_CHECKPOINT_DIR/mine && echo my-ckpt-writable; id -u; echo b-done";
  const int64_t b = SubmitAs("team-b", "b", b_script);
  ASSERT_TRUE(WaitState(b, "succeeded", std::chrono::seconds(30))) << Job(b).dump() << Logs(b);
  ASSERT_TRUE(LogHas(b, "b-done")) << Logs(b);
  const std::string out = Logs(b);
  // Not mounted: the other tenant's checkpoint, the agent's work directory
  // (its logs, tokens), the server's data directory.
  EXPECT_NE(out.find("ls: cannot access '" + ckpt_a + "': No such file or directory"), std::string::npos) << out;
  EXPECT_EQ(out.find("secret-a"), std::string::npos) << out;
  EXPECT_NE(out.find("ls: cannot access '" + agent_dir + "': No such file or directory"), std::string::npos) << out;
  EXPECT_NE(out.find(root_ + "/data/admin.token: No such file or directory"), std::string::npos) << out;
  EXPECT_EQ(out.find("hunter2"), std::string::npos) << out;
  EXPECT_NE(out.find("my-ckpt-writable"), std::string::npos) << out;
  // Its own processes only: the init, the shell, ls/ps and grep.
  const size_t procs = out.find("procs:\n");
  ASSERT_NE(procs, std::string::npos) << out;
  EXPECT_LE(std::stoi(out.substr(procs + 7)), 6) << out;
  EXPECT_EQ(out.find("sleep"), std::string::npos) << out;
  // On the node, each checkpoint directory belongs to its tenant's uid
  // range with mode 0700: B's uid is refused A's directory (permission
  // denied), even where both are visible.
  struct stat sa {}, sb {};
  ASSERT_EQ(::stat(ckpt_a.c_str(), &sa), 0);
  ASSERT_EQ(::stat(CheckpointDir(b).c_str(), &sb), 0);
  EXPECT_NE(sa.st_uid, sb.st_uid);
  EXPECT_GE(sa.st_uid, 1'000'000u);
  EXPECT_EQ(sa.st_mode & 0777, 0700u);
  const std::string probe = root_ + "/probe.out";
  const std::string cmd = "setpriv --reuid=" + std::to_string(sb.st_uid) + " --regid=" + std::to_string(sb.st_gid) +
                          " --clear-groups ls " + ckpt_a + " > " + probe + " 2>&1";
  EXPECT_NE(std::system(cmd.c_str()), 0);
  EXPECT_NE(ReadFile(probe).find("Permission denied"), std::string::npos) << ReadFile(probe);
  EXPECT_EQ(State(a), "running");
}

// B cannot signal A: A's processes do not exist in B's pid namespace.
TEST_F(IsolationE2eTest, ATaskCannotSignalAnotherTenantsTask) {
  StartAgent("node-a", "2xH100");
  CreateTenant("team-a", 1, 1);
  CreateTenant("team-b", 1, 1);
  const int64_t a = SubmitAs("team-a", "a", "echo a-ready; while true; do sleep 0.2; done");
  ASSERT_TRUE(LogHas(a, "a-ready")) << Logs(a);
  // A's processes on the node.
  std::string host_pids;
  for (const auto& e : std::filesystem::directory_iterator("/proc")) {
    const std::string name = e.path().filename().string();
    if (name.find_first_not_of("0123456789") != std::string::npos) continue;
    if (ReadFile(e.path().string() + "/comm").rfind("sleep", 0) == 0 ||
        ReadFile(e.path().string() + "/environ").find("GPUPOOL_JOB_ID=" + std::to_string(a)) != std::string::npos) {
      host_pids += name + " ";
    }
  }
  ASSERT_FALSE(host_pids.empty());
  const int64_t b = SubmitAs("team-b", "b", "for p in " + host_pids + "; do kill -9 $p 2>&1; done; echo b-done");
  ASSERT_TRUE(WaitState(b, "succeeded", std::chrono::seconds(30))) << Job(b).dump() << Logs(b);
  ASSERT_TRUE(LogHas(b, "b-done"));
  EXPECT_NE(Logs(b).find("No such process"), std::string::npos) << Logs(b);
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  EXPECT_EQ(State(a), "running");
}

// A task on one GPU of four has only that GPU's device node; with all four
// bound in (a test option), the devices cgroup still refuses the others:
// ENXIO ("No such device or address": allowed, no driver behind the fake
// node) for its own, EPERM ("Operation not permitted") for the rest.
TEST_F(IsolationE2eTest, ATaskHasOnlyItsGpusDeviceNodes) {
  StartAgent("node-a", "4xH100");
  CreateTenant("team-a", 4, 4);
  const std::string script =
      "echo visible=$(ls /dev | grep '^nvidia[0-9]' | tr '\\n' ' ')end; "
      "for i in 0 1 2 3; do if [ -e /dev/nvidia$i ]; then cat /dev/nvidia$i 2>&1 | sed \"s/^/open$i: /\"; fi; "
      "done; echo done-devices";
  const int64_t id = SubmitAs("team-a", "one-gpu", script);
  ASSERT_TRUE(WaitState(id, "succeeded", std::chrono::seconds(30))) << Job(id).dump() << Logs(id);
  ASSERT_TRUE(LogHas(id, "done-devices")) << Logs(id);
  const auto placed = Events({"JobPlaced"});
  ASSERT_EQ(placed.size(), 1u);
  const int mask = placed[0]["replicas"][0]["gpus"];
  int gpu = 0;
  while ((mask >> gpu) != 1) ++gpu;
  const std::string out = Logs(id);
  EXPECT_NE(out.find("visible=nvidia" + std::to_string(gpu) + " end"), std::string::npos) << out;

  // All four bound in: only the cgroup stands between the task and them.
  agents_.clear();
  StartAgent("node-b", "4xH100", {"--test-expose-all-gpu-nodes"});
  // node-a is gone (its agent stopped); the job lands on node-b.
  const int64_t all = SubmitAs("team-a", "all-nodes", script);
  ASSERT_TRUE(WaitState(all, "succeeded", std::chrono::seconds(40))) << Job(all).dump() << Logs(all);
  ASSERT_TRUE(LogHas(all, "done-devices")) << Logs(all);
  const auto placed2 = Events({"JobPlaced"});
  const int mask2 = placed2.back()["replicas"][0]["gpus"];
  int mine = 0;
  while ((mask2 >> mine) != 1) ++mine;
  const std::string out2 = Logs(all);
  EXPECT_NE(out2.find("visible=nvidia0 nvidia1 nvidia2 nvidia3 end"), std::string::npos) << out2;
  for (int i = 0; i < 4; ++i) {
    const std::string want = i == mine ? "No such device or address" : "Operation not permitted";
    EXPECT_NE(out2.find("open" + std::to_string(i) + ": cat: /dev/nvidia" + std::to_string(i) + ": " + want),
              std::string::npos)
        << "GPU " << i << " (placed on " << mine << "):\n"
        << out2;
  }
}

// A task on a MIG instance gets its GPU's node and the instance's two
// capability nodes (GPU instance, compute instance), allowed, and nothing
// of other instances.
TEST_F(IsolationE2eTest, AMigTaskGetsItsInstancesCapabilityNodes) {
  StartAgent("node-a", "1xH100:mig");
  CreateTenant("team-a", 1, 1);
  const int64_t id = SubmitAs("team-a", "mig",
                              "echo caps=$(ls /dev/nvidia-caps | tr '\\n' ' ')end; "
                              "for c in /dev/nvidia-caps/*; do cat $c 2>&1 | sed 's/^/open: /'; done; "
                              "echo uuid=$CUDA_VISIBLE_DEVICES; echo done-caps",
                              json{{"gpus", nullptr}, {"gpu_fraction", 0.25}, {"gpu_memory_gib", 10},
                                   {"sharing", "mig"}});
  ASSERT_TRUE(WaitState(id, "succeeded", std::chrono::seconds(30))) << Job(id).dump() << Logs(id);
  ASSERT_TRUE(LogHas(id, "done-caps")) << Logs(id);
  const std::string out = Logs(id);
  EXPECT_NE(out.find("uuid=MIG-"), std::string::npos) << out;
  // Two nodes, each allowed (ENXIO: no driver behind the fake), none denied.
  const size_t caps = out.find("caps=nvidia-cap");
  ASSERT_NE(caps, std::string::npos) << out;
  const std::string listed = out.substr(caps, out.find("end", caps) - caps);
  EXPECT_EQ(std::count(listed.begin(), listed.end(), ' '), 2) << listed;
  size_t enxio = 0;
  for (size_t at = out.find("No such device or address"); at != std::string::npos;
       at = out.find("No such device or address", at + 1)) {
    ++enxio;
  }
  EXPECT_EQ(enxio, 2u) << out;
  EXPECT_EQ(out.find("Operation not permitted"), std::string::npos) << out;
}

// Issue 15: a time-sliced task's container has the CUDA cap bound read-only
// at /gpupool/lib and preloaded; its accounting file is in its scratch.
TEST_F(IsolationE2eTest, ATimeSlicedTaskRunsUnderTheCudaCapBoundReadOnly) {
  StartAgent("node-a", "1xH100");
  CreateTenant("team-a", 1, 1);
  const int64_t id = SubmitAs("team-a", "ts",
                              "echo preload=$LD_PRELOAD state=$GPUPOOL_CUDA_CAP_STATE; "
                              "echo mapped=$(grep -c libgpupool-cuda-cap /proc/self/maps); "
                              "echo x > /gpupool/lib/libgpupool-cuda-cap.so || echo not-writable; "
                              "echo signal=$GPUPOOL_CUDA_CONTENTION_FILE; ls /gpupool/contention/gpu-0 || echo only-ours; "
                              "touch /gpupool/contention/x || echo signal-read-only; "
                              "i=0; until [ -s /gpupool/contention/state ] || [ $i -ge 100 ]; do sleep 0.1; "
                              "i=$((i+1)); done; echo line=$(cut -d' ' -f1 /gpupool/contention/state); echo done-cap",
                              json{{"gpus", nullptr}, {"gpu_fraction", 0.5}, {"gpu_memory_gib", 10},
                                   {"sharing", "time-slice"}});
  ASSERT_TRUE(WaitState(id, "succeeded", std::chrono::seconds(30))) << Job(id).dump() << Logs(id);
  ASSERT_TRUE(LogHas(id, "done-cap")) << Logs(id);
  const std::string out = Logs(id);
  EXPECT_NE(out.find("preload=/gpupool/lib/libgpupool-cuda-cap.so state=/gpupool/scratch/.gpupool-cuda-cap"),
            std::string::npos) << out;
  EXPECT_EQ(out.find("mapped=0"), std::string::npos) << out;
  EXPECT_NE(out.find("not-writable"), std::string::npos) << out;
  // The GPU's contention signal: its own directory, read-only, written by the agent.
  EXPECT_NE(out.find("signal=/gpupool/contention/state"), std::string::npos) << out;
  EXPECT_NE(out.find("only-ours"), std::string::npos) << out;
  EXPECT_NE(out.find("signal-read-only"), std::string::npos) << out;
  EXPECT_TRUE(out.find("line=contended\n") != std::string::npos || out.find("line=uncontended\n") != std::string::npos)
      << out;
}

TEST_F(IsolationE2eTest, ATaskPastItsMemoryLimitIsOomKilledAndFails) {
  StartAgent("node-a", "1xH100");
  CreateTenant("team-a", 1, 1);
  const int64_t id = SubmitAs("team-a", "hog", "echo hogging; exec tail /dev/zero",
                              json{{"memory_gib", 0.25}});
  ASSERT_TRUE(WaitState(id, "failed", std::chrono::seconds(30))) << Job(id).dump() << Logs(id);
  EXPECT_EQ(Job(id).value("reason", ""), "out of memory (limit 0.25 GiB)") << Job(id).dump();
  EXPECT_NE(Logs(id).find("gpupool agent: out of memory (limit 0.25 GiB)"), std::string::npos) << Logs(id);
}

TEST_F(IsolationE2eTest, AForkBombMeetsThePidsLimitAndTheNodeStaysHealthy) {
  StartAgent("node-a", "1xH100");
  CreateTenant("team-a", 1, 1);
  const int64_t id = SubmitAs("team-a", "forks",
                              // perl (Debian's perl-base, always there) says
                              // what fork(2) returned.
                              "perl -e 'for (1..100) { my $p = fork; if (!defined $p) { print \"fork: $!\\n\"; "
                              "last } if ($p == 0) { sleep 30; exit } }'; echo forked; exit 0");
  ASSERT_TRUE(LogHas(id, "forked")) << Logs(id);
  EXPECT_NE(Logs(id).find("Resource temporarily unavailable"), std::string::npos) << Logs(id);  // EAGAIN
  ASSERT_TRUE(WaitState(id, "succeeded", std::chrono::seconds(30))) << Job(id).dump();
  // The node takes the next task.
  const int64_t next = SubmitAs("team-a", "next", "echo next-ran");
  EXPECT_TRUE(WaitState(next, "succeeded", std::chrono::seconds(30))) << Job(next).dump();
}

// Nothing a task started outlives it: daemonised children go with its stop.
TEST_F(IsolationE2eTest, DetachedChildrenDieWithTheirTask) {
  StartAgent("node-a", "1xH100");
  CreateTenant("team-a", 1, 1);
  const int64_t id = SubmitAs("team-a", "detach",
                              "setsid sleep 1007 & (sleep 1008 &) ; timeout 1000 sleep 1009 & "
                              "sh -c 'sleep 1010 &' ; echo detached; while true; do sleep 0.2; done");
  ASSERT_TRUE(LogHas(id, "detached")) << Logs(id);
  auto count = [] {
    int n = 0;
    for (const auto& e : std::filesystem::directory_iterator("/proc")) {
      const std::string cmd = ReadFile(e.path().string() + "/cmdline");
      for (const char* s : {"1007", "1008", "1009", "1010"}) {
        if (cmd.rfind("sleep", 0) == 0 && cmd.find(s) != std::string::npos) ++n;
      }
    }
    return n;
  };
  ASSERT_TRUE(WaitFor([&] { return count() == 4; }, std::chrono::seconds(5))) << count();
  EXPECT_EQ(Http(*server_, "DELETE", "/v1/jobs/" + std::to_string(id), admin_).status, 200);
  EXPECT_TRUE(WaitFor([&] { return count() == 0; }, std::chrono::seconds(20))) << count();
  // The container is deleted once empty.
  EXPECT_TRUE(WaitFor([&] { return !std::filesystem::exists(agents_[0]->work_dir() + "/containers/gp-" +
                                                            std::to_string(id) + "-0-1"); },
                      std::chrono::seconds(20)));
}

// A crashed agent costs a running container nothing: the next agent adopts
// it (same process, no restart, no checkpoint) and its log goes on.
TEST_F(IsolationE2eTest, AnAgentRestartReadoptsARunningContainer) {
  testing::AgentProcess& agent = StartAgent("node-a", "1xH100");
  CreateTenant("team-a", 1, 1);
  const int64_t id = SubmitAs("team-a", "long",
                              // busy, so that idle reclamation leaves it alone
                              "echo pid=$$; n=0; while true; do n=$((n+1)); echo tick-$n; i=0; "
                              "while [ $i -lt 20000 ]; do i=$((i+1)); done; done",
                              json{{"checkpointable", true}});
  ASSERT_TRUE(LogHas(id, "tick-3")) << Logs(id);
  agent.Kill();
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  agent.Start();
  ASSERT_TRUE(WaitFor([&] { return agent.action_log().find("\"action\":\"adopt\"") != std::string::npos; },
                      std::chrono::seconds(15)))
      << agent.action_log();
  // The log goes on past what it had before the restart.
  auto lines = [&] {
    const std::string log = Logs(id);
    return static_cast<size_t>(std::count(log.begin(), log.end(), '\n'));
  };
  const size_t before = lines();
  ASSERT_TRUE(WaitFor([&] { return lines() >= before + 10; }, std::chrono::seconds(15)))
      << Logs(id) << "\nagent: " << agent.action_log() << "\nnode's log: "
      << ReadFile(agent.work_dir() + "/logs/" + std::to_string(id) + ".0.1.log");
  const std::string log = Logs(id);
  EXPECT_EQ(log.find("pid="), log.rfind("pid="));  // started once
  EXPECT_EQ(State(id), "running");
  const std::string actions = agent.action_log();
  EXPECT_EQ(actions.find("\"action\":\"start\""), actions.rfind("\"action\":\"start\"")) << actions;
  EXPECT_EQ(actions.find("\"action\":\"checkpoint\""), std::string::npos) << actions;
  EXPECT_TRUE(Events({"JobInterrupted", "PreemptionStarted"}).empty());
}

// Bad input fails the job with a reason naming the field; the agent goes on.
TEST_F(IsolationE2eTest, AnUnknownOrMalformedImageFailsTheJobNamingTheField) {
  StartAgent("node-a", "1xH100");
  CreateTenant("team-a", 1, 1);
  const int64_t missing = SubmitAs("team-a", "missing", "true", json{{"image", "/no/such/image"}});
  ASSERT_TRUE(WaitState(missing, "failed", std::chrono::seconds(30))) << Job(missing).dump();
  EXPECT_EQ(Job(missing).value("reason", "").rfind("image: /no/such/image is not on this node", 0), 0u)
      << Job(missing).dump();
  const std::string junk = root_ + "/junk-image";
  std::filesystem::create_directories(junk + "/stuff");
  const int64_t bad = SubmitAs("team-a", "junk", "true", json{{"image", junk}});
  ASSERT_TRUE(WaitState(bad, "failed", std::chrono::seconds(30))) << Job(bad).dump();
  EXPECT_NE(Job(bad).value("reason", "").find("is not an image"), std::string::npos) << Job(bad).dump();
  const int64_t ok = SubmitAs("team-a", "ok", "echo fine");
  EXPECT_TRUE(WaitState(ok, "succeeded", std::chrono::seconds(30))) << Job(ok).dump();
}

}  // namespace
}  // namespace gpupool
