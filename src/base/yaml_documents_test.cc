// CountYamlDocuments: the inputs on which yaml-cpp 0.7's LoadAll never
// returns end with `stuck`, and ordinary streams are counted.
#include "src/base/yaml_documents.h"

#include <gtest/gtest.h>

namespace gpupool {
namespace {

TEST(YamlDocumentsTest, CountsDocuments) {
  EXPECT_EQ(CountYamlDocuments("").count, 0u);
  EXPECT_EQ(CountYamlDocuments("# only a comment\n").count, 0u);
  const YamlDocuments one = CountYamlDocuments("a: 1\n");
  EXPECT_EQ(one.count, 1u);
  EXPECT_FALSE(one.second);
  EXPECT_FALSE(one.stuck);
  const YamlDocuments two = CountYamlDocuments("a: 1\n---\nb: 2\n");
  EXPECT_EQ(two.count, 2u);
  ASSERT_TRUE(two.second);
  EXPECT_EQ(two.second->line, 2);  // 0-based: "b: 2"
  EXPECT_EQ(CountYamlDocuments("a\n---\nb\n---\nc\n", 2).count, 2u);  // the bound
}

// Each of these makes YAML::LoadAll loop for ever (found by fuzz/job_file_fuzz.cc).
TEST(YamlDocumentsTest, AStreamTheParserCannotReadOnIsStuckNotEndless) {
  for (const char* text : {",", ",\n", ",name: x\n", "# note\n,\n##\n"}) {
    const YamlDocuments d = CountYamlDocuments(text);
    EXPECT_TRUE(d.stuck) << text;
    EXPECT_LE(d.count, 1u) << text;
  }
}

}  // namespace
}  // namespace gpupool
