// Crash test: clients submit jobs concurrently while the server is killed
// with SIGKILL and restarted several times. Every acknowledged job must be
// there afterwards with its id, none twice, and no GPU allocated twice.
#include <gtest/gtest.h>

#include <atomic>
#include <filesystem>
#include <fstream>
#include <map>
#include <mutex>
#include <set>
#include <thread>

#include "tests/run_binary.h"
#include "tests/server_process.h"

namespace gpupool::testing {
namespace {

using nlohmann::json;

TEST(ServerCrashTest, AcknowledgedJobsSurviveRepeatedSigkill) {
  const std::string root = MakeTempDir();
  {
    std::ofstream(root + "/config.yaml") << R"(name: crash
engine: {heartbeat_timeout: 0s}
pools:
  - name: gpu
cluster:
  nodes:
    - {count: 4, model: H100, gpus: 8, cpu_cores: 96, memory_gib: 1024}
server:
  tick: 100ms
  snapshot_every_events: 150
)";
  }
  const int port = FreePort();
  ServerProcess server(root + "/data", {"--config", root + "/config.yaml"}, "127.0.0.1:" + std::to_string(port));
  ASSERT_TRUE(server.Start()) << server.log();
  const std::string admin = server.admin_token();
  auto t = Http(server, "POST", "/v1/tenants", admin,
                json{{"name", "crash"}, {"quota", {{"gpu", {{"guaranteed_gpus", 32}, {"limit_gpus", 32}}}}}});
  ASSERT_EQ(t.status, 201) << t.text;
  const std::string token = t.body["token"];

  std::atomic<bool> stop{false};
  std::mutex mu;
  std::map<std::string, int64_t> acknowledged;  // name -> id
  std::vector<std::thread> clients;
  for (int c = 0; c < 8; ++c) {
    clients.emplace_back([&, c] {
      for (int i = 0; !stop; ++i) {
        const std::string name = "c" + std::to_string(c) + "-" + std::to_string(i);
        // Whole GPUs or quarter shares, so that double allocation would show.
        const json body = i % 3 == 0 ? json{{"name", name}, {"gpu_fraction", 0.25}, {"gpu_memory_gib", 8},
                                            {"sharing", "time-slice"}}
                                     : json{{"name", name}, {"gpus", 1 + i % 2}};
        auto r = HttpTo("127.0.0.1", port, "POST", "/v1/jobs", token, body.dump());
        if (r.status == 201) {
          std::lock_guard lock(mu);
          acknowledged[name] = r.body["id"];
        } else if (r.status == 0) {
          std::this_thread::sleep_for(std::chrono::milliseconds(5));
        } else {
          ADD_FAILURE() << "unexpected " << r.status << " " << r.text;
          return;
        }
        // Some jobs end, so that capacity churns.
        if (r.status == 201 && i % 4 == 1) {
          HttpTo("127.0.0.1", port, "DELETE", "/v1/jobs/" + r.body["id"].dump(), token, "");
        }
      }
    });
  }
  for (int crash = 0; crash < 4; ++crash) {
    std::this_thread::sleep_for(std::chrono::milliseconds(400));
    server.Kill();
    ASSERT_TRUE(server.Start()) << server.log();
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  stop = true;
  for (auto& th : clients) th.join();
  server.Kill();
  ASSERT_TRUE(server.Start()) << server.log();

  std::map<std::string, int64_t> found;  // name -> id
  std::map<std::pair<std::string, int>, int64_t> gpu_milli;  // (node, gpu) -> milli allocated
  int64_t after = 0;
  for (;;) {
    auto page = Http(server, "GET", "/v1/jobs?limit=1000&after=" + std::to_string(after), admin);
    ASSERT_EQ(page.status, 200) << page.text;
    for (const json& j : page.body["jobs"]) {
      const std::string name = j["name"];
      EXPECT_FALSE(found.contains(name)) << "job " << name << " exists twice";
      found[name] = j["id"];
      if (j["state"] == "running") {
        const json& req = j["request"];
        const int64_t milli = req.contains("gpu_fraction") ? std::llround(req["gpu_fraction"].get<double>() * 1000) : 1000;
        for (const json& p : j["placements"]) {
          for (const json& g : p["gpus"]) gpu_milli[{p["node"], g}] += milli;
        }
      }
    }
    if (page.body["next_after"].is_null()) break;
    after = page.body["next_after"];
  }
  EXPECT_GT(acknowledged.size(), 50u) << "the clients hardly got through";
  for (const auto& [name, id] : acknowledged) {
    auto it = found.find(name);
    ASSERT_NE(it, found.end()) << "acknowledged job " << name << " (id " << id << ") is lost";
    EXPECT_EQ(it->second, id) << name;
  }
  for (const auto& [gpu, milli] : gpu_milli) {
    EXPECT_LE(milli, 1000) << gpu.first << " GPU " << gpu.second << " is allocated " << milli << " milli";
  }
  // The server's own view agrees: no node has negative free GPUs.
  auto nodes = Http(server, "GET", "/v1/nodes", admin);
  for (const json& n : nodes.body["nodes"]) {
    for (const json& g : n["gpu"]) EXPECT_GE(g["free_milli"].get<int>(), 0);
  }
  server.Stop();
  std::filesystem::remove_all(root);
}

}  // namespace
}  // namespace gpupool::testing
