// What-if on a synthetic month (issue 20): a 64-GPU pool's month run
// through the daemon's Engine by the simulator and written as a server's
// journal (src/cli/testing/synthetic_history.h), then read back by the
// real binary: replayed under the configuration it recorded, the month is
// reproduced; `config check` passes the same configuration and fails one
// that obviously hurts.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "src/cli/testing/synthetic_history.h"
#include "tests/run_binary.h"

namespace gpupool::testing {
namespace {

using nlohmann::json;

class WhatifMonthTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    root_ = new std::string(MakeTempDir());
    month_ = SyntheticMonth(/*nodes=*/8, /*days=*/30, /*load=*/0.8, /*seed=*/7);
    auto written = WriteSyntheticJournal(month_, *root_ + "/data");
    ASSERT_TRUE(written.has_value()) << written.error().message;
    journal_ = *written;
  }
  static void TearDownTestSuite() {
    std::filesystem::remove_all(*root_);
    delete root_;
  }
  static std::string* root_;
  static SyntheticHistory month_;
  static SyntheticJournal journal_;
};
std::string* WhatifMonthTest::root_ = nullptr;
SyntheticHistory WhatifMonthTest::month_;
SyntheticJournal WhatifMonthTest::journal_;

TEST_F(WhatifMonthTest, ReplayUnderTheRecordedConfigurationReproducesTheMonth) {
  ASSERT_GT(journal_.jobs, 3'000) << "a month at 80% of 64 GPUs";
  const BinaryRun r = RunGpupool({"sim", "replay", "--from", *root_ + "/data", "--json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const json j = json::parse(r.out);
  const json& f = j["fidelity"];
  EXPECT_GT(f["compared"].get<int64_t>(), journal_.jobs * 9 / 10) << f.dump();
  EXPECT_EQ(f["started_in_one_only"].get<int64_t>(), 0) << f.dump();
  // The same Engine, the same configuration, the same arrivals and work:
  // every job starts at the same instant on the same GPUs.
  EXPECT_EQ(f["start_error_max_s"].get<double>(), 0.0) << f.dump();
  EXPECT_EQ(f["placement_differs"].get<int64_t>(), 0) << f.dump();
  EXPECT_EQ(f["order_differs"].get<int64_t>(), 0) << f.dump();
  EXPECT_NE(j["in_force_config"].get<std::string>().find("as recorded in the journal"), std::string::npos);
}

TEST_F(WhatifMonthTest, ConfigCheckPassesTheSameConfigurationAndFailsATinyLimit) {
  std::ofstream(*root_ + "/same.yaml") << month_.ServerConfigText();
  const BinaryRun same = RunGpupool({"config", "check", *root_ + "/same.yaml", "--against", *root_ + "/data"});
  EXPECT_EQ(same.exit_code, 0) << same.out << same.err;

  // The interns may hold 4 GPUs instead of 32: their jobs wait and fewer complete.
  std::string tight = month_.ServerConfigText();
  const std::string from = "interns, quota: {gpu: {guaranteed_gpus: 0, limit_gpus: 32}}";
  ASSERT_NE(tight.find(from), std::string::npos) << tight;
  tight.replace(tight.find(from), from.size(), "interns, quota: {gpu: {guaranteed_gpus: 0, limit_gpus: 4}}");
  std::ofstream(*root_ + "/tight.yaml") << tight;
  const BinaryRun hurt = RunGpupool({"config", "check", *root_ + "/tight.yaml", "--against", *root_ + "/data",
                                     "--json"});
  EXPECT_EQ(hurt.exit_code, 1) << hurt.out.substr(0, 4000) << hurt.err;
  const json j = json::parse(hurt.out);
  EXPECT_FALSE(j["holds"].get<bool>());
  bool interns_broken = false;  // their share, or what completes
  for (const json& rule : j["rules"]) {
    const std::string name = rule["rule"];
    if (!rule["holds"].get<bool>() && (name == "guarantee_share_pct, tenant interns" || name == "completed" ||
                                       name.starts_with("wait_p95_s"))) {
      interns_broken = true;
    }
  }
  EXPECT_TRUE(interns_broken) << j["rules"].dump(2);
}

// `sim tune` over the journal: the candidates replay the month.
TEST_F(WhatifMonthTest, TuneSearchesThePoolsOwnHistory) {
  std::ofstream(*root_ + "/space.yaml")
      << "parameters:\n  - {path: 'tenants[interns].quota.gpu.limit_gpus', min: 4, max: 64, integer: true}\n";
  const BinaryRun r = RunGpupool({"sim", "tune", "--from", *root_ + "/data", "--space", *root_ + "/space.yaml",
                                  "--objective", "completed", "--budget", "4", "--parallel", "2", "--json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const json j = json::parse(r.out);
  ASSERT_EQ(j["runs"].size(), 4u);
  EXPECT_TRUE(j["runs"][0]["baseline"].get<bool>());
  EXPECT_EQ(j["runs"][0]["values"]["tenants[interns].quota.gpu.limit_gpus"], "32") << "read from the recorded file";
  const double baseline = j["runs"][0]["objective"].get<double>();
  EXPECT_GT(baseline, 3'000);
  EXPECT_GE(j["runs"][j["best"][0].get<size_t>()]["objective"].get<double>(), baseline);
  EXPECT_NE(j["source"].get<std::string>().find("as recorded in the journal"), std::string::npos);
}

}  // namespace
}  // namespace gpupool::testing
