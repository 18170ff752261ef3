// The JSON codec generated from a type's Fields list (src/base/fields.h).
//
// Writing: an object with one key per written field (nlohmann's objects
// keep keys sorted, so the text is a pure function of the value); Duration
// and Instant as integer milliseconds, enums by name, pairs as
// [first, second], string maps as objects.
//
// Reading is strict: every field the list reads as required must be there,
// a field the list does not name is an error (dropping it could rebuild a
// different state), each integer must fit its C++ type, each enum name must
// be known. The first error wins and names its path, e.g.
// "replicas[1].gpus: expected an integer in [0, 65535]"; reads after it
// are no-ops that leave defaults, so a reader goes straight through and the
// caller checks once. Nothing throws.
#pragma once

#include <algorithm>
#include <concepts>
#include <limits>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "src/base/fields.h"
#include "src/base/time.h"

namespace gpupool {

// Where a value sits, e.g. spec.stages[0].mode: a chain of links on the
// reader's stack, turned into text only for an error (so reading builds
// no strings).
struct JsonPath {
  const JsonPath* parent = nullptr;
  std::string_view key;  // a field's name; empty for an array item or the root
  int64_t index = -1;    // an array item's index
  std::string str() const {
    std::vector<const JsonPath*> chain;
    for (const JsonPath* p = this; p != nullptr; p = p->parent) chain.push_back(p);
    std::string out;
    for (auto it = chain.rbegin(); it != chain.rend(); ++it) {
      if ((*it)->index >= 0) {
        out += "[" + std::to_string((*it)->index) + "]";
      } else if (!(*it)->key.empty()) {
        if (!out.empty()) out += ".";
        out += (*it)->key;
      }
    }
    return out;
  }
};

// The first error met while reading one value.
struct JsonFieldErrors {
  std::optional<std::string> first;
  void Fail(const std::string& path, const std::string& why) {
    if (!first) first = path + ": " + why;
  }
  void Fail(const JsonPath& path, const std::string& why) {
    if (!first) Fail(path.str(), why);
  }
};

template <class T>
nlohmann::json FieldToJson(const T& value);

// Reads `j` into `out` (which starts as T{}), failing at `path`.
template <class T>
void FieldFromJson(JsonFieldErrors& errors, const nlohmann::json& j, const JsonPath& path, T& out);

// A strict reader of one JSON object: each field is read at most once, and
// Done() reports a field nothing read.
class JsonObjectReader {
 public:
  // `path` must outlive the reader.
  JsonObjectReader(JsonFieldErrors& errors, const nlohmann::json& j, const JsonPath& path)
      : errors_(errors), path_(path) {
    if (j.is_object()) {
      j_ = &j;
    } else {
      const std::string at = path_.str();
      errors_.Fail(at.empty() ? "value" : at, "expected an object");
    }
  }

  std::string PathOf(std::string_view key) const { return JsonPath{&path_, key}.str(); }

  // The field's value; nullptr (and, when required, an error) if absent.
  // Each key is read once (a Fields list names it once).
  const nlohmann::json* Find(const char* key, bool required) {
    if (j_ == nullptr || errors_.first) return nullptr;
    auto it = j_->find(key);
    if (it == j_->end()) {
      if (required) errors_.Fail(PathOf(key), "missing");
      return nullptr;
    }
    read_.push_back(key);
    return &*it;
  }

  void Done() {
    if (j_ == nullptr || errors_.first || read_.size() == j_->size()) return;
    for (const auto& [key, value] : j_->items()) {
      if (std::find(read_.begin(), read_.end(), key) == read_.end()) {
        errors_.Fail(PathOf(key), "unknown field");
        return;
      }
    }
  }

  // The field visitor protocol (fields.h), reading.
  template <class F>
  void operator()(const char* key, F& field) {
    const bool required = !IsOptional<F>::value;
    if (const nlohmann::json* v = Find(key, required)) FieldFromJson(errors_, *v, JsonPath{&path_, key}, field);
  }
  template <class F>
  void operator()(const char* key, F& field, bool /*written*/) {
    if (const nlohmann::json* v = Find(key, false)) FieldFromJson(errors_, *v, JsonPath{&path_, key}, field);
  }
  void Check(bool, const char*, const char*) {}

  JsonFieldErrors& errors() { return errors_; }

 private:
  JsonFieldErrors& errors_;
  const nlohmann::json* j_ = nullptr;
  const JsonPath& path_;
  std::vector<std::string_view> read_;
};

template <HasFields T>
void ReadFields(JsonObjectReader& reader, T& out);

namespace fields_internal {

// The field visitor protocol, writing.
struct JsonObjectWriter {
  nlohmann::json& j;
  template <class F>
  void operator()(const char* key, const F& field) {
    if constexpr (IsOptional<F>::value) {
      if (field) j[key] = FieldToJson(*field);
    } else {
      j[key] = FieldToJson(field);
    }
  }
  template <class F>
  void operator()(const char* key, const F& field, bool written) {
    if (written) j[key] = FieldToJson(field);
  }
  void Check(bool, const char*, const char*) {}
};

// Runs a record's checks once its fields are read.
struct JsonChecker {
  JsonObjectReader& reader;
  template <class F>
  void operator()(const char*, const F&) {}
  template <class F>
  void operator()(const char*, const F&, bool) {}
  void Check(bool ok, const char* key, const char* why) {
    if (!ok) reader.errors().Fail(reader.PathOf(key), why);
  }
};

template <std::integral T>
T IntFromJson(JsonFieldErrors& errors, const nlohmann::json& v, const JsonPath& path) {
  if (v.is_number_unsigned()) {
    const auto u = v.get<uint64_t>();
    if (std::in_range<T>(u)) return static_cast<T>(u);
  } else if (v.is_number_integer()) {
    const auto i = v.get<int64_t>();
    if (std::in_range<T>(i)) return static_cast<T>(i);
  }
  errors.Fail(path, "expected an integer in [" + std::to_string(std::numeric_limits<T>::min()) + ", " +
                        std::to_string(std::numeric_limits<T>::max()) + "]");
  return T{};
}

template <NamedEnum E>
E EnumFromJson(JsonFieldErrors& errors, const nlohmann::json& v, const JsonPath& path) {
  using Names = EnumNames<E>;
  if (!v.is_string()) {
    errors.Fail(path, "expected a string");
    return E{};
  }
  const std::string& name = v.get_ref<const std::string&>();
  for (int i = 0; i < Names::kCount; ++i) {
    if (name == Names::Name(static_cast<E>(i))) return static_cast<E>(i);
  }
  std::string known;
  for (int i = 0; i < Names::kCount; ++i) known += std::string(i ? ", " : "") + Names::Name(static_cast<E>(i));
  errors.Fail(path, "unknown value '" + name + "' (known: " + known + ")");
  return E{};
}

template <class T>
struct IsPair : std::false_type {};
template <>
struct IsPair<std::pair<std::string, std::string>> : std::true_type {};

}  // namespace fields_internal

// Reads the fields of `out` from the object `reader` holds, then runs its
// checks; the caller may read more fields of the same object, then calls
// Done().
template <HasFields T>
void ReadFields(JsonObjectReader& reader, T& out) {
  T::Fields(out, reader);
  fields_internal::JsonChecker checks{reader};
  if (!reader.errors().first) T::Fields(std::as_const(out), checks);
}

template <class T>
nlohmann::json FieldToJson(const T& value) {
  using namespace fields_internal;
  if constexpr (HasFields<T>) {
    nlohmann::json j = nlohmann::json::object();
    JsonObjectWriter w{j};
    T::Fields(value, w);
    return j;
  } else if constexpr (std::same_as<T, Duration>) {
    return ToMillis(value);
  } else if constexpr (std::same_as<T, Instant>) {
    return ToMillis(value);
  } else if constexpr (NamedEnum<T>) {
    return EnumNames<T>::Name(value);
  } else if constexpr (IsOptional<T>::value) {
    return value ? FieldToJson(*value) : nlohmann::json();
  } else if constexpr (IsVector<T>::value) {
    nlohmann::json a = nlohmann::json::array();
    for (const auto& item : value) a.push_back(FieldToJson(item));
    return a;
  } else if constexpr (IsPair<T>::value) {
    return nlohmann::json::array({value.first, value.second});
  } else if constexpr (IsStringMap<T>::value) {
    nlohmann::json o = nlohmann::json::object();
    for (const auto& [key, item] : value) o[key] = FieldToJson(item);
    return o;
  } else {
    static_assert(std::is_arithmetic_v<T> || std::same_as<T, std::string>, "no JSON codec for this field type");
    return value;
  }
}

template <class T>
void FieldFromJson(JsonFieldErrors& errors, const nlohmann::json& j, const JsonPath& path, T& out) {
  using namespace fields_internal;
  if (errors.first) return;
  if constexpr (HasFields<T>) {
    JsonObjectReader reader(errors, j, path);
    T::Fields(out, reader);
    reader.Done();  // an unknown field is reported before a failed check
    JsonChecker checks{reader};
    if (!errors.first) T::Fields(std::as_const(out), checks);
  } else if constexpr (std::same_as<T, Duration>) {
    out = Duration(IntFromJson<int64_t>(errors, j, path));
  } else if constexpr (std::same_as<T, Instant>) {
    out = InstantFromMillis(IntFromJson<int64_t>(errors, j, path));
  } else if constexpr (NamedEnum<T>) {
    out = EnumFromJson<T>(errors, j, path);
  } else if constexpr (IsOptional<T>::value) {
    typename T::value_type v{};
    FieldFromJson(errors, j, path, v);
    out = std::move(v);
  } else if constexpr (IsVector<T>::value) {
    if (!j.is_array()) return errors.Fail(path, "expected an array");
    for (size_t i = 0; i < j.size() && !errors.first; ++i) {
      typename T::value_type item{};
      FieldFromJson(errors, j[i], JsonPath{&path, {}, static_cast<int64_t>(i)}, item);
      out.push_back(std::move(item));
    }
  } else if constexpr (IsPair<T>::value) {
    if (!j.is_array() || j.size() != 2 || !j[0].is_string() || !j[1].is_string()) {
      return errors.Fail(path, "expected [name, value]");
    }
    out = {j[0].get<std::string>(), j[1].get<std::string>()};
  } else if constexpr (IsStringMap<T>::value) {
    if (!j.is_object()) return errors.Fail(path, "expected an object");
    for (const auto& [key, item] : j.items()) {
      typename T::mapped_type v{};
      FieldFromJson(errors, item, JsonPath{&path, key}, v);
      out[key] = std::move(v);
    }
  } else if constexpr (std::same_as<T, bool>) {
    if (!j.is_boolean()) return errors.Fail(path, "expected true or false");
    out = j.get<bool>();
  } else if constexpr (std::integral<T>) {
    out = IntFromJson<T>(errors, j, path);
  } else if constexpr (std::floating_point<T>) {
    if (!j.is_number()) return errors.Fail(path, "expected a number");
    out = j.get<T>();
  } else {
    static_assert(std::same_as<T, std::string>, "no JSON codec for this field type");
    if (!j.is_string()) return errors.Fail(path, "expected a string");
    out = j.get<std::string>();
  }
}

}  // namespace gpupool
