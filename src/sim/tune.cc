// See tune.h.
#include "src/sim/tune.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdio>
#include <thread>

#include "src/base/rng.h"
#include "src/config/yaml_edit.h"
#include "src/config/yaml_reader.h"

namespace gpupool {
namespace {

constexpr const char* kAsConfigured = "(as configured)";
constexpr size_t kMaxBest = 10;

class SpaceReader : public YamlReader {
 public:
  using YamlReader::YamlReader;

  Result<TuneSpace> Parse(const YAML::Node& root) const {
    TuneSpace out{std::string(source()), {}};
    GP_ASSIGN_OR_RETURN(YamlFields f, Map(root, "", {"parameters"}));
    GP_ASSIGN_OR_RETURN(const YAML::Node list, RequiredList(f, "parameters", kMaxTuneParameters, "parameters"));
    for (size_t i = 0; i < list.size(); ++i) {
      GP_ASSIGN_OR_RETURN(TuneParameter p, Parameter(list[i], ItemPath("parameters", i)));
      for (const TuneParameter& q : out.parameters) {
        if (q.path == p.path) return Fail(list[i], ItemPath("parameters", i), "path '" + p.path + "' given twice");
      }
      out.parameters.push_back(std::move(p));
    }
    return out;
  }

 private:
  Result<TuneParameter> Parameter(const YAML::Node& n, const std::string& path) const {
    GP_ASSIGN_OR_RETURN(YamlFields f, Map(n, path, {"path", "values", "min", "max", "integer"}));
    GP_TRY(Require(f, "path"));
    TuneParameter p;
    GP_TRY(StringField(f, "path", p.path));
    if (auto ok = ParseYamlPath(p.path); !ok) return Fail(*f.Find("path"), f.PathOf("path"), ok.error().message);
    if (f.Has("values")) {
      if (f.Has("min") || f.Has("max") || f.Has("integer")) {
        return Fail(*f.Find("values"), f.PathOf("values"), "give values, or min and max, not both");
      }
      return Values(f, p);
    }
    GP_TRY(Require(f, "min"));
    GP_TRY(Require(f, "max"));
    const auto any = [](double) { return std::string(); };
    GP_TRY(NumberField(f, "min", p.min, any));
    GP_TRY(NumberField(f, "max", p.max, any));
    GP_TRY(BoolField(f, "integer", p.integer));
    if (p.max < p.min) return Fail(*f.Find("max"), f.PathOf("max"), "is below min");
    if (p.integer && (std::floor(p.min) != p.min || std::floor(p.max) != p.max)) {
      return Fail(*f.Find("min"), f.PathOf("min"), "an integer range needs whole bounds");
    }
    return p;
  }

  Result<TuneParameter> Values(const YamlFields& f, TuneParameter& p) const {
    const YAML::Node& v = *f.Find("values");
    if (!v.IsSequence() || v.size() == 0) return Fail(v, f.PathOf("values"), "expected a list of at least one value");
    if (v.size() > static_cast<size_t>(kMaxTuneValues)) {
      return Fail(v, f.PathOf("values"), "at most " + std::to_string(kMaxTuneValues) + " values");
    }
    for (size_t i = 0; i < v.size(); ++i) {
      if (!v[i].IsScalar()) return Fail(v[i], ItemPath(f.PathOf("values"), i), "expected a scalar");
      p.values.push_back(v[i].Scalar());
    }
    return p;
  }
};

std::string NumberText(double v, bool integer) {
  char b[64];
  if (integer) {
    std::snprintf(b, sizeof b, "%lld", static_cast<long long>(std::llround(v)));
  } else {
    std::snprintf(b, sizeof b, "%.4g", v);
  }
  return b;
}

std::string Draw(const TuneParameter& p, Rng& rng) {
  if (!p.values.empty()) return p.values[rng.Below(p.values.size())];
  if (p.integer) {
    const int64_t lo = std::llround(p.min), hi = std::llround(p.max);
    return NumberText(static_cast<double>(lo + static_cast<int64_t>(rng.Below(static_cast<uint64_t>(hi - lo) + 1))),
                      true);
  }
  return NumberText(p.min + (p.max - p.min) * rng.Uniform(), false);
}

// `value` moved by up to `radius` of the range (or, for a choice, replaced
// with chance `radius`).
std::string Nudge(const TuneParameter& p, const std::string& value, double radius, Rng& rng) {
  if (!p.values.empty()) return value == kAsConfigured || rng.Uniform() < radius ? Draw(p, rng) : value;
  double v = value == kAsConfigured ? (p.min + p.max) / 2 : std::strtod(value.c_str(), nullptr);
  v += (rng.Uniform() * 2 - 1) * radius * (p.max - p.min);
  v = std::clamp(v, p.min, p.max);
  return NumberText(v, p.integer);
}

Result<std::string> ConfigWith(const YAML::Node& base, const TuneSpace& space, const TuneRun& run) {
  if (run.baseline) return YamlText(base);
  YAML::Node copy = YAML::Clone(base);
  for (size_t i = 0; i < space.parameters.size(); ++i) {
    GP_TRY(SetYamlPath(copy, space.parameters[i].path, run.values[i]));
  }
  return YamlText(copy);
}

// Better first; a run without a value last.
bool Better(const TuneRun& a, const TuneRun& b, bool higher) {
  if (a.objective.has_value() != b.objective.has_value()) return a.objective.has_value();
  if (!a.objective) return false;
  return higher ? *a.objective > *b.objective : *a.objective < *b.objective;
}

void Evaluate(const TuneSpace& space, const YAML::Node& base, const TuneEvaluator& evaluate, const TuneOptions& o,
              std::vector<TuneRun>& runs, size_t from, const SimReport* baseline_report, SimReport* keep_baseline) {
  // yaml-cpp nodes are not safe to share across threads: each candidate's
  // text is made here, before the threads start.
  std::vector<std::string> texts(runs.size());
  for (size_t i = from; i < runs.size(); ++i) {
    auto text = ConfigWith(base, space, runs[i]);
    if (text) texts[i] = std::move(*text); else runs[i].error = text.error().message;
  }
  std::atomic<size_t> next{from};
  const auto work = [&] {
    for (size_t i = next++; i < runs.size(); i = next++) {
      if (!runs[i].error.empty()) continue;
      auto report = evaluate(texts[i]);
      if (!report) {
        runs[i].error = report.error().message;
        continue;
      }
      const SimReport& against = baseline_report != nullptr ? *baseline_report : *report;
      const TuneMeasure& m = o.objective;
      runs[i].objective = SloMeasureValue(m.measure, m.scope, m.key, *report, against);
      if (o.front) runs[i].front = SloMeasureValue(o.front->measure, o.front->scope, o.front->key, *report, against);
      if (keep_baseline != nullptr && runs[i].baseline) *keep_baseline = std::move(*report);
    }
  };
  std::vector<std::thread> threads;
  const size_t want = std::min(static_cast<size_t>(std::max(1, o.parallel)), runs.size() - from);
  for (size_t t = 1; t < want; ++t) threads.emplace_back(work);
  work();
  for (std::thread& t : threads) t.join();
}

std::vector<size_t> ParetoFront(const std::vector<TuneRun>& runs, const TuneOptions& o) {
  std::vector<size_t> out;
  if (!o.front) return out;
  const auto better = [](double a, double b, bool higher) { return higher ? a > b : a < b; };
  for (size_t i = 0; i < runs.size(); ++i) {
    if (!runs[i].objective || !runs[i].front) continue;
    bool dominated = false;
    for (size_t j = 0; j < runs.size() && !dominated; ++j) {
      if (j == i || !runs[j].objective || !runs[j].front) continue;
      const bool no_worse = !better(*runs[i].objective, *runs[j].objective, o.objective.higher_is_better) &&
                            !better(*runs[i].front, *runs[j].front, o.front->higher_is_better);
      const bool strictly = better(*runs[j].objective, *runs[i].objective, o.objective.higher_is_better) ||
                            better(*runs[j].front, *runs[i].front, o.front->higher_is_better);
      dominated = no_worse && strictly;
    }
    if (!dominated) out.push_back(i);
  }
  std::sort(out.begin(), out.end(), [&](size_t a, size_t b) {
    return Better(runs[a], runs[b], o.objective.higher_is_better) || (!Better(runs[b], runs[a], o.objective.higher_is_better) && a < b);
  });
  return out;
}

}  // namespace

std::string TuneMeasure::Text() const {
  if (scope == SloScope::kPriority) return measure + ":priority=" + key;
  if (scope == SloScope::kTenant) return measure + ":tenant=" + key;
  return measure;
}

Result<TuneMeasure> ParseTuneMeasure(std::string_view text, std::string_view flag) {
  const std::string t(text);
  TuneMeasure m;
  const size_t colon = t.find(':');
  m.measure = t.substr(0, colon);
  if (colon != std::string::npos) {
    const std::string scope = t.substr(colon + 1);
    if (scope.starts_with("priority=")) {
      m.scope = SloScope::kPriority;
      m.key = scope.substr(9);
    } else if (scope.starts_with("tenant=")) {
      m.scope = SloScope::kTenant;
      m.key = scope.substr(7);
    } else {
      return InvalidArgument(std::string(flag) + ": '" + t + "': expected MEASURE, MEASURE:priority=CLASS or "
                             "MEASURE:tenant=NAME");
    }
    if (m.key.empty() || m.key == "*") return InvalidArgument(std::string(flag) + ": '" + t + "': name one class or tenant");
  }
  if (!SloMeasureTakes(m.measure, SloScope::kAll) && !SloMeasureTakes(m.measure, SloScope::kTenant)) {
    return InvalidArgument(std::string(flag) + ": unknown measure '" + m.measure + "' (expected one of: " +
                           JoinNames(SloMeasureNames()) + ")");
  }
  if (!SloMeasureTakes(m.measure, m.scope)) {
    return InvalidArgument(std::string(flag) + ": " + m.measure + " does not take " +
                           (m.scope == SloScope::kAll ? "no scope (give :tenant=NAME)" : "that scope"));
  }
  m.higher_is_better = !SloMeasureLowerIsBetter(m.measure);
  return m;
}

Result<TuneSpace> ParseTuneSpace(std::string_view text, std::string_view source) {
  return ReadYamlDocument(text, source, [&](const YAML::Node& root) { return SpaceReader(source, ".").Parse(root); });
}

Result<TuneSpace> LoadTuneSpace(const std::string& path) {
  GP_ASSIGN_OR_RETURN(const std::string text, ReadConfigFile(path));
  return ParseTuneSpace(text, path);
}

Result<TuneResult> Tune(const TuneSpace& space, const std::string& base_config, const TuneEvaluator& evaluate,
                        const TuneOptions& o) {
  if (o.budget < 1 || o.budget > kMaxTuneBudget) {
    return InvalidArgument("--budget: between 1 and " + std::to_string(kMaxTuneBudget));
  }
  GP_ASSIGN_OR_RETURN(const YAML::Node base, ParseOneYamlDocument(base_config, "the configuration"));
  for (const TuneParameter& p : space.parameters) {  // every path is in the file, before any run
    GP_TRY(SetYamlPath(YAML::Clone(base), p.path, p.values.empty() ? NumberText(p.min, p.integer) : p.values[0]));
  }
  Rng rng(o.seed);
  TuneResult r;
  TuneRun baseline_run{{}, true, "", {}, {}};
  for (const TuneParameter& p : space.parameters) {
    GP_ASSIGN_OR_RETURN(auto v, GetYamlPath(base, p.path));
    baseline_run.values.push_back(v.value_or(kAsConfigured));
  }
  r.runs.push_back(std::move(baseline_run));
  SimReport baseline;
  Evaluate(space, base, evaluate, o, r.runs, 0, nullptr, &baseline);
  const int random = o.budget / 2;
  for (int i = 0; i < random; ++i) {
    TuneRun run;
    for (const TuneParameter& p : space.parameters) run.values.push_back(Draw(p, rng));
    r.runs.push_back(std::move(run));
  }
  Evaluate(space, base, evaluate, o, r.runs, 1, &baseline, nullptr);
  // Rounds around the best so far, each with a smaller radius.
  double radius = 0.25;
  constexpr size_t kRound = 8;  // candidates per round, whatever runs in parallel (so results do not depend on it)
  while (static_cast<int>(r.runs.size()) < o.budget) {
    size_t best = 0;
    for (size_t i = 1; i < r.runs.size(); ++i) {
      if (Better(r.runs[i], r.runs[best], o.objective.higher_is_better)) best = i;
    }
    const size_t from = r.runs.size();
    for (size_t k = 0; k < kRound && static_cast<int>(r.runs.size()) < o.budget; ++k) {
      TuneRun run;
      for (size_t p = 0; p < space.parameters.size(); ++p) {
        run.values.push_back(Nudge(space.parameters[p], r.runs[best].values[p], radius, rng));
      }
      r.runs.push_back(std::move(run));
    }
    Evaluate(space, base, evaluate, o, r.runs, from, &baseline, nullptr);
    radius = std::max(0.02, radius * 0.7);
  }
  std::vector<size_t> order(r.runs.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t a, size_t b) { return Better(r.runs[a], r.runs[b], o.objective.higher_is_better); });
  for (size_t i = 0; i < order.size() && r.best.size() < kMaxBest; ++i) {
    if (r.runs[order[i]].objective) r.best.push_back(order[i]);
  }
  r.pareto = ParetoFront(r.runs, o);
  return r;
}

Result<std::string> TunedConfigText(const TuneSpace& space, const std::string& base_config, const TuneRun& run) {
  GP_ASSIGN_OR_RETURN(const YAML::Node base, ParseOneYamlDocument(base_config, "the configuration"));
  return ConfigWith(base, space, run);
}

std::string FormatTuneResult(const TuneSpace& space, const TuneResult& r, const TuneOptions& o) {
  std::string out;
  const auto value = [](const std::optional<double>& v) { return v ? NumberText(*v, false) : std::string("-"); };
  const auto row = [&](size_t i) {
    const TuneRun& run = r.runs[i];
    std::string line = "  #" + std::to_string(i) + (run.baseline ? " (baseline)" : "") + "  " +
                       o.objective.Text() + " " + value(run.objective);
    if (o.front) line += "  " + o.front->Text() + " " + value(run.front);
    for (size_t p = 0; p < space.parameters.size() && !run.baseline; ++p) {
      line += "  " + space.parameters[p].path + "=" + run.values[p];
    }
    return line + "\n";
  };
  int failed = 0;
  for (const TuneRun& run : r.runs) failed += run.error.empty() ? 0 : 1;
  out += std::to_string(r.runs.size()) + " runs (" + std::to_string(failed) + " failed), seed " +
         std::to_string(o.seed) + ", " + (o.objective.higher_is_better ? "maximising " : "minimising ") +
         o.objective.Text() + "\n\nbaseline:\n" + row(0) + "\nbest:\n";
  for (const size_t i : r.best) out += row(i);
  if (o.front) {
    out += "\ntrade-off front (" + o.objective.Text() + " against " + o.front->Text() + "):\n";
    for (const size_t i : r.pareto) out += row(i);
  }
  for (size_t i = 0; i < r.runs.size() && failed > 0; ++i) {
    if (!r.runs[i].error.empty()) {
      out += "\nfirst failed run #" + std::to_string(i) + ": " + r.runs[i].error + "\n";
      break;
    }
  }
  return out;
}

}  // namespace gpupool
