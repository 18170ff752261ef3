#include "src/sim/tune.h"

#include <gtest/gtest.h>
#include <yaml-cpp/yaml.h>

namespace gpupool {
namespace {

constexpr const char* kBase = "engine:\n  lending:\n    share: 0.5\ntenants:\n  - name: a\n    limit: 10\n";
constexpr const char* kSpace = "parameters:\n  - {path: engine.lending.share, min: 0, max: 1}\n"
                               "  - {path: 'tenants[a].limit', min: 0, max: 100, integer: true}\n";

// allocation_pct peaks at 100 where share = 0.3 and limit = 40 (known by construction).
Result<SimReport> Peaked(const std::string& text) {
  const YAML::Node n = YAML::Load(text);
  const double x = n["engine"]["lending"]["share"].as<double>();
  const double y = n["tenants"][0]["limit"].as<double>();
  SimReport r;
  r.allocation_pct_mean = 100 - (x - 0.3) * (x - 0.3) * 100 - (y - 40) * (y - 40) / 10;
  r.all.wait_s.p95 = y;  // a second measure in tension with the first below 40
  return r;
}

TuneOptions Options(int parallel) {
  TuneOptions o;
  o.budget = 64;
  o.seed = 3;
  o.parallel = parallel;
  o.objective = *ParseTuneMeasure("allocation_pct", "--objective");
  o.front = *ParseTuneMeasure("wait_p95_s", "--front");
  return o;
}

TEST(TuneTest, FindsAKnownOptimumWithinFivePercent) {
  auto space = ParseTuneSpace(kSpace, "space.yaml");
  ASSERT_TRUE(space.has_value()) << space.error().message;
  auto r = Tune(*space, kBase, Peaked, Options(2));
  ASSERT_TRUE(r.has_value()) << r.error().message;
  ASSERT_EQ(r->runs.size(), 64u);
  EXPECT_TRUE(r->runs[0].baseline);
  EXPECT_EQ(r->runs[0].values[0], "0.5");  // the baseline's values, read from the file
  ASSERT_FALSE(r->best.empty());
  EXPECT_GE(*r->runs[r->best[0]].objective, 95.0) << FormatTuneResult(*space, *r, Options(2));
  // The front: no run on it is beaten on both measures by another.
  ASSERT_FALSE(r->pareto.empty());
  for (const size_t i : r->pareto) {
    for (const TuneRun& other : r->runs) {
      EXPECT_FALSE(*other.objective > *r->runs[i].objective && *other.front < *r->runs[i].front);
    }
  }
  auto best = TunedConfigText(*space, kBase, r->runs[r->best[0]]);
  ASSERT_TRUE(best.has_value());
  EXPECT_NE(best->find("limit: " + r->runs[r->best[0]].values[1]), std::string::npos) << *best;
}

TEST(TuneTest, TheSameSeedGivesTheSameResultWhateverRunsInParallel) {
  auto space = ParseTuneSpace(kSpace, "space.yaml");
  ASSERT_TRUE(space.has_value());
  auto one = Tune(*space, kBase, Peaked, Options(1));
  auto four = Tune(*space, kBase, Peaked, Options(4));
  ASSERT_TRUE(one.has_value() && four.has_value());
  ASSERT_EQ(one->runs.size(), four->runs.size());
  for (size_t i = 0; i < one->runs.size(); ++i) EXPECT_EQ(one->runs[i].values, four->runs[i].values) << i;
  EXPECT_EQ(one->best, four->best);
}

TEST(TuneTest, ARunThatFailsIsKeptWithItsMessage) {
  auto space = ParseTuneSpace("parameters:\n  - {path: engine.lending.share, values: [0.2, bad]}\n", "s.yaml");
  ASSERT_TRUE(space.has_value());
  TuneOptions o = Options(1);
  o.budget = 8;
  auto r = Tune(*space, kBase, [](const std::string& text) -> Result<SimReport> {
    if (text.find("bad") != std::string::npos) return InvalidArgument("engine.lending.share: expected a number");
    return SimReport{};
  }, o);
  ASSERT_TRUE(r.has_value());
  bool failed = false;
  for (const TuneRun& run : r->runs) failed |= run.error == "engine.lending.share: expected a number";
  EXPECT_TRUE(failed);
}

TEST(TuneTest, BadSpacesAndMeasuresAreNamed) {
  const auto error = [](const char* text) {
    auto r = ParseTuneSpace(text, "space.yaml");
    return r ? std::string("(parsed)") : r.error().message;
  };
  EXPECT_NE(error("parameters:\n  - {path: a, min: 2, max: 1}\n").find("space.yaml:2:"), std::string::npos);
  EXPECT_NE(error("parameters:\n  - {path: a, min: 2, max: 1}\n").find("is below min"), std::string::npos);
  EXPECT_NE(error("parameters:\n  - {path: a, values: [1], min: 0}\n").find("not both"), std::string::npos);
  EXPECT_NE(error("parameters:\n  - {path: 'a[', min: 0, max: 1}\n").find("'[' without ']'"), std::string::npos);
  EXPECT_NE(error("parameters:\n  - {path: a, min: 0, max: 1}\n  - {path: a, min: 0, max: 1}\n").find("given twice"),
            std::string::npos);
  EXPECT_NE(error("parameters: []\n").find("at least one"), std::string::npos);
  EXPECT_FALSE(ParseTuneMeasure("wait_p99_s", "--objective").has_value());
  EXPECT_NE(ParseTuneMeasure("guarantee_share_pct", "--objective").error().message.find("tenant=NAME"),
            std::string::npos);
  EXPECT_FALSE(ParseTuneMeasure("allocation_pct:tenant=a", "--objective").has_value());
  EXPECT_TRUE(ParseTuneMeasure("wait_p95_s:priority=high", "--objective").has_value());
  auto space = ParseTuneSpace("parameters:\n  - {path: 'tenants[z].limit', min: 0, max: 1}\n", "s.yaml");
  ASSERT_TRUE(space.has_value());
  auto r = Tune(*space, kBase, Peaked, Options(1));
  ASSERT_FALSE(r.has_value());
  EXPECT_NE(r.error().message.find("tenants[z] is not in the file"), std::string::npos) << r.error().message;
}

}  // namespace
}  // namespace gpupool
