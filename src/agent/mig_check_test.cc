#include "src/agent/mig_check.h"

#include <gtest/gtest.h>

#include "src/agent/fake_backend.h"
#include "tests/run_binary.h"

namespace gpupool {
namespace {

FakeBackend Fake(const std::string& spec) {
  auto gpus = ParseFakeGpus(spec, "n");
  EXPECT_TRUE(gpus.has_value()) << gpus.error().message;
  return FakeBackend(*gpus);
}

TEST(MigCheckTest, CreatesListsAndDestroysTheSmallestFreeInstanceAndLeavesTheRest) {
  FakeBackend b = Fake("H100:mig=1g.10gb@0");
  auto r = RunMigCheck(b, 0);
  ASSERT_TRUE(r.has_value()) << r.error().message;
  EXPECT_EQ((*r)["profile"], "1g.10gb");
  EXPECT_EQ((*r)["start"], 1) << "slice 0 holds the existing instance";
  EXPECT_GE((*r)["create_ms"].get<double>(), 0);
  auto after = b.ListMigInstances(0);
  ASSERT_TRUE(after.has_value());
  ASSERT_EQ(after->size(), 1u) << "the operator's instance stays, the check's is gone";
  EXPECT_EQ((*after)[0].start, 0);
}

TEST(MigCheckTest, RefusesWhatItCannotDoNamingWhy) {
  FakeBackend plain = Fake("H100");
  auto r = RunMigCheck(plain, 0);
  ASSERT_FALSE(r.has_value());
  EXPECT_NE(r.error().message.find("not in MIG mode"), std::string::npos) << r.error().message;
  FakeBackend full = Fake("H100:mig=7g.80gb@0");
  r = RunMigCheck(full, 0);
  ASSERT_FALSE(r.has_value());
  EXPECT_NE(r.error().message.find("no free placement"), std::string::npos) << r.error().message;
  r = RunMigCheck(full, 3);
  ASSERT_FALSE(r.has_value());
  EXPECT_NE(r.error().message.find("no GPU 3"), std::string::npos) << r.error().message;
}

TEST(MigCheckTest, TheAgentCommandPrintsTheRoundTrip) {
  const auto run = testing::RunGpupool({"agent", "--fake-gpus", "A100-80GB:mig", "--mig-check", "0"});
  ASSERT_EQ(run.exit_code, 0) << run.err;
  const auto out = nlohmann::json::parse(run.out, nullptr, false);
  EXPECT_EQ(out["profile"], "1g.10gb") << run.out;
  EXPECT_EQ(out["start"], 0);
  const auto refused = testing::RunGpupool({"agent", "--fake-gpus", "A100-80GB", "--mig-check", "0"});
  EXPECT_EQ(refused.exit_code, 1);
  EXPECT_NE(refused.err.find("not in MIG mode"), std::string::npos) << refused.err;
}

}  // namespace
}  // namespace gpupool
