// The journal's on-disk names pinned (issue 21): tests/fixtures/events/
// every_type.jsonl holds one canonical line per event type, every field away
// from its default. A type name, a field name, an enum value's name or the
// text of a value may never change: journals written before must replay. A
// change that makes this test fail is a journal format change, which needs
// a migration (and then a new fixture beside this one), not an edit of the
// fixture.
#include <gtest/gtest.h>

#include <fstream>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "src/engine/event.h"
#include "src/engine/testing/every_event.h"

namespace gpupool {
namespace {

using namespace std::chrono_literals;

const std::string kFixture = std::string(GPUPOOL_SOURCE_DIR) + "/tests/fixtures/events/every_type.jsonl";
// The same events in the binary form (EventToBinary), one hex line each:
// it pins the tags (EventBody's order) and the field layout.
const std::string kBinaryFixture = std::string(GPUPOOL_SOURCE_DIR) + "/tests/fixtures/events/every_type.binary.hex";

std::vector<std::string> FixtureLines(const std::string& path = kFixture) {
  std::ifstream in(path);
  EXPECT_TRUE(in.good()) << path;
  std::vector<std::string> lines;
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

std::string TypeOf(const std::string& line) {
  auto e = EventFromJson(line);
  return e ? EventName(e->body) : "(" + e.error().message + ")";
}

// (a) The encoder writes the fixture's bytes.
TEST(EventFormatTest, EveryTypeEncodesToTheFixtureByteForByte) {
  const std::vector<std::string> fixture = FixtureLines();
  const std::vector<Event> events = EveryEventType();
  ASSERT_EQ(fixture.size(), events.size()) << kFixture;
  for (size_t i = 0; i < events.size(); ++i) {
    EXPECT_EQ(ToJsonLine(events[i]), fixture[i]) << EventName(events[i].body) << " (line " << i + 1 << ")";
  }
}

// (b) Each fixture line decodes, and encodes back to itself.
TEST(EventFormatTest, EveryFixtureLineDecodesAndEncodesBackIdentically) {
  for (const std::string& line : FixtureLines()) {
    auto e = EventFromJson(line);
    ASSERT_TRUE(e.has_value()) << line << ": " << e.error().message;
    EXPECT_EQ(ToJsonLine(*e), line);
  }
}

// (c) No event type is missing from the fixture (nor listed twice): a new
// type adds its line, and the line is pinned from then on.
TEST(EventFormatTest, TheFixtureHasOneLinePerEventType) {
  std::map<std::string, int> lines_of_type;
  for (const std::string& line : FixtureLines()) ++lines_of_type[TypeOf(line)];
  std::set<std::string> types;
  [&]<size_t... I>(std::index_sequence<I...>) {
    (types.insert(EventName(EventBody(std::in_place_index<I>))), ...);
  }(std::make_index_sequence<std::variant_size_v<EventBody>>());
  ASSERT_EQ(types.size(), std::variant_size_v<EventBody>) << "two event types share a name";
  for (const std::string& type : types) {
    EXPECT_EQ(lines_of_type[type], 1) << type << ": the fixture " << kFixture << " needs exactly one line of it";
  }
  for (const auto& [type, count] : lines_of_type) EXPECT_TRUE(types.contains(type)) << type;
}

std::string Hex(std::string_view bytes) {
  static constexpr char kDigits[] = "0123456789abcdef";
  std::string out;
  for (unsigned char c : bytes) out += {kDigits[c >> 4], kDigits[c & 15]};
  return out;
}

std::string Unhex(std::string_view hex) {
  std::string out;
  for (size_t i = 0; i + 1 < hex.size(); i += 2) out += static_cast<char>(std::stoi(std::string(hex.substr(i, 2)), nullptr, 16));
  return out;
}

// (d) The binary encoder writes the binary fixture's bytes, and each of its
// lines decodes to the event of the same line of the JSON fixture.
TEST(EventFormatTest, TheBinaryFormIsPinnedToo) {
  const std::vector<std::string> fixture = FixtureLines(kBinaryFixture);
  const std::vector<std::string> json = FixtureLines();
  const std::vector<Event> events = EveryEventType();
  ASSERT_EQ(fixture.size(), events.size()) << kBinaryFixture;
  ASSERT_EQ(json.size(), events.size());
  for (size_t i = 0; i < events.size(); ++i) {
    EXPECT_EQ(Hex(EventToBinary(events[i])), fixture[i]) << EventName(events[i].body) << " (line " << i + 1 << ")";
    auto decoded = EventFromBinary(Unhex(fixture[i]));
    ASSERT_TRUE(decoded.has_value()) << "line " << i + 1 << ": " << decoded.error().message;
    EXPECT_EQ(ToJsonLine(*decoded), json[i]) << "line " << i + 1;
  }
}

}  // namespace
}  // namespace gpupool
