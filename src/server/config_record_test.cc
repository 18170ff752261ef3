#include "src/server/config_record.h"

#include <gtest/gtest.h>

#include "src/server/testing/memory_journal.h"

namespace gpupool {
namespace {

TEST(ConfigRecordTest, AJournalWithoutAnIndexHasNoRecords) {
  MemoryJournal j;
  auto records = ReadConfigRecords(j);
  ASSERT_TRUE(records.has_value()) << records.error().message;
  EXPECT_TRUE(records->empty());
  EXPECT_EQ(ConfigInForceAt(*records, 10), nullptr);
}

TEST(ConfigRecordTest, EachChangeIsRecordedOnceWithItsTextKeptOncePerHash) {
  MemoryJournal j;
  ASSERT_TRUE(RecordConfigInForce(j, "a: 1\n", "/etc/a.yaml", 1, 1000).has_value());
  ASSERT_TRUE(RecordConfigInForce(j, "a: 1\n", "/etc/a.yaml", 40, 2000).has_value());  // a restart, same file
  ASSERT_TRUE(RecordConfigInForce(j, "a: 2\n", "/etc/a.yaml", 90, 3000).has_value());
  ASSERT_TRUE(RecordConfigInForce(j, "a: 1\n", "/etc/a.yaml", 120, 4000).has_value());  // put back
  auto records = ReadConfigRecords(j);
  ASSERT_TRUE(records.has_value());
  ASSERT_EQ(records->size(), 3u);
  EXPECT_EQ((*records)[0].since_seq, 1);
  EXPECT_EQ((*records)[1].since_seq, 90);
  EXPECT_EQ((*records)[2].since_seq, 120);
  EXPECT_EQ((*records)[0].sha256, ConfigSha256("a: 1\n"));
  EXPECT_EQ((*records)[2].sha256, (*records)[0].sha256);
  EXPECT_EQ((*records)[1].at_ms, 3000);
  EXPECT_EQ(ConfigInForceAt(*records, 89)->since_seq, 1);
  EXPECT_EQ(ConfigInForceAt(*records, 90)->since_seq, 90);
  EXPECT_EQ(ConfigInForceAt(*records, 1'000)->since_seq, 120);
  auto text = ReadConfigText(j, (*records)[1].sha256);
  ASSERT_TRUE(text.has_value() && text->has_value());
  EXPECT_EQ(**text, "a: 2\n");
}

TEST(ConfigRecordTest, ATextOverTheLimitIsRecordedByItsHashAlone) {
  MemoryJournal j;
  const std::string big(kMaxRecordedConfigBytes + 1, '#');
  auto r = RecordConfigInForce(j, big, "big.yaml", 1, 0);
  ASSERT_TRUE(r.has_value());
  EXPECT_FALSE(r->text_kept);
  EXPECT_EQ(r->bytes, kMaxRecordedConfigBytes + 1);
  auto text = ReadConfigText(j, r->sha256);
  ASSERT_TRUE(text.has_value());
  EXPECT_FALSE(text->has_value());
}

TEST(ConfigRecordTest, TheIndexKeepsTheNewestRecordsUpToItsLimit) {
  MemoryJournal j;
  for (int64_t i = 0; i < kMaxConfigRecords + 5; ++i) {
    ASSERT_TRUE(RecordConfigInForce(j, "n: " + std::to_string(i), "c.yaml", i + 1, i).has_value());
  }
  auto records = ReadConfigRecords(j);
  ASSERT_TRUE(records.has_value());
  ASSERT_EQ(static_cast<int64_t>(records->size()), kMaxConfigRecords);
  EXPECT_EQ(records->front().since_seq, 6);
  EXPECT_EQ(records->back().since_seq, kMaxConfigRecords + 5);
}

TEST(ConfigRecordTest, ADamagedIndexIsDataLossNamingTheField) {
  MemoryJournal j;
  JournalBatch b;
  b.meta.emplace_back(kConfigIndexMeta, R"([{"sha256":"ab","source":"x","since_seq":"one","at_ms":0,"bytes":1}])");
  ASSERT_TRUE(j.Commit(b).has_value());
  auto records = ReadConfigRecords(j);
  ASSERT_FALSE(records.has_value());
  EXPECT_EQ(records.error().code, ErrorCode::kDataLoss);
  EXPECT_NE(records.error().message.find("configs[0].since_seq"), std::string::npos) << records.error().message;
}

}  // namespace
}  // namespace gpupool
