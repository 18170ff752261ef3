#include "src/config/yaml_reader.h"

#include "src/base/yaml_documents.h"

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <charconv>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "src/config/traces_dir.h"
#include "src/model/demand.h"

namespace gpupool {

std::string ChildPath(std::string_view parent, std::string_view key) {
  if (parent.empty()) return std::string(key);
  return std::string(parent) + "." + std::string(key);
}

std::string ItemPath(std::string_view parent, size_t i) {
  return std::string(parent) + "[" + std::to_string(i) + "]";
}

std::string JoinNames(const std::vector<std::string>& names) {
  std::string out;
  for (const auto& n : names) {
    if (!out.empty()) out += ", ";
    out += n;
  }
  return out.empty() ? "none" : out;
}

std::string LowerCase(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

std::string YamlWhere(std::string_view source, const YAML::Mark& mark) {
  const int line = mark.is_null() ? 1 : mark.line + 1;
  const int column = mark.is_null() ? 1 : mark.column + 1;
  return std::string(source) + ":" + std::to_string(line) + ":" + std::to_string(column) + ": ";
}

const YAML::Node* YamlFields::Find(std::string_view key) const {
  for (const Entry& e : entries) {
    if (e.key == key) return &e.value;
  }
  return nullptr;
}

std::string NonNegative(double v) { return v < 0 ? "must not be negative" : ""; }
std::string Positive(double v) { return v > 0 ? "" : "must be positive"; }
std::string Fraction01(double v) { return v >= 0 && v <= 1 ? "" : "must be between 0 and 1"; }
std::string UpToHalf(double v) { return v >= 0 && v <= 0.5 ? "" : "must be between 0 and 0.5"; }
std::string AnyDuration(Duration) { return ""; }
std::string PositiveDuration(Duration d) { return d > Duration(0) ? "" : "must be positive"; }

Result<YAML::Node> ParseOneYamlDocument(std::string_view text, std::string_view source) {
  try {
    const YamlDocuments docs = CountYamlDocuments(text);
    if (docs.stuck) return InvalidArgument(YamlWhere(source, *docs.stuck) + "malformed YAML: cannot read on from here");
    if (docs.count > 1) {
      return InvalidArgument(YamlWhere(source, *docs.second) + "expected one YAML document, found " +
                             std::to_string(docs.count));
    }
    return docs.count == 0 ? YAML::Node() : YAML::Load(std::string(text));
  } catch (const YAML::ParserException& e) {
    return InvalidArgument(YamlWhere(source, e.mark) + "malformed YAML: " + e.msg);
  } catch (const YAML::Exception& e) {
    return InvalidArgument(YamlWhere(source, e.mark) + "YAML error: " + e.msg);
  }
}

Result<std::string> ReadConfigFile(const std::string& path) {
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec)) return IoError(path + ": cannot open (a folder, not a file)");
  std::ifstream in(path, std::ios::binary);
  if (!in) return IoError(path + ": cannot open (" + std::strerror(errno) + ")");
  std::ostringstream text;
  text << in.rdbuf();
  if (in.bad()) return IoError(path + ": cannot read");
  return text.str();
}

std::string ConfigFileDir(const std::string& path) {
  const std::string dir = std::filesystem::path(path).parent_path().string();
  return dir.empty() ? "." : dir;
}

std::unexpected<Error> YamlReader::Fail(const YAML::Node& at, std::string_view path, std::string_view problem) const {
  std::string msg = YamlWhere(source_, at.Mark());
  if (!path.empty()) msg += std::string(path) + ": ";
  msg += problem;
  return InvalidArgument(std::move(msg));
}

Result<YamlFields> YamlReader::Map(const YAML::Node& node, std::string path,
                                   const std::vector<std::string_view>& allowed) const {
  YamlFields f{node, std::move(path), {}};
  if (node.IsNull()) return f;
  if (!node.IsMap()) return Fail(node, f.path, "expected a map");
  for (const auto& kv : node) {
    const YAML::Node key = kv.first;
    if (!key.IsScalar()) return Fail(key, f.path, "expected a name as key");
    const std::string name = key.Scalar();
    if (!allowed.empty() && std::find(allowed.begin(), allowed.end(), name) == allowed.end()) {
      std::vector<std::string> known(allowed.begin(), allowed.end());
      return Fail(key, f.PathOf(name), "unknown key '" + name + "' (expected one of: " + JoinNames(known) + ")");
    }
    if (f.Has(name)) return Fail(key, f.PathOf(name), "duplicate key '" + name + "'");
    f.entries.push_back({name, key, kv.second});
  }
  return f;
}

Status YamlReader::Require(const YamlFields& f, std::string_view key) const {
  if (!f.Has(key)) return Fail(f.node, f.PathOf(key), "required");
  return {};
}

Result<std::string> YamlReader::String(const YAML::Node& n, const std::string& path, bool allow_empty) const {
  if (!n.IsScalar()) return Fail(n, path, "expected a string");
  if (!allow_empty && n.Scalar().empty()) return Fail(n, path, "must not be empty");
  return n.Scalar();
}

Result<double> YamlReader::Number(const YAML::Node& n, const std::string& path) const {
  if (!n.IsScalar()) return Fail(n, path, "expected a number");
  const std::string& s = n.Scalar();
  double v = 0;
  const char* begin = s.data();
  if (!s.empty() && s[0] == '+') ++begin;
  auto [ptr, ec] = std::from_chars(begin, s.data() + s.size(), v);
  if (s.empty() || ec != std::errc() || ptr != s.data() + s.size() || !std::isfinite(v)) {
    return Fail(n, path, "expected a number (got '" + s + "')");
  }
  return v;
}

Result<int64_t> YamlReader::Integer(const YAML::Node& n, const std::string& path) const {
  if (!n.IsScalar()) return Fail(n, path, "expected an integer");
  const std::string& s = n.Scalar();
  int64_t v = 0;
  const char* begin = s.data();
  if (!s.empty() && s[0] == '+') ++begin;
  auto [ptr, ec] = std::from_chars(begin, s.data() + s.size(), v);
  if (s.empty() || ec != std::errc() || ptr != s.data() + s.size()) {
    return Fail(n, path, "expected an integer (got '" + s + "')");
  }
  return v;
}

Result<bool> YamlReader::Bool(const YAML::Node& n, const std::string& path) const {
  bool v = false;
  if (!n.IsScalar() || !YAML::convert<bool>::decode(n, v)) return Fail(n, path, "expected true or false");
  return v;
}

Result<Duration> YamlReader::ParseDuration(const YAML::Node& n, const std::string& path) const {
  static constexpr const char* kExpect = "expected a duration such as \"90s\", \"5m\", \"1.5h\" or \"2d\"";
  if (!n.IsScalar()) return Fail(n, path, kExpect);
  const std::string& s = n.Scalar();
  double v = 0;
  auto [ptr, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (s.empty() || ec != std::errc() || !std::isfinite(v))
    return Fail(n, path, std::string(kExpect) + " (got '" + s + "')");
  const std::string_view unit(ptr, s.data() + s.size() - ptr);
  struct Unit {
    std::string_view name;
    double ms;
  };
  static constexpr Unit kUnits[] = {{"", 1000}, {"s", 1000}, {"ms", 1}, {"m", 60'000}, {"h", 3'600'000},
                                    {"d", 86'400'000}};
  double ms_per_unit = 0;
  for (const Unit& u : kUnits) {
    if (unit == u.name) ms_per_unit = u.ms;
  }
  if (ms_per_unit == 0) return Fail(n, path, std::string(kExpect) + " (got '" + s + "'; units: ms, s, m, h, d)");
  if (v < 0) return Fail(n, path, "must not be negative");
  const double ms = v * ms_per_unit;
  if (ms > kMaxDurationMs) return Fail(n, path, "too long");
  return Duration(std::llround(ms));
}

Result<std::vector<std::string>> YamlReader::StringList(const YAML::Node& n, const std::string& path,
                                                        std::vector<YamlRef>* refs) const {
  if (n.IsNull()) return std::vector<std::string>{};
  if (!n.IsSequence()) return Fail(n, path, "expected a list of names");
  std::vector<std::string> out;
  for (size_t i = 0; i < n.size(); ++i) {
    std::string s;
    GP_ASSIGN_OR_RETURN(s, String(n[i], ItemPath(path, i)));
    if (std::find(out.begin(), out.end(), s) != out.end()) return Fail(n[i], ItemPath(path, i), "duplicate '" + s + "'");
    out.push_back(s);
    if (refs) refs->push_back({n[i], ItemPath(path, i)});
  }
  return out;
}

Result<YAML::Node> YamlReader::RequiredList(const YamlFields& f, std::string_view key, size_t max,
                                            std::string_view what) const {
  GP_TRY(Require(f, key));
  const YAML::Node& list = *f.Find(key);
  const std::string path = f.PathOf(key);
  if (!list.IsSequence() || list.size() == 0) return Fail(list, path, "expected a list of at least one of the " + std::string(what));
  if (list.size() > max) return Fail(list, path, "at most " + std::to_string(max) + " " + std::string(what));
  return list;
}

Status YamlReader::StringField(const YamlFields& f, std::string_view key, std::string& out, bool allow_empty) const {
  const YAML::Node* n = f.Find(key);
  if (!n) return {};
  GP_ASSIGN_OR_RETURN(out, String(*n, f.PathOf(key), allow_empty));
  return {};
}

Status YamlReader::BoolField(const YamlFields& f, std::string_view key, bool& out) const {
  const YAML::Node* n = f.Find(key);
  if (!n) return {};
  GP_ASSIGN_OR_RETURN(out, Bool(*n, f.PathOf(key)));
  return {};
}

Status YamlReader::GpuFractionField(const YamlFields& f, std::string_view key, int32_t& milli) const {
  const YAML::Node* n = f.Find(key);
  if (!n) return {};
  double v = 0;
  GP_TRY(NumberField(f, key, v, [](double x) -> std::string {
    return x > 0 && x < 1 ? "" : "must be between 0 and 1 (exclusive); use gpus for whole GPUs";
  }));
  const auto m = static_cast<int32_t>(std::llround(v * kMilliPerGpu));
  if (m < 1 || m >= kMilliPerGpu) return Fail(*n, f.PathOf(key), "must be between 0.001 and 0.999");
  milli = m;
  return {};
}

Status YamlReader::GpuMemoryField(const YamlFields& f, std::string_view key, int32_t& mib) const {
  int64_t v = 0;
  GP_TRY(ScaledField(f, key, v, 1024, [](double x) -> std::string { return x < 0 ? "must not be negative" : ""; }));
  if (v > INT32_MAX) return Fail(*f.Find(key), f.PathOf(key), "too large");
  if (f.Has(key)) mib = static_cast<int32_t>(v);
  return {};
}

std::string YamlReader::ResolvePath(const std::string& p) const {
  namespace fs = std::filesystem;
  static constexpr std::string_view kTraces = "$TRACES/";
  if (p.starts_with(kTraces)) {
    // When no traces folder exists the path still names where one would
    // be, so the simulator's "not here" message shows it.
    std::string dir = TracesDir(base_dir_.empty() ? "." : base_dir_);
    if (dir.empty()) dir = "../shared/traces";
    while (dir.size() > 1 && dir.back() == '/') dir.pop_back();
    return dir + "/" + p.substr(kTraces.size());
  }
  const fs::path path(p);
  if (path.is_absolute() || base_dir_.empty()) return p;
  return (fs::path(base_dir_) / path).lexically_normal().string();
}

}  // namespace gpupool
