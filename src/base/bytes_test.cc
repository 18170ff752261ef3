#include "src/base/bytes.h"

#include <gtest/gtest.h>

#include <limits>

namespace gpupool {
namespace {

TEST(BytesTest, VarintsAreSevenBitsAByteLowFirstAndZigzagKeepsSmallNegativesShort) {
  ByteWriter w;
  w.PutVarint(0);
  w.PutVarint(127);
  w.PutVarint(300);  // 0xac 0x02
  w.PutZigzag(-1);   // 1
  w.PutZigzag(1);    // 2
  w.PutVarint(std::numeric_limits<uint64_t>::max());
  w.PutZigzag(std::numeric_limits<int64_t>::min());
  const std::string& b = w.bytes();
  ASSERT_GE(b.size(), 6u);
  EXPECT_EQ(b.substr(0, 6), std::string("\x00\x7f\xac\x02\x01\x02", 6));
  EXPECT_EQ(b.size(), 6u + 2 * kMaxVarintBytes);
  ByteReader r(b);
  EXPECT_EQ(r.GetVarint(), 0u);
  EXPECT_EQ(r.GetVarint(), 127u);
  EXPECT_EQ(r.GetVarint(), 300u);
  EXPECT_EQ(r.GetZigzag(), -1);
  EXPECT_EQ(r.GetZigzag(), 1);
  EXPECT_EQ(r.GetVarint(), std::numeric_limits<uint64_t>::max());
  EXPECT_EQ(r.GetZigzag(), std::numeric_limits<int64_t>::min());
  EXPECT_FALSE(r.failed());
  EXPECT_EQ(r.remaining(), 0u);
}

TEST(BytesTest, ATruncatedOrOverlongVarintIsRefusedAndReadsNothingMore) {
  const std::string cut("\xac", 1);
  const char* p = cut.data();
  uint64_t v = 7;
  EXPECT_EQ(DecodeVarint(&p, cut.data() + cut.size(), &v), VarintRead::kTruncated);
  EXPECT_EQ(v, 0u);
  // Eleven continuation bytes, or a tenth byte above 1: more than 64 bits.
  for (const std::string& bad : {std::string(11, '\xff'), std::string(9, '\xff') + "\x02"}) {
    p = bad.data();
    EXPECT_EQ(DecodeVarint(&p, bad.data() + bad.size(), &v), VarintRead::kMalformed);
    ByteReader r(bad);
    EXPECT_EQ(r.GetVarint(), 0u);
    EXPECT_TRUE(r.failed());
    EXPECT_EQ(r.GetVarint(), 0u);  // a failed reader stays failed
  }
}

TEST(BytesTest, LittleEndianStoresAndLoadsAreByteOrderIndependent) {
  char b[8];
  StoreLe(b, 0x0102030405060708ull, 8);
  EXPECT_EQ(std::string(b, 8), std::string("\x08\x07\x06\x05\x04\x03\x02\x01", 8));
  EXPECT_EQ(LoadLe64(b), 0x0102030405060708ull);
  StoreLe(b, 0xaabbccdd, 4);
  EXPECT_EQ(std::string(b, 4), "\xdd\xcc\xbb\xaa");
}

}  // namespace
}  // namespace gpupool
