// examples/production/server.yaml, the configuration the package installs as
// /etc/gpupool/server.yaml (issue 23), starts a real server: its four pools,
// 52 nodes, four tenants with their three tiers, scaling, regions and
// provider are all accepted, and a tenant's job lands in its pool.
#include <gtest/gtest.h>

#include <fstream>
#include <sstream>

#include "tests/configured_server.h"

namespace gpupool::testing {
namespace {

using nlohmann::json;

std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

class ProductionExampleTest : public ConfiguredServerTest {};

TEST_F(ProductionExampleTest, StartsWithItsPoolsTenantsAndNodes) {
  const std::string config = ReadFile(std::string(GPUPOOL_SOURCE_DIR) + "/examples/production/server.yaml");
  ASSERT_FALSE(config.empty());
  ASSERT_NO_FATAL_FAILURE(StartServer(config));

  auto pools = Http(*server_, "GET", "/v1/pools", admin_);
  ASSERT_EQ(pools.status, 200) << pools.text;
  std::map<std::string, int64_t> gpus;
  for (const json& p : pools.body["pools"]) gpus[p["name"]] = static_cast<int64_t>(p["capacity"]["total_gpus"].get<double>());
  EXPECT_EQ(gpus, (std::map<std::string, int64_t>{{"h100", 128}, {"a100", 192}, {"inference-east", 32},
                                                   {"inference-west", 16}}))
      << pools.text;

  auto tenants = Http(*server_, "GET", "/v1/tenants", admin_);
  ASSERT_EQ(tenants.status, 200) << tenants.text;
  EXPECT_EQ(tenants.body["tenants"].size(), 4u) << tenants.text;

  // A tenant's token from the bootstrap runs a job in its own pool.
  const std::string token = ReadFile(root_ + "/data/tokens/applied-ml.token");
  ASSERT_FALSE(token.empty());
  auto job = Http(*server_, "POST", "/v1/jobs", token.substr(0, token.find_first_of("\r\n")),
                  json{{"name", "smoke"}, {"kind", "training"}, {"gpus", 8}, {"pools", {"a100"}},
                       {"image", "host"}, {"command", {"true"}}});
  ASSERT_EQ(job.status, 201) << job.text;
}

}  // namespace
}  // namespace gpupool::testing
