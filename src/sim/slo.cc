// See slo.h.
#include "src/sim/slo.h"

#include <algorithm>
#include <cstdio>
#include <functional>
#include <limits>
#include <map>
#include <set>

#include "src/config/yaml_reader.h"

namespace gpupool {
namespace {

// A measure of a report on one scope; empty when it has none there.
using Getter = std::function<std::optional<double>(const SimReport& r, const SimReport& in_force, SloScope,
                                                   const std::string& key, std::string& note)>;

struct MeasureDef {
  const char* name;
  bool all, priority, tenant;  // the scopes it takes
  Getter get;
};

const ClassReport* ClassOf(const SimReport& r, SloScope s, const std::string& key) {
  if (s == SloScope::kAll) return &r.all;
  if (s == SloScope::kPriority) {
    auto it = r.by_priority.find(key);
    return it == r.by_priority.end() ? nullptr : &it->second;
  }
  auto it = r.by_tenant.find(key);
  return it == r.by_tenant.end() ? nullptr : &it->second.jobs;
}

const TenantReport* TenantOf(const SimReport& r, const std::string& key) {
  auto it = r.by_tenant.find(key);
  return it == r.by_tenant.end() ? nullptr : &it->second;
}

Getter OfClass(std::function<double(const ClassReport&)> f) {
  return [f](const SimReport& r, const SimReport&, SloScope s, const std::string& key,
             std::string& note) -> std::optional<double> {
    const ClassReport* c = ClassOf(r, s, key);
    if (c == nullptr) {
      note = "no jobs";
      return std::nullopt;
    }
    return f(*c);
  };
}

Getter OfPool(std::function<double(const SimReport&)> f) {
  return [f](const SimReport& r, const SimReport&, SloScope, const std::string&, std::string&) {
    return std::optional<double>(f(r));
  };
}

// A tenant's measure, or the pool's without a scope.
Getter OfTenantOrPool(std::function<double(const TenantReport&)> t, std::function<double(const SimReport&)> p) {
  return [t, p](const SimReport& r, const SimReport&, SloScope s, const std::string& key,
                std::string& note) -> std::optional<double> {
    if (s == SloScope::kAll) return p(r);
    const TenantReport* tr = TenantOf(r, key);
    if (tr == nullptr) {
      note = "no such tenant";
      return std::nullopt;
    }
    return t(*tr);
  };
}

std::optional<double> GuaranteeShare(const SimReport& r, const SimReport& in_force, SloScope, const std::string& key,
                                     std::string& note) {
  const TenantReport* base = TenantOf(in_force, key);
  const TenantReport* t = TenantOf(r, key);
  if (base == nullptr || t == nullptr) {
    note = "no such tenant";
    return std::nullopt;
  }
  if (base->entitlement_guaranteed_pct <= 0) {
    note = "no guarantee";
    return std::nullopt;
  }
  const double owed = std::min(base->entitlement_guaranteed_pct, base->share_received_pct);
  if (owed <= 0) {
    note = "received nothing in force";
    return std::nullopt;
  }
  return 100.0 * t->share_received_pct / owed;
}

const std::vector<MeasureDef>& Measures() {
  static const std::vector<MeasureDef> defs = {
      {"wait_p50_s", true, true, true, OfClass([](const ClassReport& c) { return c.wait_s.p50; })},
      {"wait_p95_s", true, true, true, OfClass([](const ClassReport& c) { return c.wait_s.p95; })},
      {"wait_mean_s", true, true, true, OfClass([](const ClassReport& c) { return c.wait_s.mean; })},
      {"jct_p95_s", true, true, true, OfClass([](const ClassReport& c) { return c.jct_s.p95; })},
      {"completed", true, true, true, OfClass([](const ClassReport& c) { return double(c.completed); })},
      {"rejected", true, true, true, OfClass([](const ClassReport& c) { return double(c.rejected); })},
      {"gpu_hours_completed", true, true, true, OfClass([](const ClassReport& c) { return c.gpu_hours_completed; })},
      {"share_received_pct", false, false, true,
       OfTenantOrPool([](const TenantReport& t) { return t.share_received_pct; }, nullptr)},
      {"guarantee_share_pct", false, false, true, GuaranteeShare},
      {"preemptions", true, false, true,
       OfTenantOrPool([](const TenantReport& t) { return double(t.preemptions); },
                      [](const SimReport& r) { return double(r.preemptions); })},
      {"gpu_hours_lost", true, false, true,
       OfTenantOrPool([](const TenantReport& t) { return t.gpu_hours_lost; },
                      [](const SimReport& r) { return r.gpu_hours_lost; })},
      {"allocation_pct", true, false, false, OfPool([](const SimReport& r) { return r.allocation_pct_mean; })},
      {"busy_pct", true, false, false, OfPool([](const SimReport& r) { return r.sharing.gpu_busy_pct_mean; })},
      {"idle_reclaims", true, false, false, OfPool([](const SimReport& r) { return double(r.reclaim.idle_reclaims); })},
      {"deadline_evictions", true, false, false,
       OfPool([](const SimReport& r) { return double(r.reclaim.deadline_evictions); })},
      {"unfinished", true, false, false, OfPool([](const SimReport& r) { return double(r.unfinished); })},
  };
  return defs;
}

const MeasureDef* FindMeasure(const std::string& name) {
  for (const MeasureDef& m : Measures()) {
    if (name == m.name) return &m;
  }
  return nullptr;
}

std::string Num(double v) {
  char b[64];
  std::snprintf(b, sizeof b, "%.2f", v);
  return b;
}

std::string ScopeText(SloScope s, const std::string& key) {
  if (s == SloScope::kPriority) return ", priority " + key;
  if (s == SloScope::kTenant) return ", tenant " + key;
  return "";
}

std::string BoundText(const SloRule& r) {
  std::vector<std::string> parts;
  const std::string slack = r.slack > 0 ? " + " + Num(r.slack) : "";
  if (r.max) parts.push_back("<= " + Num(*r.max));
  if (r.max_increase_pct) parts.push_back("<= in force x " + Num(1 + *r.max_increase_pct / 100) + slack);
  if (r.min) parts.push_back(">= " + Num(*r.min));
  if (r.max_decrease_pct) {
    parts.push_back(">= in force x " + Num(1 - *r.max_decrease_pct / 100) + (r.slack > 0 ? " - " + Num(r.slack) : ""));
  }
  std::string out;
  for (const std::string& p : parts) out += (out.empty() ? "" : ", ") + p;
  return out;
}

// The keys of a wildcard rule: every class or tenant in either report.
std::vector<std::string> KeysOf(const SloRule& r, const SimReport& a, const SimReport& b) {
  if (r.key != "*") return {r.key};
  std::set<std::string> keys;
  if (r.scope == SloScope::kPriority) {
    for (const auto& [k, v] : a.by_priority) keys.insert(k);
    for (const auto& [k, v] : b.by_priority) keys.insert(k);
  } else {
    for (const auto& [k, v] : a.by_tenant) keys.insert(k);
    for (const auto& [k, v] : b.by_tenant) keys.insert(k);
  }
  return {keys.begin(), keys.end()};
}

SloVerdict Judge(const SloRule& rule, const MeasureDef& m, const std::string& key, const SimReport& in_force,
                 const SimReport& next) {
  SloVerdict v;
  v.rule = rule.measure + ScopeText(rule.scope, key);
  v.bound = BoundText(rule);
  std::string note_a, note_b;
  v.in_force = m.get(in_force, in_force, rule.scope, key, note_a);
  v.next = m.get(next, in_force, rule.scope, key, note_b);
  if (!v.next) {
    v.note = note_b;
    return v;
  }
  double lo = -std::numeric_limits<double>::infinity(), hi = std::numeric_limits<double>::infinity();
  if (rule.max) hi = std::min(hi, *rule.max);
  if (rule.min) lo = std::max(lo, *rule.min);
  if (v.in_force) {
    if (rule.max_increase_pct) hi = std::min(hi, *v.in_force * (1 + *rule.max_increase_pct / 100) + rule.slack);
    if (rule.max_decrease_pct) lo = std::max(lo, *v.in_force * (1 - *rule.max_decrease_pct / 100) - rule.slack);
  } else if (!rule.max && !rule.min) {
    v.note = note_a + " in force";
    return v;
  }
  constexpr double kEps = 1e-9;
  v.holds = *v.next <= hi + kEps && *v.next >= lo - kEps;
  if (!v.holds) v.limit = *v.next > hi + kEps ? hi : lo;
  return v;
}

class SloReader : public YamlReader {
 public:
  using YamlReader::YamlReader;

  Result<SloFile> Parse(const YAML::Node& root) const {
    SloFile out{std::string(source()), {}};
    GP_ASSIGN_OR_RETURN(YamlFields f, Map(root, "", {"rules"}));
    GP_ASSIGN_OR_RETURN(const YAML::Node rules, RequiredList(f, "rules", kMaxSloRules, "rules"));
    for (size_t i = 0; i < rules.size(); ++i) {
      GP_ASSIGN_OR_RETURN(SloRule r, Rule(rules[i], ItemPath("rules", i)));
      out.rules.push_back(std::move(r));
    }
    return out;
  }

 private:
  Result<SloRule> Rule(const YAML::Node& n, const std::string& path) const {
    GP_ASSIGN_OR_RETURN(YamlFields f, Map(n, path, {"measure", "priority", "tenant", "min", "max", "max_increase_pct",
                                                    "max_decrease_pct", "slack"}));
    GP_TRY(Require(f, "measure"));
    SloRule r;
    GP_TRY(StringField(f, "measure", r.measure));
    const MeasureDef* m = FindMeasure(r.measure);
    if (m == nullptr) {
      return Fail(*f.Find("measure"), f.PathOf("measure"),
                  "unknown measure '" + r.measure + "' (expected one of: " + JoinNames(SloMeasureNames()) + ")");
    }
    GP_TRY(Scope(f, *m, r));
    GP_TRY(Bounds(f, r));
    return r;
  }

  Status Scope(const YamlFields& f, const MeasureDef& m, SloRule& r) const {
    if (f.Has("priority") && f.Has("tenant")) {
      return Fail(*f.Find("tenant"), f.PathOf("tenant"), "give priority or tenant, not both");
    }
    if (f.Has("priority")) {
      r.scope = SloScope::kPriority;
      GP_TRY(StringField(f, "priority", r.key));
      if (!m.priority) return Fail(*f.Find("priority"), f.PathOf("priority"), r.measure + " has no priority scope");
    } else if (f.Has("tenant")) {
      r.scope = SloScope::kTenant;
      GP_TRY(StringField(f, "tenant", r.key));
      if (!m.tenant) return Fail(*f.Find("tenant"), f.PathOf("tenant"), r.measure + " has no tenant scope");
    } else if (!m.all) {
      return Fail(f.node, f.path, r.measure + " needs a tenant (a name, or \"*\" for each)");
    }
    return {};
  }

  Status Bounds(const YamlFields& f, SloRule& r) const {
    const auto opt = [&](const char* key, std::optional<double>& out, auto check) -> Status {
      if (!f.Has(key)) return {};
      double v = 0;
      GP_TRY(NumberField(f, key, v, check));
      out = v;
      return {};
    };
    const auto any = [](double) { return std::string(); };
    GP_TRY(opt("min", r.min, any));
    GP_TRY(opt("max", r.max, any));
    GP_TRY(opt("max_increase_pct", r.max_increase_pct, NonNegative));
    GP_TRY(opt("max_decrease_pct", r.max_decrease_pct,
               [](double v) { return v < 0 || v > 100 ? std::string("must be between 0 and 100") : std::string(); }));
    GP_TRY(NumberField(f, "slack", r.slack, NonNegative));
    if (!r.min && !r.max && !r.max_increase_pct && !r.max_decrease_pct) {
      return Fail(f.node, f.path, "no bound: give min, max, max_increase_pct or max_decrease_pct");
    }
    if (r.min && r.max && *r.min > *r.max) return Fail(*f.Find("min"), f.PathOf("min"), "is above max");
    return {};
  }
};

}  // namespace

SloFile DefaultSlo() {
  SloFile s{"the default objectives", {}};
  s.rules.push_back({.measure = "wait_p95_s", .scope = SloScope::kPriority, .key = "*", .max_increase_pct = 10,
                     .slack = 1});
  s.rules.push_back({.measure = "guarantee_share_pct", .scope = SloScope::kTenant, .key = "*", .min = 95});
  s.rules.push_back({.measure = "completed", .max_decrease_pct = 5});
  return s;
}

Result<SloFile> ParseSlo(std::string_view text, std::string_view source) {
  return ReadYamlDocument(text, source, [&](const YAML::Node& root) { return SloReader(source, ".").Parse(root); });
}

Result<SloFile> LoadSlo(const std::string& path) {
  GP_ASSIGN_OR_RETURN(const std::string text, ReadConfigFile(path));
  return ParseSlo(text, path);
}

std::vector<SloVerdict> CheckSlo(const SloFile& slo, const SimReport& in_force, const SimReport& next) {
  std::vector<SloVerdict> out;
  for (const SloRule& r : slo.rules) {
    const MeasureDef& m = *FindMeasure(r.measure);
    for (const std::string& key : KeysOf(r, in_force, next)) out.push_back(Judge(r, m, key, in_force, next));
  }
  return out;
}

bool AllHold(const std::vector<SloVerdict>& v) {
  return std::all_of(v.begin(), v.end(), [](const SloVerdict& x) { return x.holds; });
}

std::string FormatSloTable(const std::vector<SloVerdict>& v) {
  const auto cell = [](const std::optional<double>& x) { return x ? Num(*x) : std::string("-"); };
  size_t w = 4;
  for (const SloVerdict& x : v) w = std::max(w, x.rule.size());
  std::string out;
  char line[1024];
  std::snprintf(line, sizeof line, "%-*s  %12s  %12s  %-6s  %s\n", int(w), "rule", "in force", "new", "", "bound");
  out += line;
  for (const SloVerdict& x : v) {
    const std::string verdict = !x.note.empty() && x.holds ? "n/a" : x.holds ? "ok" : "BROKEN";
    std::string bound = x.bound;
    if (!x.note.empty()) bound += " (" + x.note + ")";
    if (x.limit) bound += " (limit " + Num(*x.limit) + ")";
    std::snprintf(line, sizeof line, "%-*s  %12s  %12s  %-6s  %s\n", int(w), x.rule.c_str(), cell(x.in_force).c_str(),
                  cell(x.next).c_str(), verdict.c_str(), bound.c_str());
    out += line;
  }
  return out;
}

std::optional<double> SloMeasureValue(const std::string& measure, SloScope scope, const std::string& key,
                                      const SimReport& r, const SimReport& in_force) {
  const MeasureDef* m = FindMeasure(measure);
  if (m == nullptr || !SloMeasureTakes(measure, scope)) return std::nullopt;
  std::string note;
  return m->get(r, in_force, scope, key, note);
}

bool SloMeasureLowerIsBetter(const std::string& measure) {
  for (const char* name : {"wait_p50_s", "wait_p95_s", "wait_mean_s", "jct_p95_s", "rejected", "preemptions",
                           "gpu_hours_lost", "deadline_evictions", "unfinished"}) {
    if (measure == name) return true;
  }
  return false;
}

bool SloMeasureTakes(const std::string& measure, SloScope scope) {
  const MeasureDef* m = FindMeasure(measure);
  if (m == nullptr) return false;
  return scope == SloScope::kAll ? m->all : scope == SloScope::kPriority ? m->priority : m->tenant;
}

std::vector<std::string> SloMeasureNames() {
  std::vector<std::string> out;
  for (const MeasureDef& m : Measures()) out.emplace_back(m.name);
  return out;
}

}  // namespace gpupool
