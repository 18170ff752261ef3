#include "src/base/json_text.h"

#include <string>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace gpupool {
namespace {

using ::testing::HasSubstr;

std::string ErrorOf(std::string_view text, JsonLimits limits = {}) {
  auto r = ParseJsonText(text, limits);
  EXPECT_FALSE(r) << text;
  return r ? "" : r.error().message;
}

TEST(JsonTextTest, ParsesWhatIsValid) {
  auto r = ParseJsonText(R"( {"a": [1, 2.5, "x", null, true], "b": {"c": -3}} )");
  ASSERT_TRUE(r) << r.error().message;
  EXPECT_EQ((*r)["a"][1], 2.5);
  EXPECT_EQ((*r)["b"]["c"], -3);
  // A number too large for int64 but within a double is a double.
  auto big = ParseJsonText("123456789012345678901234567890");
  ASSERT_TRUE(big);
  EXPECT_TRUE(big->is_number_float());
}

TEST(JsonTextTest, NumbersBeyondADoubleAreAnErrorNotAnException) {
  EXPECT_THAT(ErrorOf(R"({"gpus": 1e999})"), HasSubstr("number overflow"));
  EXPECT_THAT(ErrorOf("-1e400"), HasSubstr("number overflow"));
}

TEST(JsonTextTest, RefusesNonJsonNumbersAndBadUtf8) {
  EXPECT_THAT(ErrorOf("NaN"), HasSubstr("line 1"));
  EXPECT_THAT(ErrorOf("Infinity"), HasSubstr("line 1"));
  EXPECT_THAT(ErrorOf("\"\xff\xfe\""), HasSubstr("UTF-8"));
  EXPECT_THAT(ErrorOf("{\"a\": 1,\n \"b\": }"), HasSubstr("line 2"));
  EXPECT_THAT(ErrorOf("{} {}"), HasSubstr("end of input"));
  EXPECT_THAT(ErrorOf("/* comment */ {}"), HasSubstr("line 1"));
}

TEST(JsonTextTest, RefusesRepeatedKeysAtAnyDepth) {
  EXPECT_THAT(ErrorOf(R"({"a": 1, "a": 2})"), HasSubstr("key 'a' given twice"));
  EXPECT_THAT(ErrorOf(R"({"x": [{"k": 1, "k": 1}]})"), HasSubstr("key 'k' given twice"));
  // The same key in sibling objects is fine.
  EXPECT_TRUE(ParseJsonText(R"([{"k": 1}, {"k": 2}])"));
}

TEST(JsonTextTest, LimitsDepthAndSize) {
  const std::string deep = std::string(65, '[') + std::string(65, ']');
  EXPECT_THAT(ErrorOf(deep), HasSubstr("deeper than 64"));
  const std::string ok = std::string(64, '[') + std::string(64, ']');
  EXPECT_TRUE(ParseJsonText(ok));
  // A million levels are refused at the limit, not after building them.
  EXPECT_THAT(ErrorOf(std::string(1'000'000, '['), {.max_bytes = 2'000'000, .max_depth = 64}),
              HasSubstr("deeper than 64"));
  EXPECT_THAT(ErrorOf(R"({"a": "0123456789"})", {.max_bytes = 10, .max_depth = 64}), HasSubstr("more than the 10"));
}

TEST(JsonTextTest, LimitsTheNumberOfValuesWhateverTheirNesting) {
  const JsonLimits four{.max_values = 4};
  EXPECT_TRUE(ParseJsonText("[1, 2, 3]", four));       // the array and three numbers
  EXPECT_TRUE(ParseJsonText(R"({"a": [], "b": 1})", four));  // keys are not values
  EXPECT_TRUE(ParseJsonText("[[], [], 1]", four));
  EXPECT_THAT(ErrorOf("[1, 2, 3, 4]", four), HasSubstr("more than 4 values"));
  EXPECT_THAT(ErrorOf("[[], [], 1, 2]", four), HasSubstr("more than 4 values"));
  EXPECT_THAT(ErrorOf(R"({"a": {}, "b": {}, "c": {}, "d": 1})", four), HasSubstr("more than 4 values"));
  // A megabyte of tiny values is refused as it is read.
  std::string many = "[";
  while (many.size() < (1u << 20)) many += "1,";
  many += "1]";
  EXPECT_THAT(ErrorOf(many, {.max_values = 20000}), HasSubstr("more than 20000 values"));
}

}  // namespace
}  // namespace gpupool
