// The codecs generated from the events' Fields lists: EventFromJson is the
// exact inverse of ToJsonLine and EventFromBinary of EventToBinary, both
// refuse malformed input with an error that names the field, and equality
// compares every listed field. (Round trips of every event the example
// scenarios produce, and replays of the decoded events, are in
// snapshot_test.cc.)
#include <limits>
#include <cstring>
#include <gtest/gtest.h>

#include <set>
#include <string>
#include <vector>

#include "src/base/rng.h"
#include "src/engine/event.h"
#include "src/engine/testing/every_event.h"

namespace gpupool {
namespace {

using namespace std::chrono_literals;

std::vector<Event> EveryType() { return EveryEventType(); }

TEST(EventJsonTest, EveryEventTypeRoundTripsWithEveryField) {
  const std::vector<Event> events = EveryType();
  std::set<size_t> types;
  for (const Event& e : events) {
    types.insert(e.body.index());
    const std::string line = ToJsonLine(e);
    auto back = EventFromJson(line);
    ASSERT_TRUE(back.has_value()) << line << ": " << back.error().message;
    EXPECT_EQ(ToJsonLine(*back), line);
    EXPECT_EQ(*back, e);
    EXPECT_EQ(back->seq, e.seq);
    EXPECT_EQ(back->at, e.at);
    EXPECT_EQ(back->body.index(), e.body.index());
  }
  EXPECT_EQ(types.size(), std::variant_size_v<EventBody>);
  // Fields the text could lose without the line changing shape.
  auto submitted = EventFromJson(ToJsonLine(events[4]));
  ASSERT_TRUE(submitted.has_value());
  const JobSpec& spec = std::get<JobSubmitted>(submitted->body).spec;
  const JobSpec want = EverySpecField();
  EXPECT_EQ(spec.demand, want.demand);  // reservation included
  EXPECT_EQ(spec.stages, want.stages);
  EXPECT_EQ(spec.name, want.name);
  EXPECT_EQ(spec.deadline, want.deadline);
  EXPECT_EQ(spec.expected_duration, want.expected_duration);
  EXPECT_EQ(spec.labels, want.labels);
  EXPECT_EQ(spec.task, want.task);
  auto quota = EventFromJson(ToJsonLine(events[3]));
  ASSERT_TRUE(quota.has_value());
  EXPECT_EQ(std::get<QuotaSet>(quota->body).quota, (Quota{24000, 64000, 0.1 + 0.2, true}));  // bit-exact weight
  auto pool = EventFromJson(ToJsonLine(events[0]));
  ASSERT_TRUE(pool.has_value());
  EXPECT_EQ(std::get<PoolAdded>(pool->body).pool.selector.regions, (std::vector<std::string>{"east", "west"}));
  EXPECT_EQ(std::get<PoolAdded>(pool->body).pool.dedicated_to, (std::vector<TenantId>{1, 2}));
}

TEST(EventJsonTest, AnUnsetReservationKeepsTheCanonicalText) {
  // Logs written before Demand::reservation was carried stay byte-identical.
  JobSpec s;
  s.tenant = 0;
  s.demand = Demand{1000, 1024, 1, 1000};
  const std::string line = ToJsonLine(Event{1, InstantFromMillis(0), JobSubmitted{1, s}});
  EXPECT_EQ(line.find("reservation"), std::string::npos) << line;
  EXPECT_EQ(line.find("task"), std::string::npos) << line;  // nor a job without a command
  auto back = EventFromJson(line);
  ASSERT_TRUE(back.has_value()) << back.error().message;
  EXPECT_EQ(std::get<JobSubmitted>(back->body).spec.demand.reservation, -1);
}

TEST(EventJsonTest, TheContainerFieldsAreWrittenOnlyAwayFromTheirDefaults) {
  // Journals written before issue 14 keep their text, and read back with
  // the defaults.
  JobSpec s;
  s.tenant = 0;
  s.demand = Demand{1000, 1024, 1, 1000};
  s.task.command = {"sleep", "1"};
  const std::string line = ToJsonLine(Event{1, InstantFromMillis(0), JobSubmitted{1, s}});
  EXPECT_EQ(line.find("image"), std::string::npos) << line;
  EXPECT_EQ(line.find("shm_mib"), std::string::npos) << line;
  EXPECT_EQ(line.find("network_isolated"), std::string::npos) << line;
  auto back = EventFromJson(line);
  ASSERT_TRUE(back.has_value()) << back.error().message;
  EXPECT_EQ(std::get<JobSubmitted>(back->body).spec.task, s.task);
  s.task.image = "host";
  const std::string with_image = ToJsonLine(Event{1, InstantFromMillis(0), JobSubmitted{1, s}});
  EXPECT_NE(with_image.find(R"("image":"host")"), std::string::npos) << with_image;
  EXPECT_EQ(with_image.find("shm_mib"), std::string::npos) << with_image;
  auto image_back = EventFromJson(with_image);
  ASSERT_TRUE(image_back.has_value()) << image_back.error().message;
  EXPECT_EQ(std::get<JobSubmitted>(image_back->body).spec.task, s.task);
  // Wrong types are named.
  std::string bad = with_image;
  bad.replace(bad.find(R"("image":"host")"), 14, R"("network_isolated":1)");
  auto refused = EventFromJson(bad);
  ASSERT_FALSE(refused.has_value());
  EXPECT_NE(refused.error().message.find("spec.task.network_isolated: expected true or false"), std::string::npos)
      << refused.error().message;
}

TEST(EventJsonTest, KeyOrderAndSpacingDoNotMatter) {
  auto e = EventFromJson(R"( { "type" : "JobFinished", "succeeded": true, "job": 7, "at": 1500, "seq": 12 } )");
  ASSERT_TRUE(e.has_value()) << e.error().message;
  EXPECT_EQ(ToJsonLine(*e), R"({"at":1500,"job":7,"seq":12,"succeeded":true,"type":"JobFinished"})");
}

TEST(EventJsonTest, MalformedLinesAreErrorsNamingTheField) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"", "not valid JSON"},
      {"{\"seq\":1,", "not valid JSON"},
      {"[1,2]", "event: expected an object"},
      {R"({"at":1,"type":"NodeUp","node":1})", "event: seq: missing"},
      {R"({"seq":"1","at":1,"type":"NodeUp","node":1})", "event: seq: expected an integer"},
      {R"({"seq":1,"at":1.5,"type":"NodeUp","node":1})", "event: at: expected an integer"},
      {R"({"seq":1,"at":1,"type":"NodeSideways","node":1})", "unknown event type 'NodeSideways'"},
      {R"({"seq":1,"at":1,"type":7})", "event: type: expected a string"},
      {R"({"seq":1,"at":1,"type":"NodeUp"})", "NodeUp event: node: missing"},
      {R"({"seq":1,"at":1,"type":"NodeUp","node":1,"colour":"red"})", "NodeUp event: colour: unknown field"},
      {R"({"seq":1,"at":1,"type":"NodeUp","node":4294967296})", "NodeUp event: node: expected an integer in"},
      {R"({"seq":1,"at":1,"type":"JobPlaced","job":1,"pool":0,"borrowed":false,"replicas":[{"node":1,"gpus":70000}]})",
       "JobPlaced event: replicas[0].gpus: expected an integer in [0, 65535]"},
      {R"({"seq":1,"at":1,"type":"JobPlaced","job":1,"pool":0,"borrowed":0,"replicas":[]})",
       "JobPlaced event: borrowed: expected true or false"},
      {R"({"seq":1,"at":1,"type":"JobPlaced","job":1,"pool":0,"borrowed":false,"replicas":{}})",
       "JobPlaced event: replicas: expected an array"},
      {R"({"seq":1,"at":1,"type":"JobPlaced","job":1,"pool":-1,"borrowed":false,"replicas":[]})",
       "JobPlaced event: pool: expected an integer in [0, 255]"},
      {R"({"seq":1,"at":1,"type":"ReclaimStarted","job":1,"reason":"boredom","checkpoint":true})",
       "ReclaimStarted event: reason: unknown value 'boredom' (known: idle, deadline)"},
      {R"({"seq":1,"at":1,"type":"QuotaSet","tenant":0,"pool":0,"quota":{"guaranteed_milli":1,"elastic_limit_milli":2,"weight":"heavy","reserved":false}})",
       "QuotaSet event: quota.weight: expected a number"},
      {R"({"seq":1,"at":1,"type":"QuotaSet","tenant":0,"pool":0,"quota":5})", "QuotaSet event: quota: expected an object"},
      {R"({"seq":1,"at":1,"type":"QuotaSet","tenant":0,"pool":0})", "QuotaSet event: quota: missing"},
      {R"({"seq":1,"at":1,"type":"NodesReserved","job":1,"nodes":[1,"2"]})",
       "NodesReserved event: nodes[1]: expected an integer"},
      {R"({"seq":1,"at":1,"type":"PoolAdded","pool":0,"name":"p","models":1,"regions":[3],"dedicated_to":[]})",
       "PoolAdded event: regions[0]: expected a string"},
  };
  for (const auto& [line, want] : cases) {
    auto e = EventFromJson(line);
    ASSERT_FALSE(e.has_value()) << line;
    EXPECT_EQ(e.error().code, ErrorCode::kInvalidArgument);
    EXPECT_NE(e.error().message.find(want), std::string::npos) << line << "\n  gave: " << e.error().message;
  }
}

TEST(EventJsonTest, ASpecWithABadNestedFieldNamesItsPath) {
  std::string line = ToJsonLine(EveryType()[4]);
  const std::string from = "\"gpu_milli\":500";
  line.replace(line.find(from), from.size(), "\"gpu_milli\":true");
  auto e = EventFromJson(line);
  ASSERT_FALSE(e.has_value());
  EXPECT_NE(e.error().message.find("JobSubmitted event: spec.demand.gpu_milli: expected an integer"),
            std::string::npos)
      << e.error().message;
  std::string stage = ToJsonLine(EveryType()[4]);
  const std::string mode = "\"mode\":\"mig\"";
  stage.replace(stage.find(mode), mode.size(), "\"mode\":\"magic\"");
  e = EventFromJson(stage);
  ASSERT_FALSE(e.has_value());
  EXPECT_NE(e.error().message.find("spec.stages[0].mode: unknown value 'magic'"), std::string::npos)
      << e.error().message;
}

// Damaged lines never crash the decoder: each either decodes (and then
// encodes again) or is an error.
TEST(EventJsonTest, DamagedLinesAreErrorsNotCrashes) {
  Rng rng(5);
  int decoded = 0, refused = 0;
  for (const Event& e : EveryType()) {
    const std::string line = ToJsonLine(e);
    for (size_t cut = 0; cut < line.size(); ++cut) {
      auto r = EventFromJson(std::string_view(line).substr(0, cut));
      EXPECT_FALSE(r.has_value()) << line.substr(0, cut);
    }
    for (int trial = 0; trial < 200; ++trial) {
      std::string bad = line;
      bad[rng.Below(bad.size())] = static_cast<char>(rng.Below(256));
      auto r = EventFromJson(bad);
      if (r.has_value()) {
        ++decoded;
        (void)ToJsonLine(*r);
      } else {
        ++refused;
        EXPECT_FALSE(r.error().message.empty());
      }
    }
  }
  EXPECT_GT(refused, 0);
  EXPECT_GT(decoded, 0);  // e.g. a digit changed into another digit
}

// Equality sees every listed field, nested ones included, and nothing else.
TEST(EventEqualityTest, ADifferenceInAnyNestedFieldMakesEventsUnequal) {
  const std::vector<Event> events = EveryType();
  for (size_t i = 0; i < events.size(); ++i) {
    for (size_t k = 0; k < events.size(); ++k) EXPECT_EQ(events[i] == events[k], i == k) << i << " vs " << k;
  }
  Event a = events[4];
  Event b = a;
  std::get<JobSubmitted>(b.body).spec.task.env[1].second += "!";
  EXPECT_FALSE(a == b);
  b = a;
  std::get<JobSubmitted>(b.body).spec.stages[1].gpu_memory_mib += 1;
  EXPECT_FALSE(a == b);
  b = a;
  b.at += 1ms;
  EXPECT_FALSE(a == b);
  b = a;
  std::get<JobSubmitted>(b.body).spec.demand.mps_tenant = 9;  // derived, not in the journal
  EXPECT_TRUE(a == b);
  Event r = events[36];  // RegionsSet
  Event q = r;
  std::get<RegionsSet>(q.body).policy.regions[0].latency_ms["beijing"] = 29;
  EXPECT_FALSE(r == q);
}

TEST(EventBinaryTest, EveryEventTypeRoundTripsWithEveryField) {
  for (const Event& e : EveryType()) {
    const std::string bytes = EventToBinary(e);
    auto back = EventFromBinary(bytes);
    ASSERT_TRUE(back.has_value()) << EventName(e.body) << ": " << back.error().message;
    EXPECT_EQ(*back, e) << EventName(e.body);
    EXPECT_EQ(ToJsonLine(*back), ToJsonLine(e));
    EXPECT_EQ(EventToBinary(*back), bytes);
  }
}

TEST(EventBinaryTest, OptionalFieldsKeepTheirDefaultsAndAbsence) {
  JobSpec s;
  s.tenant = 0;
  s.demand = Demand{1000, 1024, 1, 1000};
  const Event e{1, InstantFromMillis(0), JobSubmitted{1, s}};
  auto back = EventFromBinary(EventToBinary(e));
  ASSERT_TRUE(back.has_value()) << back.error().message;
  const JobSpec& got = std::get<JobSubmitted>(back->body).spec;
  EXPECT_EQ(got.demand.reservation, -1);
  EXPECT_FALSE(got.deadline.has_value());
  EXPECT_TRUE(got.task.empty());
  EXPECT_EQ(*back, e);
}

TEST(EventBinaryTest, MalformedInputIsAnErrorNamingTheField) {
  const Event placed = EveryType()[6];  // JobPlaced
  std::string bytes = EventToBinary(placed);
  auto refuse = [](const std::string& b, const std::string& want) {
    auto r = EventFromBinary(b);
    ASSERT_FALSE(r.has_value()) << want;
    EXPECT_EQ(r.error().code, ErrorCode::kInvalidArgument);
    EXPECT_NE(r.error().message.find(want), std::string::npos) << "gave: " << r.error().message;
  };
  refuse("", "event: tag: ends early");
  refuse(std::string("\xff\x7f", 2) + std::string(16, '\0'), "event: tag: unknown event type 32767");
  refuse(bytes + "x", "JobPlaced event: 1 bytes after its end");
  // The borrowed flag sits after the tag (2), seq and at (16), job (8) and pool (1).
  std::string two = bytes;
  two[2 + 16 + 8 + 1] = 2;
  refuse(two, "JobPlaced event: borrowed: expected 0 or 1, got 2");
  // The replica count, next, claims more replicas than bytes are left.
  std::string many = bytes;
  many[2 + 16 + 8 + 1 + 1 + 7] = 0x10;
  refuse(many, "JobPlaced event: replicas: ends early");
  // A task without a command is refused, as in JSON.
  JobSpec s = EverySpecField();
  s.task.command.clear();
  s.task.image.clear();
  Event submitted{1, InstantFromMillis(0), JobSubmitted{1, s}};
  EXPECT_FALSE(EventToBinary(submitted).empty());
  auto no_task = EventFromBinary(EventToBinary(submitted));
  ASSERT_TRUE(no_task.has_value()) << no_task.error().message;  // an empty task is not written
  EXPECT_TRUE(std::get<JobSubmitted>(no_task->body).spec.task.empty());
  // Strings must be UTF-8, as the JSON codec needs.
  Event named{1, InstantFromMillis(0), TenantAdded{1, "ok"}};
  std::string bad_utf8 = EventToBinary(named);
  bad_utf8[bad_utf8.size() - 1] = static_cast<char>(0xff);
  refuse(bad_utf8, "TenantAdded event: name: not valid UTF-8");
}

// Found by the fuzzer (fuzz/event_binary_fuzz.cc): a region price of NaN decoded, and
// the event was then unequal to itself and had no JSON form.
TEST(EventBinaryTest, ANumberThatIsNotFiniteIsRefusedNamingTheField) {
  const Event e{1, InstantFromMillis(0), MigrationStarted{30, 7, 0b0110, 12.5 + 0.1}};
  const std::string bytes = EventToBinary(e);
  const double was = 12.5 + 0.1;
  const size_t at = bytes.find(std::string_view(reinterpret_cast<const char*>(&was), sizeof was));
  ASSERT_NE(at, std::string::npos);
  for (double bad : {std::numeric_limits<double>::quiet_NaN(), std::numeric_limits<double>::infinity(),
                     -std::numeric_limits<double>::infinity()}) {
    std::string damaged = bytes;
    std::memcpy(damaged.data() + at, &bad, sizeof bad);
    auto r = EventFromBinary(damaged);
    ASSERT_FALSE(r.has_value()) << bad;
    EXPECT_NE(r.error().message.find("not a finite number"), std::string::npos) << r.error().message;
  }
}

// Found by the fuzzer too: min_replicas and max_replicas given for a job
// whose max_replicas of 0 says it is not elastic decoded, and the event was
// then unequal to itself after a round trip. The binary form is canonical.
TEST(EventBinaryTest, AConditionalFieldMustBePresentExactlyWhenItIsWritten) {
  JobSpec s = EverySpecField();  // elastic: min_replicas 2, max_replicas 4
  ASSERT_EQ(s.min_replicas, 2);
  ASSERT_EQ(s.max_replicas, 4);
  const std::string bytes = EventToBinary(Event{1, InstantFromMillis(0), JobSubmitted{1, s}});
  const std::string elastic("\x01\x02\x00\x00\x00\x01\x04\x00\x00\x00", 10);
  const size_t at = bytes.find(elastic);
  ASSERT_NE(at, std::string::npos);
  ASSERT_EQ(bytes.find(elastic, at + 1), std::string::npos);
  std::string not_elastic = bytes;
  not_elastic[at + 6] = 0;  // max_replicas 0, both still present
  auto r = EventFromBinary(not_elastic);
  ASSERT_FALSE(r.has_value());
  EXPECT_NE(r.error().message.find("spec.min_replicas: given, but the record's other fields say it is not written"),
            std::string::npos)
      << r.error().message;
}

TEST(EventBinaryTest, DamagedOrCutInputIsAnErrorNotACrash) {
  Rng rng(7);
  int decoded = 0, refused = 0;
  for (const Event& e : EveryType()) {
    const std::string bytes = EventToBinary(e);
    for (size_t cut = 0; cut < bytes.size(); ++cut) {
      EXPECT_FALSE(EventFromBinary(std::string_view(bytes).substr(0, cut)).has_value()) << EventName(e.body) << cut;
    }
    for (int trial = 0; trial < 200; ++trial) {
      std::string bad = bytes;
      bad[rng.Below(bad.size())] = static_cast<char>(rng.Below(256));
      auto r = EventFromBinary(bad);
      if (r.has_value()) {
        ++decoded;
        (void)ToJsonLine(*r);  // valid UTF-8: the JSON codec takes it
      } else {
        ++refused;
      }
    }
  }
  EXPECT_GT(refused, 0);
  EXPECT_GT(decoded, 0);
}

}  // namespace
}  // namespace gpupool
