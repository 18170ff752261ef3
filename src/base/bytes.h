// The project's one byte codec (issue 21): little-endian fixed-width
// integers, LEB128 varints and zigzag varints as free functions, and on
// them a byte writer and a bounds-checked reader, for binary snapshots and
// event records. The reader never reads past its end: a short or corrupt
// input sets failed() and yields zeros, and the caller turns that into an
// Error. The engine's snapshot codec (src/engine/snapshot.cc) keeps its own
// reader for its field-named messages, on the same functions.
#pragma once

#include <bit>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>
#include <type_traits>

namespace gpupool {

// `bytes` (1 to 8) low bytes of `v`, least significant first.
inline void StoreLe(char* p, uint64_t v, int bytes) {
  for (int i = 0; i < bytes; ++i) p[i] = static_cast<char>(v >> (8 * i));
}
inline uint64_t LoadLe64(const char* p) {
  uint64_t v;
  std::memcpy(&v, p, 8);
  if constexpr (std::endian::native == std::endian::big) v = std::byteswap(v);
  return v;
}

// A varint: 7 bits a byte, the low ones first, the high bit set on every
// byte but the last; at most kMaxVarintBytes. A zigzag varint maps
// 0, -1, 1, -2, ... to 0, 1, 2, 3, ... first, so small negatives stay short.
inline constexpr int kMaxVarintBytes = 10;
// Writes `v` at `out` (room for kMaxVarintBytes); returns the bytes written.
inline int EncodeVarint(uint64_t v, char* out) {
  int n = 0;
  while (v >= 0x80) {
    out[n++] = static_cast<char>(v | 0x80);
    v >>= 7;
  }
  out[n++] = static_cast<char>(v);
  return n;
}
inline uint64_t ZigzagEncode(int64_t v) { return (static_cast<uint64_t>(v) << 1) ^ static_cast<uint64_t>(v >> 63); }
inline int64_t ZigzagDecode(uint64_t u) { return static_cast<int64_t>(u >> 1) ^ -static_cast<int64_t>(u & 1); }

enum class VarintRead { kOk, kTruncated, kMalformed };
// Reads a varint from [*p, end) into *v and advances *p past it. kTruncated
// when the input ends inside it; kMalformed when it runs over 64 bits.
// On failure *v is 0.
inline VarintRead DecodeVarint(const char** p, const char* end, uint64_t* v) {
  *v = 0;
  uint64_t out = 0;
  for (int shift = 0; shift < 64; shift += 7) {
    if (*p == end) return VarintRead::kTruncated;
    const auto b = static_cast<uint8_t>(*(*p)++);
    if (shift == 63 && b > 1) break;
    out |= static_cast<uint64_t>(b & 0x7f) << shift;
    if (!(b & 0x80)) {
      *v = out;
      return VarintRead::kOk;
    }
  }
  return VarintRead::kMalformed;
}

class ByteWriter {
 public:
  template <class T>
    requires std::is_arithmetic_v<T> || std::is_enum_v<T>
  void Put(T v) {
    char b[sizeof(T)];
    std::memcpy(b, &v, sizeof(T));
    out_.append(b, sizeof(T));
  }
  void PutString(std::string_view s) {
    Put<uint64_t>(s.size());
    out_.append(s.data(), s.size());
  }
  // Raw bytes of a trivially copyable value (for fixed-layout structs).
  template <class T>
    requires std::is_trivially_copyable_v<T>
  void PutRaw(const T& v) {
    out_.append(reinterpret_cast<const char*>(&v), sizeof(T));
  }
  void PutVarint(uint64_t v) {
    char b[kMaxVarintBytes];
    out_.append(b, EncodeVarint(v, b));
  }
  void PutZigzag(int64_t v) { PutVarint(ZigzagEncode(v)); }
  std::string& bytes() { return out_; }

 private:
  std::string out_;
};

class ByteReader {
 public:
  explicit ByteReader(std::string_view in) : in_(in) {}

  template <class T>
    requires std::is_arithmetic_v<T> || std::is_enum_v<T>
  T Get() {
    T v{};
    if (!Take(sizeof(T))) return v;
    std::memcpy(&v, in_.data() + pos_ - sizeof(T), sizeof(T));
    return v;
  }
  uint64_t GetVarint() {
    if (failed_) return 0;
    const char* p = in_.data() + pos_;
    uint64_t v = 0;
    if (DecodeVarint(&p, in_.data() + in_.size(), &v) != VarintRead::kOk) {
      failed_ = true;
      return 0;
    }
    pos_ = static_cast<size_t>(p - in_.data());
    return v;
  }
  int64_t GetZigzag() { return ZigzagDecode(GetVarint()); }
  std::string GetString() {
    const uint64_t n = Get<uint64_t>();
    if (n > remaining()) {
      failed_ = true;
      return {};
    }
    std::string s(in_.substr(pos_, n));
    pos_ += n;
    return s;
  }
  template <class T>
    requires std::is_trivially_copyable_v<T>
  void GetRaw(T& v) {
    if (!Take(sizeof(T))) return;
    std::memcpy(&v, in_.data() + pos_ - sizeof(T), sizeof(T));
  }
  // A count of items each at least `min_item_bytes` long: fails (returns 0)
  // when the rest of the input cannot hold that many.
  uint64_t GetCount(uint64_t min_item_bytes) {
    const uint64_t n = Get<uint64_t>();
    if (min_item_bytes > 0 && n > remaining() / min_item_bytes) {
      failed_ = true;
      return 0;
    }
    return n;
  }
  size_t remaining() const { return in_.size() - pos_; }
  // Bytes read so far: where a failed read stopped (for messages).
  size_t position() const { return pos_; }
  bool failed() const { return failed_; }
  void Fail() { failed_ = true; }

 private:
  bool Take(size_t n) {
    if (failed_ || n > remaining()) {
      failed_ = true;
      return false;
    }
    pos_ += n;
    return true;
  }
  std::string_view in_;
  size_t pos_ = 0;
  bool failed_ = false;
};

}  // namespace gpupool
