// A little-endian byte writer and a bounds-checked reader, for binary
// snapshots. The reader never reads past its end: a short or corrupt input
// sets failed() and yields zeros, and the caller turns that into an Error.
#pragma once

#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>
#include <type_traits>

namespace gpupool {

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
