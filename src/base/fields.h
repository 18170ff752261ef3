// Types declared once (issue 21): a record type lists its fields, each with
// the name it has on disk, in one static member template (GP_FIELDS), and
// its codecs and equality are generated from that list instead of being
// written by hand beside it:
//
//   struct JobFinished {
//     JobId job = -1;
//     bool succeeded = true;
//     std::string reason;
//     GP_EVENT_FIELDS("JobFinished", e) {              // GP_FIELDS(e) for a record
//       v("job", e.job);                               // always written
//       v("succeeded", e.succeeded);
//       v("reason", e.reason, !e.reason.empty());      // written when true
//     }
//   };
//
// GP_FIELDS(e) declares `template <class Self, class V> static void
// Fields(Self& e, V& v)`: `Self` is the type or the type const (a writer
// visits a const object, a reader a default-constructed one that it
// fills). GP_EVENT_FIELDS(name, e) adds `kType`, the event's type name in
// the journal. The visitor protocol:
//   v(name, field)           a field that is always written and must be read;
//   v(name, field, written)  a field written only when `written` (computed
//                            from the object being written; readers ignore
//                            it): absent when read, it keeps its default;
//   v.Check(ok, name, why)   a rule a reader enforces after the fields are
//                            read (writers ignore it), e.g. "must not be
//                            empty"; the error is at `name`.
// A std::optional field is always optional: written when it holds a value.
// Field values are integers, bool, double, std::string, Duration and
// Instant (milliseconds), enums with EnumNames, std::vector, std::optional,
// std::pair<std::string, std::string>, std::map<std::string, V> and types
// with Fields. Generated from the list: the JSON codec (fields_json.h), the
// binary codec (fields_binary.h) and FieldsEqual below.
//
// Names, their meanings and an enum's value names are on-disk formats:
// never rename or reuse one (tests/event_format_test.cc pins the journal's).
#pragma once

#include <concepts>
#include <cstddef>
#include <map>
#include <optional>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#define GP_FIELDS(e)                 \
  template <class Self, class V>     \
  static void Fields(Self& e, V& v)
#define GP_EVENT_FIELDS(type_name, e)                   \
  static constexpr const char* kType = type_name;       \
  GP_FIELDS(e)

namespace gpupool {

// An enum's on-disk value names, specialised next to the enum:
//   template <> struct EnumNames<ShareMode> {
//     static constexpr int kCount = 4;              // values 0 .. kCount-1
//     static const char* Name(ShareMode m) { return ShareModeName(m); }
//   };
template <class E>
struct EnumNames;

template <class E>
concept NamedEnum = std::is_enum_v<E> && requires(E e) {
  { EnumNames<E>::kCount } -> std::convertible_to<int>;
  { EnumNames<E>::Name(e) } -> std::convertible_to<const char*>;
};

// A visitor that does nothing: the shape every visitor has.
struct NullFieldVisitor {
  template <class F>
  void operator()(const char*, F&) {}
  template <class F>
  void operator()(const char*, F&, bool) {}
  void Check(bool, const char*, const char*) {}
};

template <class T>
concept HasFields = requires(T& t, NullFieldVisitor& v) { T::Fields(t, v); };

template <class T>
struct IsOptional : std::false_type {};
template <class T>
struct IsOptional<std::optional<T>> : std::true_type {};
template <class T>
struct IsVector : std::false_type {};
template <class T, class A>
struct IsVector<std::vector<T, A>> : std::true_type {};
template <class T>
struct IsStringMap : std::false_type {};
template <class V, class C, class A>
struct IsStringMap<std::map<std::string, V, C, A>> : std::true_type {};

// Field-by-field equality of two records over their Fields lists (fields
// that are not listed, such as derived ones, are not compared).
template <HasFields T>
bool FieldsEqual(const T& a, const T& b);

namespace fields_internal {

template <class T>
bool ValueEqual(const T& a, const T& b) {
  if constexpr (HasFields<T>) {
    return FieldsEqual(a, b);
  } else if constexpr (IsVector<T>::value) {
    if (a.size() != b.size()) return false;
    for (size_t i = 0; i < a.size(); ++i) {
      if (!ValueEqual(a[i], b[i])) return false;
    }
    return true;
  } else if constexpr (IsOptional<T>::value) {
    if (a.has_value() != b.has_value()) return false;
    return !a.has_value() || ValueEqual(*a, *b);
  } else {
    return a == b;
  }
}

// Collects the addresses of b's fields, in list order.
struct AddressCollector {
  std::vector<const void*> fields;
  template <class F>
  void operator()(const char*, const F& f) {
    fields.push_back(&f);
  }
  template <class F>
  void operator()(const char*, const F& f, bool) {
    fields.push_back(&f);
  }
  void Check(bool, const char*, const char*) {}
};

// Compares a's fields with the collected ones of b, which has the same list.
struct Comparer {
  const std::vector<const void*>& other;
  size_t next = 0;
  bool equal = true;
  template <class F>
  void operator()(const char*, const F& f) {
    const F& g = *static_cast<const F*>(other[next++]);
    equal = equal && ValueEqual(f, g);
  }
  template <class F>
  void operator()(const char* name, const F& f, bool) {
    (*this)(name, f);
  }
  void Check(bool, const char*, const char*) {}
};

}  // namespace fields_internal

template <HasFields T>
bool FieldsEqual(const T& a, const T& b) {
  fields_internal::AddressCollector collect;
  T::Fields(b, collect);
  fields_internal::Comparer compare{collect.fields};
  T::Fields(a, compare);
  return compare.equal;
}

}  // namespace gpupool
