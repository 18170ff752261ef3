#include "src/server/export_view.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "src/engine/event.h"
#include "src/server/config_record.h"
#include "src/server/testing/memory_journal.h"

namespace gpupool {
namespace {

JournalEvent Submitted(int64_t seq) {
  Event e;
  e.seq = seq;
  e.at = InstantFromMillis(seq * 1000);
  JobSubmitted s;
  s.job = seq;
  s.spec.tenant = 0;
  s.spec.task.command = {"train"};
  s.spec.task.env = {{"API_KEY", "s3cret"}, {"EPOCHS", "3"}};
  e.body = s;
  return JournalEvent{seq, seq * 1000, EventName(e.body), ToJsonLine(e)};
}

TEST(ExportViewTest, PagesRedactEnvironmentValuesAndCarryTheConfigurationFirst) {
  MemoryJournal j;
  JournalBatch b;
  for (int64_t seq = 1; seq <= 3; ++seq) b.events.push_back(Submitted(seq));
  ASSERT_TRUE(j.Commit(b).has_value());
  ASSERT_TRUE(RecordConfigInForce(j, "name: x\n", "x.yaml", 1, 0).has_value());

  auto first = ExportPage(j, 0, 2);
  ASSERT_TRUE(first.has_value()) << first.error().message;
  const auto p = nlohmann::json::parse(*first);
  EXPECT_EQ(p["format"].get<int>(), kExportFormat);
  EXPECT_EQ(p["last_seq"], 3);
  EXPECT_EQ(p["next_since"], 2);
  ASSERT_EQ(p["events"].size(), 2u);
  EXPECT_EQ(first->find("s3cret"), std::string::npos) << *first;
  EXPECT_EQ(p["events"][0]["spec"]["task"]["env"][0][0], "API_KEY");
  EXPECT_EQ(p["events"][0]["spec"]["task"]["env"][0][1], kRedacted);
  EXPECT_EQ(p["configs"].size(), size_t{1});
  EXPECT_EQ(p["config_text"], "name: x\n");

  auto second = ExportPage(j, 2, 2);
  ASSERT_TRUE(second.has_value());
  const auto q = nlohmann::json::parse(*second);
  EXPECT_EQ(q["events"].size(), 1u);
  EXPECT_EQ(q["next_since"], 3);
  EXPECT_FALSE(q.contains("configs")) << "the configuration comes with the first page only";
}

TEST(ExportViewTest, AnEventThatDoesNotDecodeIsDataLossNamingItsSeq) {
  MemoryJournal j;
  JournalBatch b;
  b.events.push_back(JournalEvent{1, 0, "JobSubmitted", R"({"at":0,"seq":1,"type":"JobSubmitted","job":"x"})"});
  ASSERT_TRUE(j.Commit(b).has_value());
  auto page = ExportPage(j, 0, 10);
  ASSERT_FALSE(page.has_value());
  EXPECT_EQ(page.error().code, ErrorCode::kDataLoss);
  EXPECT_NE(page.error().message.find("event 1"), std::string::npos) << page.error().message;
}

}  // namespace
}  // namespace gpupool
