// libFuzzer target: one journal line (EventFromJson). A line that decodes
// must encode back to the same line's canonical form and decode again.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "src/engine/event.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view line(reinterpret_cast<const char*>(data), size);
  auto e = gpupool::EventFromJson(line);
  if (!e) return 0;
  const std::string once = gpupool::ToJsonLine(*e);
  auto back = gpupool::EventFromJson(once);
  if (!back || gpupool::ToJsonLine(*back) != once) std::abort();  // the round trip is the journal's contract
  return 0;
}
