// TOPO-2 at runtime: the region table through the REST API (GET and PUT
// /v1/regions) of a real `gpupool server`. Two pools in two regions, east
// and west, one H100 node each; the configuration's table makes east the
// cheaper, so latency-insensitive work goes there until a PUT makes west the
// cheaper.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "tests/configured_server.h"

namespace gpupool::testing {
namespace {

using nlohmann::json;

constexpr const char* kConfig = R"(name: regions
engine: {heartbeat_timeout: 0s}
pools:
  - {name: east, models: [H100], regions: [east]}
  - {name: west, models: [H100], regions: [west]}
cluster:
  nodes:
    - {count: 1, model: H100, gpus: 8, cpu_cores: 96, memory_gib: 1024, region: east, name_prefix: east}
    - {count: 1, model: H100, gpus: 8, cpu_cores: 96, memory_gib: 1024, region: west, name_prefix: west}
regions:
  policy: cost-aware
  table:
    - {name: east, price_per_gpu_hour: 2, latency_ms: {nyc: 10}}
    - {name: west, price_per_gpu_hour: 3, latency_ms: {nyc: 70}}
server:
  tick: 200ms
)";

// West cheaper than east, and team-r's users in nyc.
json WestCheaper() {
  return json{{"policy", "cost-aware"},
              {"regions", json::array({json{{"name", "east"}, {"price_per_gpu_hour", 4}, {"latency_ms", {{"nyc", 10}}}},
                                       json{{"name", "west"}, {"price_per_gpu_hour", 1.5},
                                            {"latency_ms", {{"nyc", 70}}}}})},
              {"users", json::array({json{{"tenant", "team-r"}, {"location", "nyc"}, {"latency_budget_ms", 100}}})}};
}

class ServerRegionsTest : public ConfiguredServerTest {
 protected:
  void SetUp() override {
    ASSERT_NO_FATAL_FAILURE(StartServer(kConfig));
    auto t = Http(*server_, "POST", "/v1/tenants", admin_,
                  json{{"name", "team-r"},
                       {"quota", {{"east", {{"guaranteed_gpus", 8}, {"limit_gpus", 8}}},
                                  {"west", {{"guaranteed_gpus", 8}, {"limit_gpus", 8}}}}}});
    ASSERT_EQ(t.status, 201) << t.text;
    token_ = t.body["token"];
  }

  // Submits a one-GPU batch job and returns the pool it runs in ("" if it
  // does not run).
  std::string PlaceOne(const std::string& name) {
    auto s = Http(*server_, "POST", "/v1/jobs", token_, json{{"name", name}, {"kind", "batch-inference"}, {"gpus", 1}});
    EXPECT_EQ(s.status, 201) << s.text;
    auto g = Http(*server_, "GET", "/v1/jobs/" + s.body["id"].dump(), token_);
    EXPECT_EQ(g.body["state"], "running") << g.text;
    return g.body.value("pool", "");
  }
  int64_t LastSeq() { return Http(*server_, "GET", "/healthz", "").body["last_seq"]; }

  std::string token_;
};

TEST_F(ServerRegionsTest, GetReturnsTheConfiguredTableToAnyCaller) {
  for (const std::string& token : {admin_, token_}) {
    auto g = Http(*server_, "GET", "/v1/regions", token);
    ASSERT_EQ(g.status, 200) << g.text;
    EXPECT_EQ(g.body["policy"], "cost-aware");
    ASSERT_EQ(g.body["regions"].size(), 2u) << g.text;
    EXPECT_EQ(g.body["regions"][0]["name"], "east");
    EXPECT_EQ(g.body["regions"][0]["price_per_gpu_hour"], 2);
    EXPECT_EQ(g.body["regions"][0]["latency_ms"]["nyc"], 10);
    EXPECT_EQ(g.body["regions"][1]["name"], "west");
    EXPECT_EQ(g.body["users"], json::array());
  }
  EXPECT_EQ(Http(*server_, "GET", "/v1/regions", "").status, 401);
}

TEST_F(ServerRegionsTest, PutReplacesTheTableAndTheNextJobGoesToTheNewCheapestRegion) {
  EXPECT_EQ(PlaceOne("first"), "east");
  auto p = Http(*server_, "PUT", "/v1/regions", admin_, WestCheaper());
  ASSERT_EQ(p.status, 200) << p.text;
  EXPECT_EQ(p.body, WestCheaper()) << p.text;  // every field explicit, as sent here
  auto g = Http(*server_, "GET", "/v1/regions", token_);
  ASSERT_EQ(g.status, 200);
  EXPECT_EQ(g.body, WestCheaper());
  EXPECT_EQ(PlaceOne("second"), "west");
  // Journaled as RegionsSet.
  auto events = Http(*server_, "GET", "/v1/events?limit=10000", admin_);
  int set = 0;
  for (const json& e : events.body["events"]) set += e["type"] == "RegionsSet";
  EXPECT_EQ(set, 1) << events.text;
  // Policy off: no region order (the table stays as given).
  auto off = Http(*server_, "PUT", "/v1/regions", admin_, json{{"policy", "off"}});
  ASSERT_EQ(off.status, 200) << off.text;
  EXPECT_EQ(off.body, (json{{"policy", "off"}, {"regions", json::array()}, {"users", json::array()}}));
}

// Where a tenant's users are is its own business: another tenant's token
// sees the regions but not team-r's users; the admin sees them all.
TEST_F(ServerRegionsTest, ATenantSeesOnlyItsOwnUsers) {
  ASSERT_EQ(Http(*server_, "PUT", "/v1/regions", admin_, WestCheaper()).status, 200);
  auto o = Http(*server_, "POST", "/v1/tenants", admin_, json{{"name", "other"}});
  ASSERT_EQ(o.status, 201) << o.text;
  auto other = Http(*server_, "GET", "/v1/regions", o.body["token"].get<std::string>());
  ASSERT_EQ(other.status, 200) << other.text;
  EXPECT_EQ(other.body["regions"], WestCheaper()["regions"]);
  EXPECT_EQ(other.body["users"], json::array()) << other.text;
  EXPECT_EQ(Http(*server_, "GET", "/v1/regions", token_).body["users"].size(), 1u);
  EXPECT_EQ(Http(*server_, "GET", "/v1/regions", admin_).body["users"].size(), 1u);
}

TEST_F(ServerRegionsTest, BadTablesAreRefusedNamingTheFieldAndJournalNothing) {
  const int64_t before = LastSeq();
  struct Case {
    json body;
    std::string field;
  };
  const json east{{"name", "east"}, {"price_per_gpu_hour", 1}};
  const std::vector<Case> cases = {
      {json{{"policy", "cheapest"}, {"regions", json::array({east})}}, "policy"},
      {json{{"regions", json::array({east, east})}}, "regions[1].name"},
      {json{{"regions", json::array({json{{"name", "east"}, {"price_per_gpu_hour", -1}}})}},
       "regions[0].price_per_gpu_hour"},
      {json{{"regions", json::array({east})}, {"currency", "EUR"}}, "currency"},
      {json{{"regions", json::array({json{{"name", "east"}, {"price_per_gpu_hour", 1}, {"zone", "a"}}})}},
       "regions[0].zone"},
      {json{{"regions", json::array({json{{"name", "east"}}})}}, "regions[0].price_per_gpu_hour"},
      {json{{"regions", json::array({east})},
            {"users", json::array({json{{"tenant", "team-r"}, {"location", "nyc"}, {"latency_budget_ms", -5}}})}},
       "users[0].latency_budget_ms"},
      {json{{"policy", "cost-aware"}, {"regions", json::array()}}, "regions"},
      {json::array(), "body"},  // not an object
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.body.dump());
    auto r = Http(*server_, "PUT", "/v1/regions", admin_, c.body);
    EXPECT_EQ(r.status, 400) << r.text;
    EXPECT_EQ(r.body["error"]["code"], "invalid_argument") << r.text;
    EXPECT_EQ(r.body["error"].value("field", ""), c.field) << r.text;
  }
  auto malformed = HttpRaw(*server_, "PUT", "/v1/regions", admin_, "{\"policy\": ");
  EXPECT_EQ(malformed.status, 400);
  EXPECT_EQ(malformed.body["error"]["field"], "body");
  // Nothing changed, nothing was journaled.
  EXPECT_EQ(Http(*server_, "GET", "/v1/regions", admin_).body["regions"][0]["price_per_gpu_hour"], 2);
  EXPECT_EQ(LastSeq(), before);
}

TEST_F(ServerRegionsTest, OnlyTheAdminMaySetTheTable) {
  EXPECT_EQ(Http(*server_, "PUT", "/v1/regions", token_, WestCheaper()).status, 403);
  EXPECT_EQ(Http(*server_, "PUT", "/v1/regions", "", WestCheaper()).status, 401);
  auto t = Http(*server_, "POST", "/v1/nodes/n-1/token", admin_, json::object());
  ASSERT_EQ(t.status, 201);
  EXPECT_EQ(Http(*server_, "PUT", "/v1/regions", t.body["token"], WestCheaper()).status, 403);
  EXPECT_EQ(Http(*server_, "GET", "/v1/regions", t.body["token"]).status, 403);  // node tokens: agent routes only
  EXPECT_EQ(Http(*server_, "GET", "/v1/regions", admin_).body["regions"][0]["price_per_gpu_hour"], 2);
}

TEST_F(ServerRegionsTest, TheTableSetThroughTheApiSurvivesRestarts) {
  ASSERT_EQ(Http(*server_, "PUT", "/v1/regions", admin_, WestCheaper()).status, 200);
  // SIGTERM: the read model comes back from its snapshot.
  EXPECT_EQ(server_->Stop(), 0);
  ASSERT_TRUE(server_->Start()) << server_->log();
  EXPECT_EQ(Http(*server_, "GET", "/v1/regions", token_).body, WestCheaper());
  EXPECT_EQ(PlaceOne("after-stop"), "west");  // and the Engine places by it
  // SIGKILL after another change: replayed from the journal.
  json east_again = WestCheaper();
  east_again["regions"][0]["price_per_gpu_hour"] = 0.5;
  ASSERT_EQ(Http(*server_, "PUT", "/v1/regions", admin_, east_again).status, 200);
  server_->Kill();
  ASSERT_TRUE(server_->Start()) << server_->log();
  EXPECT_EQ(Http(*server_, "GET", "/v1/regions", token_).body, east_again);
  EXPECT_EQ(PlaceOne("after-kill"), "east");
}

}  // namespace
}  // namespace gpupool::testing
