#include "src/server/server_config.h"

#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <fstream>

#include "src/server/default_config.h"

namespace gpupool {
namespace {

TEST(ServerConfigTest, TheEmbeddedDefaultParses) {
  auto c = ParseServerConfig(kDefaultServerConfig, "embedded configuration", ".");
  ASSERT_TRUE(c) << c.error().message;
  EXPECT_EQ(c->name, "default");
  ASSERT_EQ(c->pools.size(), 1u);
  EXPECT_TRUE(c->tenants.empty());  // optional in a server configuration
  EXPECT_TRUE(c->nodes.empty());
  EXPECT_EQ(c->server.tick, Duration(std::chrono::seconds(1)));
  // Four missed heartbeats (reclaim.poll, 5 s) by default.
  EXPECT_EQ(c->engine.heartbeat_timeout, Duration(std::chrono::seconds(20)));
}

TEST(ServerConfigTest, ReadsTheServerSection) {
  auto c = ParseServerConfig(
      "name: s\npools: [{name: p}]\nengine: {heartbeat_timeout: 0s}\n"
      "server: {tick: 250ms, http_threads: 8, default_image: host, provider: {create: ./up, timeout: 2m}}\n"
      "scaling:\n  - pool: p\n    node: {model: H100, gpus: 8, cpu_cores: 96, memory_gib: 1024}\n    max_nodes: 4\n",
      "s.yaml", ".");
  ASSERT_TRUE(c) << c.error().message;
  EXPECT_EQ(c->server.tick, Duration(std::chrono::milliseconds(250)));
  EXPECT_EQ(c->server.http_threads, 8);
  EXPECT_EQ(c->server.default_image, "host");
  EXPECT_EQ(c->server.provider.create, "./up");
  EXPECT_EQ(c->server.provider.timeout, Duration(std::chrono::minutes(2)));
  EXPECT_EQ(c->engine.heartbeat_timeout, Duration(0));
  ASSERT_EQ(c->engine.scaling.size(), 1u);
}

TEST(ServerConfigTest, ReadsThePendingJobCap) {
  auto d = ParseServerConfig("name: s\npools: [{name: p}]\n", "s.yaml", ".");
  ASSERT_TRUE(d);
  EXPECT_EQ(d->server.max_pending_jobs_per_tenant, 10000);
  auto c = ParseServerConfig("name: s\npools: [{name: p}]\nserver: {max_pending_jobs_per_tenant: 3}\n", "s.yaml", ".");
  ASSERT_TRUE(c) << c.error().message;
  EXPECT_EQ(c->server.max_pending_jobs_per_tenant, 3);
  for (const char* bad : {"0", "-1", "20000000", "many"}) {
    auto e = ParseServerConfig(std::string("name: s\npools: [{name: p}]\nserver: {max_pending_jobs_per_tenant: ") +
                                   bad + "}\n",
                               "s.yaml", ".");
    ASSERT_FALSE(e) << bad;
    EXPECT_NE(e.error().message.find("server.max_pending_jobs_per_tenant"), std::string::npos) << e.error().message;
  }
}

TEST(ServerConfigTest, ReadsTheTaskLogLimit) {
  auto c = ParseServerConfig("name: s\npools: [{name: p}]\nserver: {max_log_bytes_per_task: 1048576}\n", "s.yaml", ".");
  ASSERT_TRUE(c) << c.error().message;
  EXPECT_EQ(c->server.max_log_bytes_per_task, 1 << 20);
  for (const char* bad : {"0", "100", "2000000000000", "big"}) {
    auto e = ParseServerConfig(std::string("name: s\npools: [{name: p}]\nserver: {max_log_bytes_per_task: ") + bad +
                                   "}\n",
                               "s.yaml", ".");
    ASSERT_FALSE(e) << bad;
    EXPECT_NE(e.error().message.find("server.max_log_bytes_per_task"), std::string::npos) << e.error().message;
  }
}

TEST(ServerConfigTest, ReadsTheHttpLimits) {
  auto c = ParseServerConfig(
      "name: s\npools: [{name: p}]\nserver:\n  http_threads: 8\n  http: {max_connections: 100, "
      "max_connections_per_client: 5, max_header_bytes: 4096, idle_timeout: 5s, header_timeout: 2s, "
      "body_timeout: 3s, request_timeout: 20s, queue_length: 7, agent_threads: 3, token_requests_per_s: 50, "
      "token_request_burst: 60, tenant_requests_per_s: 70, tenant_request_burst: 80, failed_auth_per_s: 2, failed_auth_burst: 9, max_json_values: 500, "
      "max_json_depth: 16}\n",
      "s.yaml", ".");
  ASSERT_TRUE(c) << c.error().message;
  const HttpSettings& h = c->server.http;
  EXPECT_EQ(h.max_connections, 100);
  EXPECT_EQ(h.max_connections_per_client, 5);
  EXPECT_EQ(h.max_header_bytes, 4096);
  EXPECT_EQ(h.idle_timeout, Duration(std::chrono::seconds(5)));
  EXPECT_EQ(h.header_timeout, Duration(std::chrono::seconds(2)));
  EXPECT_EQ(h.body_timeout, Duration(std::chrono::seconds(3)));
  EXPECT_EQ(h.request_timeout, Duration(std::chrono::seconds(20)));
  EXPECT_EQ(h.queue_length, 7);
  EXPECT_EQ(h.agent_threads, 3);
  EXPECT_EQ(h.token_requests_per_s, 50);
  EXPECT_EQ(h.token_request_burst, 60);
  EXPECT_EQ(h.tenant_requests_per_s, 70);
  EXPECT_EQ(h.tenant_request_burst, 80);
  EXPECT_EQ(h.failed_auth_per_s, 2);
  EXPECT_EQ(h.failed_auth_burst, 9);
  EXPECT_EQ(h.max_json_values, 500);
  EXPECT_EQ(h.max_json_depth, 16);
  // Defaults: a quarter of the handler threads for agents (resolved by the API), safe limits.
  auto d = ParseServerConfig("name: s\npools: [{name: p}]\n", "s.yaml", ".");
  ASSERT_TRUE(d);
  EXPECT_EQ(d->server.http_threads, 16);
  EXPECT_EQ(d->server.http.agent_threads, -1);
  EXPECT_EQ(d->server.http.max_connections_per_client, 256);
  EXPECT_EQ(d->server.http.token_requests_per_s, 1000);
  EXPECT_EQ(d->server.http.tenant_requests_per_s, 4000);
  EXPECT_EQ(d->server.http.failed_auth_per_s, 10);
  EXPECT_EQ(d->server.http.max_json_depth, 64);
  EXPECT_EQ(d->server.max_log_bytes_per_task, int64_t{64} << 20);
  for (const char* bad : {"server: {http: {agent_threads: 16}}", "server: {http: {header_timeout: 500ms}}",
                          "server: {http: {max_header_bytes: 10}}", "server: {http: {nope: 1}}",
                          "server: {http: {token_request_burst: 0}}", "server: {http: {failed_auth_per_s: -1}}",
                          "server: {http: {max_json_depth: 2}}", "server: {http: {max_json_depth: 5000}}"}) {
    auto e = ParseServerConfig(std::string("name: s\npools: [{name: p}]\n") + bad + "\n", "s.yaml", ".");
    ASSERT_FALSE(e) << bad;
    EXPECT_NE(e.error().message.find("server.http."), std::string::npos) << e.error().message;
  }
}

TEST(ServerConfigTest, RefusesWhatOnlyASimulationHas) {
  struct Case {
    const char* text;
    const char* message;
  } cases[] = {
      {"name: s\npools: [{name: p}]\nhorizon: 1h\n", "s.yaml:3:1: horizon: unknown key 'horizon'"},
      {"name: s\npools: [{name: p}]\nworkload: []\n", "s.yaml:3:1: workload: unknown key 'workload'"},
      // The simulator's settings in the engine section: the server's tick is server.tick.
      {"name: s\npools: [{name: p}]\nengine: {tick: 1s}\n", "s.yaml:3:10: engine.tick: unknown key 'tick'"},
      {"name: s\npools: [{name: p}]\nengine: {costs: {}}\n", "s.yaml:3:10: engine.costs: unknown key 'costs'"},
      {"name: s\npools: [{name: p}]\nserver: {tick: 0s}\n", "s.yaml:3:16: server.tick: must be positive"},
      {"name: s\npools: [{name: p}]\nserver: {default_image: rel/path}\n",
       "s.yaml:3:25: server.default_image: expected \"host\" or an absolute path"},
      {"name: s\npools: [{name: p}]\nscaling:\n  - pool: p\n    node: {model: H100, gpus: 8, cpu_cores: 1, "
       "memory_gib: 1}\n",
       "s.yaml:4:3: scaling: needs server.provider"},
      {"", "embedded:1:1: empty configuration"},
  };
  for (const Case& c : cases) {
    auto r = ParseServerConfig(c.text, c.text[0] ? "s.yaml" : "embedded", ".");
    ASSERT_FALSE(r) << c.text;
    EXPECT_EQ(r.error().message.rfind(c.message, 0), 0u) << r.error().message;
  }
}

TEST(ServerConfigTest, LoadNamesAMissingFile) {
  auto r = LoadServerConfig("/nonexistent/gpupool.yaml");
  ASSERT_FALSE(r);
  EXPECT_NE(r.error().message.find("/nonexistent/gpupool.yaml: cannot open"), std::string::npos);
  const std::string dir = testing::TempDir() + "/server_config_test";
  std::filesystem::create_directories(dir);
  std::ofstream(dir + "/c.yaml") << "name: s\npools: [{name: p}]\n";
  auto ok = LoadServerConfig(dir + "/c.yaml");
  ASSERT_TRUE(ok) << ok.error().message;
  EXPECT_EQ(ok->name, "s");
}

}  // namespace
}  // namespace gpupool
