// Operators' node commands through the real server (issue 19): POST
// /v1/nodes/{name}/cordon|uncordon|drain and DELETE /v1/nodes/{name}, their
// authorization, bad input, the node view and the audit, and a restart.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "tests/run_binary.h"
#include "tests/server_process.h"

namespace gpupool::testing {
namespace {

using nlohmann::json;

// Two single-GPU nodes and no agents (failure detection off): jobs run
// in the Engine's view, which is what these commands act on.
constexpr const char* kConfig = R"(name: node-ops
engine: {heartbeat_timeout: 0s, policy: BestFit}
pools:
  - name: gpu
    models: [H100]
cluster:
  nodes:
    - {count: 2, name_prefix: gpu, model: H100, gpus: 1, cpu_cores: 16, memory_gib: 64}
server:
  tick: 100ms
)";

class ServerNodeOpsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = MakeTempDir();
    std::ofstream(root_ + "/config.yaml") << kConfig;
    server_ = std::make_unique<ServerProcess>(root_ + "/data", std::vector<std::string>{"--config", root_ + "/config.yaml"});
    ASSERT_TRUE(server_->Start()) << server_->log();
    admin_ = server_->admin_token();
    auto t = Http(*server_, "POST", "/v1/tenants", admin_,
                  json{{"name", "team"}, {"quota", {{"gpu", {{"guaranteed_gpus", 0}, {"limit_gpus", 2}}}}}});
    ASSERT_EQ(t.status, 201) << t.text;
    tenant_ = t.body["token"];
  }
  void TearDown() override {
    server_.reset();
    std::filesystem::remove_all(root_);
  }
  HttpResult Call(const std::string& method, const std::string& path, const std::optional<json>& body = std::nullopt) {
    return Http(*server_, method, path, admin_, body);
  }
  int64_t Submit(const std::string& name) {
    auto s = Http(*server_, "POST", "/v1/jobs", tenant_,
                  json{{"name", name}, {"gpus", 1}, {"cpu_cores", 1}, {"memory_gib", 1}, {"image", "host"},
                       {"command", {"sleep", "1000"}}});
    EXPECT_EQ(s.status, 201) << s.text;
    return s.body.value("id", int64_t{-1});
  }
  json Job(int64_t id) { return Call("GET", "/v1/jobs/" + std::to_string(id)).body; }
  std::string NodeOf(int64_t id) {
    const json j = Job(id);
    return j["placements"].empty() ? "" : j["placements"][0]["node"].get<std::string>();
  }
  int64_t LastSeq() { return Http(*server_, "GET", "/healthz", "").body["last_seq"]; }
  // The event types journaled after `since`.
  std::vector<std::string> TypesSince(int64_t since) {
    std::vector<std::string> out;
    const HttpResult r = Call("GET", "/v1/events?since=" + std::to_string(since));
    EXPECT_EQ(r.status, 200) << r.text;
    for (const json& e : r.body["events"]) out.push_back(e["type"]);
    return out;
  }
  static bool Has(const std::vector<std::string>& v, const std::string& x) {
    return std::find(v.begin(), v.end(), x) != v.end();
  }

  std::string root_, admin_, tenant_;
  std::unique_ptr<ServerProcess> server_;
};

TEST_F(ServerNodeOpsTest, CordonKeepsRunningWorkTakesNoNewWorkAndUncordonRestoresIt) {
  const int64_t first = Submit("first");
  const std::string busy = NodeOf(first);
  ASSERT_FALSE(busy.empty());
  const std::string other = busy == "gpu-0" ? "gpu-1" : "gpu-0";
  auto c = Call("POST", "/v1/nodes/" + other + "/cordon", json{{"reason", "replacing a fan"}});
  ASSERT_EQ(c.status, 200) << c.text;
  EXPECT_EQ(c.body["changed"], true);
  EXPECT_EQ(c.body["condition"], "cordoned");
  ASSERT_EQ(c.body["cordons"].size(), 1u) << c.text;
  EXPECT_EQ(c.body["cordons"][0]["by"], "operator");
  EXPECT_EQ(c.body["cordons"][0]["actor"], "admin");
  EXPECT_EQ(c.body["cordons"][0]["reason"], "replacing a fan");
  // Idempotent: 200, nothing journaled.
  const int64_t seq = LastSeq();
  auto again = Call("POST", "/v1/nodes/" + other + "/cordon");
  ASSERT_EQ(again.status, 200) << again.text;
  EXPECT_EQ(again.body["changed"], false);
  EXPECT_EQ(LastSeq(), seq);

  const int64_t second = Submit("second");
  EXPECT_EQ(Job(second)["state"], "pending");
  EXPECT_EQ(Job(first)["state"], "running");  // what runs stays
  auto got = Call("GET", "/v1/nodes/" + other);
  ASSERT_EQ(got.status, 200);
  EXPECT_EQ(got.body["condition"], "cordoned");

  auto u = Call("POST", "/v1/nodes/" + other + "/uncordon");
  ASSERT_EQ(u.status, 200) << u.text;
  EXPECT_EQ(u.body["changed"], true);
  EXPECT_EQ(u.body["cordons"].size(), 0u);
  EXPECT_EQ(Job(second)["state"], "running");
  EXPECT_EQ(NodeOf(second), other);

  // The audit names who asked.
  auto audit = Call("GET", "/v1/audit?actor=admin");
  ASSERT_EQ(audit.status, 200);
  bool cordon_audited = false;
  for (const json& e : audit.body["entries"]) cordon_audited |= e["type"] == "NodeCordoned" && e["actor"] == "admin";
  EXPECT_TRUE(cordon_audited) << audit.text;
}

TEST_F(ServerNodeOpsTest, DrainStopsWhatCannotMoveAtTheTimeoutAndItRunsElsewhere) {
  const int64_t job = Submit("stuck");  // not checkpointable: it waits for the timeout
  const std::string from = NodeOf(job);
  const std::string to = from == "gpu-0" ? "gpu-1" : "gpu-0";
  const int64_t seq = LastSeq();
  auto d = Call("POST", "/v1/nodes/" + from + "/drain", json{{"timeout_s", 0}, {"reason", "kernel upgrade"}});
  ASSERT_EQ(d.status, 200) << d.text;
  EXPECT_EQ(d.body["changed"], true);
  EXPECT_EQ(d.body["condition"], "cordoned");
  ASSERT_EQ(d.body["cordons"].size(), 1u);
  EXPECT_EQ(d.body["cordons"][0]["drain"], "drained");
  const std::vector<std::string> types = TypesSince(seq);
  for (const char* t : {"NodeDrainRequested", "PreemptionStarted", "JobPreempted", "NodeDrained", "JobPlaced"}) {
    EXPECT_TRUE(Has(types, t)) << t << " in " << ::testing::PrintToString(types);
  }
  EXPECT_EQ(Job(job)["state"], "running");
  EXPECT_EQ(NodeOf(job), to);
  EXPECT_EQ(Job(job)["last_stop"]["reason"], "drain");
  // Draining a drained node: a new drain, over at once.
  EXPECT_EQ(Call("POST", "/v1/nodes/" + from + "/drain").body["changed"], true);

  // Survives a restart: still cordoned, by the operator, drained.
  ASSERT_EQ(server_->Stop(), 0) << server_->log();
  ASSERT_TRUE(server_->Start()) << server_->log();
  auto after = Call("GET", "/v1/nodes/" + from);
  ASSERT_EQ(after.status, 200) << after.text;
  EXPECT_EQ(after.body["condition"], "cordoned");
  ASSERT_EQ(after.body["cordons"].size(), 1u) << after.text;
  EXPECT_EQ(after.body["cordons"][0]["reason"], "");
  EXPECT_EQ(after.body["cordons"][0]["drain"], "drained");
  const int64_t next = Submit("next");  // the other node is full and this one cordoned: it waits
  EXPECT_EQ(Job(next)["state"], "pending");
}

TEST_F(ServerNodeOpsTest, RemoveRefusesABusyNodeNamingItsJobsUnlessForcedAndRevokesTheAgentsToken) {
  const int64_t job = Submit("busy");
  const std::string node = NodeOf(job);
  auto token = Call("POST", "/v1/nodes/" + node + "/token");
  ASSERT_EQ(token.status, 201) << token.text;
  const std::string node_token = token.body["token"];
  const int64_t seq = LastSeq();
  auto refused = Call("DELETE", "/v1/nodes/" + node);
  ASSERT_EQ(refused.status, 409) << refused.text;
  EXPECT_NE(refused.text.find("job " + std::to_string(job) + " (tenant team, replica 0)"), std::string::npos)
      << refused.text;
  EXPECT_EQ(LastSeq(), seq);

  auto removed = Call("DELETE", "/v1/nodes/" + node + "?force=true&reason=decommissioned");
  ASSERT_EQ(removed.status, 200) << removed.text;
  EXPECT_EQ(removed.body["changed"], true);
  EXPECT_EQ(removed.body["condition"], "removed");
  const std::vector<std::string> types = TypesSince(seq);
  for (const char* t : {"NodeRemovalRequested", "JobInterrupted", "NodeRemoved"}) EXPECT_TRUE(Has(types, t)) << t << " in " << ::testing::PrintToString(types);
  const json j = Job(job);
  EXPECT_EQ(j["state"], "running") << j.dump();  // queued again, on the other node
  EXPECT_NE(NodeOf(job), node);
  EXPECT_EQ(j["last_stop"]["cause"], "interrupted");
  EXPECT_EQ(j["last_stop"]["reason"], "node " + node + " removed");
  // The agent's token no longer works.
  EXPECT_EQ(Http(*server_, "POST", "/v1/agent/heartbeat", node_token, json{{"node", node}}).status, 401);
  // Again: 200, nothing new; the other commands: 409.
  EXPECT_EQ(Call("DELETE", "/v1/nodes/" + node).body["changed"], false);
  EXPECT_EQ(Call("POST", "/v1/nodes/" + node + "/cordon").status, 409);
}

TEST_F(ServerNodeOpsTest, OnlyTheAdminMayAndBadInputNamesTheField) {
  auto reader = Call("POST", "/v1/tokens", json{{"name", "ops-reader"}, {"read_only", true}});
  ASSERT_EQ(reader.status, 201) << reader.text;
  const std::string reader_token = reader.body["token"];
  const int64_t seq = LastSeq();
  for (const auto& [method, path] : std::vector<std::pair<std::string, std::string>>{
           {"POST", "/v1/nodes/gpu-0/cordon"},
           {"POST", "/v1/nodes/gpu-0/uncordon"},
           {"POST", "/v1/nodes/gpu-0/drain"},
           {"DELETE", "/v1/nodes/gpu-0?force=true"}}) {
    SCOPED_TRACE(method + " " + path);
    EXPECT_EQ(Http(*server_, method, path, tenant_).status, 403);
    EXPECT_EQ(Http(*server_, method, path, reader_token).status, 403);
    EXPECT_EQ(Http(*server_, method, path, "").status, 401);
  }
  EXPECT_EQ(Http(*server_, "GET", "/v1/nodes/gpu-0", tenant_).status, 403);
  EXPECT_EQ(Http(*server_, "GET", "/v1/nodes/gpu-0", reader_token).status, 200);

  struct Case {
    std::string method, path;
    std::optional<json> body;
    int status;
    std::string field;
  };
  const std::vector<Case> cases = {
      {"POST", "/v1/nodes/gpu-0/drain", json{{"timeout_s", "10m"}}, 400, "timeout_s"},
      {"POST", "/v1/nodes/gpu-0/drain", json{{"timeout_s", -1}}, 400, "timeout_s"},
      {"POST", "/v1/nodes/gpu-0/drain", json{{"timeout_s", 604801}}, 400, "timeout_s"},
      {"POST", "/v1/nodes/gpu-0/drain", json{{"timeout", 5}}, 400, "timeout"},
      {"POST", "/v1/nodes/gpu-0/cordon", json{{"timeout_s", 5}}, 400, "timeout_s"},
      {"POST", "/v1/nodes/gpu-0/cordon", json{{"reason", std::string(300, 'x')}}, 400, "reason"},
      {"POST", "/v1/nodes/gpu-0/cordon", json::array(), 400, "body"},
      {"DELETE", "/v1/nodes/gpu-0?force=yes", std::nullopt, 400, "force"},
      // Not UTF-8: the events could not carry it (this once aborted the server).
      {"DELETE", "/v1/nodes/gpu-0?force=true&reason=%FF%FE", std::nullopt, 400, "reason"},
      {"DELETE", "/v1/nodes/gpu-0?reason=" + std::string(300, 'x'), std::nullopt, 400, "reason"},
      {"POST", "/v1/nodes/%FF/cordon", std::nullopt, 404, "name"},
      {"POST", "/v1/nodes/nope/cordon", std::nullopt, 404, "name"},
      {"POST", "/v1/nodes/nope/drain", json{{"timeout_s", 5}}, 404, "name"},
      {"DELETE", "/v1/nodes/nope", std::nullopt, 404, "name"},
      {"GET", "/v1/nodes/nope", std::nullopt, 404, "name"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.method + " " + c.path + " " + (c.body ? c.body->dump() : ""));
    auto r = Call(c.method, c.path, c.body);
    EXPECT_EQ(r.status, c.status) << r.text;
    EXPECT_EQ(r.body["error"].value("field", ""), c.field) << r.text;
  }
  EXPECT_EQ(LastSeq(), seq);  // nothing journaled
  EXPECT_EQ(Call("GET", "/v1/nodes/gpu-0").body["condition"], "ready");  // and the server still answers
  auto raw = HttpRaw(*server_, "POST", "/v1/nodes/gpu-0/drain", admin_, "{\"timeout_s\":");
  EXPECT_EQ(raw.status, 400);
  EXPECT_EQ(raw.body["error"].value("field", ""), "body") << raw.text;
}

}  // namespace
}  // namespace gpupool::testing
