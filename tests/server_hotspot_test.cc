// OPS-2 end to end through a real `gpupool server`: an agent (played by the
// test, speaking the agent protocol by hand) reports a GPU at 95 C for
// longer than the hotspot window; the server finds the node hot, cordons
// it and asks the checkpointable job on that GPU to checkpoint; cool
// reports clear the hotspot.
#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <thread>

#include "tests/configured_server.h"

namespace gpupool::testing {
namespace {

using nlohmann::json;

constexpr const char* kConfig = R"(name: hotspot
engine:
  heartbeat_timeout: 60s
  hotspots: {temperature_above_c: 85, window: 2s, max_moves: 1, cooldown: 1m}
pools:
  - name: gpu
    models: [H100]
server:
  tick: 200ms
  default_image: host
)";

class ServerHotspotTest : public ConfiguredServerTest {
 protected:
  void SetUp() override { ASSERT_NO_FATAL_FAILURE(StartServer(kConfig)); }

  // The node's view in GET /v1/nodes.
  json NodeView(const std::string& name) {
    auto list = Http(*server_, "GET", "/v1/nodes", admin_);
    for (const json& n : list.body["nodes"]) {
      if (n["name"] == name) return n;
    }
    ADD_FAILURE() << "no node " << name << " in " << list.text;
    return json();
  }
  std::vector<json> Events(const std::string& type) {
    std::vector<json> out;
    auto r = Http(*server_, "GET", "/v1/events?limit=10000", admin_);
    for (const json& e : r.body["events"]) {
      if (e["type"] == type) out.push_back(e);
    }
    return out;
  }
};

TEST_F(ServerHotspotTest, AHotGpuCordonsItsNodeAndCheckpointsItsJobUntilItCools) {
  // The node registers as its agent would, with two H100s.
  auto t = Http(*server_, "POST", "/v1/nodes/hot-0/token", admin_, json::object());
  ASSERT_EQ(t.status, 201) << t.text;
  const std::string node_token = t.body["token"];
  json gpus = json::array();
  for (int g = 0; g < 2; ++g) {
    gpus.push_back(json{{"index", g}, {"uuid", "GPU-hot-" + std::to_string(g)}, {"model", "H100"}, {"memory_mib", 81920}});
  }
  auto reg = Http(*server_, "POST", "/v1/agent/register", node_token,
                  json{{"node", "hot-0"}, {"backend", "fake"}, {"cpu_milli", 32000}, {"memory_mib", 262144}, {"gpus", gpus}});
  ASSERT_EQ(reg.status, 200) << reg.text;
  const std::string session = reg.body["session"];

  auto tenant = Http(*server_, "POST", "/v1/tenants", admin_,
                     json{{"name", "team-h"}, {"quota", {{"gpu", {{"guaranteed_gpus", 2}, {"limit_gpus", 2}}}}}});
  ASSERT_EQ(tenant.status, 201) << tenant.text;
  // A task, so that its checkpoint waits for the agent's acknowledgement.
  auto job = Http(*server_, "POST", "/v1/jobs", tenant.body["token"].get<std::string>(),
                  json{{"name", "train"}, {"gpus", 1}, {"checkpointable", true}, {"command", {"sleep", "1000"}}});
  ASSERT_EQ(job.status, 201) << job.text;
  ASSERT_EQ(job.body["state"], "running") << job.text;
  const int64_t id = job.body["id"];
  ASSERT_EQ(job.body["placements"][0]["node"], "hot-0");
  const int hot_gpu = job.body["placements"][0]["gpus"][0];
  const int cool_gpu = 1 - hot_gpu;

  // Heartbeats with the job's GPU at 95 C and the other at 40 C, every 250 ms.
  int32_t attempt = 1;
  auto beat = [&](double hot_c) {
    json samples = json::array({json{{"index", hot_gpu}, {"util_pct", 90}, {"temperature_c", hot_c}},
                                json{{"index", cool_gpu}, {"util_pct", 0}, {"temperature_c", 40}}});
    json tasks = json::array(
        {json{{"job", id}, {"replica", 0}, {"attempt", attempt}, {"phase", "running"}, {"pid", 4242}, {"util_pct", 90}}});
    return Http(*server_, "POST", "/v1/agent/heartbeat", node_token,
                json{{"node", "hot-0"}, {"session", session}, {"gpus", samples}, {"tasks", tasks}});
  };
  auto first = beat(40);
  ASSERT_EQ(first.status, 200) << first.text;
  for (const json& o : first.body["tasks"]) {
    if (o["job"] == id) attempt = o["attempt"];
  }
  auto order_for_job = [&](const json& reply) -> json {
    for (const json& o : reply["tasks"]) {
      if (o["job"] == id) return o;
    }
    return json();
  };
  EXPECT_EQ(order_for_job(first.body)["action"], "run") << first.text;

  const auto started = std::chrono::steady_clock::now();
  json checkpoint_order;
  while (std::chrono::steady_clock::now() - started < std::chrono::seconds(10)) {
    auto r = beat(95);
    ASSERT_EQ(r.status, 200) << r.text;
    const json o = order_for_job(r.body);
    if (o.is_object() && o["action"] == "checkpoint") {
      checkpoint_order = o;
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(250));
  }
  const auto took = std::chrono::steady_clock::now() - started;
  ASSERT_TRUE(checkpoint_order.is_object()) << "the job was never asked to checkpoint\n" << server_->log();
  EXPECT_GE(took, std::chrono::seconds(2)) << "found hot before the 2 s window";

  // The events: the hotspot names the GPU and its temperature; the job moves
  // off with a checkpoint, reason hotspot.
  const auto detected = Events("HotspotDetected");
  ASSERT_EQ(detected.size(), 1u);
  const std::string reason = detected[0]["reason"];
  EXPECT_NE(reason.find("GPU " + std::to_string(hot_gpu) + " temperature 95 C above 85 C"), std::string::npos)
      << reason;
  EXPECT_EQ(detected[0]["gpus"], 1 << hot_gpu);
  bool asked = false;
  for (const json& e : Events("PreemptionStarted")) {
    asked = asked || (e["victim"] == id && e["reason"] == "hotspot" && e["checkpoint"] == true);
  }
  EXPECT_TRUE(asked);
  EXPECT_EQ(Http(*server_, "GET", "/v1/jobs/" + std::to_string(id), admin_).body["state"], "checkpointing");

  // The node view: cordoned, with the hotspot.
  json node = NodeView("hot-0");
  EXPECT_EQ(node["condition"], "cordoned") << node.dump();
  ASSERT_TRUE(node.contains("hotspot")) << node.dump();
  EXPECT_EQ(node["hotspot"]["gpus"], json::array({hot_gpu}));
  EXPECT_EQ(node["hotspot"]["reason"], reason);
  EXPECT_TRUE(node["hotspot"]["since"].is_string());

  // Still hot: no second detection, still cordoned.
  ASSERT_EQ(beat(95).status, 200);
  EXPECT_EQ(Events("HotspotDetected").size(), 1u);

  // Cool reports clear the hotspot: the node takes work again.
  ASSERT_EQ(beat(50).status, 200);
  const auto cleared = Events("HotspotCleared");
  ASSERT_EQ(cleared.size(), 1u);
  EXPECT_EQ(cleared[0]["node"], detected[0]["node"]);
  node = NodeView("hot-0");
  EXPECT_EQ(node["condition"], "ready") << node.dump();
  EXPECT_FALSE(node.contains("hotspot")) << node.dump();

  // The hotspot is part of the read model's snapshot: a restart keeps a
  // cleared node clear (and the events).
  EXPECT_EQ(server_->Stop(), 0);
  ASSERT_TRUE(server_->Start()) << server_->log();
  EXPECT_FALSE(NodeView("hot-0").contains("hotspot"));
  EXPECT_EQ(Events("HotspotCleared").size(), 1u);
}

TEST_F(ServerHotspotTest, AHotNodeStaysCordonedAcrossARestart) {
  auto t = Http(*server_, "POST", "/v1/nodes/hot-1/token", admin_, json::object());
  ASSERT_EQ(t.status, 201) << t.text;
  const std::string node_token = t.body["token"];
  auto reg = Http(*server_, "POST", "/v1/agent/register", node_token,
                  json{{"node", "hot-1"}, {"cpu_milli", 32000}, {"memory_mib", 262144},
                       {"gpus", json::array({json{{"index", 0}, {"uuid", "GPU-h1"}, {"model", "H100"},
                                                   {"memory_mib", 81920}}})}});
  ASSERT_EQ(reg.status, 200) << reg.text;
  const json beat{{"node", "hot-1"},
                  {"session", reg.body["session"]},
                  {"gpus", json::array({json{{"index", 0}, {"temperature_c", 99}}})}};
  const auto started = std::chrono::steady_clock::now();
  while (Events("HotspotDetected").empty() && std::chrono::steady_clock::now() - started < std::chrono::seconds(10)) {
    ASSERT_EQ(Http(*server_, "POST", "/v1/agent/heartbeat", node_token, beat).status, 200);
    std::this_thread::sleep_for(std::chrono::milliseconds(250));
  }
  ASSERT_EQ(Events("HotspotDetected").size(), 1u);
  // SIGTERM (read-model snapshot) and SIGKILL (replay) both keep it.
  EXPECT_EQ(server_->Stop(), 0);
  ASSERT_TRUE(server_->Start()) << server_->log();
  json node = NodeView("hot-1");
  EXPECT_EQ(node["condition"], "cordoned") << node.dump();
  EXPECT_NE(node["hotspot"].value("reason", "").find("GPU 0 temperature 99 C above 85 C"), std::string::npos)
      << node.dump();
  server_->Kill();
  ASSERT_TRUE(server_->Start()) << server_->log();
  node = NodeView("hot-1");
  EXPECT_EQ(node["condition"], "cordoned") << node.dump();
  EXPECT_TRUE(node.contains("hotspot")) << node.dump();
}

}  // namespace
}  // namespace gpupool::testing
