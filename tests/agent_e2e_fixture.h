// The fixture of the end-to-end agent tests: a real server (fixed port, a
// short-interval configuration) and real agents with fake GPUs, talked to
// through the API.
#pragma once

#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <functional>
#include <sstream>
#include <thread>

#include "src/agent/oci_runtime.h"
#include "tests/agent_process.h"
#include "tests/run_binary.h"
#include "tests/server_process.h"

namespace gpupool::testing {

using nlohmann::json;

inline constexpr const char* kE2eConfig = R"(name: e2e
engine:
  reclaim: {idle: true, poll: 500ms, idle_below_pct: 10, idle_polls: 2, grace: 1500ms}
  heartbeat_timeout: 3s
pools:
  - name: gpu
server:
  tick: 100ms
  snapshot_every_events: 5  # restarts replay from a snapshot taken mid-run
  default_image: host       # jobs that name no image run on the node's own files
)";

inline std::string ReadFile(const std::string& path) { return ReadTextFile(path); }

// A job's command: busy work that saves its step every 20 steps in its
// checkpoint folder and resumes from it, saying so ("resumed-from-step-N").
inline json CheckpointingTrainer() {
  return {"sh", "-c",
          "f=\"$GPUPOOL_CHECKPOINT_DIR/step\"; step=0; if [ -f \"$f\" ]; then step=$(cat \"$f\"); echo "
          "resumed-from-step-$step; fi; echo pid=$$ on $GPUPOOL_NODE; while true; do i=0; while [ $i -lt 2000 ]; do "
          "i=$((i+1)); done; step=$((step+1)); if [ $((step % 20)) -eq 0 ]; then echo $step > \"$f.tmp\"; mv "
          "\"$f.tmp\" \"$f\"; fi; done"};
}

// The `start` lines of job `id` in an agent's action log, in order.
inline std::vector<json> StartLines(const AgentProcess& agent, int64_t id) {
  std::vector<json> out;
  std::istringstream lines(agent.action_log());
  for (std::string line; std::getline(lines, line);) {
    json j = json::parse(line, nullptr, false);
    if (j.is_object() && j.value("action", "") == "start" && j.value("job", "") == std::to_string(id)) {
      out.push_back(std::move(j));
    }
  }
  return out;
}

inline bool WaitFor(const std::function<bool()>& pred, std::chrono::milliseconds timeout) {
  const auto until = std::chrono::steady_clock::now() + timeout;
  while (std::chrono::steady_clock::now() < until) {
    if (pred()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  return pred();
}

class AgentE2eTest : public ::testing::Test {
 protected:
  // The server's configuration.
  virtual std::string Config() const { return kE2eConfig; }
  // Flags every agent gets after the fixture's own: the oci runtime where
  // containers work here (root and runc; CI has both), else plain processes.
  virtual std::vector<std::string> AgentFlags() const {
    return {"--runtime", ContainersWork() ? "oci" : "process"};
  }
  static bool ContainersWork() { return ::geteuid() == 0 && !FindOnPath("runc").empty(); }

  void SetUp() override {
    root_ = MakeTempDir();
    std::ofstream(root_ + "/config.yaml") << Config();
    // A fixed port, so that a restarted server is where the agents look.
    server_ = std::make_unique<ServerProcess>(root_ + "/data", std::vector<std::string>{"--config", root_ + "/config.yaml"},
                                              "127.0.0.1:" + std::to_string(FreePort()));
    ASSERT_TRUE(server_->Start()) << server_->log();
    admin_ = server_->admin_token();
  }
  void TearDown() override {
    agents_.clear();  // SIGTERM: each stops its tasks
    server_->Stop();
    std::filesystem::remove_all(root_);
  }

  // Issues a node token and starts an agent with fake GPUs.
  AgentProcess& StartAgent(const std::string& node, const std::string& gpus, std::vector<std::string> extra = {}) {
    auto t = Http(*server_, "POST", "/v1/nodes/" + node + "/token", admin_, json::object());
    EXPECT_EQ(t.status, 201) << t.text;
    const std::string token_file = root_ + "/" + node + ".token";
    std::ofstream(token_file) << t.body.value("token", "") << "\n";
    agents_.push_back(std::make_unique<AgentProcess>(
        server_->url(), token_file, node, root_ + "/agent-" + node,
        std::vector<std::string>{"--fake-gpus", gpus, "--cpu-cores", "8", "--memory-gib", "16", "--checkpoint-root",
                                 root_ + "/checkpoints", "--scrub-record", root_ + "/scrubs-" + node + ".jsonl",
                                 "--quiet"}));
    for (const std::string& f : AgentFlags()) extra.push_back(f);
    agents_.back()->AddArgs(extra);
    agents_.back()->Start();
    EXPECT_TRUE(WaitFor(
        [&] {
          auto nodes = Http(*server_, "GET", "/v1/nodes", admin_);
          for (const json& n : nodes.body.value("nodes", json::array())) {
            if (n.value("name", "") == node && n.value("condition", "") == "ready") return true;
          }
          return false;
        },
        std::chrono::seconds(20)))
        << agents_.back()->log();
    return *agents_.back();
  }

  // Kills what an agent's tasks left running (as if its node died with
  // it): the process groups of the process runtime (WORK/tasks.pids) and
  // the containers of the oci runtime (the init of each started bundle,
  // which ends the container's pid namespace). Returns how many.
  int KillTasksOf(const AgentProcess& agent) {
    int killed = 0;
    std::istringstream in(ReadFile(agent.work_dir() + "/tasks.pids"));
    std::string word, boot;
    int pid = 0;
    unsigned long long start = 0;
    if (in >> word >> boot) {
      while (in >> pid >> start) killed += pid > 1 && ::kill(-pid, SIGKILL) == 0;
    }
    std::error_code ec;
    for (const auto& e : std::filesystem::directory_iterator(agent.work_dir() + "/containers", ec)) {
      const std::string started = ReadFile(e.path().string() + "/started");
      if (!started.empty() && std::stoi(started) > 1) killed += ::kill(std::stoi(started), SIGKILL) == 0;
    }
    return killed;
  }

  void CreateTenant(const std::string& name, double guaranteed, double limit) {
    auto t = Http(*server_, "POST", "/v1/tenants", admin_,
                  json{{"name", name},
                       {"quota", {{"gpu", {{"guaranteed_gpus", guaranteed}, {"limit_gpus", limit}}}}}});
    ASSERT_EQ(t.status, 201) << t.text;
  }

  int64_t Submit(json request) {
    if (!request.contains("cpu_cores")) request["cpu_cores"] = 1;
    if (!request.contains("memory_gib")) request["memory_gib"] = 1;
    auto r = Http(*server_, "POST", "/v1/jobs", admin_, request);
    EXPECT_EQ(r.status, 201) << r.text;
    return r.body.value("id", int64_t{-1});
  }
  json Job(int64_t id) { return Http(*server_, "GET", "/v1/jobs/" + std::to_string(id), admin_).body; }
  std::string State(int64_t id) { return Job(id).value("state", ""); }
  bool WaitState(int64_t id, const std::string& state, std::chrono::milliseconds timeout) {
    return WaitFor([&] { return State(id) == state; }, timeout);
  }
  std::string Logs(int64_t id) { return Http(*server_, "GET", "/v1/jobs/" + std::to_string(id) + "/logs", admin_).text; }
  // The journal's events of these types, in order.
  std::vector<json> Events(const std::vector<std::string>& types) {
    std::vector<json> out;
    auto e = Http(*server_, "GET", "/v1/events?since=0&limit=10000", admin_);
    for (const json& ev : e.body.value("events", json::array())) {
      if (std::find(types.begin(), types.end(), ev.value("type", "")) != types.end()) out.push_back(ev);
    }
    return out;
  }

  std::string root_;
  std::unique_ptr<ServerProcess> server_;
  std::string admin_;
  std::vector<std::unique_ptr<AgentProcess>> agents_;
};

}  // namespace gpupool::testing
