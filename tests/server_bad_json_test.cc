// Hostile JSON bodies get a 400 naming `body`, never a 500 (issue 22: a number
// such as 1e999 used to raise a library exception that became a 500 with the
// library's text), and the server keeps answering.
#include <gtest/gtest.h>

#include <string>
#include <utility>
#include <vector>

#include "tests/configured_server.h"

namespace gpupool::testing {
namespace {

class ServerBadJsonTest : public ConfiguredServerTest {};

TEST_F(ServerBadJsonTest, EveryHostileBodyIsA400NamingTheBody) {
  ASSERT_NO_FATAL_FAILURE(StartServer("name: bad-json\npools: [{name: default}]\n"));
  const std::vector<std::pair<std::string, std::string>> bodies = {
      {"overflowing number", R"({"name": "x", "gpus": 1e999})"},
      {"negative overflow", R"({"name": "x", "gpus": -1e400})"},
      {"repeated key", R"({"name": "x", "name": "y", "gpus": 1})"},
      {"deep nesting", std::string(10000, '[') + std::string(10000, ']')},
      {"invalid UTF-8", "{\"name\": \"\xff\xfe\", \"gpus\": 1}"},
      {"NaN", R"({"name": "x", "gpus": NaN})"},
      {"two values", R"({"name": "x"} {"name": "y"})"},
      {"truncated", R"({"name": "x", "gpus": )"},
  };
  for (const auto& [what, body] : bodies) {
    for (const char* path : {"/v1/jobs", "/v1/tenants"}) {
      auto r = HttpRaw(*server_, "POST", path, admin_, body);
      EXPECT_EQ(r.status, 400) << what << " to " << path << ": " << r.text;
      EXPECT_EQ(r.body["error"].value("field", ""), "body") << what << ": " << r.text;
    }
  }
  EXPECT_EQ(Http(*server_, "GET", "/healthz", "").status, 200);
}

}  // namespace
}  // namespace gpupool::testing
