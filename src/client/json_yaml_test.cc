#include "src/client/json_yaml.h"

#include <gtest/gtest.h>

namespace gpupool {
namespace {

using nlohmann::json;

// dump() tells 8 from 8.0, which json's operator== does not.
std::string Typed(std::string_view plain) {
  auto v = PlainScalarToJson(plain);
  EXPECT_TRUE(v) << plain << ": " << v.error().message;
  return v ? v->dump() : "";
}

TEST(PlainScalarToJsonTest, IntegersFollowTheCoreSchema) {
  EXPECT_EQ(Typed("8"), "8");
  EXPECT_EQ(Typed("-3"), "-3");
  EXPECT_EQ(Typed("+4"), "4");
  EXPECT_EQ(Typed("007"), "7");
  EXPECT_EQ(Typed("0x1F"), "31");
  EXPECT_EQ(Typed("0o17"), "15");
  EXPECT_EQ(Typed("9223372036854775807"), "9223372036854775807");
  EXPECT_EQ(Typed("-9223372036854775808"), "-9223372036854775808");
  EXPECT_FALSE(PlainScalarToJson("9223372036854775808"));
}

TEST(PlainScalarToJsonTest, FloatsStayFloats) {
  EXPECT_EQ(Typed("0.25"), "0.25");
  EXPECT_EQ(Typed("8.0"), "8.0");
  EXPECT_EQ(Typed(".5"), "0.5");
  EXPECT_EQ(Typed("1e3"), "1000.0");
  EXPECT_EQ(Typed("-2.5E-1"), "-0.25");
  EXPECT_EQ(Typed("1."), "1.0");
}

TEST(PlainScalarToJsonTest, BooleansAndNulls) {
  for (auto t : {"true", "True", "TRUE", "yes", "on"}) EXPECT_EQ(Typed(t), "true") << t;
  for (auto f : {"false", "False", "FALSE", "no", "off"}) EXPECT_EQ(Typed(f), "false") << f;
  for (auto n : {"", "~", "null", "Null", "NULL"}) EXPECT_EQ(Typed(n), "null") << n;
}

TEST(PlainScalarToJsonTest, DurationsTimesAndNamesAreStrings) {
  EXPECT_EQ(Typed("30s"), "\"30s\"");
  EXPECT_EQ(Typed("1h30m"), "\"1h30m\"");
  EXPECT_EQ(Typed("500ms"), "\"500ms\"");
  EXPECT_EQ(Typed("2026-11-29T12:00:00Z"), "\"2026-11-29T12:00:00Z\"");
  EXPECT_EQ(Typed("A100-80GB"), "\"A100-80GB\"");
  EXPECT_EQ(Typed("1e"), "\"1e\"");
  EXPECT_EQ(Typed("0x"), "\"0x\"");
  EXPECT_EQ(Typed("1_000"), "\"1_000\"");
  EXPECT_EQ(Typed("y"), "\"y\"");  // YAML 1.2: only the words above are booleans
}

TEST(PlainScalarToJsonTest, NonFiniteNumbersHaveNoJsonForm) {
  auto inf = PlainScalarToJson(".inf");
  ASSERT_FALSE(inf);
  EXPECT_EQ(inf.error().message, "'.inf' has no JSON form (numbers must be finite)");
  EXPECT_FALSE(PlainScalarToJson("-.Inf"));
  EXPECT_FALSE(PlainScalarToJson(".nan"));
  EXPECT_FALSE(PlainScalarToJson("1e999"));
}

TEST(YamlToJsonTest, ConvertsNestedDocuments) {
  auto j = YamlToJson(
      "a: 1\n"
      "b: [0.5, \"2\", '3', x, true]\n"
      "c:\n  d: ~\n  e: !!str 7\n  f: !!float 2\n  g: |\n    text\n"
      "h: []\n",
      "t.yaml");
  ASSERT_TRUE(j) << j.error().message;
  EXPECT_EQ(j->dump(), R"({"a":1,"b":[0.5,"2","3","x",true],"c":{"d":null,"e":"7","f":2.0,"g":"text\n"},"h":[]})");
}

TEST(YamlToJsonTest, EmptyDocumentIsNull) {
  auto j = YamlToJson("# nothing\n", "t.yaml");
  ASSERT_TRUE(j);
  EXPECT_TRUE(j->is_null());
}

TEST(YamlToJsonTest, ErrorsNameFileLineAndColumn) {
  auto dup = YamlToJson("name: a\ngpus: 1\ngpus: 2\n", "job.yaml");
  ASSERT_FALSE(dup);
  EXPECT_EQ(dup.error().message, "job.yaml:3:1: duplicate key 'gpus'");

  auto inf = YamlToJson("x:\n  y: .inf\n", "job.yaml");
  ASSERT_FALSE(inf);
  EXPECT_EQ(inf.error().message, "job.yaml:2:6: '.inf' has no JSON form (numbers must be finite)");

  auto bad_tag = YamlToJson("x: !!int abc\n", "job.yaml");
  ASSERT_FALSE(bad_tag);
  EXPECT_EQ(bad_tag.error().message, "job.yaml:1:4: 'abc' is not a valid !!int");

  auto syntax = YamlToJson("a: 1\nb: [1, 2\n", "job.yaml");
  ASSERT_FALSE(syntax);
  EXPECT_EQ(syntax.error().message.rfind("job.yaml:", 0), 0u) << syntax.error().message;
  EXPECT_NE(syntax.error().message.find("malformed YAML"), std::string::npos);

  auto two = YamlToJson("a: 1\n---\nb: 2\n", "job.yaml");
  ASSERT_FALSE(two);
  EXPECT_EQ(two.error().message, "job.yaml:3:1: expected one YAML document, found 2");
  // yaml-cpp's LoadAll never returns on this stream; it is refused instead.
  auto comma = YamlToJson(",\n", "job.yaml");
  ASSERT_FALSE(comma);
  EXPECT_NE(comma.error().message.find("job.yaml:1:1: malformed YAML"), std::string::npos) << comma.error().message;

  auto key = YamlToJson("? [a]\n: 1\n", "job.yaml");
  ASSERT_FALSE(key);
  EXPECT_EQ(key.error().message, "job.yaml:1:3: expected a name as key");
}

TEST(JsonToYamlTest, PrintsBlockYaml) {
  const json j = {{"id", 17}, {"state", "running"}, {"placements", json::array({{{"node", "n1"}, {"gpus", {0, 1}}}})}};
  EXPECT_EQ(JsonToYaml(j),
            "id: 17\n"
            "placements:\n"
            "  - gpus:\n"
            "      - 0\n"
            "      - 1\n"
            "    node: n1\n"
            "state: running\n");
}

TEST(JsonToYamlTest, QuotesStringsThatWouldReadAsOtherTypes) {
  const json j = {{"a", "8"}, {"b", "true"}, {"c", ""}, {"d", "null"}, {"e", "0.25"}, {"f", "30s"}};
  EXPECT_EQ(JsonToYaml(j),
            "a: \"8\"\n"
            "b: \"true\"\n"
            "c: \"\"\n"
            "d: \"null\"\n"
            "e: \"0.25\"\n"
            "f: 30s\n");
}

TEST(JsonToYamlTest, RoundTripsEveryType) {
  const json j = json::parse(R"({
    "int": 8, "neg": -3, "float": 0.25, "whole_float": 2.0, "tiny": 1e-7, "yes": true, "no": false,
    "nothing": null, "str": "A100-80GB", "numstr": "42", "boolstr": "yes", "empty": "",
    "list": [1, "1", [], {}], "map": {"next_after": null, "0": "zero"},
    "text": "two\nlines", "colon": "a: b", "hash": "x #y", "quote": "it's \"q\""
  })");
  const std::string yaml = JsonToYaml(j);
  auto back = YamlToJson(yaml, "round-trip");
  ASSERT_TRUE(back) << back.error().message << "\n" << yaml;
  EXPECT_EQ(back->dump(), j.dump()) << yaml;
}

}  // namespace
}  // namespace gpupool
