// Rate limits on the API (issue 22, limits on everything), on the real
// server binary: a tenant token over server.http.token_requests_per_s, a
// tenant's tokens together over server.http.tenant_requests_per_s, and a
// client address guessing tokens over server.http.failed_auth_per_s, get
// 429 with Retry-After; the admin is not limited; every denial is counted
// in /metrics (gpupool_auth_denied_total).
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "tests/run_binary.h"
#include "tests/server_process.h"

namespace gpupool::testing {
namespace {

using nlohmann::json;

// Rates of 1 per second: the buckets hardly refill while the test runs.
constexpr const char* kConfig = R"(name: limits
engine: {heartbeat_timeout: 0s}
pools:
  - name: gpu
server:
  http:
    token_requests_per_s: 1
    token_request_burst: 20
    tenant_requests_per_s: 1
    tenant_request_burst: 30
    failed_auth_per_s: 1
    failed_auth_burst: 5
)";

double Counter(const std::string& metrics, const std::string& series) {
  const size_t at = metrics.find(series + " ");
  return at == std::string::npos ? 0 : std::stod(metrics.substr(at + series.size() + 1));
}

class ServerRateLimitTest : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = MakeTempDir();
    std::ofstream(root_ + "/config.yaml") << kConfig;
    server_ = std::make_unique<ServerProcess>(root_ + "/data", std::vector<std::string>{"--config", root_ + "/config.yaml"});
    ASSERT_TRUE(server_->Start()) << server_->log();
    admin_ = server_->admin_token();
  }
  void TearDown() override {
    server_->Stop();
    std::filesystem::remove_all(root_);
  }
  std::string root_, admin_;
  std::unique_ptr<ServerProcess> server_;
};

TEST_F(ServerRateLimitTest, ATenantTokenOverItsRateGets429WithRetryAfterAndOthersAreNotSlowed) {
  auto t = Http(*server_, "POST", "/v1/tenants", admin_, json{{"name", "team"}});
  ASSERT_EQ(t.status, 201) << t.text;
  const std::string token = t.body["token"];
  auto o = Http(*server_, "POST", "/v1/tenants", admin_, json{{"name", "other"}});
  ASSERT_EQ(o.status, 201) << o.text;
  const std::string other = o.body["token"];
  int ok = 0;
  HttpResult refused;
  for (int i = 0; i < 40 && refused.status == 0; ++i) {
    auto r = Http(*server_, "GET", "/v1/jobs", token);
    if (r.status == 200) {
      ++ok;
    } else {
      refused = r;
    }
  }
  EXPECT_GE(ok, 20);  // the burst
  EXPECT_LE(ok, 22);  // and what refilled meanwhile
  ASSERT_EQ(refused.status, 429) << refused.text;
  EXPECT_EQ(refused.body["error"]["code"], "rate_limited");
  EXPECT_NE(refused.text.find("token_requests_per_s"), std::string::npos) << refused.text;
  EXPECT_EQ(refused.retry_after, "1");
  // Another tenant's token, and the admin's, are their own.
  EXPECT_EQ(Http(*server_, "GET", "/v1/jobs", other).status, 200);
  for (int i = 0; i < 50; ++i) ASSERT_EQ(Http(*server_, "GET", "/v1/jobs", admin_).status, 200) << i;
  const std::string metrics = Http(*server_, "GET", "/metrics", "").text;
  EXPECT_GE(Counter(metrics, R"(gpupool_auth_denied_total{principal="tenant/team",reason="rate_limited",token="initial"})"), 1)
      << metrics.substr(0, 2000);
}

// Each token has its own bucket: a second token of the tenant is served
// when the first is refused, until the tenant's bucket (30) is empty too.
TEST_F(ServerRateLimitTest, EachTokenHasItsBucketAndTheTenantsTokensShareOne) {
  auto t = Http(*server_, "POST", "/v1/tenants", admin_, json{{"name", "team"}});
  ASSERT_EQ(t.status, 201) << t.text;
  const std::string first = t.body["token"];
  auto c = Http(*server_, "POST", "/v1/tokens", admin_, json{{"tenant", "team"}, {"name", "ci"}});
  ASSERT_EQ(c.status, 201) << c.text;
  const std::string second = c.body["token"];
  const auto served_until_refused = [&](const std::string& token, HttpResult& refused) {
    int ok = 0;
    for (int i = 0; i < 40; ++i) {
      auto r = Http(*server_, "GET", "/v1/jobs", token);
      if (r.status != 200) {
        refused = r;
        break;
      }
      ++ok;
    }
    return ok;
  };
  HttpResult by_token, by_tenant;
  const int first_ok = served_until_refused(first, by_token);
  EXPECT_GE(first_ok, 20);
  EXPECT_LE(first_ok, 22);
  ASSERT_EQ(by_token.status, 429) << by_token.text;
  EXPECT_NE(by_token.text.find("token_requests_per_s"), std::string::npos) << by_token.text;
  const int second_ok = served_until_refused(second, by_tenant);
  EXPECT_GE(second_ok, 30 - first_ok);
  EXPECT_LE(second_ok, 30 - first_ok + 3);
  ASSERT_EQ(by_tenant.status, 429) << by_tenant.text;
  EXPECT_NE(by_tenant.text.find("tenant_requests_per_s"), std::string::npos) << by_tenant.text;
  EXPECT_FALSE(by_tenant.retry_after.empty());
  // A request the tenant's bucket refuses costs the token nothing: the
  // second token had about 10 of its 20 left, and 15 more refusals still
  // name the tenant's bucket, never the token's.
  int named_token = 0;
  for (int i = 0; i < 15; ++i) {
    auto r = Http(*server_, "GET", "/v1/jobs", second);
    if (r.status == 429 && r.text.find("token_requests_per_s") != std::string::npos) ++named_token;
  }
  EXPECT_EQ(named_token, 0);
}

TEST_F(ServerRateLimitTest, GuessingTokensFromOneAddressGets429BeforeTheTokenIsChecked) {
  int unauthorized = 0, limited = 0;
  for (int i = 0; i < 30; ++i) {
    auto r = Http(*server_, "GET", "/v1/jobs", "gpt_guess" + std::to_string(1000000 + i) + "abcdefgh");
    if (r.status == 401) ++unauthorized;
    if (r.status == 429) {
      ++limited;
      EXPECT_FALSE(r.retry_after.empty());
    }
  }
  EXPECT_GE(unauthorized, 5);
  EXPECT_LE(unauthorized, 7);
  EXPECT_EQ(unauthorized + limited, 30);
  // While the address is limited even a good token waits: a guesser cannot
  // tell a hit from a miss.
  EXPECT_EQ(Http(*server_, "GET", "/v1/jobs", admin_).status, 429);
  const std::string metrics = Http(*server_, "GET", "/metrics", "").text;
  EXPECT_EQ(Counter(metrics, R"(gpupool_auth_denied_total{principal="unknown",reason="unauthorized",token=""})"),
            unauthorized);
  EXPECT_GE(Counter(metrics, R"(gpupool_auth_denied_total{principal="unknown",reason="rate_limited",token=""})"), limited);
}

}  // namespace
}  // namespace gpupool::testing
