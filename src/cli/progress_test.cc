#include "src/cli/progress.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <string>

namespace gpupool {
namespace {

TEST(ProgressTest, TheBarIsFilledByTheFractionAndClamped) {
  EXPECT_EQ(FormatProgress(0.5, "half", 10), "[#####.....]  50%  half");
  EXPECT_EQ(FormatProgress(2.0, "", 4), "[####] 100%  ");
  EXPECT_EQ(FormatProgress(-1, "", 4), "[....]   0%  ");
  EXPECT_EQ(FormatProgress(NAN, "", 4), "[....]   0%  ");
}

TEST(ProgressTest, NothingIsWrittenWhenOutputIsNotATerminal) {
  std::FILE* f = std::tmpfile();
  ASSERT_NE(f, nullptr);
  {
    ProgressLine line(f);  // a file: not a terminal
    EXPECT_FALSE(line.enabled());
    line.Update(0.5, "x");
  }
  EXPECT_EQ(std::ftell(f), 0);
  {
    ProgressLine line(f, true);
    line.Update(0.5, "x");
    line.Clear();
  }
  std::rewind(f);
  char buf[128] = {};
  const size_t n = std::fread(buf, 1, sizeof buf - 1, f);
  EXPECT_EQ(std::string(buf, n), "\r" + FormatProgress(0.5, "x") + "\033[K\r\033[K");
  std::fclose(f);
}

}  // namespace
}  // namespace gpupool
