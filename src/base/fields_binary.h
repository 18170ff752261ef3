// The binary codec generated from a type's Fields list (src/base/fields.h),
// on the little-endian ByteWriter/ByteReader (src/base/bytes.h).
//
// Layout, field by field in list order, no names: integers and enums at
// their own width; bool as one byte 0 or 1; double as its 8 bytes;
// Duration and Instant as i64 milliseconds; strings as u64 length + bytes
// (valid UTF-8, like the JSON codec's); vectors and maps as u64 count +
// items (a map's items as key, value); std::optional and fields written
// only sometimes as one presence byte + the value when present; a record
// as its fields.
//
// Both codecs carry the same fields: one written only when its predicate
// holds is absent from both otherwise (and reads back as its default).
//
// Reading is strict: a count larger than the bytes left, a bool other than
// 0 or 1, an enum value past its names, a map key given twice, invalid
// UTF-8 or a failed Check is
// an error naming the field's path; the first one wins, later reads are
// no-ops.
#pragma once

#include <cmath>
#include <concepts>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "src/base/bytes.h"
#include "src/base/fields.h"
#include "src/base/time.h"

namespace gpupool {

template <class T>
void FieldToBinary(ByteWriter& w, const T& value);

// The first error met while reading; reads after it are no-ops.
class BinaryFieldReader {
 public:
  explicit BinaryFieldReader(std::string_view bytes) : r_(bytes) {}

  void Fail(const std::string& path, const std::string& why) {
    if (!first_) first_ = (path.empty() ? "value" : path) + ": " + why;
    r_.Fail();
  }
  bool failed() const { return first_.has_value() || r_.failed(); }
  const std::optional<std::string>& error() const { return first_; }
  ByteReader& bytes() { return r_; }

  // Reads `out` (which starts as T{}) at `path`.
  template <class T>
  void Read(const std::string& path, T& out);

 private:
  template <class T>
  struct RecordReader;
  template <class T>
  struct RecordChecker;

  ByteReader r_;
  std::optional<std::string> first_;
};

// True when `s` is well-formed UTF-8 (no overlong forms, no surrogates,
// nothing past U+10FFFF).
bool IsValidUtf8(std::string_view s);

namespace fields_internal {

struct BinaryRecordWriter {
  ByteWriter& w;
  template <class F>
  void operator()(const char*, const F& field) {
    FieldToBinary(w, field);
  }
  template <class F>
  void operator()(const char*, const F& field, bool written) {
    w.Put<uint8_t>(written ? 1 : 0);
    if (written) FieldToBinary(w, field);
  }
  void Check(bool, const char*, const char*) {}
};

template <class T>
struct IsStringPair : std::false_type {};
template <>
struct IsStringPair<std::pair<std::string, std::string>> : std::true_type {};

}  // namespace fields_internal

template <class T>
void FieldToBinary(ByteWriter& w, const T& value) {
  using namespace fields_internal;
  if constexpr (HasFields<T>) {
    BinaryRecordWriter rw{w};
    T::Fields(value, rw);
  } else if constexpr (std::same_as<T, Duration> || std::same_as<T, Instant>) {
    w.Put<int64_t>(ToMillis(value));
  } else if constexpr (std::same_as<T, bool>) {
    w.Put<uint8_t>(value ? 1 : 0);
  } else if constexpr (std::is_arithmetic_v<T> || std::is_enum_v<T>) {
    w.Put<T>(value);
  } else if constexpr (std::same_as<T, std::string>) {
    w.PutString(value);
  } else if constexpr (IsOptional<T>::value) {
    w.Put<uint8_t>(value ? 1 : 0);
    if (value) FieldToBinary(w, *value);
  } else if constexpr (IsVector<T>::value) {
    w.Put<uint64_t>(value.size());
    for (const auto& item : value) FieldToBinary(w, item);
  } else if constexpr (IsStringPair<T>::value) {
    w.PutString(value.first);
    w.PutString(value.second);
  } else {
    static_assert(IsStringMap<T>::value, "no binary codec for this field type");
    w.Put<uint64_t>(value.size());
    for (const auto& [key, item] : value) {
      w.PutString(key);
      FieldToBinary(w, item);
    }
  }
}

template <class T>
struct BinaryFieldReader::RecordReader {
  BinaryFieldReader& reader;
  const std::string& path;
  std::string PathOf(const char* key) const { return path.empty() ? std::string(key) : path + "." + key; }
  template <class F>
  void operator()(const char* key, F& field) {
    reader.Read(PathOf(key), field);
  }
  template <class F>
  void operator()(const char* key, F& field, bool /*written*/) {
    bool present = false;
    reader.Read(PathOf(key), present);
    if (present) reader.Read(PathOf(key), field);
    presence.push_back(present);
  }
  void Check(bool, const char*, const char*) {}
  // Whether each conditional field was present, in list order, for the
  // checker: the binary form is canonical (see RecordChecker).
  std::vector<bool> presence;
};

// Runs a record's checks once its fields are read.
template <class T>
// A conditional field must be present exactly when the record read says it
// is written (its predicate over the fields read): otherwise the bytes are
// not what the writer makes of that record, and the record would not equal
// itself after a round trip (min_replicas given for a job that is not
// elastic, found by fuzz/event_binary_fuzz.cc).
struct BinaryFieldReader::RecordChecker {
  BinaryFieldReader& reader;
  const std::string& path;
  const std::vector<bool>& presence;
  size_t next = 0;
  std::string PathOf(const char* key) const { return path.empty() ? std::string(key) : path + "." + key; }
  template <class F>
  void operator()(const char*, const F&) {}
  template <class F>
  void operator()(const char* key, const F&, bool written) {
    const bool present = next < presence.size() && presence[next];
    ++next;
    if (present != written) {
      reader.Fail(PathOf(key), present ? "given, but the record's other fields say it is not written"
                                       : "missing, but the record's other fields say it is written");
    }
  }
  void Check(bool ok, const char* key, const char* why) {
    if (!ok) reader.Fail(PathOf(key), why);
  }
};

template <class T>
void BinaryFieldReader::Read(const std::string& path, T& out) {
  using namespace fields_internal;
  if (failed()) return;
  if constexpr (HasFields<T>) {
    RecordReader<T> fields{*this, path};
    T::Fields(out, fields);
    RecordChecker<T> checks{*this, path, fields.presence};
    if (!failed()) T::Fields(std::as_const(out), checks);
  } else if constexpr (std::same_as<T, Duration>) {
    out = Duration(r_.Get<int64_t>());
  } else if constexpr (std::same_as<T, Instant>) {
    out = InstantFromMillis(r_.Get<int64_t>());
  } else if constexpr (std::same_as<T, bool>) {
    const uint8_t b = r_.Get<uint8_t>();
    if (b > 1) Fail(path, "expected 0 or 1, got " + std::to_string(b));
    out = b == 1;
  } else if constexpr (NamedEnum<T>) {
    const auto u = r_.Get<std::underlying_type_t<T>>();
    if (static_cast<int64_t>(u) < 0 || static_cast<int64_t>(u) >= EnumNames<T>::kCount) {
      Fail(path, "unknown value " + std::to_string(static_cast<int64_t>(u)));
    }
    out = static_cast<T>(u);
  } else if constexpr (std::floating_point<T>) {
    // The JSON form has no NaN or infinity, so neither form may hold one:
    // an event that decodes here must also encode as a journal line.
    out = r_.Get<T>();
    if (!r_.failed() && !std::isfinite(out)) Fail(path, "not a finite number");
  } else if constexpr (std::is_arithmetic_v<T>) {
    out = r_.Get<T>();
  } else if constexpr (std::same_as<T, std::string>) {
    out = r_.GetString();
    if (!r_.failed() && !IsValidUtf8(out)) Fail(path, "not valid UTF-8");
  } else if constexpr (IsOptional<T>::value) {
    bool present = false;
    Read(path, present);
    if (!present) return;
    typename T::value_type v{};
    Read(path, v);
    out = std::move(v);
  } else if constexpr (IsVector<T>::value) {
    const uint64_t n = r_.GetCount(1);
    for (uint64_t i = 0; i < n && !failed(); ++i) {
      typename T::value_type item{};
      Read(path + "[" + std::to_string(i) + "]", item);
      out.push_back(std::move(item));
    }
  } else if constexpr (IsStringPair<T>::value) {
    Read(path + "[0]", out.first);
    Read(path + "[1]", out.second);
  } else {
    static_assert(IsStringMap<T>::value, "no binary codec for this field type");
    const uint64_t n = r_.GetCount(1);
    for (uint64_t i = 0; i < n && !failed(); ++i) {
      std::string key;
      Read(path + "{key}", key);
      typename T::mapped_type v{};
      Read(path + "." + key, v);
      if (!failed() && !out.emplace(key, std::move(v)).second) Fail(path, "key '" + key + "' given twice");
    }
  }
  if (r_.failed() && !first_) first_ = (path.empty() ? "value" : path) + ": ends early";
}

}  // namespace gpupool
