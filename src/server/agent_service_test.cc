#include "src/server/agent_service.h"

#include <gtest/gtest.h>

namespace gpupool {
namespace {

TEST(AgentServiceTest, ScrubOrdersSurviveTheirRecord) {
  AgentService a(std::chrono::seconds(5), std::chrono::seconds(30), nullptr);
  ASSERT_TRUE(a.LoadScrubs(R"({"version":1,"nodes":{"2":[[17,5],[20,2]],"0":[[3,1]]}})", 3).has_value());
  AgentService b(std::chrono::seconds(5), std::chrono::seconds(30), nullptr);
  ASSERT_TRUE(b.LoadScrubs(a.EncodeScrubs(), 3).has_value());
  EXPECT_EQ(b.EncodeScrubs(), a.EncodeScrubs());
  EXPECT_NE(a.EncodeScrubs().find("[17,5]"), std::string::npos) << a.EncodeScrubs();
  // Damaged records are errors, not crashes.
  for (const char* bad : {"", "[]", R"({"version":2,"nodes":{}})", R"({"version":1,"nodes":{"9":[[1,1]]}})",
                          R"({"version":1,"nodes":{"x":[[1,1]]}})", R"({"version":1,"nodes":{"0":[[1]]}})",
                          R"({"version":1,"nodes":{"0":[["a",1]]}})"}) {
    AgentService c(std::chrono::seconds(5), std::chrono::seconds(30), nullptr);
    EXPECT_FALSE(c.LoadScrubs(bad, 3).has_value()) << bad;
  }
}

}  // namespace
}  // namespace gpupool
