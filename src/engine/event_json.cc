// The canonical JSON encoding of events and its inverse, generated from the
// events' Fields lists (src/engine/event.h, src/base/fields_json.h):
// nlohmann::json objects keep keys sorted, so the text is a pure function of
// the event.
#include <algorithm>
#include <array>
#include <utility>

#include <nlohmann/json.hpp>

#include "src/base/fields_json.h"
#include "src/engine/event.h"

namespace gpupool {

const char* PreemptReasonName(PreemptReason r) {
  switch (r) {
    case PreemptReason::kGuaranteeReclaim: return "guarantee-reclaim";
    case PreemptReason::kPriority: return "priority";
    case PreemptReason::kMigRecut: return "mig-recut";
    case PreemptReason::kDrain: return "drain";
    case PreemptReason::kDefrag: return "defrag";
    case PreemptReason::kHotspot: return "hotspot";
    case PreemptReason::kGpuUnhealthy: return "gpu-unhealthy";
  }
  return "unknown";
}

const char* ReclaimReasonName(ReclaimReason r) {
  return r == ReclaimReason::kIdle ? "idle" : "deadline";
}

const char* EventName(const EventBody& body) {
  return std::visit([](const auto& e) { return std::decay_t<decltype(e)>::kType; }, body);
}

std::string ToJsonLine(const Event& e) {
  nlohmann::json j = std::visit([](const auto& body) { return FieldToJson(body); }, e.body);
  j["seq"] = e.seq;
  j["at"] = ToMillis(e.at);
  j["type"] = EventName(e.body);
  return j.dump();
}

namespace {

constexpr size_t kEventTypes = std::variant_size_v<EventBody>;

template <size_t... I>
constexpr std::array<std::string_view, kEventTypes> TypeNamesOf(std::index_sequence<I...>) {
  return {std::variant_alternative_t<I, EventBody>::kType...};
}
// The type names, by variant index.
constexpr std::array<std::string_view, kEventTypes> kTypeNames =
    TypeNamesOf(std::make_index_sequence<kEventTypes>());

// The body of type `index`, its fields read from `reader`.
template <size_t... I>
EventBody ReadBody(size_t index, JsonObjectReader& reader, std::index_sequence<I...>) {
  EventBody body;
  // Exactly one I matches.
  ((index == I ? (void)([&] {
     std::variant_alternative_t<I, EventBody> e;
     ReadFields(reader, e);
     body = std::move(e);
   }())
               : (void)0),
   ...);
  return body;
}

}  // namespace

Result<Event> EventFromJson(std::string_view line) {
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(line);
  } catch (const nlohmann::json::exception& e) {
    return InvalidArgument(std::string("event: not valid JSON: ") + e.what());
  }
  if (!j.is_object()) return InvalidArgument("event: expected an object");
  JsonFieldErrors errors;
  const JsonPath root;
  JsonObjectReader reader(errors, j, root);
  Event e;
  int64_t at_ms = 0;
  std::string type;
  reader("seq", e.seq);
  reader("at", at_ms);
  reader("type", type);
  if (errors.first) return InvalidArgument("event: " + *errors.first);
  e.at = InstantFromMillis(at_ms);
  const size_t index = static_cast<size_t>(std::find(kTypeNames.begin(), kTypeNames.end(), type) - kTypeNames.begin());
  if (index == kEventTypes) return InvalidArgument("event: type: unknown event type '" + type + "'");
  e.body = ReadBody(index, reader, std::make_index_sequence<kEventTypes>());
  reader.Done();
  if (errors.first) return InvalidArgument(type + " event: " + *errors.first);
  return e;
}

bool operator==(const Event& a, const Event& b) {
  if (a.seq != b.seq || a.at != b.at || a.body.index() != b.body.index()) return false;
  return std::visit(
      [&](const auto& x) {
        using T = std::decay_t<decltype(x)>;
        return FieldsEqual(x, std::get<T>(b.body));
      },
      a.body);
}

}  // namespace gpupool
