#include "src/config/yaml_edit.h"

#include <gtest/gtest.h>

namespace gpupool {
namespace {

TEST(YamlEditTest, SetsValuesByKeyIndexAndName) {
  YAML::Node root = YAML::Load("engine: {policy: best}\ntenants:\n  - {name: a, quota: {gpu: {limit_gpus: 8}}}\n"
                               "  - {name: b}\nlist: [1, 2]\n");
  ASSERT_TRUE(SetYamlPath(root, "engine.policy", "FGD").has_value());
  ASSERT_TRUE(SetYamlPath(root, "engine.lending", "x").has_value());  // a new key of an existing map
  ASSERT_TRUE(SetYamlPath(root, "tenants[a].quota.gpu.limit_gpus", "16").has_value());
  ASSERT_TRUE(SetYamlPath(root, "tenants[1].name", "c").has_value());
  ASSERT_TRUE(SetYamlPath(root, "list[0]", "7").has_value());
  const YAML::Node back = YAML::Load(YamlText(root));
  EXPECT_EQ(back["engine"]["policy"].as<std::string>(), "FGD");
  EXPECT_EQ(back["tenants"][0]["quota"]["gpu"]["limit_gpus"].as<int>(), 16);
  EXPECT_EQ(back["tenants"][1]["name"].as<std::string>(), "c");
  EXPECT_EQ(back["list"][0].as<int>(), 7);
  auto got = GetYamlPath(root, "tenants[a].quota.gpu.limit_gpus");
  ASSERT_TRUE(got.has_value() && got->has_value());
  EXPECT_EQ(**got, "16");
  auto missing = GetYamlPath(root, "engine.seed");
  ASSERT_TRUE(missing.has_value());
  EXPECT_FALSE(missing->has_value()) << "a key not in the file: the reader's default applies";
}

TEST(YamlEditTest, APathThatIsNotInTheFileIsNamed) {
  YAML::Node root = YAML::Load("engine: {policy: best}\ntenants: [{name: a}]\n");
  EXPECT_NE(SetYamlPath(root, "tenants[z].quota", "1").error().message.find("tenants[z] is not in the file"),
            std::string::npos);
  EXPECT_NE(SetYamlPath(root, "pools[gpu].x", "1").error().message.find("pools[gpu] is not in the file"),
            std::string::npos);
  ASSERT_TRUE(SetYamlPath(root, "engine.lending.share", "0.3").has_value()) << "maps left to defaults are added";
  EXPECT_EQ(root["engine"]["lending"]["share"].as<double>(), 0.3);
  auto absent = GetYamlPath(root, "server.http.max_connections");
  ASSERT_TRUE(absent.has_value());
  EXPECT_FALSE(absent->has_value());
  EXPECT_NE(SetYamlPath(root, "engine[0]", "1").error().message.find("not a list"), std::string::npos);
  EXPECT_FALSE(ParseYamlPath("").has_value());
  EXPECT_FALSE(ParseYamlPath("a..b").has_value());
  EXPECT_FALSE(ParseYamlPath("a.").has_value());
  EXPECT_FALSE(ParseYamlPath("a[]").has_value());
  EXPECT_FALSE(ParseYamlPath("a[0]b").has_value());
  EXPECT_EQ(ParseYamlPath("a.b.c.d.e.f.g.h.i.j.k.l.m.n.o.p.q").error().code, ErrorCode::kInvalidArgument);
  EXPECT_FALSE(GetYamlPath(root, "engine").has_value()) << "a map is not a single value";
}

}  // namespace
}  // namespace gpupool
