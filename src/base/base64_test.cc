#include "src/base/base64.h"

#include <gtest/gtest.h>

namespace gpupool {
namespace {

TEST(Base64Test, EncodesTheRfc4648Vectors) {
  EXPECT_EQ(Base64Encode(""), "");
  EXPECT_EQ(Base64Encode("f"), "Zg==");
  EXPECT_EQ(Base64Encode("fo"), "Zm8=");
  EXPECT_EQ(Base64Encode("foo"), "Zm9v");
  EXPECT_EQ(Base64Encode("foob"), "Zm9vYg==");
  EXPECT_EQ(Base64Encode("fooba"), "Zm9vYmE=");
  EXPECT_EQ(Base64Encode("foobar"), "Zm9vYmFy");
}

TEST(Base64Test, DecodesWhatItEncodesForEveryByteValue) {
  std::string all;
  for (int i = 0; i < 256; ++i) all.push_back(static_cast<char>(i));
  for (size_t n = 0; n <= all.size(); n += 37) {
    const std::string part = all.substr(0, n);
    auto back = Base64Decode(Base64Encode(part));
    ASSERT_TRUE(back) << back.error().message;
    EXPECT_EQ(*back, part);
  }
  EXPECT_EQ(*Base64Decode("Zm9vYmE="), "fooba");
}

TEST(Base64Test, RefusesMalformedText) {
  EXPECT_EQ(Base64Decode("Zm9").error().message, "base64: length 3 is not a multiple of 4");
  EXPECT_EQ(Base64Decode("Zm!v").error().message, "base64: bad character at offset 2");
  EXPECT_FALSE(Base64Decode("Z===").has_value());
  EXPECT_FALSE(Base64Decode("Zg==Zm9v").has_value());  // padding only at the very end
  EXPECT_FALSE(Base64Decode("Zm=v").has_value());
}

}  // namespace
}  // namespace gpupool
