#include "src/http/router.h"

#include <gtest/gtest.h>

namespace gpupool::http {
namespace {

Route R(std::string method, std::string pattern, std::string name = "") {
  return Route{std::move(method), std::move(pattern), std::move(name), Lane::kApi, [](const ExchangePtr&) {}};
}

TEST(RouterTest, LiteralsCapturesAndDigits) {
  Router r;
  r.Add(R("GET", "/v1/jobs"));
  r.Add(R("GET", "/v1/jobs/{id:digits}", "job"));
  r.Add(R("GET", "/v1/jobs/{id:digits}/logs"));
  r.Add(R("GET", "/v1/tenants/{name}"));
  r.Add(R("GET", "/v1/tenants/stats"));
  auto m = r.Find("GET", "/v1/jobs/42");
  ASSERT_NE(m.route, nullptr);
  EXPECT_EQ(m.route->name, "job");
  EXPECT_EQ(m.captures, std::vector<std::string>{"42"});
  m = r.Find("GET", "/v1/jobs/42/logs");
  ASSERT_NE(m.route, nullptr);
  EXPECT_EQ(m.route->name, "/v1/jobs/{id:digits}/logs");
  EXPECT_EQ(r.Find("GET", "/v1/jobs/4x").route, nullptr);
  EXPECT_EQ(r.Find("GET", "/v1/jobs/12345678901234567890").route, nullptr);  // 20 digits
  EXPECT_EQ(r.Find("GET", "/v1/tenants/stats").route->pattern, "/v1/tenants/stats");  // the literal wins
  m = r.Find("GET", "/v1/tenants/team-a");
  ASSERT_NE(m.route, nullptr);
  EXPECT_EQ(m.captures, std::vector<std::string>{"team-a"});
  EXPECT_EQ(r.Find("HEAD", "/v1/jobs").route->pattern, "/v1/jobs");  // HEAD is served by GET
}

TEST(RouterTest, UnknownPathAndWrongMethod) {
  Router r;
  r.Add(R("GET", "/v1/regions"));
  r.Add(R("PUT", "/v1/regions"));
  r.Add(R("GET", "/healthz"));
  auto m = r.Find("DELETE", "/v1/regions");
  EXPECT_EQ(m.route, nullptr);
  EXPECT_EQ(m.allow, "GET, PUT");
  m = r.Find("GET", "/v1/nothing");
  EXPECT_EQ(m.route, nullptr);
  EXPECT_EQ(m.allow, "");
  for (const char* odd : {"", "healthz", "/healthz/", "//healthz", "/v1//regions"}) {
    EXPECT_EQ(r.Find("GET", odd).route, nullptr) << odd;
  }
  EXPECT_NE(r.Find("GET", "/healthz").route, nullptr);
}

TEST(RouterDeathTest, BadPatternsAndDuplicates) {
  Router r;
  r.Add(R("GET", "/a/{x}"));
  EXPECT_DEATH(r.Add(R("GET", "/a/{x}")), "duplicate route");
  EXPECT_DEATH(r.Add(R("GET", "a")), "route pattern");
  EXPECT_DEATH(r.Add(R("GET", "/a/{x:hex}")), "route pattern");
}

}  // namespace
}  // namespace gpupool::http
