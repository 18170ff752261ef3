// libFuzzer target: a read-model snapshot (ReadModel::Decode), as read from a
// data directory or etcd at start-up. Damaged bytes must give an error, never
// a crash. Version 6 and later end in an XXH3-64 checksum, which random bytes
// almost never match; so each input is also decoded sealed (its checksum
// appended), which lets the fuzzer reach the sections behind the checksum.
// A snapshot that decodes must encode to bytes that decode and encode again
// to the same bytes.
#include <xxhash.h>

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string>
#include <string_view>

#include "src/server/read_model.h"

namespace {

void DecodeAndRoundTrip(std::string_view bytes) {
  gpupool::ReadModel m;
  if (!m.Decode(bytes)) return;
  const std::string once = m.Encode();
  gpupool::ReadModel again;
  if (!again.Decode(once) || again.Encode() != once) std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view bytes(reinterpret_cast<const char*>(data), size);
  DecodeAndRoundTrip(bytes);
  std::string sealed(bytes);
  const uint64_t sum = XXH3_64bits(sealed.data(), sealed.size());
  sealed.append(reinterpret_cast<const char*>(&sum), sizeof sum);
  DecodeAndRoundTrip(sealed);
  return 0;
}
