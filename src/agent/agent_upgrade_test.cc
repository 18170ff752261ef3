// An agent of this build against a server of protocol 1 (older than the
// `protocol` field, whose strict reader refuses the key): the agent
// registers again speaking protocol 1, then heartbeats without the key and
// never watches.
#include "src/agent/agent.h"

#include <gtest/gtest.h>
#include <httplib.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <sstream>
#include <thread>

#include "src/agent/fake_backend.h"

namespace gpupool {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

// Answers as a server of protocol 1 did: any unknown key is a 400 naming it.
class OldServer {
 public:
  OldServer() {
    auto handler = [this](const httplib::Request& req, httplib::Response& res) {
      const json body = json::parse(req.body, nullptr, false);
      std::lock_guard lock(mu_);
      ++(req.path == "/v1/agent/register" ? registrations_ : heartbeats_);
      if (body.contains("protocol")) {
        res.status = 400;
        const json error{{"code", "bad_request"}, {"message", "unknown field (known: node, ...)"}, {"field", "protocol"}};
        res.set_content(json{{"error", error}}.dump(), "application/json");
        return;
      }
      AgentReply reply;
      reply.node_index = 0;
      reply.session = "s";
      reply.heartbeat_interval_ms = 100;
      res.set_content(ToJson(reply).dump(), "application/json");
    };
    server_.Post("/v1/agent/register", handler);
    server_.Post("/v1/agent/heartbeat", handler);
    server_.Post("/v1/agent/watch", [this](const httplib::Request&, httplib::Response& res) {
      std::lock_guard lock(mu_);
      ++watches_;
      res.status = 404;
    });
    port_ = server_.bind_to_any_port("127.0.0.1");
    thread_ = std::thread([this] { server_.listen_after_bind(); });
  }
  ~OldServer() {
    server_.stop();
    thread_.join();
  }
  std::string url() const { return "http://127.0.0.1:" + std::to_string(port_); }
  // registrations, heartbeats, watches
  std::tuple<int, int, int> counts() {
    std::lock_guard lock(mu_);
    return {registrations_, heartbeats_, watches_};
  }

 private:
  httplib::Server server_;
  int port_ = 0;
  std::thread thread_;
  std::mutex mu_;
  int registrations_ = 0, heartbeats_ = 0, watches_ = 0;  // guarded by mu_
};

TEST(AgentUpgradeTest, AgainstAServerOfProtocolOneTheAgentSpeaksProtocolOne) {
  std::string templ = (fs::temp_directory_path() / "gpupool-agent-upgrade-XXXXXX").string();
  ASSERT_NE(mkdtemp(templ.data()), nullptr);
  OldServer server;
  AgentOptions o;
  o.server_url = server.url();
  o.token = "t";
  o.node = "node-a";
  o.work_dir = templ + "/work";
  o.quiet = true;
  o.runtime = "process";
  o.cpu_milli = 4000;
  o.memory_mib = 4096;
  auto gpus = ParseFakeGpus("1xH100", "node-a");
  ASSERT_TRUE(gpus.has_value());
  Agent agent(o, std::make_unique<FakeBackend>(*gpus));
  std::thread run([&] { agent.Run(); });
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(15);
  while (std::get<1>(server.counts()) < 3 && std::chrono::steady_clock::now() < until) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  agent.Stop();
  run.join();
  const auto [registrations, heartbeats, watches] = server.counts();
  std::ifstream in(templ + "/work/agent.log");
  std::stringstream log;
  log << in.rdbuf();
  EXPECT_EQ(registrations, 2) << "refused with the key, accepted without it\n" << log.str();
  EXPECT_GE(heartbeats, 3) << "every one without the key (the server answers 400 to one with it)\n" << log.str();
  EXPECT_EQ(watches, 0);
  EXPECT_NE(log.str().find(R"("protocol":"1")"), std::string::npos) << log.str();
  EXPECT_EQ(log.str().find("heartbeat_failed"), std::string::npos) << log.str();
  fs::remove_all(templ);
}

}  // namespace
}  // namespace gpupool
