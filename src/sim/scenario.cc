#include "src/sim/scenario.h"

#include "src/sim/traces_dir.h"

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string_view>
#include <utility>

#include "src/engine/mode_policy.h"
#include "src/model/demand.h"
#include "src/model/gpu_catalog.h"
#include "src/sched/policy.h"

namespace gpupool {
namespace {

constexpr int kMaxNodeGroupCount = 1'000'000;
constexpr double kMaxDurationMs = 1e15;  // ~31,000 years: keeps int64 arithmetic safe

std::string Child(std::string_view parent, std::string_view key) {
  if (parent.empty()) return std::string(key);
  return std::string(parent) + "." + std::string(key);
}

std::string Item(std::string_view parent, size_t i) { return std::string(parent) + "[" + std::to_string(i) + "]"; }

std::string JoinNames(const std::vector<std::string>& names) {
  std::string out;
  for (const auto& n : names) {
    if (!out.empty()) out += ", ";
    out += n;
  }
  return out.empty() ? "none" : out;
}

template <class Map>
std::string KeysOf(const Map& m) {
  std::vector<std::string> names;
  for (const auto& [k, v] : m) names.push_back(k);
  return JoinNames(names);
}

std::string Lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

// "SOURCE:LINE:COLUMN: " (1-based) for messages; 1:1 when the mark is unknown.
std::string Where(std::string_view source, const YAML::Mark& mark) {
  const int line = mark.is_null() ? 1 : mark.line + 1;
  const int column = mark.is_null() ? 1 : mark.column + 1;
  return std::string(source) + ":" + std::to_string(line) + ":" + std::to_string(column) + ": ";
}

// The entries of a YAML map, in file order, with their key nodes (for the
// position of "unknown key" errors) and the map's own node and path.
struct Fields {
  struct Entry {
    std::string key;
    YAML::Node key_node;
    YAML::Node value;
  };
  YAML::Node node;
  std::string path;
  std::vector<Entry> entries;

  const YAML::Node* Find(std::string_view key) const {
    for (const Entry& e : entries) {
      if (e.key == key) return &e.value;
    }
    return nullptr;
  }
  bool Has(std::string_view key) const { return Find(key) != nullptr; }
  std::string PathOf(std::string_view key) const { return Child(path, key); }
};

// A YAML node and where it sits, for references checked after the whole
// file is read.
struct Ref {
  YAML::Node node;
  std::string path;
};

class Parser {
 public:
  Parser(std::string_view source, std::string base_dir, bool server = false)
      : source_(source), base_dir_(std::move(base_dir)), server_(server) {}

  Result<Scenario> Parse(const YAML::Node& root);

 private:
  // --- errors -----------------------------------------------------------
  std::unexpected<Error> Fail(const YAML::Node& at, std::string_view path, std::string_view problem) const {
    std::string msg = Where(source_, at.Mark());
    if (!path.empty()) msg += std::string(path) + ": ";
    msg += problem;
    return InvalidArgument(std::move(msg));
  }

  // --- maps -------------------------------------------------------------
  // A map (null counts as empty) whose keys are distinct and, unless
  // `allowed` is empty, among `allowed`.
  Result<Fields> Map(const YAML::Node& node, std::string path, const std::vector<std::string_view>& allowed) const {
    Fields f{node, std::move(path), {}};
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

  Status Require(const Fields& f, std::string_view key) const {
    if (!f.Has(key)) return Fail(f.node, f.PathOf(key), "required");
    return {};
  }

  // --- scalars ----------------------------------------------------------
  Result<std::string> String(const YAML::Node& n, const std::string& path, bool allow_empty = false) const {
    if (!n.IsScalar()) return Fail(n, path, "expected a string");
    if (!allow_empty && n.Scalar().empty()) return Fail(n, path, "must not be empty");
    return n.Scalar();
  }

  Result<double> Number(const YAML::Node& n, const std::string& path) const {
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

  Result<int64_t> Integer(const YAML::Node& n, const std::string& path) const {
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

  Result<bool> Bool(const YAML::Node& n, const std::string& path) const {
    bool v = false;
    if (!n.IsScalar() || !YAML::convert<bool>::decode(n, v)) return Fail(n, path, "expected true or false");
    return v;
  }

  // "90s", "1.5h", "5m", "250ms", "2d", or a plain number of seconds.
  Result<Duration> ParseDuration(const YAML::Node& n, const std::string& path) const {
    static constexpr const char* kExpect = "expected a duration such as \"90s\", \"5m\", \"1.5h\" or \"2d\"";
    if (!n.IsScalar()) return Fail(n, path, kExpect);
    const std::string& s = n.Scalar();
    double v = 0;
    auto [ptr, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
    if (s.empty() || ec != std::errc() || !std::isfinite(v))
      return Fail(n, path, std::string(kExpect) + " (got '" + s + "')");
    const std::string_view unit(ptr, s.data() + s.size() - ptr);
    double ms_per_unit = 0;
    if (unit.empty() || unit == "s") {
      ms_per_unit = 1000;
    } else if (unit == "ms") {
      ms_per_unit = 1;
    } else if (unit == "m") {
      ms_per_unit = 60'000;
    } else if (unit == "h") {
      ms_per_unit = 3'600'000;
    } else if (unit == "d") {
      ms_per_unit = 86'400'000;
    } else {
      return Fail(n, path, std::string(kExpect) + " (got '" + s + "'; units: ms, s, m, h, d)");
    }
    if (v < 0) return Fail(n, path, "must not be negative");
    const double ms = v * ms_per_unit;
    if (ms > kMaxDurationMs) return Fail(n, path, "too long");
    return Duration(std::llround(ms));
  }

  Result<std::vector<std::string>> StringList(const YAML::Node& n, const std::string& path,
                                              std::vector<Ref>* refs = nullptr) const {
    if (n.IsNull()) return std::vector<std::string>{};
    if (!n.IsSequence()) return Fail(n, path, "expected a list of names");
    std::vector<std::string> out;
    for (size_t i = 0; i < n.size(); ++i) {
      std::string s;
      GP_ASSIGN_OR_RETURN(s, String(n[i], Item(path, i)));
      if (std::find(out.begin(), out.end(), s) != out.end()) return Fail(n[i], Item(path, i), "duplicate '" + s + "'");
      out.push_back(s);
      if (refs) refs->push_back({n[i], Item(path, i)});
    }
    return out;
  }

  // --- optional fields with checks ----------------------------------------
  // Each sets `out` only when the key is present; `check` returns a problem
  // or an empty string.
  template <class Check>
  Status NumberField(const Fields& f, std::string_view key, double& out, Check check) const {
    const YAML::Node* n = f.Find(key);
    if (!n) return {};
    double v = 0;
    GP_ASSIGN_OR_RETURN(v, Number(*n, f.PathOf(key)));
    if (std::string problem = check(v); !problem.empty()) return Fail(*n, f.PathOf(key), problem);
    out = v;
    return {};
  }
  template <class T, class Check>
  Status IntField(const Fields& f, std::string_view key, T& out, Check check) const {
    const YAML::Node* n = f.Find(key);
    if (!n) return {};
    int64_t v = 0;
    GP_ASSIGN_OR_RETURN(v, Integer(*n, f.PathOf(key)));
    if (std::string problem = check(v); !problem.empty()) return Fail(*n, f.PathOf(key), problem);
    out = static_cast<T>(v);
    return {};
  }
  template <class Check>
  Status DurationField(const Fields& f, std::string_view key, Duration& out, Check check) const {
    const YAML::Node* n = f.Find(key);
    if (!n) return {};
    Duration d{0};
    GP_ASSIGN_OR_RETURN(d, ParseDuration(*n, f.PathOf(key)));
    if (std::string problem = check(d); !problem.empty()) return Fail(*n, f.PathOf(key), problem);
    out = d;
    return {};
  }
  Status StringField(const Fields& f, std::string_view key, std::string& out, bool allow_empty = false) const {
    const YAML::Node* n = f.Find(key);
    if (!n) return {};
    GP_ASSIGN_OR_RETURN(out, String(*n, f.PathOf(key), allow_empty));
    return {};
  }
  Status BoolField(const Fields& f, std::string_view key, bool& out) const {
    const YAML::Node* n = f.Find(key);
    if (!n) return {};
    GP_ASSIGN_OR_RETURN(out, Bool(*n, f.PathOf(key)));
    return {};
  }
  // Fractional cores or GiB converted to milli-cores or MiB.
  template <class Check>
  Status ScaledField(const Fields& f, std::string_view key, int64_t& out, double factor, Check check) const {
    double v = 0;
    bool present = f.Has(key);
    GP_TRY(NumberField(f, key, v, check));
    if (present) {
      if (v * factor > 9e15) return Fail(*f.Find(key), f.PathOf(key), "too large");
      out = std::llround(v * factor);
    }
    return {};
  }

  // A share of one GPU, as a fraction in (0, 1), converted to milli-GPUs
  // (1..999); sets `milli` only when the key is present.
  Status GpuFractionField(const Fields& f, std::string_view key, int32_t& milli) const {
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
  // GPU memory in GiB (fractional allowed) converted to MiB.
  Status GpuMemoryField(const Fields& f, std::string_view key, int32_t& mib) const {
    int64_t v = 0;
    GP_TRY(ScaledField(f, key, v, 1024, [](double x) -> std::string { return x < 0 ? "must not be negative" : ""; }));
    if (v > INT32_MAX) return Fail(*f.Find(key), f.PathOf(key), "too large");
    if (f.Has(key)) mib = static_cast<int32_t>(v);
    return {};
  }

  // A path from the file: "$TRACES/..." goes to the traces folder; other
  // relative paths are relative to the scenario's folder.
  std::string ResolvePath(const std::string& p) const;

  // --- sections -----------------------------------------------------------
  Status ParseEngine(const YAML::Node& n, const std::string& path, Scenario& s) const;
  Status ParseServer(const YAML::Node& n, const std::string& path, Scenario& s) const;
  Status ParsePriorities(const YAML::Node& n, const std::string& path, Scenario& s) const;
  Result<std::vector<EcosystemComponent>> ParseEcosystem(const YAML::Node& n, const std::string& path) const;
  Status ParseNodeClasses(const YAML::Node& n, const std::string& path, Scenario& s) const;
  Status ParseRequirements(const YAML::Node& n, const std::string& path, Scenario& s) const;
  Status ParsePools(const YAML::Node& n, const std::string& path, Scenario& s);
  Status ParseTenants(const YAML::Node& n, const std::string& path, Scenario& s);
  Status ParseCluster(const YAML::Node& n, const std::string& path, Scenario& s) const;
  Status ParseWorkloads(const YAML::Node& n, const std::string& path, Scenario& s) const;
  Status ParseArrivals(const YAML::Node& n, const std::string& path, const Scenario& s, ArrivalProcess& a) const;
  Status ParseJob(const YAML::Node& n, const std::string& path, const Scenario& s, const ScenarioTenant& tenant,
                  JobTemplate& t) const;
  Status ParseDurationModel(const YAML::Node& n, const std::string& path, DurationModel& m) const;
  Status ParseStages(const YAML::Node& n, const std::string& path, JobTemplate& t) const;
  Status ParseUtilization(const YAML::Node& n, const std::string& path, UtilizationModel& m) const;
  Status ParseFaults(const YAML::Node& n, const std::string& path, Scenario& s) const;
  Status ParseHotSpells(const YAML::Node& n, const std::string& path, Scenario& s) const;
  Status ParseGpuFaults(const YAML::Node& n, const std::string& path, Scenario& s) const;
  Status ParseTrace(const YAML::Node& n, const std::string& path, Scenario& s) const;
  Status ParseScaling(const YAML::Node& n, const std::string& path, Scenario& s) const;
  Status ParseProvider(const YAML::Node& n, const std::string& path, Scenario& s) const;
  Status ParseRegions(const YAML::Node& n, const std::string& path, Scenario& s) const;
  Result<std::string> PriorityField(const Fields& f, const Scenario& s) const;
  // The optional `kind` key: leaves `out` as it is when absent.
  Status KindField(const Fields& f, JobKind& out) const;
  Status CheckGuarantees(const Scenario& s) const;

  std::string source_;
  std::string base_dir_;
  bool server_ = false;  // a server configuration (see ParseServerConfig)
  // Kept for checks that need later sections.
  std::vector<std::vector<Ref>> dedicated_refs_;  // per pool, its dedicated_to items
  struct QuotaRef {
    size_t tenant;
    std::string pool;
    Ref guaranteed;  // the guaranteed_gpus node, or the quota's own node
  };
  std::vector<QuotaRef> quota_refs_;
};

// --- helpers for checks -------------------------------------------------------

std::string NonNegative(double v) { return v < 0 ? "must not be negative" : ""; }
std::string Positive(double v) { return v > 0 ? "" : "must be positive"; }
std::string Fraction01(double v) { return v >= 0 && v <= 1 ? "" : "must be between 0 and 1"; }
std::string UpToHalf(double v) { return v >= 0 && v <= 0.5 ? "" : "must be between 0 and 0.5"; }
std::string AnyDuration(Duration) { return ""; }
std::string PositiveDuration(Duration d) { return d > Duration(0) ? "" : "must be positive"; }
auto IntRange(int64_t lo, int64_t hi) {
  return [lo, hi](int64_t v) -> std::string {
    if (v < lo) return lo == 0 ? "must not be negative" : "must be at least " + std::to_string(lo);
    if (v > hi) return "must be at most " + std::to_string(hi);
    return "";
  };
}

std::string Parser::ResolvePath(const std::string& p) const {
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

// --- the scenario ---------------------------------------------------------------

Result<Scenario> Parser::Parse(const YAML::Node& root) {
  Scenario s;
  if (root.IsNull() || !root.IsDefined()) return Fail(root, "", "empty scenario (expected a map with at least 'name')");
  Fields f;
  if (server_) {
    GP_ASSIGN_OR_RETURN(f, Map(root, "",
                               {"name", "description", "seed", "engine", "priorities", "node_classes", "requirements",
                                "cluster", "pools", "tenants", "server", "scaling", "regions"}));
  } else {
    GP_ASSIGN_OR_RETURN(f, Map(root, "",
                               {"name", "description", "seed", "horizon", "engine", "priorities", "node_classes",
                                "requirements", "cluster", "pools", "tenants", "workload", "trace", "faults", "scaling",
                                "provider", "regions", "hot_spells", "gpu_faults"}));
  }
  GP_TRY(Require(f, "name"));
  GP_TRY(StringField(f, "name", s.name));
  GP_TRY(StringField(f, "description", s.description, /*allow_empty=*/true));
  GP_TRY(IntField(f, "seed", s.seed, IntRange(0, INT64_MAX)));
  GP_TRY(DurationField(f, "horizon", s.horizon, PositiveDuration));
  s.engine.seed = s.seed;
  if (auto* n = f.Find("engine")) GP_TRY(ParseEngine(*n, "engine", s));
  if (auto* n = f.Find("priorities")) GP_TRY(ParsePriorities(*n, "priorities", s));
  if (auto* n = f.Find("node_classes")) GP_TRY(ParseNodeClasses(*n, "node_classes", s));
  if (auto* n = f.Find("requirements")) GP_TRY(ParseRequirements(*n, "requirements", s));
  GP_TRY(Require(f, "pools"));
  GP_TRY(ParsePools(*f.Find("pools"), "pools", s));
  if (!server_ || f.Has("tenants")) {
    GP_TRY(Require(f, "tenants"));
    GP_TRY(ParseTenants(*f.Find("tenants"), "tenants", s));
  }
  // Pools name their dedicated tenants before the tenants are declared.
  for (size_t p = 0; p < s.pools.size(); ++p) {
    for (const Ref& r : dedicated_refs_[p]) {
      const std::string name = r.node.Scalar();
      if (std::none_of(s.tenants.begin(), s.tenants.end(), [&](const ScenarioTenant& t) { return t.name == name; })) {
        std::vector<std::string> known;
        for (const auto& t : s.tenants) known.push_back(t.name);
        return Fail(r.node, r.path, "unknown tenant '" + name + "' (known: " + JoinNames(known) + ")");
      }
    }
  }
  for (const QuotaRef& q : quota_refs_) {
    const auto pool =
        std::find_if(s.pools.begin(), s.pools.end(), [&](const ScenarioPool& p) { return p.name == q.pool; });
    const ScenarioTenant& t = s.tenants[q.tenant];
    if (!pool->dedicated_to.empty() && t.quota.at(q.pool).limit_gpus > 0 &&
        std::find(pool->dedicated_to.begin(), pool->dedicated_to.end(), t.name) == pool->dedicated_to.end()) {
      return Fail(q.guaranteed.node, q.guaranteed.path,
                  "pool '" + q.pool + "' is dedicated to other tenants (" + JoinNames(pool->dedicated_to) + ")");
    }
  }
  if (!server_ || f.Has("cluster")) {
    GP_TRY(Require(f, "cluster"));
    GP_TRY(ParseCluster(*f.Find("cluster"), "cluster", s));
    GP_TRY(CheckGuarantees(s));
  }
  if (server_) {
    if (auto* n = f.Find("server")) GP_TRY(ParseServer(*n, "server", s));
    if (auto* n = f.Find("regions")) GP_TRY(ParseRegions(*n, "regions", s));
    if (auto* n = f.Find("scaling")) {
      GP_TRY(ParseScaling(*n, "scaling", s));
      // Scale-outs are only requests: without a provider nothing would
      // ever create the nodes.
      if (s.server.provider.create.empty()) {
        return Fail(*n, "scaling", "needs server.provider (the commands that create and delete nodes)");
      }
    }
    // Agents heartbeat every reclaim.poll: a node silent for six of them
    // (30 s by default) is down, unless the configuration says otherwise
    // (0s: no failure detection, e.g. nodes without agents).
    const YAML::Node* engine = f.Find("engine");
    if (!engine || !(*engine)["heartbeat_timeout"]) s.engine.heartbeat_timeout = 6 * s.engine.reclaim.poll;
    return s;
  }
  if (auto* n = f.Find("workload")) GP_TRY(ParseWorkloads(*n, "workload", s));
  if (auto* n = f.Find("trace")) GP_TRY(ParseTrace(*n, "trace", s));
  if (auto* n = f.Find("faults")) GP_TRY(ParseFaults(*n, "faults", s));
  if (auto* n = f.Find("hot_spells")) GP_TRY(ParseHotSpells(*n, "hot_spells", s));
  if (auto* n = f.Find("gpu_faults")) GP_TRY(ParseGpuFaults(*n, "gpu_faults", s));
  if (auto* n = f.Find("scaling")) GP_TRY(ParseScaling(*n, "scaling", s));
  if (auto* n = f.Find("provider")) GP_TRY(ParseProvider(*n, "provider", s));
  if (auto* n = f.Find("regions")) GP_TRY(ParseRegions(*n, "regions", s));
  if (s.workloads.empty() && !s.trace) return Fail(root, "", "nothing to run: give a workload or a trace");
  return s;
}

Status Parser::ParseServer(const YAML::Node& n, const std::string& path, Scenario& s) const {
  Fields f;
  GP_ASSIGN_OR_RETURN(
      f,
      Map(n, path, {"tick", "snapshot_every_events", "max_body_bytes", "http_threads", "provider", "default_image"}));
  ServerSettings& c = s.server;
  if (const YAML::Node* i = f.Find("default_image")) {
    // As a job's `image` (src/api/task_request.h, ImageProblem).
    GP_TRY(StringField(f, "default_image", c.default_image));
    if (c.default_image != "host" && (c.default_image[0] != '/' || c.default_image.size() > 4096 ||
                                         c.default_image.find('\0') != std::string::npos)) {
      return Fail(*i, f.PathOf("default_image"),
                  "expected \"host\" or an absolute path to an image on the nodes (at most 4096 bytes, without NUL)");
    }
  }
  GP_TRY(DurationField(f, "tick", c.tick, PositiveDuration));
  GP_TRY(IntField(f, "snapshot_every_events", c.snapshot_every_events, IntRange(1, INT64_MAX)));
  GP_TRY(IntField(f, "max_body_bytes", c.max_body_bytes, IntRange(1024, 1 << 30)));
  GP_TRY(IntField(f, "http_threads", c.http_threads, IntRange(1, 1024)));
  if (const YAML::Node* p = f.Find("provider")) {
    // The command node provider (src/server/node_provider.h).
    Fields pf;
    GP_ASSIGN_OR_RETURN(pf, Map(*p, f.PathOf("provider"), {"create", "delete", "timeout"}));
    if (p->IsNull()) return Fail(*p, f.PathOf("provider"), "expected a map with create (and delete, timeout)");
    GP_TRY(Require(pf, "create"));
    GP_TRY(StringField(pf, "create", c.provider.create));
    GP_TRY(StringField(pf, "delete", c.provider.remove));
    GP_TRY(DurationField(pf, "timeout", c.provider.timeout, [](Duration d) -> std::string {
      return d >= std::chrono::seconds(1) ? "" : "must be at least 1s";
    }));
  }
  return {};
}

Status Parser::ParseEngine(const YAML::Node& n, const std::string& path, Scenario& s) const {
  Fields f;
  GP_ASSIGN_OR_RETURN(
      f, Map(n, path,
             {"policy", "seed", "tick", "start_latency", "sample_every", "lending", "sharing_policy", "reclaim",
              "heartbeat_timeout", "costs", "topology", "defrag", "hotspots", "elastic", "borrow_between_pools"}));
  if (const YAML::Node* p = f.Find("policy")) {
    std::string name;
    GP_ASSIGN_OR_RETURN(name, String(*p, f.PathOf("policy")));
    if (auto spec = FindPolicy(name); !spec) return Fail(*p, f.PathOf("policy"), spec.error().message);
    s.engine.policy = name;
  }
  GP_TRY(IntField(f, "seed", s.engine.seed, IntRange(0, INT64_MAX)));
  GP_TRY(DurationField(f, "tick", s.tick, PositiveDuration));
  GP_TRY(DurationField(f, "start_latency", s.start_latency, AnyDuration));
  GP_TRY(DurationField(f, "sample_every", s.sample_every, PositiveDuration));
  if (const YAML::Node* l = f.Find("lending")) {
    Fields lf;
    GP_ASSIGN_OR_RETURN(lf, Map(*l, f.PathOf("lending"), {"enabled", "window", "threshold", "fraction"}));
    LendingConfig& c = s.engine.lending;
    GP_TRY(BoolField(lf, "enabled", c.enabled));
    GP_TRY(DurationField(lf, "window", c.window, AnyDuration));
    GP_TRY(NumberField(lf, "threshold", c.threshold, Fraction01));
    GP_TRY(NumberField(lf, "fraction", c.lend_fraction, Fraction01));
  }
  if (const YAML::Node* p = f.Find("sharing_policy")) {
    std::string name;
    GP_ASSIGN_OR_RETURN(name, String(*p, f.PathOf("sharing_policy")));
    if (auto table = FindModePolicy(name); !table) return Fail(*p, f.PathOf("sharing_policy"), table.error().message);
    s.engine.sharing_policy = name;
  }
  if (const YAML::Node* d = f.Find("defrag")) {
    Fields df;
    GP_ASSIGN_OR_RETURN(df, Map(*d, f.PathOf("defrag"),
                                {"enabled", "every", "trigger_frag_pct", "max_migrations_per_hour", "min_gain_per_cost",
                                 "horizon", "restart_cost"}));
    DefragConfig& c = s.engine.defrag_config;
    s.engine.defrag = true;
    GP_TRY(BoolField(df, "enabled", s.engine.defrag));
    GP_TRY(DurationField(df, "every", s.engine.defrag_every, PositiveDuration));
    GP_TRY(NumberField(df, "trigger_frag_pct", c.trigger_frag_pct,
                       [](double v) -> std::string { return v >= 0 && v <= 100 ? "" : "must be between 0 and 100"; }));
    GP_TRY(IntField(df, "max_migrations_per_hour", c.max_migrations_per_hour, IntRange(0, 100000)));
    GP_TRY(NumberField(df, "min_gain_per_cost", c.min_gain_per_cost, NonNegative));
    GP_TRY(DurationField(df, "horizon", c.horizon, PositiveDuration));
    GP_TRY(DurationField(df, "restart_cost", c.restart_cost, AnyDuration));
  }
  if (const YAML::Node* t = f.Find("topology")) {
    std::string mode;
    GP_ASSIGN_OR_RETURN(mode, String(*t, f.PathOf("topology")));
    if (mode != "aware" && mode != "blind") {
      return Fail(*t, f.PathOf("topology"), "expected 'aware' or 'blind' (got '" + mode + "')");
    }
    s.engine.topology_aware = mode == "aware";
  }
  if (const YAML::Node* r = f.Find("reclaim")) {
    Fields rf;
    GP_ASSIGN_OR_RETURN(
        rf, Map(*r, f.PathOf("reclaim"), {"idle", "poll", "idle_below_pct", "idle_polls", "grace", "deadlines"}));
    ReclaimConfig& c = s.engine.reclaim;
    GP_TRY(BoolField(rf, "idle", c.idle));
    GP_TRY(DurationField(rf, "poll", c.poll, PositiveDuration));
    GP_TRY(NumberField(rf, "idle_below_pct", c.idle_below_pct,
                       [](double v) -> std::string { return v >= 0 && v <= 100 ? "" : "must be between 0 and 100"; }));
    GP_TRY(IntField(rf, "idle_polls", c.idle_polls, IntRange(1, INT32_MAX)));
    GP_TRY(DurationField(rf, "grace", c.grace, AnyDuration));
    GP_TRY(BoolField(rf, "deadlines", c.deadlines));
  }
  GP_TRY(DurationField(f, "heartbeat_timeout", s.engine.heartbeat_timeout, AnyDuration));
  if (const YAML::Node* h = f.Find("hotspots")) {
    Fields hf;
    GP_ASSIGN_OR_RETURN(hf, Map(*h, f.PathOf("hotspots"),
                                {"enabled", "util_above_pct", "memory_above_pct", "temperature_above_c", "window",
                                 "max_moves", "cooldown"}));
    HotspotConfig& c = s.engine.hotspots;
    c.enabled = true;
    GP_TRY(BoolField(hf, "enabled", c.enabled));
    const auto pct = [](double v) -> std::string { return v >= 0 && v <= 100 ? "" : "must be between 0 and 100 (0: off)"; };
    GP_TRY(NumberField(hf, "util_above_pct", c.util_above_pct, pct));
    GP_TRY(NumberField(hf, "memory_above_pct", c.memory_above_pct, pct));
    GP_TRY(NumberField(hf, "temperature_above_c", c.temperature_above_c, [](double v) -> std::string {
      return v >= 0 && v <= 150 ? "" : "must be between 0 and 150 (0: off)";
    }));
    GP_TRY(DurationField(hf, "window", c.window, PositiveDuration));
    GP_TRY(IntField(hf, "max_moves", c.max_moves, IntRange(0, 1000)));
    GP_TRY(DurationField(hf, "cooldown", c.cooldown, AnyDuration));
    if (c.enabled) {
      if (auto ok = CheckHotspotConfig(c); !ok) return Fail(*h, f.PathOf("hotspots"), ok.error().message);
    }
  }
  if (const YAML::Node* e = f.Find("elastic")) {
    Fields ef;
    GP_ASSIGN_OR_RETURN(ef, Map(*e, f.PathOf("elastic"), {"resize_every"}));
    GP_TRY(DurationField(ef, "resize_every", s.engine.elastic_resize_every, AnyDuration));
  }
  GP_TRY(BoolField(f, "borrow_between_pools", s.engine.borrow_between_pools));
  if (const YAML::Node* c = f.Find("costs")) {
    Fields cf;
    GP_ASSIGN_OR_RETURN(
        cf, Map(*c, f.PathOf("costs"), {"time_slice_overhead", "mig_setup", "scrub", "checkpoint_overhead", "links"}));
    SharingCosts& k = s.costs;
    GP_TRY(NumberField(cf, "time_slice_overhead", k.time_slice_overhead, UpToHalf));
    GP_TRY(DurationField(cf, "mig_setup", k.mig_setup, AnyDuration));
    GP_TRY(DurationField(cf, "scrub", k.scrub, AnyDuration));
    GP_TRY(NumberField(cf, "checkpoint_overhead", k.checkpoint_overhead, UpToHalf));
    if (const YAML::Node* l = cf.Find("links")) {
      Fields lf;
      GP_ASSIGN_OR_RETURN(
          lf, Map(*l, cf.PathOf("links"), {"nvlink_gbps", "pcie_gbps", "intra_rack_gbps", "inter_rack_gbps"}));
      GP_TRY(NumberField(lf, "nvlink_gbps", k.links.nvlink_gbps, Positive));
      GP_TRY(NumberField(lf, "pcie_gbps", k.links.pcie_gbps, Positive));
      GP_TRY(NumberField(lf, "intra_rack_gbps", k.links.intra_rack_gbps, Positive));
      GP_TRY(NumberField(lf, "inter_rack_gbps", k.links.inter_rack_gbps, Positive));
    }
  }
  return {};
}

Status Parser::ParsePriorities(const YAML::Node& n, const std::string& path, Scenario& s) const {
  Fields f;
  GP_ASSIGN_OR_RETURN(f, Map(n, path, {}));
  if (f.entries.empty()) return Fail(n, path, "needs at least one priority class");
  s.priorities.clear();
  for (const auto& e : f.entries) {
    if (e.key.empty()) return Fail(e.key_node, path, "a priority class needs a name");
    int32_t v = 0;
    GP_TRY(IntField(f, e.key, v, IntRange(INT32_MIN, INT32_MAX)));
    s.priorities[e.key] = v;
  }
  return {};
}

Result<std::vector<EcosystemComponent>> Parser::ParseEcosystem(const YAML::Node& n, const std::string& path) const {
  Fields f;
  GP_ASSIGN_OR_RETURN(f, Map(n, path, {}));
  std::vector<EcosystemComponent> out;
  for (const auto& e : f.entries) {
    if (e.key.empty()) return Fail(e.key_node, path, "a component needs a name");
    std::string text;
    GP_ASSIGN_OR_RETURN(text, String(e.value, f.PathOf(e.key)));
    auto v = ParseVersion(text);
    if (!v) return Fail(e.value, f.PathOf(e.key), "expected a version MAJOR[.MINOR[.PATCH]] (got '" + text + "')");
    out.push_back({e.key, *v});
  }
  return out;
}

Status Parser::ParseNodeClasses(const YAML::Node& n, const std::string& path, Scenario& s) const {
  if (n.IsNull()) return {};
  if (!n.IsSequence()) return Fail(n, path, "expected a list of node classes");
  for (size_t i = 0; i < n.size(); ++i) {
    Fields f;
    GP_ASSIGN_OR_RETURN(f, Map(n[i], Item(path, i), {"name", "family", "ecosystem", "gpu", "storage", "network"}));
    NodeAttributes a;
    GP_TRY(Require(f, "name"));
    GP_TRY(StringField(f, "name", a.name));
    for (const auto& c : s.node_classes) {
      if (c.name == a.name) return Fail(*f.Find("name"), f.PathOf("name"), "duplicate node class '" + a.name + "'");
    }
    GP_TRY(StringField(f, "family", a.family));
    if (const YAML::Node* e = f.Find("ecosystem")) {
      GP_ASSIGN_OR_RETURN(a.ecosystem, ParseEcosystem(*e, f.PathOf("ecosystem")));
    }
    struct Sub {
      std::string_view section;
      std::vector<std::pair<std::string_view, double*>> keys;
    };
    const Sub subs[] = {
        {"gpu",
         {{"fp16_tflops", &a.value[kFp16Tflops]},
          {"memory_mib", &a.value[kGpuMemoryMib]},
          {"memory_bandwidth_gbps", &a.value[kMemoryBandwidthGbps]},
          {"interconnect_gbps", &a.value[kInterconnectGbps]}}},
        {"storage",
         {{"capacity_gib", &a.value[kStorageCapacityGib]},
          {"iops", &a.value[kStorageIops]},
          {"latency_us", &a.value[kStorageLatencyUs]},
          {"durability_nines", &a.storage_durability_nines}}},
        {"network", {{"bandwidth_gbps", &a.value[kNetworkBandwidthGbps]}, {"latency_us", &a.value[kNetworkLatencyUs]}}},
    };
    for (const Sub& sub : subs) {
      const YAML::Node* sn = f.Find(sub.section);
      if (!sn) continue;
      std::vector<std::string_view> allowed;
      for (const auto& k : sub.keys) allowed.push_back(k.first);
      Fields sf;
      GP_ASSIGN_OR_RETURN(sf, Map(*sn, f.PathOf(sub.section), allowed));
      for (const auto& [key, out] : sub.keys) GP_TRY(NumberField(sf, key, *out, NonNegative));
    }
    s.node_classes.push_back(std::move(a));
  }
  return {};
}

Status Parser::ParseRequirements(const YAML::Node& n, const std::string& path, Scenario& s) const {
  if (n.IsNull()) return {};
  if (!n.IsSequence()) return Fail(n, path, "expected a list of requirements");
  for (size_t i = 0; i < n.size(); ++i) {
    Fields f;
    GP_ASSIGN_OR_RETURN(
        f, Map(n[i], Item(path, i),
               {"name", "kind", "ecosystem", "min", "max", "min_storage_durability_nines", "preferred_family"}));
    Requirement r;
    GP_TRY(Require(f, "name"));
    GP_TRY(StringField(f, "name", r.name));
    for (const auto& other : s.requirements) {
      if (other.name == r.name)
        return Fail(*f.Find("name"), f.PathOf("name"), "duplicate requirement '" + r.name + "'");
    }
    GP_TRY(KindField(f, r.kind));
    if (const YAML::Node* e = f.Find("ecosystem")) {
      GP_ASSIGN_OR_RETURN(r.ecosystem, ParseEcosystem(*e, f.PathOf("ecosystem")));
    }
    // min: the attributes where more is better; max: the latencies.
    for (const bool max : {false, true}) {
      const char* section = max ? "max" : "min";
      const YAML::Node* sn = f.Find(section);
      if (!sn) continue;
      Fields sf;
      GP_ASSIGN_OR_RETURN(sf, Map(*sn, f.PathOf(section), {}));
      for (const auto& e : sf.entries) {
        int attr = -1;
        for (int a = 0; a < kAttrCount; ++a) {
          if (LowerIsBetter(a) == max && e.key == AttrName(a)) attr = a;
        }
        if (attr < 0) {
          for (int a = 0; a < kAttrCount; ++a) {
            if (e.key == AttrName(a)) {
              return Fail(
                  e.key_node, sf.PathOf(e.key),
                  std::string(max ? "a minimum: put it under min" : "a maximum (lower is better): put it under max"));
            }
          }
          std::vector<std::string> known;
          for (int a = 0; a < kAttrCount; ++a) {
            if (LowerIsBetter(a) == max) known.push_back(AttrName(a));
          }
          return Fail(e.key_node, sf.PathOf(e.key),
                      "unknown key '" + e.key + "' (expected one of: " + JoinNames(known) + ")");
        }
        GP_TRY(NumberField(sf, e.key, r.minimum[attr], NonNegative));
      }
    }
    GP_TRY(NumberField(f, "min_storage_durability_nines", r.min_storage_durability_nines, NonNegative));
    GP_TRY(StringField(f, "preferred_family", r.preferred_family));
    s.requirements.push_back(std::move(r));
  }
  return {};
}

Status Parser::ParsePools(const YAML::Node& n, const std::string& path, Scenario& s) {
  if (!n.IsSequence() || n.size() == 0) return Fail(n, path, "expected a list of at least one pool");
  if (n.size() > static_cast<size_t>(kMaxPools))
    return Fail(n, path, "at most " + std::to_string(kMaxPools) + " pools");
  for (size_t i = 0; i < n.size(); ++i) {
    Fields f;
    GP_ASSIGN_OR_RETURN(f, Map(n[i], Item(path, i), {"name", "models", "regions", "dedicated_to", "isolation"}));
    ScenarioPool p;
    GP_TRY(Require(f, "name"));
    GP_TRY(StringField(f, "name", p.name));
    for (const auto& other : s.pools) {
      if (other.name == p.name) return Fail(*f.Find("name"), f.PathOf("name"), "duplicate pool '" + p.name + "'");
    }
    if (const YAML::Node* m = f.Find("models")) {
      std::vector<Ref> refs;
      GP_ASSIGN_OR_RETURN(p.models, StringList(*m, f.PathOf("models"), &refs));
      for (const Ref& r : refs) {
        if (!Catalog::Builtin().Find(r.node.Scalar())) {
          return Fail(r.node, r.path,
                      "unknown GPU model '" + r.node.Scalar() + "' (known: " + Catalog::Builtin().Names() + ")");
        }
      }
    }
    if (const YAML::Node* r = f.Find("regions")) {
      GP_ASSIGN_OR_RETURN(p.regions, StringList(*r, f.PathOf("regions")));
    }
    std::vector<Ref> dedicated;
    if (const YAML::Node* d = f.Find("dedicated_to")) {
      GP_ASSIGN_OR_RETURN(p.dedicated_to, StringList(*d, f.PathOf("dedicated_to"), &dedicated));
    }
    if (const YAML::Node* iso = f.Find("isolation")) {
      std::string v;
      GP_TRY(StringField(f, "isolation", v));
      if (v != "required" && v != "optional") {
        return Fail(*iso, f.PathOf("isolation"), "unknown isolation '" + v + "' (known: required, optional)");
      }
      p.isolation_required = v == "required";
    }
    dedicated_refs_.push_back(std::move(dedicated));
    s.pools.push_back(std::move(p));
  }
  return {};
}

Status Parser::ParseTenants(const YAML::Node& n, const std::string& path, Scenario& s) {
  if (!n.IsSequence() || n.size() == 0) return Fail(n, path, "expected a list of at least one tenant");
  for (size_t i = 0; i < n.size(); ++i) {
    Fields f;
    GP_ASSIGN_OR_RETURN(f, Map(n[i], Item(path, i), {"name", "quota"}));
    ScenarioTenant t;
    GP_TRY(Require(f, "name"));
    GP_TRY(StringField(f, "name", t.name));
    for (const auto& other : s.tenants) {
      if (other.name == t.name) return Fail(*f.Find("name"), f.PathOf("name"), "duplicate tenant '" + t.name + "'");
    }
    if (const YAML::Node* qn = f.Find("quota")) {
      Fields qf;
      GP_ASSIGN_OR_RETURN(qf, Map(*qn, f.PathOf("quota"), {}));
      for (const auto& e : qf.entries) {
        if (std::none_of(s.pools.begin(), s.pools.end(), [&](const ScenarioPool& p) { return p.name == e.key; })) {
          std::vector<std::string> known;
          for (const auto& p : s.pools) known.push_back(p.name);
          return Fail(e.key_node, qf.PathOf(e.key), "unknown pool '" + e.key + "' (known: " + JoinNames(known) + ")");
        }
        Fields pf;
        GP_ASSIGN_OR_RETURN(pf,
                            Map(e.value, qf.PathOf(e.key), {"guaranteed_gpus", "limit_gpus", "weight", "reserved"}));
        ScenarioQuota q;
        GP_TRY(NumberField(pf, "guaranteed_gpus", q.guaranteed_gpus, NonNegative));
        q.limit_gpus = q.guaranteed_gpus;  // no borrowing unless a limit is given
        GP_TRY(NumberField(pf, "limit_gpus", q.limit_gpus, NonNegative));
        if (q.limit_gpus < q.guaranteed_gpus) {
          return Fail(*pf.Find("limit_gpus"), pf.PathOf("limit_gpus"),
                      "must be at least guaranteed_gpus (" + std::to_string(q.guaranteed_gpus) + ")");
        }
        GP_TRY(NumberField(pf, "weight", q.weight, Positive));
        GP_TRY(BoolField(pf, "reserved", q.reserved));
        const YAML::Node* g = pf.Find("guaranteed_gpus");
        quota_refs_.push_back(
            {s.tenants.size(), e.key, g ? Ref{*g, pf.PathOf("guaranteed_gpus")} : Ref{e.value, pf.path}});
        t.quota[e.key] = q;
      }
    }
    s.tenants.push_back(std::move(t));
  }
  return {};
}

// The pool a node group's nodes join, as the engine decides it (the first
// whose selector takes the model and region), or -1.
int PoolOf(const Scenario& s, const ScenarioNodeGroup& g) {
  for (size_t p = 0; p < s.pools.size(); ++p) {
    const ScenarioPool& pool = s.pools[p];
    const bool model_ok = g.model.empty() ? pool.models.empty()
                                          : pool.models.empty() || std::find(pool.models.begin(), pool.models.end(),
                                                                             g.model) != pool.models.end();
    const bool region_ok =
        pool.regions.empty() || std::find(pool.regions.begin(), pool.regions.end(), g.region) != pool.regions.end();
    if (model_ok && region_ok) return static_cast<int>(p);
  }
  return -1;
}

Status Parser::ParseCluster(const YAML::Node& n, const std::string& path, Scenario& s) const {
  Fields f;
  GP_ASSIGN_OR_RETURN(f, Map(n, path, {"nodes", "trace_nodes", "trace_nodes_every"}));
  GP_TRY(IntField(f, "trace_nodes_every", s.trace_nodes_every, IntRange(1, 1000000)));
  if (!f.Has("nodes") && !f.Has("trace_nodes")) return Fail(n, path, "needs nodes or trace_nodes (or both)");
  if (const YAML::Node* t = f.Find("trace_nodes")) {
    std::string p;
    GP_ASSIGN_OR_RETURN(p, String(*t, f.PathOf("trace_nodes")));
    s.trace_nodes_path = ResolvePath(p);
  }
  if (!f.Has("nodes")) return {};
  const YAML::Node& nodes = *f.Find("nodes");
  const std::string npath = f.PathOf("nodes");
  if (!nodes.IsSequence() || nodes.size() == 0) return Fail(nodes, npath, "expected a list of at least one node group");
  for (size_t i = 0; i < nodes.size(); ++i) {
    Fields g;
    GP_ASSIGN_OR_RETURN(g, Map(nodes[i], Item(npath, i),
                               {"count", "model", "gpus", "cpu_cores", "memory_gib", "region", "zone", "racks",
                                "attributes", "name_prefix"}));
    ScenarioNodeGroup ng;
    GP_TRY(Require(g, "count"));
    GP_TRY(IntField(g, "count", ng.count, IntRange(0, kMaxNodeGroupCount)));
    GP_TRY(StringField(g, "model", ng.model));
    if (const YAML::Node* m = g.Find("model"); m && !Catalog::Builtin().Find(ng.model)) {
      return Fail(*m, g.PathOf("model"),
                  "unknown GPU model '" + ng.model + "' (known: " + Catalog::Builtin().Names() + ")");
    }
    GP_TRY(IntField(g, "gpus", ng.gpus, IntRange(0, kMaxGpusPerNode)));
    if (ng.gpus > 0 && ng.model.empty()) return Fail(*g.Find("gpus"), g.PathOf("gpus"), "GPUs need a model");
    if (ng.gpus == 0 && !ng.model.empty()) {
      return Fail(*g.Find("model"), g.PathOf("model"), "a model needs gpus (at least 1)");
    }
    GP_TRY(Require(g, "cpu_cores"));
    GP_TRY(ScaledField(g, "cpu_cores", ng.cpu_milli, 1000, Positive));
    GP_TRY(Require(g, "memory_gib"));
    GP_TRY(ScaledField(g, "memory_gib", ng.memory_mib, 1024, Positive));
    GP_TRY(StringField(g, "region", ng.region));
    GP_TRY(StringField(g, "zone", ng.zone));
    GP_TRY(IntField(g, "racks", ng.racks, IntRange(1, kMaxNodeGroupCount)));
    if (const YAML::Node* a = g.Find("attributes")) {
      GP_ASSIGN_OR_RETURN(ng.attributes, String(*a, g.PathOf("attributes")));
      if (std::none_of(s.node_classes.begin(), s.node_classes.end(),
                       [&](const NodeAttributes& c) { return c.name == ng.attributes; })) {
        std::vector<std::string> known;
        for (const auto& c : s.node_classes) known.push_back(c.name);
        return Fail(*a, g.PathOf("attributes"),
                    "unknown node class '" + ng.attributes + "' (known: " + JoinNames(known) + ")");
      }
    }
    ng.name_prefix = ng.model.empty() ? "cpu" : Lower(ng.model);
    GP_TRY(StringField(g, "name_prefix", ng.name_prefix));
    for (const auto& other : s.nodes) {
      if (other.name_prefix == ng.name_prefix) {
        const YAML::Node& at = g.Has("name_prefix") ? *g.Find("name_prefix") : g.node;
        return Fail(at, g.PathOf("name_prefix"),
                    "duplicate name prefix '" + ng.name_prefix + "' (set name_prefix to tell the groups apart)");
      }
    }
    if (PoolOf(s, ng) < 0) {
      return Fail(g.node, g.path,
                  "no pool takes " + (ng.model.empty() ? std::string("CPU-only") : ng.model) + " nodes in region '" +
                      ng.region +
                      "' (a pool selects nodes by models and regions; CPU-only nodes need a pool without models)");
    }
    s.nodes.push_back(std::move(ng));
  }
  return {};
}

Status Parser::CheckGuarantees(const Scenario& s) const {
  if (!s.trace_nodes_path.empty()) return {};  // the capacity is known only once the trace is read
  std::vector<int64_t> capacity(s.pools.size(), 0), guaranteed(s.pools.size(), 0);
  for (const auto& g : s.nodes) {
    const int p = PoolOf(s, g);
    if (p >= 0) capacity[p] += int64_t{g.count} * g.gpus * kMilliPerGpu;
  }
  for (const QuotaRef& q : quota_refs_) {
    const size_t p =
        std::find_if(s.pools.begin(), s.pools.end(), [&](const auto& x) { return x.name == q.pool; }) - s.pools.begin();
    guaranteed[p] += std::llround(s.tenants[q.tenant].quota.at(q.pool).guaranteed_gpus * kMilliPerGpu);
    if (guaranteed[p] > capacity[p]) {
      std::ostringstream msg;
      msg << "pool '" << q.pool << "' would guarantee " << guaranteed[p] / 1000.0 << " GPUs of its "
          << capacity[p] / kMilliPerGpu;
      return Fail(q.guaranteed.node, q.guaranteed.path, msg.str());
    }
  }
  return {};
}

Status Parser::KindField(const Fields& f, JobKind& out) const {
  const YAML::Node* k = f.Find("kind");
  if (!k) return {};
  std::string name;
  GP_ASSIGN_OR_RETURN(name, String(*k, f.PathOf("kind")));
  auto kind = JobKindFromName(name);
  if (!kind) {
    return Fail(*k, f.PathOf("kind"),
                "unknown job kind '" + name + "' (known: training, online-inference, batch-inference, development, cpu)");
  }
  out = *kind;
  return {};
}

Result<std::string> Parser::PriorityField(const Fields& f, const Scenario& s) const {
  const YAML::Node* n = f.Find("priority");
  if (!n) {
    if (s.priorities.contains("normal")) return std::string("normal");
    return Fail(f.node, f.PathOf("priority"), "required (there is no 'normal' class to default to)");
  }
  std::string name;
  GP_ASSIGN_OR_RETURN(name, String(*n, f.PathOf("priority")));
  if (!s.priorities.contains(name)) {
    return Fail(*n, f.PathOf("priority"),
                "unknown priority class '" + name + "' (known: " + KeysOf(s.priorities) + ")");
  }
  return name;
}

Status Parser::ParseWorkloads(const YAML::Node& n, const std::string& path, Scenario& s) const {
  if (n.IsNull()) return {};
  if (!n.IsSequence()) return Fail(n, path, "expected a list of tenant workloads");
  for (size_t i = 0; i < n.size(); ++i) {
    Fields f;
    GP_ASSIGN_OR_RETURN(f, Map(n[i], Item(path, i), {"tenant", "arrivals", "jobs"}));
    TenantWorkload w;
    GP_TRY(Require(f, "tenant"));
    GP_TRY(StringField(f, "tenant", w.tenant));
    const auto tenant =
        std::find_if(s.tenants.begin(), s.tenants.end(), [&](const ScenarioTenant& t) { return t.name == w.tenant; });
    if (tenant == s.tenants.end()) {
      std::vector<std::string> known;
      for (const auto& t : s.tenants) known.push_back(t.name);
      return Fail(*f.Find("tenant"), f.PathOf("tenant"),
                  "unknown tenant '" + w.tenant + "' (known: " + JoinNames(known) + ")");
    }
    GP_TRY(Require(f, "arrivals"));
    GP_TRY(ParseArrivals(*f.Find("arrivals"), f.PathOf("arrivals"), s, w.arrivals));
    GP_TRY(Require(f, "jobs"));
    const YAML::Node& jobs = *f.Find("jobs");
    const std::string jpath = f.PathOf("jobs");
    if (!jobs.IsSequence() || jobs.size() == 0) return Fail(jobs, jpath, "expected a list of at least one job");
    for (size_t j = 0; j < jobs.size(); ++j) {
      JobTemplate t;
      GP_TRY(ParseJob(jobs[j], Item(jpath, j), s, *tenant, t));
      for (const auto& other : w.jobs) {
        if (other.name == t.name) {
          return Fail(jobs[j]["name"], Item(jpath, j) + ".name", "duplicate job name '" + t.name + "'");
        }
      }
      w.jobs.push_back(std::move(t));
    }
    s.workloads.push_back(std::move(w));
  }
  return {};
}

Status Parser::ParseArrivals(const YAML::Node& n, const std::string& path, const Scenario& s, ArrivalProcess& a) const {
  Fields f;
  GP_ASSIGN_OR_RETURN(f, Map(n, path, {"process", "rate_per_hour", "amplitude", "peak_hour", "start", "stop"}));
  GP_TRY(Require(f, "process"));
  std::string process;
  GP_ASSIGN_OR_RETURN(process, String(*f.Find("process"), f.PathOf("process")));
  if (process == "poisson") {
    a.kind = ArrivalProcess::Kind::kPoisson;
    for (const char* key : {"amplitude", "peak_hour"}) {
      if (f.Has(key)) return Fail(*f.Find(key), f.PathOf(key), "only for process: diurnal");
    }
  } else if (process == "diurnal") {
    a.kind = ArrivalProcess::Kind::kDiurnal;
  } else {
    return Fail(*f.Find("process"), f.PathOf("process"), "unknown process '" + process + "' (known: poisson, diurnal)");
  }
  GP_TRY(Require(f, "rate_per_hour"));
  GP_TRY(NumberField(f, "rate_per_hour", a.rate_per_hour, Positive));
  GP_TRY(NumberField(f, "amplitude", a.amplitude, Fraction01));
  GP_TRY(NumberField(f, "peak_hour", a.peak_hour,
                     [](double v) -> std::string { return v >= 0 && v < 24 ? "" : "must be in [0, 24)"; }));
  GP_TRY(DurationField(f, "start", a.start, AnyDuration));
  a.stop = s.horizon;
  GP_TRY(DurationField(f, "stop", a.stop, AnyDuration));
  if (a.stop < a.start) {
    const YAML::Node& at = f.Has("stop") ? *f.Find("stop") : *f.Find("start");
    return Fail(at, f.PathOf(f.Has("stop") ? "stop" : "start"), "must not be before start");
  }
  return {};
}

Status Parser::ParseJob(const YAML::Node& n, const std::string& path, const Scenario& s, const ScenarioTenant& tenant,
                        JobTemplate& t) const {
  Fields f;
  GP_ASSIGN_OR_RETURN(f, Map(n, path,
                             {"name",
                              "weight",
                              "kind",
                              "priority",
                              "gpus",
                              "gpu_fraction",
                              "cpu_cores",
                              "memory_gib",
                              "replicas",
                              "checkpointable",
                              "checkpoint_interval",
                              "checkpoint_duration",
                              "deadline_after",
                              "pools",
                              "requirement",
                              "duration",
                              "sharing",
                              "gpu_memory_gib",
                              "stages",
                              "utilization",
                              "model_gib",
                              "step_compute",
                              "max_replicas"}));
  GP_TRY(Require(f, "name"));
  GP_TRY(StringField(f, "name", t.name));
  GP_TRY(NumberField(f, "weight", t.weight, Positive));
  GP_TRY(KindField(f, t.kind));
  GP_ASSIGN_OR_RETURN(t.priority, PriorityField(f, s));
  const YAML::Node* stages = f.Find("stages");
  if (stages) {
    // A pipeline's resources are its stages'; job-level ones would be ignored.
    for (const auto& e : f.entries) {
      for (const char* key : {"gpus", "gpu_fraction", "replicas", "gpu_memory_gib", "cpu_cores", "memory_gib"}) {
        if (e.key == key) {
          return Fail(e.value, f.PathOf(e.key),
                      "not with stages (each stage gives its own resources; one replica runs per stage)");
        }
      }
    }
    if (t.kind == JobKind::kCpu) return Fail(*stages, f.PathOf("stages"), "a cpu job takes no GPUs");
  }
  GP_TRY(IntField(f, "gpus", t.gpus, IntRange(0, kMaxGpusPerNode)));
  t.gpu_milli = t.gpus == 0 ? 0 : kMilliPerGpu;
  if (const YAML::Node* fr = f.Find("gpu_fraction")) {
    if (f.Has("gpus")) return Fail(*fr, f.PathOf("gpu_fraction"), "give either gpus or gpu_fraction, not both");
    GP_TRY(GpuFractionField(f, "gpu_fraction", t.gpu_milli));
    t.gpus = 1;
  }
  if (t.kind == JobKind::kCpu) {  // CPU-only work: no GPUs by default, and asking for some is an error
    for (const char* key : {"gpu_fraction", "gpus"}) {
      if (f.Has(key) && t.gpus > 0) return Fail(*f.Find(key), f.PathOf(key), "a cpu job takes no GPUs");
    }
    t.gpus = 0;
    t.gpu_milli = 0;
  }
  GP_TRY(ScaledField(f, "cpu_cores", t.cpu_milli, 1000, NonNegative));
  GP_TRY(ScaledField(f, "memory_gib", t.memory_mib, 1024, NonNegative));
  if (const YAML::Node* r = f.Find("replicas")) {
    const std::string rpath = f.PathOf("replicas");
    const auto check = IntRange(1, EngineConfig{}.max_replicas);
    t.replicas.clear();
    if (r->IsSequence()) {
      if (r->size() == 0) return Fail(*r, rpath, "expected at least one replica count");
      for (size_t i = 0; i < r->size(); ++i) {
        int64_t v = 0;
        GP_ASSIGN_OR_RETURN(v, Integer((*r)[i], Item(rpath, i)));
        if (std::string problem = check(v); !problem.empty()) return Fail((*r)[i], Item(rpath, i), problem);
        t.replicas.push_back(static_cast<int32_t>(v));
      }
    } else {
      int64_t v = 0;
      GP_ASSIGN_OR_RETURN(v, Integer(*r, rpath));
      if (std::string problem = check(v); !problem.empty()) return Fail(*r, rpath, problem);
      t.replicas.push_back(static_cast<int32_t>(v));
    }
  }
  GP_TRY(IntField(f, "max_replicas", t.max_replicas, IntRange(1, EngineConfig{}.max_replicas)));
  if (const YAML::Node* m = f.Find("max_replicas")) {
    if (stages) return Fail(*m, f.PathOf("max_replicas"), "a pipeline cannot be elastic");
    for (int32_t r : t.replicas) {
      if (r > t.max_replicas) {
        return Fail(*m, f.PathOf("max_replicas"),
                    "must be at least every replica count (" + std::to_string(r) + "): replicas is the minimum");
      }
    }
  }
  GP_TRY(BoolField(f, "checkpointable", t.checkpointable));
  GP_TRY(DurationField(f, "checkpoint_interval", t.checkpoint_interval, AnyDuration));
  GP_TRY(DurationField(f, "checkpoint_duration", t.checkpoint_duration, AnyDuration));
  GP_TRY(NumberField(f, "model_gib", t.model_gib, NonNegative));
  GP_TRY(DurationField(f, "step_compute", t.step_compute, PositiveDuration));
  if (f.Has("deadline_after")) {
    Duration d{0};
    GP_TRY(DurationField(f, "deadline_after", d, PositiveDuration));
    t.deadline_after = d;
  }
  if (const YAML::Node* p = f.Find("pools")) {
    std::vector<Ref> refs;
    GP_ASSIGN_OR_RETURN(t.pools, StringList(*p, f.PathOf("pools"), &refs));
    for (const Ref& r : refs) {
      const std::string& name = r.node.Scalar();
      if (std::none_of(s.pools.begin(), s.pools.end(), [&](const ScenarioPool& x) { return x.name == name; })) {
        std::vector<std::string> known;
        for (const auto& x : s.pools) known.push_back(x.name);
        return Fail(r.node, r.path, "unknown pool '" + name + "' (known: " + JoinNames(known) + ")");
      }
      if (!tenant.quota.contains(name)) {
        return Fail(r.node, r.path, "tenant '" + tenant.name + "' has no quota in pool '" + name + "'");
      }
    }
  }
  if (const YAML::Node* r = f.Find("requirement")) {
    GP_ASSIGN_OR_RETURN(t.requirement, String(*r, f.PathOf("requirement")));
    if (std::none_of(s.requirements.begin(), s.requirements.end(),
                     [&](const Requirement& x) { return x.name == t.requirement; })) {
      std::vector<std::string> known;
      for (const auto& x : s.requirements) known.push_back(x.name);
      return Fail(*r, f.PathOf("requirement"),
                  "unknown requirement '" + t.requirement + "' (known: " + JoinNames(known) + ")");
    }
  }
  if (const YAML::Node* d = f.Find("duration")) GP_TRY(ParseDurationModel(*d, f.PathOf("duration"), t.duration));
  const bool share = t.gpus == 1 && t.gpu_milli < kMilliPerGpu;
  if (const YAML::Node* sh = f.Find("sharing")) {
    const std::string spath = f.PathOf("sharing");
    GP_ASSIGN_OR_RETURN(t.sharing, String(*sh, spath));
    static constexpr std::string_view kModes[] = {"any", "time-slice", "mps", "mig", "auto"};
    if (std::find(std::begin(kModes), std::end(kModes), t.sharing) == std::end(kModes)) {
      return Fail(*sh, spath, "unknown sharing mode '" + t.sharing + "' (known: any, time-slice, mps, mig, auto)");
    }
    if (stages && t.sharing != "any")
      return Fail(*sh, spath, "a pipeline's stages choose their own mode (stages[].mode)");
    if (t.sharing == "auto") {
      if (t.gpus == 0) return Fail(*sh, spath, "auto needs a job with GPUs (this one takes none)");
    } else if (t.sharing != "any" && !share) {
      return Fail(*sh, spath, t.sharing + " needs a share of one GPU (gpu_fraction)");
    }
  }
  if (const YAML::Node* m = f.Find("gpu_memory_gib")) {
    GP_TRY(GpuMemoryField(f, "gpu_memory_gib", t.gpu_memory_mib));
    if (t.gpus == 0) return Fail(*m, f.PathOf("gpu_memory_gib"), "the job takes no GPUs");
    if (!share && t.sharing != "auto") {
      return Fail(*m, f.PathOf("gpu_memory_gib"), "only for a share of one GPU (gpu_fraction) or with sharing: auto");
    }
  }
  if (stages) GP_TRY(ParseStages(*stages, f.PathOf("stages"), t));
  if (const YAML::Node* u = f.Find("utilization")) {
    if (t.gpus == 0) return Fail(*u, f.PathOf("utilization"), "the job takes no GPUs");
    GP_TRY(ParseUtilization(*u, f.PathOf("utilization"), t.utilization));
  }
  return {};
}

Status Parser::ParseStages(const YAML::Node& n, const std::string& path, JobTemplate& t) const {
  const std::string range = "1 to " + std::to_string(kMaxGpusPerNode);
  if (!n.IsSequence() || n.size() == 0) return Fail(n, path, "expected a list of " + range + " stages");
  if (n.size() > static_cast<size_t>(kMaxGpusPerNode)) {
    return Fail(n, path,
                "at most " + std::to_string(kMaxGpusPerNode) + " stages (a pipeline runs on one node; got " +
                    std::to_string(n.size()) + ")");
  }
  for (size_t i = 0; i < n.size(); ++i) {
    Fields f;
    GP_ASSIGN_OR_RETURN(
        f, Map(n[i], Item(path, i), {"name", "gpu_fraction", "gpu_memory_gib", "mode", "cpu_cores", "memory_gib"}));
    StageTemplate st;
    GP_TRY(Require(f, "name"));
    GP_TRY(StringField(f, "name", st.name));
    for (const auto& other : t.stages) {
      if (other.name == st.name) return Fail(*f.Find("name"), f.PathOf("name"), "duplicate stage '" + st.name + "'");
    }
    GP_TRY(Require(f, "gpu_fraction"));
    GP_TRY(GpuFractionField(f, "gpu_fraction", st.gpu_milli));
    GP_TRY(GpuMemoryField(f, "gpu_memory_gib", st.gpu_memory_mib));
    if (const YAML::Node* m = f.Find("mode")) {
      GP_ASSIGN_OR_RETURN(st.mode, String(*m, f.PathOf("mode")));
      if (st.mode != "time-slice" && st.mode != "mps" && st.mode != "mig") {
        return Fail(*m, f.PathOf("mode"), "unknown mode '" + st.mode + "' (known: time-slice, mps, mig)");
      }
    }
    GP_TRY(ScaledField(f, "cpu_cores", st.cpu_milli, 1000, NonNegative));
    GP_TRY(ScaledField(f, "memory_gib", st.memory_mib, 1024, NonNegative));
    t.stages.push_back(std::move(st));
  }
  return {};
}

Status Parser::ParseUtilization(const YAML::Node& n, const std::string& path, UtilizationModel& m) const {
  Fields f;
  GP_ASSIGN_OR_RETURN(f, Map(n, path, {"constant", "bursty", "trace"}));
  std::string chosen;
  for (const auto& e : f.entries) {
    if (!chosen.empty()) {
      return Fail(e.key_node, f.PathOf(e.key), "give only one of constant, bursty, trace (already: " + chosen + ")");
    }
    chosen = e.key;
  }
  if (chosen.empty()) return Fail(n, path, "needs one of constant, bursty, trace");
  m = UtilizationModel{};
  m.given = true;
  if (chosen == "constant") {
    m.kind = UtilizationModel::Kind::kConstant;
    GP_TRY(NumberField(f, "constant", m.busy, Fraction01));
  } else if (chosen == "bursty") {
    m.kind = UtilizationModel::Kind::kBursty;
    Fields bf;
    GP_ASSIGN_OR_RETURN(bf,
                        Map(*f.Find("bursty"), f.PathOf("bursty"), {"busy", "idle", "busy_for", "idle_for", "jitter"}));
    GP_TRY(NumberField(bf, "busy", m.busy, Fraction01));
    GP_TRY(NumberField(bf, "idle", m.idle, Fraction01));
    GP_TRY(DurationField(bf, "busy_for", m.busy_for, PositiveDuration));
    GP_TRY(DurationField(bf, "idle_for", m.idle_for, PositiveDuration));
    GP_TRY(DurationField(bf, "jitter", m.phase_jitter, AnyDuration));
  } else {
    m.kind = UtilizationModel::Kind::kTrace;
    std::string name;
    GP_ASSIGN_OR_RETURN(name, String(*f.Find("trace"), f.PathOf("trace")));
    if (name != "genai")
      return Fail(*f.Find("trace"), f.PathOf("trace"), "unknown utilization trace '" + name + "' (known: genai)");
  }
  return {};
}

// Is `name` a node that the cluster's node groups create ("<prefix>-<index>")?
bool NodeGroupsName(const Scenario& s, std::string_view name) {
  for (const ScenarioNodeGroup& g : s.nodes) {
    const std::string& p = g.name_prefix;
    if (name.size() <= p.size() + 1 || !name.starts_with(p) || name[p.size()] != '-') continue;
    const std::string_view index = name.substr(p.size() + 1);
    if (index.size() > 1 && index[0] == '0') continue;
    if (!std::all_of(index.begin(), index.end(), [](char c) { return c >= '0' && c <= '9'; })) continue;
    int64_t i = 0;
    auto [ptr, ec] = std::from_chars(index.data(), index.data() + index.size(), i);
    if (ec == std::errc() && ptr == index.data() + index.size() && i < g.count) return true;
  }
  return false;
}

Status Parser::ParseFaults(const YAML::Node& n, const std::string& path, Scenario& s) const {
  if (n.IsNull()) return {};
  if (!n.IsSequence()) return Fail(n, path, "expected a list of faults");
  if (n.size() > 0 && s.engine.heartbeat_timeout <= Duration(0)) {
    return Fail(n, path,
                "faults need engine.heartbeat_timeout above 0 (with it off the engine never notices a node is down)");
  }
  for (size_t i = 0; i < n.size(); ++i) {
    Fields f;
    GP_ASSIGN_OR_RETURN(f, Map(n[i], Item(path, i), {"node", "at", "down_for"}));
    FaultSpec x;
    GP_TRY(Require(f, "node"));
    GP_TRY(StringField(f, "node", x.node));
    // With trace_nodes the node names are known only once the trace is read.
    if (s.trace_nodes_path.empty() && !NodeGroupsName(s, x.node)) {
      std::vector<std::string> known;
      for (const ScenarioNodeGroup& g : s.nodes) {
        if (g.count == 0) continue;
        known.push_back(g.name_prefix + "-0" +
                        (g.count > 1 ? ".." + g.name_prefix + "-" + std::to_string(g.count - 1) : ""));
      }
      return Fail(*f.Find("node"), f.PathOf("node"), "unknown node '" + x.node + "' (nodes: " + JoinNames(known) + ")");
    }
    GP_TRY(Require(f, "at"));
    GP_TRY(DurationField(f, "at", x.at, AnyDuration));
    GP_TRY(DurationField(f, "down_for", x.down_for, PositiveDuration));
    for (size_t j = 0; j < s.faults.size(); ++j) {
      const FaultSpec& o = s.faults[j];
      if (o.node == x.node && x.at < o.at + o.down_for && o.at < x.at + x.down_for) {
        return Fail(*f.Find("at"), f.PathOf("at"),
                    "node '" + x.node + "' is already down then (" + Item(path, j) + ")");
      }
    }
    s.faults.push_back(std::move(x));
  }
  return {};
}

Status Parser::ParseGpuFaults(const YAML::Node& n, const std::string& path, Scenario& s) const {
  if (n.IsNull()) return {};
  if (!n.IsSequence()) return Fail(n, path, "expected a list of GPU faults");
  for (size_t i = 0; i < n.size(); ++i) {
    Fields f;
    GP_ASSIGN_OR_RETURN(f, Map(n[i], Item(path, i), {"node", "gpu", "at", "for", "xid"}));
    GpuFaultSpec x;
    GP_TRY(Require(f, "node"));
    GP_TRY(StringField(f, "node", x.node));
    if (s.trace_nodes_path.empty() && !NodeGroupsName(s, x.node)) {
      return Fail(*f.Find("node"), f.PathOf("node"), "unknown node '" + x.node + "'");
    }
    GP_TRY(IntField(f, "gpu", x.gpu, IntRange(0, kMaxGpusPerNode - 1)));
    GP_TRY(Require(f, "at"));
    GP_TRY(DurationField(f, "at", x.at, AnyDuration));
    GP_TRY(DurationField(f, "for", x.unhealthy_for, PositiveDuration));
    GP_TRY(IntField(f, "xid", x.xid, IntRange(1, 1000)));
    for (size_t j = 0; j < s.gpu_faults.size(); ++j) {
      const GpuFaultSpec& o = s.gpu_faults[j];
      if (o.node == x.node && o.gpu == x.gpu && x.at < o.at + o.unhealthy_for && o.at < x.at + x.unhealthy_for) {
        return Fail(*f.Find("at"), f.PathOf("at"), "that GPU is already unhealthy then (" + Item(path, j) + ")");
      }
    }
    s.gpu_faults.push_back(std::move(x));
  }
  return {};
}

Status Parser::ParseHotSpells(const YAML::Node& n, const std::string& path, Scenario& s) const {
  if (n.IsNull()) return {};
  if (!n.IsSequence()) return Fail(n, path, "expected a list of hot spells");
  if (n.size() > 0 && !s.engine.hotspots.enabled) {
    return Fail(n, path, "hot spells need engine.hotspots (without it nothing watches the telemetry)");
  }
  for (size_t i = 0; i < n.size(); ++i) {
    Fields f;
    GP_ASSIGN_OR_RETURN(f, Map(n[i], Item(path, i), {"node", "at", "for", "temperature_c"}));
    HotSpell x;
    GP_TRY(Require(f, "node"));
    GP_TRY(StringField(f, "node", x.node));
    if (s.trace_nodes_path.empty() && !NodeGroupsName(s, x.node)) {
      return Fail(*f.Find("node"), f.PathOf("node"), "unknown node '" + x.node + "'");
    }
    GP_TRY(Require(f, "at"));
    GP_TRY(DurationField(f, "at", x.at, AnyDuration));
    GP_TRY(DurationField(f, "for", x.hot_for, PositiveDuration));
    GP_TRY(NumberField(f, "temperature_c", x.temperature_c,
                       [](double v) -> std::string { return v >= 0 && v <= 150 ? "" : "must be between 0 and 150"; }));
    s.hot_spells.push_back(std::move(x));
  }
  return {};
}

Status Parser::ParseDurationModel(const YAML::Node& n, const std::string& path, DurationModel& m) const {
  Fields f;
  GP_ASSIGN_OR_RETURN(f, Map(n, path, {"fixed", "lognormal", "philly", "serving_lifetimes", "min", "max"}));
  const char* chosen = nullptr;
  for (const auto& e : f.entries) {
    if (e.key != "fixed" && e.key != "lognormal" && e.key != "philly" && e.key != "serving_lifetimes") continue;
    if (chosen)
      return Fail(e.key_node, f.PathOf(e.key),
                  std::string("give only one of fixed, lognormal, philly, serving_lifetimes (already: ") + chosen + ")");
    chosen = e.key == "fixed"       ? "fixed"
             : e.key == "lognormal" ? "lognormal"
             : e.key == "philly"    ? "philly"
                                    : "serving_lifetimes";
  }
  if (!chosen) return Fail(n, path, "needs one of fixed, lognormal, philly, serving_lifetimes");
  if (f.Has("fixed")) {
    m.kind = DurationModel::Kind::kFixed;
    GP_TRY(DurationField(f, "fixed", m.fixed, PositiveDuration));
  } else if (const YAML::Node* l = f.Find("lognormal")) {
    m.kind = DurationModel::Kind::kLogNormal;
    Fields lf;
    GP_ASSIGN_OR_RETURN(lf, Map(*l, f.PathOf("lognormal"), {"median", "sigma"}));
    GP_TRY(Require(lf, "median"));
    Duration median{0};
    GP_TRY(DurationField(lf, "median", median, PositiveDuration));
    m.median_s = ToSeconds(median);
    GP_TRY(Require(lf, "sigma"));
    GP_TRY(NumberField(lf, "sigma", m.sigma, NonNegative));
  } else {
    const bool philly = f.Has("philly");
    m.kind = philly ? DurationModel::Kind::kPhilly : DurationModel::Kind::kServingLifetimes;
    const char* key = philly ? "philly" : "serving_lifetimes";
    Fields pf;
    if (philly) {
      GP_ASSIGN_OR_RETURN(pf, Map(*f.Find(key), f.PathOf(key), {"scale"}));
    } else {
      GP_ASSIGN_OR_RETURN(pf, Map(*f.Find(key), f.PathOf(key), {"scale", "below"}));
      GP_TRY(DurationField(pf, "below", m.below, AnyDuration));
    }
    GP_TRY(NumberField(pf, "scale", m.scale, Positive));
  }
  GP_TRY(DurationField(f, "min", m.min, AnyDuration));
  GP_TRY(DurationField(f, "max", m.max, PositiveDuration));
  if (m.max < m.min) {
    const char* key = f.Has("max") ? "max" : "min";
    return Fail(*f.Find(key), f.PathOf(key), "must not be below min");
  }
  return {};
}

Status Parser::ParseScaling(const YAML::Node& n, const std::string& path, Scenario& s) const {
  if (!n.IsSequence() || n.size() == 0) return Fail(n, path, "expected a list of pools to scale");
  for (size_t i = 0; i < n.size(); ++i) {
    const std::string ipath = Item(path, i);
    Fields f;
    GP_ASSIGN_OR_RETURN(f,
                        Map(n[i], ipath,
                            {"pool", "node", "min_nodes", "max_nodes", "max_step", "scale_out", "scale_in", "cooldown",
                             "target_utilization", "max_actions_per_hour", "drain_timeout", "forecast", "warm_pool"}));
    PoolScalingConfig c;
    GP_TRY(Require(f, "pool"));
    GP_TRY(StringField(f, "pool", c.pool));
    const auto pool =
        std::find_if(s.pools.begin(), s.pools.end(), [&](const ScenarioPool& p) { return p.name == c.pool; });
    if (pool == s.pools.end()) {
      std::vector<std::string> known;
      for (const auto& p : s.pools) known.push_back(p.name);
      return Fail(*f.Find("pool"), f.PathOf("pool"), "unknown pool '" + c.pool + "' (known: " + JoinNames(known) + ")");
    }
    for (const PoolScalingConfig& other : s.engine.scaling) {
      if (other.pool == c.pool) return Fail(*f.Find("pool"), f.PathOf("pool"), "pool '" + c.pool + "' is scaled twice");
    }
    GP_TRY(Require(f, "node"));
    {
      Fields nf;
      const YAML::Node& node = *f.Find("node");
      GP_ASSIGN_OR_RETURN(nf, Map(node, f.PathOf("node"),
                                  {"model", "gpus", "cpu_cores", "memory_gib", "region", "zone", "racks", "attributes",
                                   "name_prefix"}));
      NodeTemplate& t = c.node;
      std::string model;
      GP_TRY(Require(nf, "model"));
      GP_TRY(StringField(nf, "model", model));
      const auto id = Catalog::Builtin().Find(model);
      if (!id) {
        return Fail(*nf.Find("model"), nf.PathOf("model"),
                    "unknown GPU model '" + model + "' (known: " + Catalog::Builtin().Names() + ")");
      }
      t.gpu_model = *id;
      GP_TRY(Require(nf, "gpus"));
      GP_TRY(IntField(nf, "gpus", t.gpus, IntRange(1, kMaxGpusPerNode)));
      GP_TRY(Require(nf, "cpu_cores"));
      GP_TRY(ScaledField(nf, "cpu_cores", t.cpu_milli, 1000, Positive));
      GP_TRY(Require(nf, "memory_gib"));
      GP_TRY(ScaledField(nf, "memory_gib", t.memory_mib, 1024, Positive));
      GP_TRY(StringField(nf, "region", t.region));
      GP_TRY(StringField(nf, "zone", t.zone));
      GP_TRY(IntField(nf, "racks", t.racks, IntRange(1, kMaxNodeGroupCount)));
      if (const YAML::Node* a = nf.Find("attributes")) {
        std::string cls;
        GP_ASSIGN_OR_RETURN(cls, String(*a, nf.PathOf("attributes")));
        const auto it = std::find_if(s.node_classes.begin(), s.node_classes.end(),
                                     [&](const NodeAttributes& x) { return x.name == cls; });
        if (it == s.node_classes.end()) return Fail(*a, nf.PathOf("attributes"), "unknown node class '" + cls + "'");
        t.attr_class = static_cast<uint16_t>(it - s.node_classes.begin());
      }
      t.name_prefix = Lower(c.pool) + "-auto";
      GP_TRY(StringField(nf, "name_prefix", t.name_prefix));
      ScenarioNodeGroup probe;
      probe.model = model;
      probe.region = t.region;
      if (PoolOf(s, probe) != pool - s.pools.begin()) {
        return Fail(node, f.PathOf("node"),
                    "pool '" + c.pool + "' does not select " + model + " nodes in region '" + t.region + "'");
      }
    }
    AutoscalerConfig& r = c.rule;
    GP_TRY(IntField(f, "min_nodes", r.min_nodes, IntRange(0, kMaxNodeGroupCount)));
    GP_TRY(IntField(f, "max_nodes", r.max_nodes, IntRange(1, kMaxNodeGroupCount)));
    if (r.max_nodes < r.min_nodes) return Fail(*f.Find("max_nodes"), f.PathOf("max_nodes"), "must not be below min_nodes");
    GP_TRY(IntField(f, "max_step", r.max_step, IntRange(1, kMaxNodeGroupCount)));
    if (const YAML::Node* o = f.Find("scale_out")) {
      Fields of;
      GP_ASSIGN_OR_RETURN(of, Map(*o, f.PathOf("scale_out"), {"utilization_above", "for", "queue_over"}));
      GP_TRY(NumberField(of, "utilization_above", r.out_util, Fraction01));
      GP_TRY(DurationField(of, "for", r.out_for, PositiveDuration));
      GP_TRY(IntField(of, "queue_over", r.queue_threshold, IntRange(0, INT64_MAX)));
    }
    if (const YAML::Node* in = f.Find("scale_in")) {
      Fields inf;
      GP_ASSIGN_OR_RETURN(inf, Map(*in, f.PathOf("scale_in"), {"utilization_below", "for", "safety_window"}));
      GP_TRY(NumberField(inf, "utilization_below", r.in_util, Fraction01));
      GP_TRY(DurationField(inf, "for", r.in_for, PositiveDuration));
      GP_TRY(DurationField(inf, "safety_window", r.safety_window, AnyDuration));
    }
    GP_TRY(DurationField(f, "cooldown", r.cooldown, AnyDuration));
    GP_TRY(NumberField(f, "target_utilization", r.target_util, Fraction01));
    GP_TRY(IntField(f, "max_actions_per_hour", r.max_actions_per_hour, IntRange(1, 3600)));
    GP_TRY(DurationField(f, "drain_timeout", c.drain_timeout, PositiveDuration));
    if (const YAML::Node* fc = f.Find("forecast")) {
      Fields ff;
      GP_ASSIGN_OR_RETURN(
          ff, Map(*fc, f.PathOf("forecast"), {"enabled", "ahead", "step", "season", "alpha", "beta", "gamma"}));
      ForecastConfig& x = c.forecast;
      x.enabled = true;
      GP_TRY(BoolField(ff, "enabled", x.enabled));
      GP_TRY(DurationField(ff, "ahead", x.ahead, PositiveDuration));
      GP_TRY(DurationField(ff, "step", x.step, PositiveDuration));
      GP_TRY(DurationField(ff, "season", x.season, PositiveDuration));
      GP_TRY(NumberField(ff, "alpha", x.alpha, Fraction01));
      GP_TRY(NumberField(ff, "beta", x.beta, Fraction01));
      GP_TRY(NumberField(ff, "gamma", x.gamma, Fraction01));
    }
    if (const YAML::Node* w = f.Find("warm_pool")) {
      Fields wf;
      GP_ASSIGN_OR_RETURN(wf, Map(*w, f.PathOf("warm_pool"), {"enabled", "lookback", "max_nodes"}));
      c.warm_pool.enabled = true;
      GP_TRY(BoolField(wf, "enabled", c.warm_pool.enabled));
      GP_TRY(DurationField(wf, "lookback", c.warm_pool.lookback, PositiveDuration));
      GP_TRY(IntField(wf, "max_nodes", c.warm_pool.max_nodes, IntRange(0, kMaxNodeGroupCount)));
    }
    if (auto ok = CheckScalingConfig(c); !ok) return Fail(n[i], ipath, ok.error().message);
    s.engine.scaling.push_back(std::move(c));
  }
  return {};
}

Status Parser::ParseRegions(const YAML::Node& n, const std::string& path, Scenario& s) const {
  Fields f;
  GP_ASSIGN_OR_RETURN(f, Map(n, path, {"policy", "table", "users"}));
  RegionPolicy& r = s.engine.regions;
  r.kind = RegionPolicy::Kind::kCostAware;
  if (const YAML::Node* p = f.Find("policy")) {
    std::string kind;
    GP_ASSIGN_OR_RETURN(kind, String(*p, f.PathOf("policy")));
    if (kind == "cost-aware") {
      r.kind = RegionPolicy::Kind::kCostAware;
    } else if (kind == "nearest") {
      r.kind = RegionPolicy::Kind::kNearest;
    } else if (kind == "off") {
      r.kind = RegionPolicy::Kind::kOff;
    } else {
      return Fail(*p, f.PathOf("policy"), "expected 'cost-aware', 'nearest' or 'off' (got '" + kind + "')");
    }
  }
  GP_TRY(Require(f, "table"));
  const YAML::Node& table = *f.Find("table");
  const std::string tpath = f.PathOf("table");
  if (!table.IsSequence() || table.size() == 0) return Fail(table, tpath, "expected a list of regions");
  for (size_t i = 0; i < table.size(); ++i) {
    Fields rf;
    GP_ASSIGN_OR_RETURN(rf, Map(table[i], Item(tpath, i), {"name", "price_per_gpu_hour", "latency_ms"}));
    RegionInfo info;
    GP_TRY(Require(rf, "name"));
    GP_TRY(StringField(rf, "name", info.name));
    for (const RegionInfo& other : r.regions) {
      if (other.name == info.name) return Fail(*rf.Find("name"), rf.PathOf("name"), "region '" + info.name + "' listed twice");
    }
    GP_TRY(Require(rf, "price_per_gpu_hour"));
    GP_TRY(NumberField(rf, "price_per_gpu_hour", info.price_per_gpu_hour, NonNegative));
    if (const YAML::Node* l = rf.Find("latency_ms")) {
      Fields lf;
      GP_ASSIGN_OR_RETURN(lf, Map(*l, rf.PathOf("latency_ms"), {}));
      for (const auto& e : lf.entries) {
        double ms = 0;
        GP_TRY(NumberField(lf, e.key, ms, NonNegative));
        info.latency_ms[e.key] = ms;
      }
    }
    r.regions.push_back(std::move(info));
  }
  if (const YAML::Node* u = f.Find("users")) {
    const std::string upath = f.PathOf("users");
    if (!u->IsSequence()) return Fail(*u, upath, "expected a list of tenants' user locations");
    for (size_t i = 0; i < u->size(); ++i) {
      Fields uf;
      GP_ASSIGN_OR_RETURN(uf, Map((*u)[i], Item(upath, i), {"tenant", "at", "latency_budget_ms"}));
      TenantUsers users;
      GP_TRY(Require(uf, "tenant"));
      GP_TRY(StringField(uf, "tenant", users.tenant));
      // A server's tenants may also be created later through its API.
      if (!server_ && std::none_of(s.tenants.begin(), s.tenants.end(), [&](const ScenarioTenant& t) { return t.name == users.tenant; })) {
        return Fail(*uf.Find("tenant"), uf.PathOf("tenant"), "unknown tenant '" + users.tenant + "'");
      }
      GP_TRY(Require(uf, "at"));
      GP_TRY(StringField(uf, "at", users.location));
      GP_TRY(NumberField(uf, "latency_budget_ms", users.latency_budget_ms, NonNegative));
      r.users.push_back(std::move(users));
    }
  }
  return {};
}

Status Parser::ParseProvider(const YAML::Node& n, const std::string& path, Scenario& s) const {
  Fields f;
  GP_ASSIGN_OR_RETURN(f, Map(n, path, {"cold_start", "warm_start", "price_per_node_hour", "warm_price_fraction"}));
  ProviderModel& p = s.provider;
  GP_TRY(DurationField(f, "cold_start", p.cold_start, AnyDuration));
  GP_TRY(DurationField(f, "warm_start", p.warm_start, AnyDuration));
  GP_TRY(NumberField(f, "price_per_node_hour", p.price_per_node_hour, NonNegative));
  GP_TRY(NumberField(f, "warm_price_fraction", p.warm_price_fraction, Fraction01));
  return {};
}

Status Parser::ParseTrace(const YAML::Node& n, const std::string& path, Scenario& s) const {
  Fields f;
  GP_ASSIGN_OR_RETURN(f, Map(n, path,
                             {"pods", "tenant", "priority", "limit", "arrival_speedup", "checkpointable",
                              "checkpoint_duration", "skip"}));
  TraceWorkload t;
  GP_TRY(Require(f, "pods"));
  std::string pods;
  GP_ASSIGN_OR_RETURN(pods, String(*f.Find("pods"), f.PathOf("pods")));
  t.pods_path = ResolvePath(pods);
  GP_TRY(Require(f, "tenant"));
  GP_TRY(StringField(f, "tenant", t.tenant));
  if (std::none_of(s.tenants.begin(), s.tenants.end(), [&](const ScenarioTenant& x) { return x.name == t.tenant; })) {
    std::vector<std::string> known;
    for (const auto& x : s.tenants) known.push_back(x.name);
    return Fail(*f.Find("tenant"), f.PathOf("tenant"),
                "unknown tenant '" + t.tenant + "' (known: " + JoinNames(known) + ")");
  }
  GP_ASSIGN_OR_RETURN(t.priority, PriorityField(f, s));
  if (f.Has("limit")) {
    int limit = 0;
    GP_TRY(IntField(f, "limit", limit, IntRange(1, INT32_MAX)));
    t.limit = limit;
  }
  GP_TRY(NumberField(f, "arrival_speedup", t.arrival_speedup, Positive));
  GP_TRY(DurationField(f, "skip", t.skip, AnyDuration));
  GP_TRY(BoolField(f, "checkpointable", t.checkpointable));
  GP_TRY(DurationField(f, "checkpoint_duration", t.checkpoint_duration, AnyDuration));
  s.trace = std::move(t);
  return {};
}

}  // namespace

Result<Scenario> ParseScenario(std::string_view text, std::string_view source, const std::string& base_dir,
                               bool server) {
  try {
    const std::vector<YAML::Node> docs = YAML::LoadAll(std::string(text));
    if (docs.size() > 1) {
      return InvalidArgument(Where(source, docs[1].Mark()) + "expected one YAML document, found " +
                             std::to_string(docs.size()));
    }
    const YAML::Node root = docs.empty() ? YAML::Node() : docs[0];
    return Parser(source, base_dir, server).Parse(root);
  } catch (const YAML::ParserException& e) {
    return InvalidArgument(Where(source, e.mark) + "malformed YAML: " + e.msg);
  } catch (const YAML::Exception& e) {
    return InvalidArgument(Where(source, e.mark) + "YAML error: " + e.msg);
  }
}

Result<Scenario> LoadScenario(const std::string& path) {
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec)) return IoError(path + ": cannot open (a folder, not a file)");
  std::ifstream in(path, std::ios::binary);
  if (!in) return IoError(path + ": cannot open (" + std::strerror(errno) + ")");
  std::ostringstream text;
  text << in.rdbuf();
  if (in.bad()) return IoError(path + ": cannot read");
  std::string base_dir = std::filesystem::path(path).parent_path().string();
  auto s = ParseScenario(text.str(), path, base_dir.empty() ? "." : base_dir);
  if (s) s->path = path;
  return s;
}

}  // namespace gpupool
