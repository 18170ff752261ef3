// The audit through the real server (issue 22): every event a request
// causes carries who asked (principal and token name) and the request's
// X-Request-Id, in GET /v1/audit and GET /v1/events, across a restart; the
// server's own decisions carry none.
#include <gtest/gtest.h>

#include <chrono>
#include <string>
#include <thread>

#include "tests/configured_server.h"

namespace gpupool::testing {
namespace {

using nlohmann::json;

constexpr const char* kConfig = R"(name: audit
pools: [{name: gpu}]
cluster:
  nodes:
    - {count: 1, model: H100, gpus: 8, cpu_cores: 96, memory_gib: 1024}
)";

class ServerAuditTest : public ConfiguredServerTest {
 protected:
  void SetUp() override { ASSERT_NO_FATAL_FAILURE(StartServer(kConfig)); }
  json Audit(const std::string& query = "") {
    auto r = Http(*server_, "GET", "/v1/audit" + query, admin_);
    EXPECT_EQ(r.status, 200) << r.text;
    return r.body["entries"];
  }
};

TEST_F(ServerAuditTest, WhoChangedAQuotaAndWhoSubmittedAJobAreRecordedWithTheRequestId) {
  auto tenant = Http(*server_, "POST", "/v1/tenants", admin_, json{{"name", "team"}});
  ASSERT_EQ(tenant.status, 201) << tenant.text;
  auto ci = Http(*server_, "POST", "/v1/tokens", admin_, json{{"tenant", "team"}, {"name", "ci"}});
  ASSERT_EQ(ci.status, 201) << ci.text;
  auto quota = Http(*server_, "PUT", "/v1/tenants/team/quota", admin_,
                    json{{"pool", "gpu"}, {"guaranteed_gpus", 2}, {"limit_gpus", 4}});
  ASSERT_EQ(quota.status, 200) << quota.text;
  ASSERT_FALSE(quota.request_id.empty());
  auto job = Http(*server_, "POST", "/v1/jobs", ci.body["token"],
                  json{{"name", "train"}, {"gpus", 1}});
  ASSERT_EQ(job.status, 201) << job.text;
  // Placed (at once, or by a tick).
  for (int i = 0; i < 200; ++i) {
    auto j = Http(*server_, "GET", "/v1/jobs/" + std::to_string(job.body["id"].get<int64_t>()), admin_);
    if (j.body.value("state", "") != "pending") break;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }

  auto check = [&] {
    const json all = Audit();
    const json* set = nullptr;
    const json* submitted = nullptr;
    for (const json& e : all) {
      if (e["type"] == "QuotaSet") set = &e;
      if (e["type"] == "JobSubmitted") submitted = &e;
      EXPECT_FALSE(e["actor"].get<std::string>().empty()) << e.dump();
    }
    ASSERT_TRUE(set) << all.dump();
    EXPECT_EQ((*set)["actor"], "admin");
    EXPECT_EQ((*set)["request_id"], quota.request_id);
    EXPECT_EQ((*set)["event"]["type"], "QuotaSet") << set->dump();
    ASSERT_TRUE(submitted) << all.dump();
    EXPECT_EQ((*submitted)["actor"], "tenant/team:ci");
    EXPECT_EQ((*submitted)["request_id"], job.request_id);
    // The filter: by principal, or by principal and token.
    for (const char* who : {"tenant/team", "tenant/team:ci"}) {
      const json mine = Audit(std::string("?actor=") + who);
      ASSERT_FALSE(mine.empty()) << who;
      for (const json& e : mine) EXPECT_EQ(e["actor"], "tenant/team:ci") << who;
    }
    EXPECT_TRUE(Audit("?actor=tenant/other").empty());
    // The event view shows the same. The placement the submission caused at
    // once is the submitter's; the configuration's bootstrap is nobody's.
    auto events = Http(*server_, "GET", "/v1/events", admin_);
    ASSERT_EQ(events.status, 200) << events.text;
    bool placed = false;
    for (const json& e : events.body["events"]) {
      if (e["type"] == "QuotaSet") EXPECT_EQ(e["actor"], "admin") << e.dump();
      if (e["type"] == "JobPlaced") {
        placed = true;
        EXPECT_EQ(e["actor"], "tenant/team:ci") << e.dump();
        EXPECT_EQ(e["request_id"], job.request_id) << e.dump();
      }
      if (e["type"] == "NodeAdded") EXPECT_FALSE(e.contains("actor")) << e.dump();
    }
    EXPECT_TRUE(placed) << events.text;
  };
  ASSERT_NO_FATAL_FAILURE(check());
  ASSERT_EQ(server_->Stop(), 0);
  ASSERT_TRUE(server_->Start()) << server_->log();
  ASSERT_NO_FATAL_FAILURE(check());
}

TEST_F(ServerAuditTest, OnlyTheAdminAndPoolReadersReadTheAuditAndBadParametersNameTheirField) {
  auto tenant = Http(*server_, "POST", "/v1/tenants", admin_, json{{"name", "team"}});
  ASSERT_EQ(tenant.status, 201);
  EXPECT_EQ(Http(*server_, "GET", "/v1/audit", tenant.body["token"]).status, 403);
  auto reader = Http(*server_, "POST", "/v1/tokens", admin_, json{{"name", "dash"}, {"read_only", true}});
  ASSERT_EQ(reader.status, 201);
  EXPECT_EQ(Http(*server_, "GET", "/v1/audit", reader.body["token"]).status, 200);
  for (const char* q : {"?since=-1", "?limit=0", "?limit=10001", "?since=x"}) {
    auto r = Http(*server_, "GET", std::string("/v1/audit") + q, admin_);
    EXPECT_EQ(r.status, 400) << q << ": " << r.text;
  }
  auto bounded = Http(*server_, "GET", "/v1/audit?limit=1", admin_);
  ASSERT_EQ(bounded.status, 200);
  EXPECT_EQ(bounded.body["next_since"], 1);
}

}  // namespace
}  // namespace gpupool::testing
