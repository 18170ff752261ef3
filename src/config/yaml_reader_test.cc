#include "src/config/yaml_reader.h"

#include <gtest/gtest.h>

#include <chrono>

namespace gpupool {
namespace {

YAML::Node Yaml(const std::string& text) { return *ParseOneYamlDocument(text, "t.yaml"); }

TEST(YamlReaderTest, MapRefusesUnknownAndDuplicateKeysAtTheirPosition) {
  const YamlReader r("t.yaml", ".");
  auto ok = r.Map(Yaml("a: 1\nb: 2\n"), "root", {"a", "b"});
  ASSERT_TRUE(ok);
  EXPECT_EQ(ok->entries.size(), 2u);
  EXPECT_EQ(ok->PathOf("a"), "root.a");
  auto unknown = r.Map(Yaml("a: 1\nc: 2\n"), "root", {"a", "b"});
  ASSERT_FALSE(unknown);
  EXPECT_EQ(unknown.error().message, "t.yaml:2:1: root.c: unknown key 'c' (expected one of: a, b)");
  auto dup = r.Map(Yaml("a: 1\na: 2\n"), "", {});
  ASSERT_FALSE(dup);
  EXPECT_EQ(dup.error().message, "t.yaml:2:1: a: duplicate key 'a'");
  EXPECT_FALSE(r.Map(Yaml("[1, 2]"), "x", {}));
  EXPECT_TRUE(r.Map(YAML::Node(), "x", {"a"}));  // null is an empty map
}

TEST(YamlReaderTest, DurationsTakeUnitsAndRefuseNegativeAndHuge) {
  const YamlReader r("t.yaml", ".");
  using namespace std::chrono;
  EXPECT_EQ(*r.ParseDuration(Yaml("90"), "d"), Duration(seconds(90)));
  EXPECT_EQ(*r.ParseDuration(Yaml("250ms"), "d"), Duration(milliseconds(250)));
  EXPECT_EQ(*r.ParseDuration(Yaml("1.5h"), "d"), Duration(minutes(90)));
  EXPECT_EQ(*r.ParseDuration(Yaml("2d"), "d"), Duration(hours(48)));
  auto unit = r.ParseDuration(Yaml("5w"), "d");
  ASSERT_FALSE(unit);
  EXPECT_NE(unit.error().message.find("units: ms, s, m, h, d"), std::string::npos);
  EXPECT_EQ(r.ParseDuration(Yaml("-1s"), "d").error().message, "t.yaml:1:1: d: must not be negative");
  EXPECT_EQ(r.ParseDuration(Yaml("1e20d"), "d").error().message, "t.yaml:1:1: d: too long");
}

TEST(YamlReaderTest, ScalarsAreTyped) {
  const YamlReader r("t.yaml", ".");
  EXPECT_EQ(*r.Integer(Yaml("+42"), "i"), 42);
  EXPECT_FALSE(r.Integer(Yaml("4.2"), "i"));
  EXPECT_FALSE(r.Number(Yaml(".nan"), "n"));
  EXPECT_FALSE(r.Number(Yaml("{a: 1}"), "n"));
  EXPECT_TRUE(*r.Bool(Yaml("true"), "b"));
  EXPECT_FALSE(r.Bool(Yaml("maybe"), "b"));
  EXPECT_FALSE(r.String(Yaml("''"), "s"));
  EXPECT_EQ(*r.String(Yaml("''"), "s", /*allow_empty=*/true), "");
  auto list = r.StringList(Yaml("[a, b, a]"), "l");
  ASSERT_FALSE(list);
  EXPECT_EQ(list.error().message, "t.yaml:1:8: l[2]: duplicate 'a'");
}

TEST(YamlReaderTest, FieldsSetOnlyWhenPresentAndCheck) {
  const YamlReader r("t.yaml", ".");
  auto f = r.Map(Yaml("cores: 1.5\nshare: 0.25\nmem: 2\nneg: -1\n"), "", {});
  ASSERT_TRUE(f);
  int64_t milli = 7;
  ASSERT_TRUE(r.ScaledField(*f, "cores", milli, 1000, Positive));
  EXPECT_EQ(milli, 1500);
  int64_t untouched = 7;
  ASSERT_TRUE(r.ScaledField(*f, "absent", untouched, 1000, Positive));
  EXPECT_EQ(untouched, 7);
  int32_t share = 0, mib = 0;
  ASSERT_TRUE(r.GpuFractionField(*f, "share", share));
  EXPECT_EQ(share, 250);
  ASSERT_TRUE(r.GpuMemoryField(*f, "mem", mib));
  EXPECT_EQ(mib, 2048);
  double v = 0;
  auto neg = r.NumberField(*f, "neg", v, NonNegative);
  ASSERT_FALSE(neg);
  EXPECT_EQ(neg.error().message, "t.yaml:4:6: neg: must not be negative");
}

TEST(YamlReaderTest, OneDocumentOnly) {
  auto two = ParseOneYamlDocument("a: 1\n---\nb: 2\n", "t.yaml");
  ASSERT_FALSE(two);
  EXPECT_NE(two.error().message.find("expected one YAML document, found 2"), std::string::npos);
  auto comma = ParseOneYamlDocument(",name: x\n", "s.yaml");  // LoadAll would never return
  ASSERT_FALSE(comma);
  EXPECT_NE(comma.error().message.find("malformed YAML"), std::string::npos) << comma.error().message;
  auto bad = ParseOneYamlDocument("a: [1, 2\n", "t.yaml");
  ASSERT_FALSE(bad);
  EXPECT_NE(bad.error().message.find("malformed YAML"), std::string::npos);
  EXPECT_TRUE(ParseOneYamlDocument("", "t.yaml")->IsNull());
}

TEST(YamlReaderTest, ResolvesRelativePathsAgainstTheFilesFolder) {
  const YamlReader r("t.yaml", "scenarios/claims");
  EXPECT_EQ(r.ResolvePath("nodes.csv"), "scenarios/claims/nodes.csv");
  EXPECT_EQ(r.ResolvePath("../x.csv"), "scenarios/x.csv");
  EXPECT_EQ(r.ResolvePath("/abs/x.csv"), "/abs/x.csv");
}

}  // namespace
}  // namespace gpupool
