// The strict YAML reader shared by every configuration file (cluster
// configurations, scenarios, server configurations): maps with known keys,
// typed scalars with range checks, durations, name lists, and one error
// style, "SOURCE:LINE:COLUMN: PATH: PROBLEM" (e.g.
// "claims/C-LEND.yaml:12:7: tenants[1].quota.a100.guaranteed_gpus: must not
// be negative"), where PATH is the key's path from the document's root.
//
// Nothing here knows a schema: the readers of each section (cluster_reader.h,
// src/sim/scenario.cc, src/server/server_config.cc) say which keys a map may
// hold and what each must be. A YamlReader is immutable after construction;
// its methods are safe to call from several threads on different nodes.
#pragma once

#include <yaml-cpp/yaml.h>

#include <cmath>
#include <cstdint>
#include <expected>
#include <string>
#include <string_view>
#include <vector>

#include "src/base/status.h"
#include "src/base/time.h"

namespace gpupool {

// "parent.key" ("key" at the root) and "parent[i]".
std::string ChildPath(std::string_view parent, std::string_view key);
std::string ItemPath(std::string_view parent, size_t i);
// "a, b, c", or "none" for an empty list.
std::string JoinNames(const std::vector<std::string>& names);
std::string LowerCase(std::string s);
// "SOURCE:LINE:COLUMN: " (1-based) for messages; 1:1 when the mark is unknown.
std::string YamlWhere(std::string_view source, const YAML::Mark& mark);

// The entries of a YAML map, in file order, with their key nodes (for the
// position of "unknown key" errors) and the map's own node and path.
struct YamlFields {
  struct Entry {
    std::string key;
    YAML::Node key_node;
    YAML::Node value;
  };
  YAML::Node node;
  std::string path;
  std::vector<Entry> entries;

  const YAML::Node* Find(std::string_view key) const;
  bool Has(std::string_view key) const { return Find(key) != nullptr; }
  std::string PathOf(std::string_view key) const { return ChildPath(path, key); }
};

// A YAML node and where it sits, for references checked after the whole
// file is read.
struct YamlRef {
  YAML::Node node;
  std::string path;
};

// Checks for the *Field readers: each returns a problem, or "" when the
// value is fine.
std::string NonNegative(double v);
std::string Positive(double v);
std::string Fraction01(double v);
std::string UpToHalf(double v);
std::string AnyDuration(Duration);
std::string PositiveDuration(Duration d);
inline auto IntRange(int64_t lo, int64_t hi) {
  return [lo, hi](int64_t v) -> std::string {
    if (v < lo) return lo == 0 ? "must not be negative" : "must be at least " + std::to_string(lo);
    if (v > hi) return "must be at most " + std::to_string(hi);
    return "";
  };
}

// The longest duration a file may give (~31,000 years: keeps int64
// arithmetic on milliseconds safe).
inline constexpr double kMaxDurationMs = 1e15;

// Parses `text` as exactly one YAML document (an empty text is a null
// node); malformed YAML or a second document is an InvalidArgument error at
// its position.
Result<YAML::Node> ParseOneYamlDocument(std::string_view text, std::string_view source);
// The whole file; IoError naming the path (a folder is refused).
Result<std::string> ReadConfigFile(const std::string& path);
// The folder that relative paths in the file at `path` resolve against
// ("." for a bare file name).
std::string ConfigFileDir(const std::string& path);

// Parses `text` as one document and hands its root to `read` (a reader's
// Parse); a yaml-cpp exception thrown while reading becomes an error at its
// position, so that nothing throws past the reader.
template <class Read>
auto ReadYamlDocument(std::string_view text, std::string_view source, Read read) -> decltype(read(YAML::Node())) {
  GP_ASSIGN_OR_RETURN(const YAML::Node root, ParseOneYamlDocument(text, source));
  try {
    return read(root);
  } catch (const YAML::Exception& e) {
    return InvalidArgument(YamlWhere(source, e.mark) + "YAML error: " + e.msg);
  }
}

class YamlReader {
 public:
  // `source` names the text in messages; `base_dir` resolves relative paths.
  YamlReader(std::string_view source, std::string base_dir) : source_(source), base_dir_(std::move(base_dir)) {}

  // An InvalidArgument error at `at`'s position, with `path` (if any).
  std::unexpected<Error> Fail(const YAML::Node& at, std::string_view path, std::string_view problem) const;

  // --- maps -------------------------------------------------------------
  // A map (null counts as empty) whose keys are distinct and, unless
  // `allowed` is empty, among `allowed`.
  Result<YamlFields> Map(const YAML::Node& node, std::string path, const std::vector<std::string_view>& allowed) const;
  Status Require(const YamlFields& f, std::string_view key) const;
  // The list under `key`, which must be there with 1 to `max` items;
  // `what` names them in messages ("rules", "parameters").
  Result<YAML::Node> RequiredList(const YamlFields& f, std::string_view key, size_t max, std::string_view what) const;

  // --- scalars ----------------------------------------------------------
  Result<std::string> String(const YAML::Node& n, const std::string& path, bool allow_empty = false) const;
  Result<double> Number(const YAML::Node& n, const std::string& path) const;  // finite
  Result<int64_t> Integer(const YAML::Node& n, const std::string& path) const;
  Result<bool> Bool(const YAML::Node& n, const std::string& path) const;
  // "90s", "1.5h", "5m", "250ms", "2d", or a plain number of seconds; not
  // negative, at most kMaxDurationMs.
  Result<Duration> ParseDuration(const YAML::Node& n, const std::string& path) const;
  // A list of distinct non-empty names (null: empty); `refs` gets each item.
  Result<std::vector<std::string>> StringList(const YAML::Node& n, const std::string& path,
                                              std::vector<YamlRef>* refs = nullptr) const;

  // --- optional fields with checks ----------------------------------------
  // Each sets `out` only when the key is present; `check` returns a problem
  // or an empty string.
  template <class Check>
  Status NumberField(const YamlFields& f, std::string_view key, double& out, Check check) const {
    const YAML::Node* n = f.Find(key);
    if (!n) return {};
    double v = 0;
    GP_ASSIGN_OR_RETURN(v, Number(*n, f.PathOf(key)));
    if (std::string problem = check(v); !problem.empty()) return Fail(*n, f.PathOf(key), problem);
    out = v;
    return {};
  }
  template <class T, class Check>
  Status IntField(const YamlFields& f, std::string_view key, T& out, Check check) const {
    const YAML::Node* n = f.Find(key);
    if (!n) return {};
    int64_t v = 0;
    GP_ASSIGN_OR_RETURN(v, Integer(*n, f.PathOf(key)));
    if (std::string problem = check(v); !problem.empty()) return Fail(*n, f.PathOf(key), problem);
    out = static_cast<T>(v);
    return {};
  }
  template <class Check>
  Status DurationField(const YamlFields& f, std::string_view key, Duration& out, Check check) const {
    const YAML::Node* n = f.Find(key);
    if (!n) return {};
    Duration d{0};
    GP_ASSIGN_OR_RETURN(d, ParseDuration(*n, f.PathOf(key)));
    if (std::string problem = check(d); !problem.empty()) return Fail(*n, f.PathOf(key), problem);
    out = d;
    return {};
  }
  Status StringField(const YamlFields& f, std::string_view key, std::string& out, bool allow_empty = false) const;
  Status BoolField(const YamlFields& f, std::string_view key, bool& out) const;
  // Fractional cores or GiB converted to milli-cores or MiB.
  template <class Check>
  Status ScaledField(const YamlFields& f, std::string_view key, int64_t& out, double factor, Check check) const {
    double v = 0;
    const bool present = f.Has(key);
    GP_TRY(NumberField(f, key, v, check));
    if (present) {
      if (v * factor > 9e15) return Fail(*f.Find(key), f.PathOf(key), "too large");
      out = std::llround(v * factor);
    }
    return {};
  }
  // A share of one GPU, as a fraction in (0, 1), converted to milli-GPUs
  // (1..999); sets `milli` only when the key is present.
  Status GpuFractionField(const YamlFields& f, std::string_view key, int32_t& milli) const;
  // GPU memory in GiB (fractional allowed) converted to MiB.
  Status GpuMemoryField(const YamlFields& f, std::string_view key, int32_t& mib) const;

  // A path from the file: "$TRACES/..." goes to the traces folder
  // (src/config/traces_dir.h); other relative paths are relative to the
  // file's folder.
  std::string ResolvePath(const std::string& p) const;

  std::string_view source() const { return source_; }

 private:
  std::string source_;
  std::string base_dir_;
};

}  // namespace gpupool
