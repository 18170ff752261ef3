// libFuzzer target: one binary journal event (EventFromBinary), the form an
// etcd journal batch holds. Damaged bytes must give an error, never a crash;
// an event that decodes must encode back to bytes that decode to the same
// event, and agree with the JSON codec (the journal's two forms of one event).
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>

#include "src/engine/event.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view bytes(reinterpret_cast<const char*>(data), size);
  auto e = gpupool::EventFromBinary(bytes);
  if (!e) return 0;
  const std::string once = gpupool::EventToBinary(*e);
  auto back = gpupool::EventFromBinary(once);
  if (!back || !(*back == *e) || gpupool::EventToBinary(*back) != once) std::abort();
  auto from_json = gpupool::EventFromJson(gpupool::ToJsonLine(*e));
  if (!from_json || !(*from_json == *e)) std::abort();  // EventFromBinary(EventToBinary(e)) == EventFromJson(ToJsonLine(e))
  return 0;
}
