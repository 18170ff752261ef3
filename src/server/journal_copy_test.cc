#include "src/server/journal_copy.h"

#include <gtest/gtest.h>
#include <sys/stat.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>

#include "src/server/journal.h"
#include "tests/run_binary.h"

namespace gpupool {
namespace {

std::map<std::string, std::pair<std::string, int64_t>> FilesOf(const std::string& dir) {
  std::map<std::string, std::pair<std::string, int64_t>> out;
  for (const auto& e : std::filesystem::directory_iterator(dir)) {
    std::ifstream in(e.path(), std::ios::binary);
    std::stringstream bytes;
    bytes << in.rdbuf();
    struct stat st {};
    ::stat(e.path().c_str(), &st);
    out[e.path().filename().string()] = {bytes.str(), st.st_mtim.tv_sec * 1'000'000'000LL + st.st_mtim.tv_nsec};
  }
  return out;
}

JournalBatch Events(int64_t from, int64_t n) {
  JournalBatch b;
  for (int64_t s = from; s < from + n; ++s) b.events.push_back({s, s * 10, "T", "{\"seq\":" + std::to_string(s) + "}"});
  return b;
}

int64_t LastSeqOf(const std::string& dir) {
  auto j = OpenSqliteJournal(dir);
  EXPECT_TRUE(j.has_value());
  return j ? *(*j)->LastSeq() : -1;
}

TEST(JournalCopyTest, AClosedJournalIsCopiedWithoutTouchingAnyFileOrAddingOne) {
  const std::string src = testing::MakeTempDir(), dst = testing::MakeTempDir();
  {
    auto j = OpenSqliteJournal(src);
    ASSERT_TRUE(j.has_value());
    ASSERT_TRUE((*j)->Commit(Events(1, 50)).has_value());
  }
  const auto before = FilesOf(src);
  ASSERT_FALSE(before.contains("gpupool.db-wal"));
  ASSERT_TRUE(CopySqliteJournal(src, dst + "/gpupool.db").has_value());
  EXPECT_EQ(FilesOf(src), before);
  EXPECT_EQ(LastSeqOf(dst), 50);
}

TEST(JournalCopyTest, AnOpenJournalIsCopiedAndItsWriterGoesOn) {
  const std::string src = testing::MakeTempDir(), dst = testing::MakeTempDir();
  auto j = OpenSqliteJournal(src);
  ASSERT_TRUE(j.has_value());
  ASSERT_TRUE((*j)->Commit(Events(1, 20)).has_value());
  ASSERT_TRUE(CopySqliteJournal(src, dst + "/gpupool.db").has_value());
  ASSERT_TRUE((*j)->Commit(Events(21, 5)).has_value()) << "the copy holds no lock the writer needs";
  EXPECT_EQ(LastSeqOf(dst), 20);
  EXPECT_EQ(*(*j)->LastSeq(), 25);
}

TEST(JournalCopyTest, NoDatabaseIsNotFoundNamingThePath) {
  const std::string src = testing::MakeTempDir(), dst = testing::MakeTempDir();
  auto copied = CopySqliteJournal(src, dst + "/gpupool.db");
  ASSERT_FALSE(copied.has_value());
  EXPECT_EQ(copied.error().code, ErrorCode::kNotFound);
  EXPECT_NE(copied.error().message.find(src + "/gpupool.db"), std::string::npos);
}

}  // namespace
}  // namespace gpupool
