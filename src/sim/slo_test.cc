#include "src/sim/slo.h"

#include <gtest/gtest.h>

namespace gpupool {
namespace {

SimReport Report(double high_p95, double share_a, int64_t completed) {
  SimReport r;
  r.all.completed = completed;
  r.by_priority["high"].wait_s.p95 = high_p95;
  r.by_priority["low"].wait_s.p95 = 100;
  r.by_tenant["a"].share_received_pct = share_a;
  r.by_tenant["a"].entitlement_guaranteed_pct = 40;
  r.by_tenant["b"].share_received_pct = 10;  // no guarantee
  return r;
}

TEST(SloTest, IdenticalReportsHoldEveryDefaultObjective) {
  const SimReport r = Report(10, 30, 100);
  const auto v = CheckSlo(DefaultSlo(), r, r);
  EXPECT_TRUE(AllHold(v)) << FormatSloTable(v);
  // Two classes, two tenants, the pool.
  EXPECT_EQ(v.size(), 5u) << FormatSloTable(v);
  EXPECT_NE(FormatSloTable(v).find("no guarantee"), std::string::npos) << FormatSloTable(v);
}

TEST(SloTest, ARelativeBoundAllowsItsSlackAndBreaksPastIt) {
  auto slo = ParseSlo("rules:\n  - {measure: wait_p95_s, priority: high, max_increase_pct: 10, slack: 1}\n", "s.yaml");
  ASSERT_TRUE(slo.has_value()) << slo.error().message;
  EXPECT_TRUE(AllHold(CheckSlo(*slo, Report(10, 30, 1), Report(12, 30, 1))));  // 10 x 1.1 + 1 = 12
  const auto broken = CheckSlo(*slo, Report(10, 30, 1), Report(12.5, 30, 1));
  ASSERT_EQ(broken.size(), 1u);
  EXPECT_FALSE(broken[0].holds);
  ASSERT_TRUE(broken[0].limit.has_value());
  EXPECT_DOUBLE_EQ(*broken[0].limit, 12);
  EXPECT_NE(FormatSloTable(broken).find("BROKEN"), std::string::npos);
}

TEST(SloTest, AGuaranteeIsOwedOnlyAsFarAsTheTenantUsedIt) {
  auto slo = ParseSlo("rules:\n  - {measure: guarantee_share_pct, tenant: a, min: 95}\n", "s.yaml");
  ASSERT_TRUE(slo.has_value()) << slo.error().message;
  // Owed min(40, 30) = 30: 28.6 is 95.3% of it.
  EXPECT_TRUE(AllHold(CheckSlo(*slo, Report(1, 30, 1), Report(1, 28.6, 1))));
  EXPECT_FALSE(AllHold(CheckSlo(*slo, Report(1, 30, 1), Report(1, 28, 1))));
  // Owed the whole guarantee when it had more.
  EXPECT_FALSE(AllHold(CheckSlo(*slo, Report(1, 50, 1), Report(1, 37, 1))));
}

TEST(SloTest, AbsoluteBoundsAndAScopeWithNoJobs) {
  auto slo = ParseSlo("rules:\n  - {measure: wait_p95_s, priority: urgent, max: 5}\n"
                      "  - {measure: completed, min: 50}\n",
                      "s.yaml");
  ASSERT_TRUE(slo.has_value()) << slo.error().message;
  const auto v = CheckSlo(*slo, Report(1, 1, 100), Report(1, 1, 40));
  ASSERT_EQ(v.size(), 2u);
  EXPECT_TRUE(v[0].holds);
  EXPECT_EQ(v[0].note, "no jobs");
  EXPECT_FALSE(v[1].holds);
}

TEST(SloTest, BadFilesAreNamedWithTheirPosition) {
  const auto error = [](const char* text) {
    auto r = ParseSlo(text, "slo.yaml");
    return r ? std::string("(parsed)") : r.error().message;
  };
  EXPECT_NE(error("rules:\n  - measure: wait_p99_s\n    max: 1\n").find("slo.yaml:2:14: rules[0].measure: unknown "
                                                                      "measure 'wait_p99_s'"),
            std::string::npos)
      << error("rules:\n  - measure: wait_p99_s\n    max: 1\n");
  EXPECT_NE(error("rules:\n  - measure: allocation_pct\n").find("rules[0]: no bound"), std::string::npos);
  EXPECT_NE(error("rules:\n  - {measure: allocation_pct, tenant: a, min: 1}\n").find("has no tenant scope"),
            std::string::npos);
  EXPECT_NE(error("rules:\n  - {measure: guarantee_share_pct, min: 1}\n").find("needs a tenant"), std::string::npos);
  EXPECT_NE(error("rules:\n  - {measure: completed, max_decrease_pct: 120}\n").find("rules[0].max_decrease_pct"),
            std::string::npos);
  EXPECT_NE(error("rules:\n  - {measure: completed, min: 1, colour: red}\n").find("unknown key 'colour'"),
            std::string::npos);
  EXPECT_NE(error("rules: []\n").find("expected a list of at least one of the rules"), std::string::npos);
  EXPECT_NE(error("rules: [\n").find("slo.yaml:"), std::string::npos);
}

}  // namespace
}  // namespace gpupool
