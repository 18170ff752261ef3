// Named tokens through the real server (issue 22): several per tenant,
// revocation that takes effect at once and survives a restart, the reader
// role, node tokens that replace each other, and the refusals (each names
// its field).
#include <gtest/gtest.h>

#include <chrono>
#include <map>
#include <string>
#include <thread>

#include "tests/configured_server.h"

namespace gpupool::testing {
namespace {

using nlohmann::json;

constexpr const char* kConfig = "name: tokens\npools: [{name: gpu}]\n";

class ServerTokensTest : public ConfiguredServerTest {
 protected:
  void SetUp() override {
    ASSERT_NO_FATAL_FAILURE(StartServer(kConfig));
    team_ = CreateTenant("team");
    other_ = CreateTenant("other");
  }
  std::string CreateTenant(const std::string& name) {
    auto r = Http(*server_, "POST", "/v1/tenants", admin_, json{{"name", name}});
    EXPECT_EQ(r.status, 201) << r.text;
    return r.body.value("token", "");
  }
  // POST /v1/tokens as `caller`; the reply.
  HttpResult Create(const std::string& caller, const json& body) {
    return Http(*server_, "POST", "/v1/tokens", caller, body);
  }
  json Listed(const std::string& caller, const std::string& query = "") {
    auto r = Http(*server_, "GET", "/v1/tokens" + query, caller);
    EXPECT_EQ(r.status, 200) << r.text;
    return r.body["tokens"];
  }
  static const json* Named(const json& list, const std::string& name) {
    for (const json& t : list) {
      if (t["name"] == name) return &t;
    }
    return nullptr;
  }
  void Restart() {
    ASSERT_EQ(server_->Stop(), 0);
    ASSERT_TRUE(server_->Start()) << server_->log();
  }

  std::string team_, other_;
};

TEST_F(ServerTokensTest, ATenantHoldsSeveralNamedTokensAndARevokedOneIsRefusedAtOnceAndAfterARestart) {
  auto ci = Create(admin_, json{{"tenant", "team"}, {"name", "ci"}});
  ASSERT_EQ(ci.status, 201) << ci.text;
  const std::string ci_token = ci.body["token"];
  const std::string ci_id = ci.body["id"];
  EXPECT_EQ(ci.body["tenant"], "team");
  EXPECT_EQ(ci.body["role"], "tenant");
  EXPECT_EQ(ci_token.substr(0, 4 + ci_id.size()), "gpt_" + ci_id);
  // A tenant makes its own too.
  auto laptop = Create(team_, json{{"name", "laptop"}});
  ASSERT_EQ(laptop.status, 201) << laptop.text;
  for (const std::string& t : {team_, ci_token, laptop.body["token"].get<std::string>()}) {
    EXPECT_EQ(Http(*server_, "GET", "/v1/jobs", t).status, 200);
  }
  const json mine = Listed(team_);
  ASSERT_EQ(mine.size(), 3u) << mine.dump();
  for (const char* name : {"initial", "ci", "laptop"}) ASSERT_TRUE(Named(mine, name)) << name << mine.dump();
  EXPECT_FALSE(Named(mine, "initial")->contains("token"));  // shown once only
  EXPECT_EQ(Listed(other_).size(), 1u);
  EXPECT_EQ(Listed(admin_).size(), 4u);
  EXPECT_EQ(Listed(admin_, "?tenant=other").size(), 1u);

  auto revoked = Http(*server_, "DELETE", "/v1/tokens/" + ci_id, team_);
  ASSERT_EQ(revoked.status, 200) << revoked.text;
  EXPECT_TRUE(revoked.body.contains("revoked_at")) << revoked.text;
  EXPECT_EQ(Http(*server_, "GET", "/v1/jobs", ci_token).status, 401);
  // Again: the same answer, the first time kept.
  auto again = Http(*server_, "DELETE", "/v1/tokens/" + ci_id, admin_);
  EXPECT_EQ(again.status, 200);
  EXPECT_EQ(again.body["revoked_at"], revoked.body["revoked_at"]);

  ASSERT_NO_FATAL_FAILURE(Restart());
  EXPECT_EQ(Http(*server_, "GET", "/v1/jobs", ci_token).status, 401);
  EXPECT_EQ(Http(*server_, "GET", "/v1/jobs", team_).status, 200);
  const json after = Listed(admin_, "?tenant=team");
  ASSERT_TRUE(Named(after, "ci"));
  EXPECT_EQ((*Named(after, "ci"))["revoked_at"], revoked.body["revoked_at"]);
  // The name is free again once its token is revoked.
  EXPECT_EQ(Create(admin_, json{{"tenant", "team"}, {"name", "ci"}}).status, 201);
}

TEST_F(ServerTokensTest, AReaderOnlyReadsOfItsTenantOrOfThePool) {
  auto pool = Create(admin_, json{{"name", "dashboard"}, {"read_only", true}});
  ASSERT_EQ(pool.status, 201) << pool.text;
  EXPECT_EQ(pool.body["role"], "reader");
  EXPECT_FALSE(pool.body.contains("tenant"));
  const std::string reader = pool.body["token"];
  for (const char* path : {"/v1/jobs", "/v1/tenants", "/v1/nodes", "/v1/events", "/v1/tokens"}) {
    EXPECT_EQ(Http(*server_, "GET", path, reader).status, 200) << path;
  }
  auto refused = Http(*server_, "POST", "/v1/jobs", reader,
                      json{{"tenant", "team"}, {"name", "x"}, {"pool", "gpu"}, {"command", {"true"}}});
  EXPECT_EQ(refused.status, 403) << refused.text;
  EXPECT_NE(refused.text.find("read-only"), std::string::npos) << refused.text;
  EXPECT_EQ(Http(*server_, "POST", "/v1/tenants", reader, json{{"name", "new"}}).status, 403);
  EXPECT_EQ(Create(reader, json{{"name", "escalate"}, {"tenant", "team"}}).status, 403);

  auto team_reader = Create(team_, json{{"name", "grafana"}, {"read_only", true}});
  ASSERT_EQ(team_reader.status, 201) << team_reader.text;
  EXPECT_EQ(team_reader.body["tenant"], "team");
  const std::string t = team_reader.body["token"];
  EXPECT_EQ(Http(*server_, "GET", "/v1/jobs", t).status, 200);
  EXPECT_EQ(Http(*server_, "GET", "/v1/tenants/team", t).status, 200);
  EXPECT_EQ(Http(*server_, "GET", "/v1/tenants/other", t).status, 404);
  EXPECT_EQ(Http(*server_, "GET", "/v1/tenants", t).status, 403);
  EXPECT_EQ(Http(*server_, "DELETE", "/v1/tokens/" + team_reader.body["id"].get<std::string>(), t).status, 403);
  const std::string metrics = Http(*server_, "GET", "/metrics", "").text;
  EXPECT_NE(metrics.find(R"(gpupool_auth_denied_total{principal="reader",reason="forbidden",token="dashboard"} 3)"),
            std::string::npos)
      << metrics;
}

TEST_F(ServerTokensTest, IssuingANodeTokenRevokesTheNodesTokenBefore) {
  auto first = Http(*server_, "POST", "/v1/nodes/n1/token", admin_);
  ASSERT_EQ(first.status, 201) << first.text;
  const json heartbeat = {{"node", "n1"}};
  EXPECT_NE(Http(*server_, "POST", "/v1/agent/heartbeat", first.body["token"], heartbeat).status, 401);
  auto second = Http(*server_, "POST", "/v1/nodes/n1/token", admin_);
  ASSERT_EQ(second.status, 201) << second.text;
  EXPECT_EQ(Http(*server_, "POST", "/v1/agent/heartbeat", first.body["token"], heartbeat).status, 401);
  EXPECT_NE(Http(*server_, "POST", "/v1/agent/heartbeat", second.body["token"], heartbeat).status, 401);
  // The ID is the token's text after "gpt_".
  const std::string first_id = first.body["token"].get<std::string>().substr(4, 16);
  const std::string second_id = second.body["token"].get<std::string>().substr(4, 16);
  std::map<std::string, json> nodes;
  for (const json& t : Listed(admin_)) {
    if (t["role"] == "node") nodes[t["id"]] = t;
  }
  ASSERT_EQ(nodes.size(), 2u);
  EXPECT_TRUE(nodes[first_id].contains("revoked_at")) << nodes[first_id].dump();
  EXPECT_FALSE(nodes[second_id].contains("revoked_at")) << nodes[second_id].dump();
  EXPECT_EQ(nodes[second_id]["node"], "n1");
}

TEST_F(ServerTokensTest, BadRequestsNameTheirField) {
  struct Case {
    std::string caller;
    json body;
    int status;
    std::string field;
  };
  const std::vector<Case> cases = {
      {admin_, json{{"tenant", "team"}}, 400, "name"},
      {admin_, json{{"tenant", "team"}, {"name", "Bad Name"}}, 400, "name"},
      {admin_, json{{"tenant", "team"}, {"name", "initial"}}, 409, "name"},
      {admin_, json{{"tenant", "nobody"}, {"name", "x"}}, 404, "tenant"},
      {admin_, json{{"name", "x"}}, 400, "tenant"},
      {admin_, json{{"tenant", "team"}, {"name", "x"}, {"expires_in", "soon"}}, 400, "expires_in"},
      {admin_, json{{"tenant", "team"}, {"name", "x"}, {"expires_in", "4000d"}}, 400, "expires_in"},
      {admin_, json{{"tenant", "team"}, {"name", "x"}, {"read_only", "yes"}}, 400, "read_only"},
      {admin_, json{{"tenant", "team"}, {"name", "x"}, {"role", "admin"}}, 400, "role"},
      {team_, json{{"tenant", "other"}, {"name", "x"}}, 403, "tenant"},
  };
  for (const Case& c : cases) {
    auto r = Create(c.caller, c.body);
    EXPECT_EQ(r.status, c.status) << c.body.dump() << ": " << r.text;
    EXPECT_EQ(r.body["error"].value("field", ""), c.field) << c.body.dump() << ": " << r.text;
  }
  // Another tenant's token is not found by a tenant; nor is an unknown ID.
  const std::string other_id = Listed(other_)[0]["id"];
  EXPECT_EQ(Http(*server_, "DELETE", "/v1/tokens/" + other_id, team_).status, 404);
  EXPECT_EQ(Http(*server_, "DELETE", "/v1/tokens/0123456789abcdef", admin_).status, 404);
  EXPECT_EQ(Http(*server_, "GET", "/v1/tokens?tenant=other", team_).status, 403);
  EXPECT_EQ(Http(*server_, "GET", "/v1/jobs", other_).status, 200);
}

TEST_F(ServerTokensTest, AnExpiredTokenIsRefused) {
  auto r = Create(admin_, json{{"tenant", "team"}, {"name", "short"}, {"expires_in", "1s"}});
  ASSERT_EQ(r.status, 201) << r.text;
  EXPECT_TRUE(r.body.contains("expires_at"));
  const std::string token = r.body["token"];
  EXPECT_EQ(Http(*server_, "GET", "/v1/jobs", token).status, 200);
  std::this_thread::sleep_for(std::chrono::milliseconds(1100));
  EXPECT_EQ(Http(*server_, "GET", "/v1/jobs", token).status, 401);
}

TEST_F(ServerTokensTest, APrincipalHoldsAtMost64LiveTokens) {
  int made = 1;  // "initial"
  for (; made < 64; ++made) {
    auto r = Create(team_, json{{"name", "t" + std::to_string(made)}});
    ASSERT_EQ(r.status, 201) << made << ": " << r.text;
  }
  auto over = Create(team_, json{{"name", "one-more"}});
  EXPECT_EQ(over.status, 429) << over.text;
  EXPECT_NE(over.text.find("revoke one first"), std::string::npos) << over.text;
  // Revoking one makes room.
  const std::string id = Listed(team_)[1]["id"];
  ASSERT_EQ(Http(*server_, "DELETE", "/v1/tokens/" + id, team_).status, 200);
  EXPECT_EQ(Create(team_, json{{"name", "one-more"}}).status, 201);
}

// Creates in flight together (one group commit, or several batches queued
// for the disk) see each other: they cannot share a name or pass the limit.
TEST_F(ServerTokensTest, ConcurrentCreatesNeitherShareANameNorPassTheLimit) {
  constexpr int kClients = 32;
  auto race = [&](auto name_of) {
    std::vector<int> status(kClients, 0);
    {
      std::vector<std::jthread> clients;
      for (int c = 0; c < kClients; ++c) {
        clients.emplace_back([&, c] { status[c] = Create(team_, json{{"name", name_of(c)}}).status; });
      }
    }
    std::map<int, int> by_status;
    for (int s : status) ++by_status[s];
    return by_status;
  };
  auto live = [&] {
    int n = 0;
    for (const json& t : Listed(team_)) n += !t.contains("revoked_at");
    return n;
  };
  // One name, room for all: one is made, the others hear 409.
  std::map<int, int> same = race([](int) { return std::string("same"); });
  EXPECT_EQ(same[201], 1);
  EXPECT_EQ(same[409], kClients - 1);
  ASSERT_EQ(live(), 2);  // "initial" and "same"
  // Room for 8 more: 8 are made, the others hear 429.
  for (int made = 2; made < 56; ++made) ASSERT_EQ(Create(team_, json{{"name", "t" + std::to_string(made)}}).status, 201);
  std::map<int, int> full = race([](int c) { return "race-" + std::to_string(c); });
  EXPECT_EQ(full[201], 64 - 56) << "201: " << full[201] << ", 429: " << full[429];
  EXPECT_EQ(full[429], kClients - (64 - 56));
  EXPECT_EQ(live(), 64);
}

}  // namespace
}  // namespace gpupool::testing
