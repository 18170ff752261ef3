// The binary form of events (src/engine/event.h), generated from their
// Fields lists by src/base/fields_binary.h.
#include <utility>

#include "src/base/fields_binary.h"
#include "src/engine/event.h"

namespace gpupool {
namespace {

constexpr size_t kEventTypes = std::variant_size_v<EventBody>;
static_assert(kEventTypes <= UINT16_MAX);

// The body of type `index`, read from `reader`.
template <size_t... I>
EventBody ReadBody(size_t index, BinaryFieldReader& reader, std::index_sequence<I...>) {
  EventBody body;
  ((index == I ? (void)([&] {
     std::variant_alternative_t<I, EventBody> e;
     reader.Read("", e);
     body = std::move(e);
   }())
               : (void)0),
   ...);
  return body;
}

}  // namespace

std::string EventToBinary(const Event& e) {
  ByteWriter w;
  w.Put<uint16_t>(static_cast<uint16_t>(e.body.index()));
  w.Put<int64_t>(e.seq);
  w.Put<int64_t>(ToMillis(e.at));
  std::visit([&](const auto& body) { FieldToBinary(w, body); }, e.body);
  return std::move(w.bytes());
}

Result<Event> EventFromBinary(std::string_view bytes) {
  BinaryFieldReader reader(bytes);
  uint16_t tag = 0;
  Event e;
  reader.Read("tag", tag);
  reader.Read("seq", e.seq);
  reader.Read("at", e.at);
  if (reader.failed()) return InvalidArgument("event: " + *reader.error());
  if (tag >= kEventTypes) return InvalidArgument("event: tag: unknown event type " + std::to_string(tag));
  e.body = ReadBody(tag, reader, std::make_index_sequence<kEventTypes>());
  const std::string type = EventName(e.body);
  if (reader.failed()) return InvalidArgument(type + " event: " + *reader.error());
  if (reader.bytes().remaining() != 0) {
    return InvalidArgument(type + " event: " + std::to_string(reader.bytes().remaining()) + " bytes after its end");
  }
  return e;
}

}  // namespace gpupool
