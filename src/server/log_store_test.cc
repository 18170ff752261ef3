#include "src/server/log_store.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>

namespace gpupool {
namespace {

TEST(LogStoreTest, AppendsAreIdempotentByOffset) {
  const std::string dir = (std::filesystem::temp_directory_path() / ("logs-" + std::to_string(getpid()))).string();
  {
    LogStore s(*Env::Default(), dir);
    EXPECT_EQ(*s.Append(LogChunk{7, 0, 1, 0, "hello "}), 6);
    EXPECT_EQ(*s.Append(LogChunk{7, 0, 1, 0, "hello "}), 6);        // repeated: nothing new
    EXPECT_EQ(*s.Append(LogChunk{7, 0, 1, 3, "lo world\n"}), 12);   // overlapping: only the new part
    EXPECT_EQ(*s.Append(LogChunk{7, 0, 1, 20, "lost bytes"}), 12);  // a gap: refused, the size says where to resume
    EXPECT_EQ(*s.Append(LogChunk{7, 1, 1, 0, "replica 1\n"}), 10);
    EXPECT_EQ(*s.Append(LogChunk{7, 0, 2, 0, "attempt 2\n"}), 10);
  }
  LogStore again(*Env::Default(), dir);  // sizes come back from the files
  EXPECT_EQ(*again.Append(LogChunk{7, 0, 1, 12, "more\n"}), 17);
  auto parts = again.Read(7, 1 << 20);
  ASSERT_TRUE(parts.has_value());
  ASSERT_EQ(parts->size(), 3u);
  EXPECT_EQ((*parts)[0].text, "hello world\nmore\n");
  EXPECT_EQ((*parts)[1].replica, 1);
  EXPECT_EQ((*parts)[2].attempt, 2);
  auto tail = again.Read(7, 5);
  EXPECT_EQ((*tail)[0].text, "more\n");
  EXPECT_EQ((*tail)[0].bytes, 17);
  EXPECT_TRUE(again.Read(8, 10)->empty());
  std::filesystem::remove_all(dir);
}

TEST(LogStoreTest, AFileStopsAtTheLimitAndLaterChunksAreCountedNotStored) {
  const std::string dir = (std::filesystem::temp_directory_path() / ("logs-cap-" + std::to_string(getpid()))).string();
  LogStore s(*Env::Default(), dir, /*max_bytes_per_task=*/10);
  EXPECT_EQ(*s.Append(LogChunk{3, 0, 1, 0, "0123456"}), 7);
  EXPECT_EQ(*s.Append(LogChunk{3, 0, 1, 7, "789abcdef"}), 16);  // straddles the limit: stored up to it
  EXPECT_EQ(*s.Append(LogChunk{3, 0, 1, 16, "ghij"}), 20);      // past it: the agent moves on
  EXPECT_EQ(*s.Append(LogChunk{3, 1, 1, 0, "other"}), 5);       // each task has its own limit
  auto parts = s.Read(3, 1 << 20);
  ASSERT_TRUE(parts.has_value());
  ASSERT_EQ(parts->size(), 2u);
  EXPECT_EQ((*parts)[0].text, "0123456789");
  EXPECT_EQ((*parts)[0].bytes, 10);
  EXPECT_EQ((*parts)[1].text, "other");
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace gpupool
