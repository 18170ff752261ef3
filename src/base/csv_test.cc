#include "src/base/csv.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <limits>
#include <string>
#include <vector>

namespace gpupool {
namespace {

struct Rec {
  int line = 0;
  std::vector<std::string> fields;
  friend bool operator==(const Rec&, const Rec&) = default;
};

void PrintTo(const Rec& r, std::ostream* os) {
  *os << "{line " << r.line << ":";
  for (const auto& f : r.fields) *os << " [" << f << "]";
  *os << "}";
}

// Reads `text` and collects every record (copying the views).
Status Collect(std::string_view text, std::vector<Rec>& out, std::string_view source = "in.csv") {
  return ReadCsvText(text, source, [&](const CsvRecord& r) -> Status {
    Rec rec;
    rec.line = r.line;
    for (auto f : r.fields) rec.fields.emplace_back(f);
    out.push_back(std::move(rec));
    return {};
  });
}

TEST(CsvReadTest, RecordsCarryLineNumbersAndFields) {
  std::vector<Rec> got;
  ASSERT_TRUE(Collect("a,b,c\n1,2,3\n4,5,6\n", got));
  EXPECT_EQ(got, (std::vector<Rec>{{1, {"a", "b", "c"}}, {2, {"1", "2", "3"}}, {3, {"4", "5", "6"}}}));
}

TEST(CsvReadTest, LastLineWithoutNewlineIsRead) {
  std::vector<Rec> got;
  ASSERT_TRUE(Collect("a,b\n1,2", got));
  EXPECT_EQ(got, (std::vector<Rec>{{1, {"a", "b"}}, {2, {"1", "2"}}}));
}

TEST(CsvReadTest, BlankLinesAreSkippedButCounted) {
  std::vector<Rec> got;
  ASSERT_TRUE(Collect("\na,b\n\n  \n1,2\n\n", got));  // line 4 holds only spaces
  EXPECT_EQ(got, (std::vector<Rec>{{2, {"a", "b"}}, {5, {"1", "2"}}}));
}

TEST(CsvReadTest, CrlfLineEndings) {
  std::vector<Rec> got;
  ASSERT_TRUE(Collect("a,b\r\n1,2\r\n\r\n3,4\r\n", got));
  // No stray '\r' in the last field, blank CRLF line skipped.
  EXPECT_EQ(got, (std::vector<Rec>{{1, {"a", "b"}}, {2, {"1", "2"}}, {4, {"3", "4"}}}));
}

TEST(CsvReadTest, EmptyFieldsAreKept) {
  std::vector<Rec> got;
  ASSERT_TRUE(Collect("a,,c\n,\n", got));
  EXPECT_EQ(got, (std::vector<Rec>{{1, {"a", "", "c"}}, {2, {"", ""}}}));
}

TEST(CsvReadTest, QuotedFieldsWithCommasAndEscapedQuotes) {
  std::vector<Rec> got;
  ASSERT_TRUE(Collect("x,\"a,b\",\"say \"\"hi\"\"\"\n", got));
  EXPECT_EQ(got, (std::vector<Rec>{{1, {"x", "a,b", "say \"hi\""}}}));
}

TEST(CsvReadTest, EmbeddedNewlineReportsTheLineWhereTheRecordEnds) {
  std::vector<Rec> got;
  ASSERT_TRUE(Collect("h1,h2\n\"p\nq\nr\",z\nlast,row\n", got));
  EXPECT_EQ(got, (std::vector<Rec>{{1, {"h1", "h2"}}, {4, {"p\nq\nr", "z"}}, {5, {"last", "row"}}}));
}

TEST(CsvReadTest, EmptyTextGivesNoRecords) {
  std::vector<Rec> got;
  ASSERT_TRUE(Collect("", got));
  EXPECT_TRUE(got.empty());
  ASSERT_TRUE(Collect("\n\n\r\n", got));
  EXPECT_TRUE(got.empty());
}

TEST(CsvReadTest, CallbackErrorStopsReadingAndIsReturnedUnchanged) {
  std::vector<int> lines;
  Status st = ReadCsvText("a\nb\nc\nd\n", "in.csv", [&](const CsvRecord& r) -> Status {
    lines.push_back(r.line);
    if (r.line == 2) return NotFound("custom failure at two");
    return {};
  });
  ASSERT_FALSE(st);
  EXPECT_EQ(st.error().code, ErrorCode::kNotFound);
  EXPECT_EQ(st.error().message, "custom failure at two");
  EXPECT_EQ(lines, (std::vector<int>{1, 2}));
}

TEST(CsvReadTest, CallbackErrorWinsOverLaterSyntaxError) {
  // Line 3 is malformed, but reading stopped at line 2.
  Status st = ReadCsvText("a\nb\n\"unterminated\n", "in.csv", [&](const CsvRecord& r) -> Status {
    if (r.line == 2) return FailedPrecondition("stop");
    return {};
  });
  ASSERT_FALSE(st);
  EXPECT_EQ(st.error().code, ErrorCode::kFailedPrecondition);
  EXPECT_EQ(st.error().message, "stop");
}

TEST(CsvReadTest, UnterminatedQuoteAtEndOfFile) {
  std::vector<Rec> got;
  Status st = Collect("x\ny,\"abc\ndef\n", got, "data/file.csv");
  ASSERT_FALSE(st);
  EXPECT_EQ(st.error().code, ErrorCode::kInvalidArgument);
  EXPECT_TRUE(st.error().message.starts_with("data/file.csv:3: malformed CSV:")) << st.error().message;
  EXPECT_NE(st.error().message.find("unterminated"), std::string::npos) << st.error().message;
  EXPECT_EQ(got, (std::vector<Rec>{{1, {"x"}}}));
}

TEST(CsvReadTest, StrictModeRejectsQuoteInsideUnquotedField) {
  std::vector<Rec> got;
  Status st = Collect("a,b\nab\"c,d\n", got);
  ASSERT_FALSE(st);
  EXPECT_EQ(st.error().code, ErrorCode::kInvalidArgument);
  EXPECT_TRUE(st.error().message.starts_with("in.csv:2: malformed CSV: ")) << st.error().message;
  EXPECT_EQ(got, (std::vector<Rec>{{1, {"a", "b"}}}));
}

TEST(CsvReadTest, StrictModeRejectsTextAfterClosingQuote) {
  std::vector<Rec> got;
  Status st = Collect("a\nb\n\"ab\"c,d\n", got);
  ASSERT_FALSE(st);
  EXPECT_TRUE(st.error().message.starts_with("in.csv:3: malformed CSV: ")) << st.error().message;
}

TEST(CsvReadTest, SpaceAfterClosingQuoteIsAccepted) {
  std::vector<Rec> got;
  ASSERT_TRUE(Collect("\"ab\" ,d\n", got));
  EXPECT_EQ(got, (std::vector<Rec>{{1, {"ab", "d"}}}));
}

TEST(CsvReadFileTest, MissingFileIsAnIoError) {
  Status st = ReadCsvFile("/nonexistent/dir/none.csv", [](const CsvRecord&) -> Status { return {}; });
  ASSERT_FALSE(st);
  EXPECT_EQ(st.error().code, ErrorCode::kIo);
  EXPECT_TRUE(st.error().message.starts_with("/nonexistent/dir/none.csv:")) << st.error().message;
}

CsvFieldRef Ref(std::string_view text) { return CsvFieldRef{"src.csv", 7, 3, "count", text}; }

TEST(CsvFieldTest, FieldErrorFormat) {
  EXPECT_EQ(CsvFieldError(Ref("x"), "is bad"), "src.csv:7:3 (count): is bad");
}

TEST(CsvFieldTest, CsvIntGoodValues) {
  EXPECT_EQ(CsvInt(Ref("0"), 0, 10).value(), 0);
  EXPECT_EQ(CsvInt(Ref("10"), 0, 10).value(), 10);
  EXPECT_EQ(CsvInt(Ref("-5"), -10, 10).value(), -5);
  EXPECT_EQ(CsvInt(Ref("007"), 0, 10).value(), 7);
  EXPECT_EQ(CsvInt(Ref("9223372036854775807"), 0, std::numeric_limits<int64_t>::max()).value(),
            std::numeric_limits<int64_t>::max());
  EXPECT_EQ(CsvInt(Ref("-9223372036854775808"), std::numeric_limits<int64_t>::min(), 0).value(),
            std::numeric_limits<int64_t>::min());
}

TEST(CsvFieldTest, CsvIntEmpty) {
  auto r = CsvInt(Ref(""), 0, 10);
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code, ErrorCode::kInvalidArgument);
  EXPECT_EQ(r.error().message, "src.csv:7:3 (count): expected an integer, got ''");
}

TEST(CsvFieldTest, CsvIntNonNumeric) {
  for (std::string_view bad : {"abc", "-", "+5", " 5", "1.5", "0x10"}) {
    auto r = CsvInt(Ref(bad), -100, 100);
    ASSERT_FALSE(r) << bad;
    EXPECT_EQ(r.error().message, "src.csv:7:3 (count): expected an integer, got '" + std::string(bad) + "'");
  }
}

TEST(CsvFieldTest, CsvIntTrailingJunk) {
  for (std::string_view bad : {"12abc", "5 ", "3,", "1-2"}) {
    auto r = CsvInt(Ref(bad), 0, 100);
    ASSERT_FALSE(r) << bad;
    EXPECT_EQ(r.error().message, "src.csv:7:3 (count): expected an integer, got '" + std::string(bad) + "'");
  }
}

TEST(CsvFieldTest, CsvIntOutOfRange) {
  auto above = CsvInt(Ref("11"), 0, 10);
  ASSERT_FALSE(above);
  EXPECT_EQ(above.error().message, "src.csv:7:3 (count): must be between 0 and 10, got '11'");

  auto below = CsvInt(Ref("-1"), 0, 10);
  ASSERT_FALSE(below);
  EXPECT_EQ(below.error().message, "src.csv:7:3 (count): must be between 0 and 10, got '-1'");

  // Beyond int64: reported as out of range, not as a non-integer.
  auto huge = CsvInt(Ref("99999999999999999999"), 0, 10);
  ASSERT_FALSE(huge);
  EXPECT_EQ(huge.error().message, "src.csv:7:3 (count): must be between 0 and 10, got '99999999999999999999'");
  auto huge_full = CsvInt(Ref("9223372036854775808"), std::numeric_limits<int64_t>::min(),
                          std::numeric_limits<int64_t>::max());
  ASSERT_FALSE(huge_full);
  EXPECT_NE(huge_full.error().message.find("must be between"), std::string::npos);
}

TEST(CsvFieldTest, CsvIntOr) {
  EXPECT_EQ(CsvIntOr(Ref(""), 0, 10, -1).value(), -1);
  EXPECT_EQ(CsvIntOr(Ref(""), 0, 10, 42).value(), 42);  // `when_empty` need not be in range
  EXPECT_EQ(CsvIntOr(Ref("4"), 0, 10, -1).value(), 4);
  auto junk = CsvIntOr(Ref("x"), 0, 10, -1);
  ASSERT_FALSE(junk);
  EXPECT_EQ(junk.error().message, "src.csv:7:3 (count): expected an integer, got 'x'");
  auto range = CsvIntOr(Ref("20"), 0, 10, -1);
  ASSERT_FALSE(range);
  EXPECT_EQ(range.error().message, "src.csv:7:3 (count): must be between 0 and 10, got '20'");
}

}  // namespace
}  // namespace gpupool
