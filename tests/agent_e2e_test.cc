// End to end: a real server, real agents (fake GPUs) and real task
// processes on loopback (issue 6's acceptance): a job runs with the right
// CUDA_VISIBLE_DEVICES and completes; an idle task is notified,
// checkpointed and reclaimed on the configured timeline; a killed agent's
// node goes down and its task resumes from its checkpoint on another node;
// a GPU freed by one tenant is scrubbed before another tenant's task starts
// on it. Short intervals keep it to seconds.
#include <gtest/gtest.h>
#include <signal.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <functional>
#include <sstream>
#include <thread>

#include "src/agent/fake_backend.h"
#include "tests/agent_e2e_fixture.h"

namespace gpupool {
namespace {

using nlohmann::json;
using testing::AgentE2eTest;
using testing::AgentProcess;
using testing::Http;
using testing::ReadFile;
using testing::WaitFor;

TEST_F(AgentE2eTest, JobRunsWithItsGpusAndCompletes) {
  StartAgent("node-a", "2xH100");
  CreateTenant("team-a", 2, 2);
  const int64_t ok = Submit({{"name", "hello"}, {"tenant", "team-a"}, {"gpus", 1},
                             {"command", {"sh", "-c", "echo CVD=$CUDA_VISIBLE_DEVICES JOB=$GPUPOOL_JOB_ID "
                                                      "REPLICA=$GPUPOOL_REPLICA; echo to-stderr >&2"}}});
  ASSERT_TRUE(WaitState(ok, "succeeded", std::chrono::seconds(20))) << Job(ok).dump() << agents_[0]->log();
  // Its placement (an ended job's view no longer lists one): the GPU mask of the JobPlaced event.
  const auto placed = Events({"JobPlaced"});
  ASSERT_EQ(placed.size(), 1u);
  const int mask = placed[0]["replicas"][0]["gpus"];
  ASSERT_TRUE(mask == 1 || mask == 2) << placed[0].dump();
  const int gpu = mask == 1 ? 0 : 1;
  const auto devices = ParseFakeGpus("2xH100", "node-a");
  ASSERT_TRUE(devices.has_value());
  ASSERT_TRUE(WaitFor([&] { return Logs(ok).find("to-stderr") != std::string::npos; }, std::chrono::seconds(10)));
  const std::string logs = Logs(ok);
  EXPECT_NE(logs.find("CVD=" + (*devices)[gpu].uuid + " JOB=" + std::to_string(ok) + " REPLICA=0"), std::string::npos)
      << logs;

  // A task that exits non-zero fails its job; a CPU-only job sees no GPU.
  const int64_t bad = Submit({{"name", "bad"}, {"tenant", "team-a"}, {"gpus", 0},
                              {"command", {"sh", "-c", "echo \"CVD=[$CUDA_VISIBLE_DEVICES]\"; exit 3"}}});
  ASSERT_TRUE(WaitState(bad, "failed", std::chrono::seconds(20))) << Job(bad).dump();
  ASSERT_TRUE(WaitFor([&] { return Logs(bad).find("CVD=[]") != std::string::npos; }, std::chrono::seconds(10)))
      << Logs(bad);
  // A program that does not exist fails at start.
  const int64_t missing = Submit({{"name", "missing"}, {"tenant", "team-a"}, {"gpus", 1},
                                  {"command", {"/no/such/program"}}});
  EXPECT_TRUE(WaitState(missing, "failed", std::chrono::seconds(20))) << Job(missing).dump();
}

TEST_F(AgentE2eTest, IdleTaskIsNotifiedCheckpointedAndReclaimed) {
  StartAgent("node-a", "1xH100");
  CreateTenant("team-a", 1, 1);
  // Sleeps (looks idle); on SIGUSR1 saves its state and acknowledges.
  const int64_t id = Submit(
      {{"name", "notebook"},
       {"tenant", "team-a"},
       {"gpus", 1},
       {"checkpointable", true},
       {"command",
        {"sh", "-c",
         "trap 'echo saved > \"$GPUPOOL_CHECKPOINT_DIR/state\"; touch \"$GPUPOOL_CHECKPOINT_DIR/ack\"; echo "
         "got-checkpoint-signal' USR1; echo started; while true; do sleep 0.2; done"}}});
  ASSERT_TRUE(WaitState(id, "evicted", std::chrono::seconds(30))) << Job(id).dump() << agents_[0]->log();
  // The tenant was notified, the task checkpointed, then the job was reclaimed, in that order.
  const auto events = Events({"JobPlaced", "JobIdleSuspected", "ReclaimStarted", "JobReclaimed"});
  ASSERT_EQ(events.size(), 4u);
  EXPECT_EQ(events[0]["type"], "JobPlaced");
  EXPECT_EQ(events[1]["type"], "JobIdleSuspected");
  EXPECT_EQ(events[2]["type"], "ReclaimStarted");
  EXPECT_EQ(events[2]["checkpoint"], true);
  EXPECT_EQ(events[3]["type"], "JobReclaimed");
  // Timeline: suspected after idle_polls low polls (2 x 500 ms, plus the
  // start), reclaimed once the 1.5 s grace has passed.
  const int64_t placed = events[0]["at"], suspected = events[1]["at"], started = events[2]["at"];
  EXPECT_GE(suspected - placed, 500);
  EXPECT_LE(suspected - placed, 6000);
  EXPECT_GE(started - suspected, 1500);
  EXPECT_LE(started - suspected, 4000);
  const std::string ckpt = root_ + "/checkpoints/job-" + std::to_string(id) + "/replica-0";
  EXPECT_EQ(ReadFile(ckpt + "/state"), "saved\n");
  EXPECT_NE(ReadFile(root_ + "/agent-node-a/tasks/job-" + std::to_string(id) + "/replica-0/notice").find("\"idle\""),
            std::string::npos);
  ASSERT_TRUE(WaitFor([&] { return Logs(id).find("got-checkpoint-signal") != std::string::npos; },
                      std::chrono::seconds(10)))
      << Logs(id);
  // The agent stopped the task after the reclaim.
  EXPECT_TRUE(WaitFor([&] { return agents_[0]->action_log().find("\"action\":\"stop\"") != std::string::npos; },
                      std::chrono::seconds(10)));
}

TEST_F(AgentE2eTest, KilledAgentsTaskResumesFromItsCheckpointElsewhere) {
  StartAgent("node-a", "1xH100");
  StartAgent("node-b", "1xH100");
  CreateTenant("team-a", 2, 2);
  // Busy work that saves its step every 20 steps and resumes from it.
  const int64_t id = Submit(
      {{"name", "trainer"},
       {"tenant", "team-a"},
       {"gpus", 1},
       {"checkpointable", true},
       {"command", testing::CheckpointingTrainer()}});
  ASSERT_TRUE(WaitState(id, "running", std::chrono::seconds(20)));
  const std::string first = Job(id)["placements"][0]["node"];
  const std::string step_file = root_ + "/checkpoints/job-" + std::to_string(id) + "/replica-0/step";
  ASSERT_TRUE(WaitFor([&] { return std::filesystem::exists(step_file); }, std::chrono::seconds(20)))
      << Logs(id) << agents_[0]->log();
  // The node dies: its agent and its task.
  AgentProcess& victim = *agents_[first == "node-a" ? 0 : 1];
  victim.Kill();
  ASSERT_GT(KillTasksOf(victim), 0);
  const int saved = std::stoi(ReadFile(step_file));
  ASSERT_GT(saved, 0);
  // Marked down after the 3 s timeout, re-placed on the other node, resumed.
  ASSERT_TRUE(WaitFor(
      [&] {
        const json j = Job(id);
        return j.value("state", "") == "running" && j["placements"][0]["node"] != first;
      },
      std::chrono::seconds(30)))
      << Job(id).dump();
  EXPECT_EQ(Events({"NodeDown"}).size(), 1u);
  EXPECT_EQ(Events({"JobInterrupted"}).size(), 1u);
  ASSERT_TRUE(WaitFor([&] { return Logs(id).find("resumed-from-step-") != std::string::npos; },
                      std::chrono::seconds(20)))
      << Logs(id);
  const std::string logs = Logs(id);
  const size_t at = logs.find("resumed-from-step-");
  EXPECT_GE(std::stoi(logs.substr(at + 18)), saved) << logs;
}

TEST_F(AgentE2eTest, GpuFreedByOneTenantIsScrubbedBeforeAnothersTaskStarts) {
  StartAgent("node-a", "1xH100");
  CreateTenant("team-a", 0, 1);
  CreateTenant("team-b", 0, 1);
  const int64_t a = Submit({{"name", "a"}, {"tenant", "team-a"}, {"gpus", 1},
                            {"command", {"sh", "-c", "echo secret > /dev/null"}}});
  ASSERT_TRUE(WaitState(a, "succeeded", std::chrono::seconds(20))) << Job(a).dump();
  const int64_t b = Submit({{"name", "b"}, {"tenant", "team-b"}, {"gpus", 1},
                            {"command", {"sh", "-c", "echo started-at-ms=$(date +%s%3N)"}}});
  ASSERT_TRUE(WaitState(b, "succeeded", std::chrono::seconds(20))) << Job(b).dump();
  // The engine decided the scrub right before b's placement ...
  const auto events = Events({"GpusScrubbed", "JobPlaced"});
  ASSERT_EQ(events.size(), 3u);
  EXPECT_EQ(events[1]["type"], "GpusScrubbed");
  EXPECT_EQ(events[2]["job"], b);
  // ... and the agent scrubbed the GPU before b's task started.
  const std::string scrubs = ReadFile(root_ + "/scrubs-node-a.jsonl");
  ASSERT_FALSE(scrubs.empty());
  const int64_t scrubbed_ms = json::parse(scrubs.substr(0, scrubs.find('\n')))["unix_ms"];
  ASSERT_TRUE(WaitFor([&] { return Logs(b).find("started-at-ms=") != std::string::npos; }, std::chrono::seconds(10)));
  const std::string logs = Logs(b);
  const int64_t started_ms = std::stoll(logs.substr(logs.find("started-at-ms=") + 14));
  EXPECT_LE(scrubbed_ms, started_ms);
  const std::string actions = agents_[0]->action_log();
  const size_t scrub_at = actions.find("\"action\":\"scrub\"");
  const size_t start_b = actions.find("\"action\":\"start\"", actions.find("\"job\":\"" + std::to_string(b) + "\""));
  ASSERT_NE(scrub_at, std::string::npos) << actions;
  EXPECT_LT(scrub_at, actions.rfind("\"action\":\"start\"")) << actions;
  (void)start_b;
}

TEST_F(AgentE2eTest, MpsSharesGetTheirLimitsInTheEnvironment) {
  StartAgent("node-a", "1xH100");
  CreateTenant("team-a", 1, 1);
  const int64_t id = Submit({{"name", "mps"}, {"tenant", "team-a"}, {"gpu_fraction", 0.25}, {"sharing", "mps"},
                             {"gpu_memory_gib", 10},
                             {"command", {"sh", "-c", "echo pct=$CUDA_MPS_ACTIVE_THREAD_PERCENTAGE "
                                                      "mem=$CUDA_MPS_PINNED_DEVICE_MEM_LIMIT mode=$GPUPOOL_GPU_MODE"}}});
  ASSERT_TRUE(WaitState(id, "succeeded", std::chrono::seconds(20))) << Job(id).dump();
  ASSERT_TRUE(WaitFor([&] { return !Logs(id).empty(); }, std::chrono::seconds(10)));
  EXPECT_EQ(Logs(id), "pct=25 mem=0=10240M mode=mps\n");
}

// Issue 15: an MPS share's GPU gets its MPS control daemon (the fake,
// tests/fake_mps) before the task starts, as the owner the task's processes
// have (a container's root: the tenant's host uid); the task sees the
// daemon's pipe directory (bound read-write at the same path in a container)
// and its limits, and shares the node's /dev/shm; the daemon got exactly its
// start commands and, once the job's processes are gone, `quit`.
TEST_F(AgentE2eTest, MpsSharesRunAgainstTheirGpusControlDaemon) {
  AgentProcess& agent = StartAgent("node-a", "1xH100", {"--mps-control", GPUPOOL_FAKE_MPS_CONTROL});
  CreateTenant("team-a", 1, 1);
  const std::string shm_probe = "/dev/shm/gpupool-e2e-mps-" + std::to_string(::getpid());
  const int64_t id = Submit(
      {{"name", "mps"}, {"tenant", "team-a"}, {"gpu_fraction", 0.25}, {"sharing", "mps"}, {"gpu_memory_gib", 10},
       {"command", {"sh", "-c", "echo pct=$CUDA_MPS_ACTIVE_THREAD_PERCENTAGE mem=$CUDA_MPS_PINNED_DEVICE_MEM_LIMIT "
                                "pipe=$CUDA_MPS_PIPE_DIRECTORY log=$CUDA_MPS_LOG_DIRECTORY; "
                                "test -p $CUDA_MPS_PIPE_DIRECTORY/control && echo control=fifo; "
                                "test -w $CUDA_MPS_PIPE_DIRECTORY && echo pipe=writable; "
                                "[ $(stat -c %u $CUDA_MPS_PIPE_DIRECTORY) = $(id -u) ] && echo owner=me; "
                                "echo shared > " + shm_probe + "; echo done"}}});
  ASSERT_TRUE(WaitState(id, "succeeded", std::chrono::seconds(20))) << Job(id).dump() << Logs(id);
  ASSERT_TRUE(WaitFor([&] { return Logs(id).find("done") != std::string::npos; }, std::chrono::seconds(10)));
  const std::string mps = agent.work_dir() + "/mps/gpu0";
  const std::string out = Logs(id);
  EXPECT_NE(out.find("pct=25 mem=0=10240M pipe=" + mps + "/pipe log=" + mps + "/log\n"), std::string::npos) << out;
  EXPECT_NE(out.find("control=fifo\npipe=writable\n"), std::string::npos) << out;
  EXPECT_NE(out.find("owner=me\n"), std::string::npos) << out;  // the daemon runs as the task's processes do
  EXPECT_EQ(ReadFile(shm_probe), "shared\n");  // the node's /dev/shm
  std::filesystem::remove(shm_probe);
  const std::string control_log = ReadFile(mps + "/log/control.log");
  EXPECT_NE(control_log.find("CUDA_VISIBLE_DEVICES=" + (*ParseFakeGpus("1xH100", "node-a"))[0].uuid),
            std::string::npos)
      << control_log;
  if (ContainersWork()) {  // the tenant's range: 1,000,000 + 65,536 x its id
    EXPECT_EQ(control_log.find("uid=0 "), std::string::npos) << control_log;
    EXPECT_NE(control_log.find("uid=1"), std::string::npos) << control_log;
  }
  const std::string expected =
      "get_server_list\nset_default_active_thread_percentage 25\nset_default_device_pinned_mem_limit 0 10240M\n";
  EXPECT_TRUE(WaitFor([&] { return ReadFile(mps + "/pipe/commands.log") == expected + "quit\n"; },
                      std::chrono::seconds(10)))
      << ReadFile(mps + "/pipe/commands.log") << agent.action_log();
  EXPECT_NE(ReadFile(mps + "/log/control.log").find("[fake] exit"), std::string::npos);
}

// The agent's health check restarts a GPU's MPS daemon killed under a running
// task (with the same defaults); the daemon quits once the task is cancelled.
TEST_F(AgentE2eTest, AKilledMpsDaemonIsRestartedUnderItsRunningTask) {
  AgentProcess& agent = StartAgent("node-a", "1xH100", {"--mps-control", GPUPOOL_FAKE_MPS_CONTROL});
  CreateTenant("team-a", 1, 1);
  // Busy, so that idle reclamation (the fixture's, after about 2.5 s) leaves it alone.
  const int64_t id = Submit({{"name", "mps"}, {"tenant", "team-a"}, {"gpu_fraction", 0.5}, {"sharing", "mps"},
                             {"command", {"sh", "-c", "echo up; while true; do i=0; "
                                                      "while [ $i -lt 20000 ]; do i=$((i+1)); done; done"}}});
  const std::string mps = agent.work_dir() + "/mps/gpu0";
  ASSERT_TRUE(WaitFor([&] { return Logs(id).find("up") != std::string::npos; }, std::chrono::seconds(20)))
      << Job(id).dump();
  const int pid = std::atoi(ReadFile(mps + "/pipe/nvidia-cuda-mps-control.pid").c_str());
  ASSERT_GT(pid, 1);
  ASSERT_EQ(::kill(pid, SIGKILL), 0);
  const std::string once = "get_server_list\nset_default_active_thread_percentage 50\n";
  EXPECT_TRUE(WaitFor([&] { return ReadFile(mps + "/pipe/commands.log") == once + once; }, std::chrono::seconds(10)))
      << ReadFile(mps + "/pipe/commands.log") << agent.action_log();
  // The restart is logged once its commands have gone out: wait for the line.
  EXPECT_TRUE(WaitFor([&] { return agent.action_log().find("\"action\":\"mps_restart\"") != std::string::npos; },
                      std::chrono::seconds(10)))
      << agent.action_log();
  EXPECT_EQ(State(id), "running");
  EXPECT_EQ(Http(*server_, "DELETE", "/v1/jobs/" + std::to_string(id), admin_).status, 200);
  EXPECT_TRUE(WaitFor([&] { return ReadFile(mps + "/pipe/commands.log") == once + once + "quit\n"; },
                      std::chrono::seconds(20)))
      << ReadFile(mps + "/pipe/commands.log");
}

// A node whose MPS control binary is missing runs MPS tasks as before (the
// limits in their environment) and says once why there is no daemon.
TEST_F(AgentE2eTest, WithoutAnMpsDaemonMpsTasksKeepTheirEnvironmentLimits) {
  AgentProcess& agent = StartAgent("node-a", "1xH100", {"--mps-control", "/no/such/nvidia-cuda-mps-control"});
  CreateTenant("team-a", 1, 1);
  const int64_t id = Submit({{"name", "mps"}, {"tenant", "team-a"}, {"gpu_fraction", 0.25}, {"sharing", "mps"},
                             {"gpu_memory_gib", 10},
                             {"command", {"sh", "-c", "echo pct=$CUDA_MPS_ACTIVE_THREAD_PERCENTAGE "
                                                      "mem=$CUDA_MPS_PINNED_DEVICE_MEM_LIMIT "
                                                      "pipe=[$CUDA_MPS_PIPE_DIRECTORY]"}}});
  ASSERT_TRUE(WaitState(id, "succeeded", std::chrono::seconds(20))) << Job(id).dump() << Logs(id);
  ASSERT_TRUE(WaitFor([&] { return !Logs(id).empty(); }, std::chrono::seconds(10)));
  EXPECT_EQ(Logs(id), "pct=25 mem=0=10240M pipe=[]\n");
  const std::string actions = agent.action_log();
  EXPECT_NE(actions.find("no MPS control daemon (--mps-control /no/such/nvidia-cuda-mps-control is not an "
                         "executable): MPS tasks get their limits in the environment only"),
            std::string::npos)
      << actions;
}

// Issue 15: a time-sliced share runs under the CUDA cap (tools/cuda_cap),
// preloaded from beside the gpupool binary with the share in its environment.
TEST_F(AgentE2eTest, TimeSlicedSharesRunUnderTheCudaCap) {
  StartAgent("node-a", "1xH100");
  CreateTenant("team-a", 1, 1);
  const int64_t id = Submit({{"name", "ts"}, {"tenant", "team-a"}, {"gpu_fraction", 0.25},
                             {"sharing", "time-slice"}, {"gpu_memory_gib", 10},
                             {"command", {"sh", "-c", "echo mem=$GPUPOOL_CUDA_MEMORY_LIMIT_MIB "
                                                      "share=$GPUPOOL_CUDA_COMPUTE_SHARE mode=$GPUPOOL_GPU_MODE; "
                                                      "echo state=${GPUPOOL_CUDA_CAP_STATE##*/}; "
                                                      "echo mapped=$(grep -c libgpupool-cuda-cap /proc/self/maps); "
                                                      // Alone and idle on its GPU: uncontended after two samples.
                                                      "f=$GPUPOOL_CUDA_CONTENTION_FILE; echo signal=${f#*/contention/}; "
                                                      "i=0; until grep -q '^uncontended ' \"$f\" || [ $i -ge 100 ]; "
                                                      "do sleep 0.1; i=$((i+1)); done; "
                                                      "echo contention=$(cut -d' ' -f1 \"$f\")"}}});
  ASSERT_TRUE(WaitState(id, "succeeded", std::chrono::seconds(30))) << Job(id).dump() << Logs(id);
  ASSERT_TRUE(WaitFor([&] { return Logs(id).find("contention=") != std::string::npos; }, std::chrono::seconds(10)));
  const std::string out = Logs(id);
  EXPECT_NE(out.find("mem=10240 share=0.250 mode=time-slice"), std::string::npos) << out;
  EXPECT_NE(out.find("state=.gpupool-cuda-cap"), std::string::npos) << out;
  EXPECT_EQ(out.find("mapped=0"), std::string::npos) << out;  // grep ran with the library loaded
  // The GPU's signal: WORK/contention/gpu-0/state, or its directory bound at /gpupool/contention.
  EXPECT_NE(out.find(ContainersWork() ? "signal=state" : "signal=gpu-0/state"), std::string::npos) << out;
  EXPECT_NE(out.find("contention=uncontended"), std::string::npos) << out;
}

TEST_F(AgentE2eTest, RestartsOfTheServerOrTheAgentHeal) {
  AgentProcess& agent = StartAgent("node-a", "1xH100");
  CreateTenant("team-a", 1, 1);
  // Saves its step every 10 steps; a restart resumes from it.
  const int64_t id = Submit(
      {{"name", "long"},
       {"tenant", "team-a"},
       {"gpus", 1},
       {"checkpointable", true},
       {"command",
        {"sh", "-c",
         "f=\"$GPUPOOL_CHECKPOINT_DIR/step\"; step=0; if [ -f \"$f\" ]; then step=$(cat \"$f\"); echo "
         "resumed-from-step-$step; fi; while true; do i=0; while [ $i -lt 2000 ]; do i=$((i+1)); done; "
         "step=$((step+1)); if [ $((step % 10)) -eq 0 ]; then echo $step > \"$f\"; fi; done"}}});
  ASSERT_TRUE(WaitState(id, "running", std::chrono::seconds(20)));
  auto starts = [&] {
    size_t n = 0;
    const std::string log = agent.action_log();
    for (size_t at = log.find("\"action\":\"start\""); at != std::string::npos;
         at = log.find("\"action\":\"start\"", at + 1)) {
      ++n;
    }
    return n;
  };
  ASSERT_TRUE(WaitFor([&] { return starts() == 1; }, std::chrono::seconds(10)));
  // The server dies and comes back: the task keeps running, nothing restarts.
  server_->Kill();
  std::this_thread::sleep_for(std::chrono::milliseconds(700));
  ASSERT_TRUE(server_->Start()) << server_->log();
  std::this_thread::sleep_for(std::chrono::seconds(2));  // a few heartbeats
  EXPECT_EQ(State(id), "running");
  EXPECT_EQ(starts(), 1u) << agent.action_log();
  EXPECT_TRUE(Events({"NodeDown", "JobInterrupted"}).empty());
  // The agent dies and comes back before the node's timeout: it re-adopts
  // the running container (no restart, nothing resumed from a checkpoint).
  const std::string step_file = root_ + "/checkpoints/job-" + std::to_string(id) + "/replica-0/step";
  ASSERT_TRUE(WaitFor([&] { return std::filesystem::exists(step_file); }, std::chrono::seconds(20)));
  agent.Kill();
  agent.Start();
  if (ContainersWork()) {
    ASSERT_TRUE(WaitFor([&] { return agent.action_log().find("\"action\":\"adopt\"") != std::string::npos; },
                        std::chrono::seconds(10)))
        << agent.action_log();
    std::this_thread::sleep_for(std::chrono::seconds(1));
    EXPECT_EQ(starts(), 1u) << agent.action_log();
    EXPECT_EQ(Logs(id).find("resumed-from-step-"), std::string::npos) << Logs(id);
  } else {
    // Plain processes cannot be re-adopted: the task restarts from its
    // checkpoint.
    EXPECT_TRUE(WaitFor([&] { return Logs(id).find("resumed-from-step-") != std::string::npos; },
                        std::chrono::seconds(20)))
        << Logs(id) << agent.action_log();
  }
  EXPECT_EQ(State(id), "running");
  // Cancelling stops the task.
  EXPECT_EQ(Http(*server_, "DELETE", "/v1/jobs/" + std::to_string(id), admin_).status, 200);
  EXPECT_TRUE(WaitFor([&] { return agent.action_log().find("\"action\":\"stop\"") != std::string::npos; },
                      std::chrono::seconds(10)));
  // The node view shows what the agent reported.
  const json nodes = Http(*server_, "GET", "/v1/nodes", admin_).body;
  const json a = nodes["nodes"][0]["agent"];
  EXPECT_EQ(a["backend"], "fake");
  EXPECT_EQ(a["gpus"][0]["uuid"], (*ParseFakeGpus("1xH100", "node-a"))[0].uuid);
  EXPECT_TRUE(a["gpus"][0].contains("util_pct"));
}

TEST_F(AgentE2eTest, AnAgentCutOffFromTheServerFencesItsTasks) {
  AgentProcess& agent = StartAgent("node-a", "1xH100");
  CreateTenant("team-a", 1, 1);
  const int64_t id = Submit({{"name", "svc"}, {"tenant", "team-a"}, {"gpus", 1},
                             {"command", {"sh", "-c", "while true; do i=0; while [ $i -lt 2000 ]; do i=$((i+1)); "
                                                      "done; done"}}});
  ASSERT_TRUE(WaitState(id, "running", std::chrono::seconds(20)));
  ASSERT_TRUE(WaitFor([&] { return agent.action_log().find("\"action\":\"start\"") != std::string::npos; },
                      std::chrono::seconds(10)));
  // Past the server's 3 s failure timeout without a heartbeat, the task may
  // run elsewhere: the agent stops it.
  server_->Kill();
  ASSERT_TRUE(WaitFor([&] { return agent.action_log().find("\"action\":\"fenced\"") != std::string::npos; },
                      std::chrono::seconds(10)))
      << agent.action_log();
  EXPECT_TRUE(WaitFor([&] { return agent.action_log().find("\"action\":\"stop\"") != std::string::npos; },
                      std::chrono::seconds(5)));
  // The server comes back: the job is still placed there, so it starts again.
  ASSERT_TRUE(server_->Start()) << server_->log();
  EXPECT_TRUE(WaitFor(
      [&] {
        const std::string log = agent.action_log();
        return log.find("\"action\":\"start\"") != log.rfind("\"action\":\"start\"");
      },
      std::chrono::seconds(15)))
      << agent.action_log();
}

TEST_F(AgentE2eTest, TokensAreScopedToTheirRole) {
  auto t = Http(*server_, "POST", "/v1/nodes/node-a/token", admin_, json::object());
  ASSERT_EQ(t.status, 201);
  const std::string node_token = t.body["token"];
  // A node token reaches only the agent endpoints, and only for its node.
  EXPECT_EQ(Http(*server_, "GET", "/v1/jobs", node_token).status, 403);
  json reg{{"node", "node-b"}, {"cpu_milli", 1000}, {"memory_mib", 1024}, {"gpus", json::array()}};
  EXPECT_EQ(Http(*server_, "POST", "/v1/agent/register", node_token, reg).status, 403);
  // The admin token is not an agent's.
  reg["node"] = "node-a";
  EXPECT_EQ(Http(*server_, "POST", "/v1/agent/register", admin_, reg).status, 403);
  // Bad registrations name the field.
  reg["gpus"] = json::array({json{{"index", 0}, {"uuid", "GPU-x"}, {"model", "NoSuchGpu"}, {"memory_mib", 1}}});
  auto bad = Http(*server_, "POST", "/v1/agent/register", node_token, reg);
  EXPECT_EQ(bad.status, 400);
  EXPECT_EQ(bad.body["error"]["field"], "gpus[0].model") << bad.text;
  // A heartbeat before registering is refused, naming why.
  auto hb = Http(*server_, "POST", "/v1/agent/heartbeat", node_token, json{{"node", "node-a"}, {"session", "x"}});
  EXPECT_EQ(hb.status, 404) << hb.text;
  // Node names are checked when the token is issued.
  EXPECT_EQ(Http(*server_, "POST", "/v1/nodes/Bad_Name/token", admin_, json::object()).status, 400);
  // A registered node may not change its resources under the pool.
  reg["gpus"] = json::array();
  auto first = Http(*server_, "POST", "/v1/agent/register", node_token, reg);
  EXPECT_EQ(first.status, 200);
  // A second agent for the node takes it over: the first one's heartbeats are refused.
  auto second = Http(*server_, "POST", "/v1/agent/register", node_token, reg);
  EXPECT_EQ(second.status, 200);
  const json beat = {{"node", "node-a"}, {"session", first.body["session"]}};
  auto stale = Http(*server_, "POST", "/v1/agent/heartbeat", node_token, beat);
  EXPECT_EQ(stale.status, 409) << stale.text;
  EXPECT_EQ(stale.body["error"]["field"], "session");
  EXPECT_EQ(Http(*server_, "POST", "/v1/agent/heartbeat", node_token,
                 json{{"node", "node-a"}, {"session", second.body["session"]}})
                .status,
            200);
  reg["cpu_milli"] = 2000;
  auto changed = Http(*server_, "POST", "/v1/agent/register", node_token, reg);
  EXPECT_EQ(changed.status, 409);
  EXPECT_NE(changed.text.find("registered with"), std::string::npos) << changed.text;
}

}  // namespace
}  // namespace gpupool
