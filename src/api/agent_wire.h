// The items of the agent protocol's messages (src/api/agent_protocol.h) as
// JSON, one reader and one writer each, shared by the messages that carry
// them. Internal to src/api: callers use agent_protocol.h.
//
// Readers follow FieldReader's rules: false after setting *err, which names
// the field by its JSON path; `unknown` says whether keys they do not know
// are errors (see agent_protocol.h: the protocol ignores them).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "src/api/agent_protocol.h"

namespace gpupool::agent_wire {

using nlohmann::json;

inline constexpr size_t kMaxItems = 4096;  // tasks, scrubs, logs per message
inline constexpr size_t kMaxLogChunkBytes = 1 << 20;
inline constexpr int64_t kMaxMib = int64_t{1} << 40;
inline constexpr int kMaxGpuIndex = 1023;

// Calls fn(item, path) for each element of the array `key` (absent: none).
template <class Fn>
bool Each(const FieldReader& f, std::string_view key, ApiError* err, Fn fn) {
  const json* v = f.Find(key);
  if (!v) return true;
  if (!v->is_array()) {
    *err = BadField(f.PathOf(key), "expected an array, got " + JsonTypeName(*v));
    return false;
  }
  if (v->size() > kMaxItems) {
    *err = BadField(f.PathOf(key), "too many entries (at most " + std::to_string(kMaxItems) + ")");
    return false;
  }
  for (size_t i = 0; i < v->size(); ++i) {
    if (!fn((*v)[i], f.PathOf(key) + "[" + std::to_string(i) + "]")) return false;
  }
  return true;
}

// Reads each element of the array `key` with read(item, path, T&, err, unknown) into `out`.
template <class T, class Read>
bool ReadList(const FieldReader& f, std::string_view key, std::vector<T>& out, ApiError* err, UnknownKeys unknown,
              Read read) {
  return Each(f, key, err, [&](const json& item, const std::string& path) {
    T x;
    if (!read(item, path, x, err, unknown)) return false;
    out.push_back(std::move(x));
    return true;
  });
}

template <class T>
bool IntAs(const FieldReader& f, std::string_view key, T& out, int64_t lo, int64_t hi, ApiError* err) {
  int64_t v = out;
  if (!f.Int(key, v, lo, hi, err)) return false;
  out = static_cast<T>(v);
  return true;
}

bool IntList(const FieldReader& f, std::string_view key, std::vector<int>& out, int hi, ApiError* err);

json MigJson(const std::vector<MigInstance>& instances);
bool ReadMigList(const FieldReader& f, std::vector<MigInstance>& out, ApiError* err, UnknownKeys unknown);
json GpuJson(const GpuDevice& g);
bool ReadGpu(const json& j, const std::string& path, GpuDevice& g, ApiError* err, UnknownKeys unknown);
json GpuSampleJson(const GpuSample& g, const std::map<int, std::vector<MigInstance>>& mig);
// Also puts the sample's MIG instances, when it has "mig", in mig[index].
bool ReadGpuSample(const json& j, const std::string& path, GpuSample& s, std::map<int, std::vector<MigInstance>>& mig,
                   ApiError* err, UnknownKeys unknown);

json TaskReportJson(const TaskReport& t);
bool ReadTaskReport(const json& j, const std::string& path, TaskReport& t, ApiError* err, UnknownKeys unknown);
json ScrubReportJson(const ScrubReport& s);
bool ReadScrubReport(const json& j, const std::string& path, ScrubReport& s, ApiError* err, UnknownKeys unknown);
json LogChunkJson(const LogChunk& l);
bool ReadLogChunk(const json& j, const std::string& path, LogChunk& l, ApiError* err, UnknownKeys unknown);

json TaskOrderJson(const TaskOrder& t);
bool ReadTaskOrder(const json& j, const std::string& path, TaskOrder& t, ApiError* err, UnknownKeys unknown);
json ScrubOrderJson(const ScrubOrder& s);
bool ReadScrubOrder(const json& j, const std::string& path, ScrubOrder& s, ApiError* err, UnknownKeys unknown);
json LogAckJson(const LogAck& l);
bool ReadLogAck(const json& j, const std::string& path, LogAck& l, ApiError* err, UnknownKeys unknown);
json TaskRefJson(const TaskRef& k);  // [job, replica, attempt]
bool ReadTaskRef(const json& j, const std::string& path, TaskRef& k, ApiError* err, UnknownKeys unknown);

// Writes each element with `write` into a JSON array.
template <class T, class Write>
json ListJson(const std::vector<T>& items, Write write) {
  json out = json::array();
  for (const T& x : items) out.push_back(write(x));
  return out;
}

}  // namespace gpupool::agent_wire
