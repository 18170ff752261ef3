#include "src/sim/utilization.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <map>

#include "src/base/csv.h"

namespace gpupool {
namespace {

constexpr Duration kSample = std::chrono::minutes(1);

}  // namespace

Result<std::vector<std::vector<double>>> LoadDutyCycles(const std::string& path) {
  // pod -> (timestamp, value)
  std::map<std::string, std::vector<std::pair<double, double>>> pods;
  bool header = false;
  int c_value = -1, c_time = -1, c_pod = -1;
  Status st = ReadCsvFile(path, [&](const CsvRecord& r) -> Status {
    if (!header) {
      header = true;
      for (size_t i = 0; i < r.fields.size(); ++i) {
        if (r.fields[i] == "value") c_value = static_cast<int>(i);
        if (r.fields[i] == "timestamp_anon") c_time = static_cast<int>(i);
        if (r.fields[i] == "container_ip") c_pod = static_cast<int>(i);
      }
      if (c_value < 0 || c_time < 0 || c_pod < 0) {
        return InvalidArgument(path + ":" + std::to_string(r.line) +
                               ": expected columns value, timestamp_anon, container_ip");
      }
      return {};
    }
    if (r.fields.size() != 3) return InvalidArgument(path + ":" + std::to_string(r.line) + ": expected 3 columns");
    double parsed[2];
    for (int k = 0; k < 2; ++k) {
      const int col = k == 0 ? c_value : c_time;
      const std::string_view text = r.fields[col];
      auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), parsed[k]);
      if (text.empty() || ec != std::errc() || ptr != text.data() + text.size() || !std::isfinite(parsed[k])) {
        return InvalidArgument(CsvFieldError(CsvFieldRef{path, r.line, col + 1, k == 0 ? "value" : "timestamp_anon", text},
                                             "expected a number"));
      }
    }
    if (parsed[0] < 0 || parsed[0] > 100) {
      return InvalidArgument(CsvFieldError(CsvFieldRef{path, r.line, c_value + 1, "value", r.fields[c_value]},
                                           "a duty cycle is a percentage from 0 to 100"));
    }
    pods[std::string(r.fields[c_pod])].emplace_back(parsed[1], parsed[0] / 100.0);
    return {};
  });
  if (!st) return std::unexpected(st.error());
  std::vector<std::vector<double>> out;
  for (auto& [pod, samples] : pods) {
    std::sort(samples.begin(), samples.end());
    std::vector<double> values;
    for (const auto& [t, v] : samples) values.push_back(v);
    if (!values.empty()) out.push_back(std::move(values));
  }
  if (out.empty()) return InvalidArgument(path + ": no samples");
  return out;
}

Utilization::Utilization(const UtilizationModel& m, const std::vector<double>* series, Duration phase)
    : model_(m), series_(series), phase_(phase), valid_(true) {
  switch (m.kind) {
    case UtilizationModel::Kind::kConstant: mean_ = m.busy; break;
    case UtilizationModel::Kind::kBursty: {
      const double b = static_cast<double>(ToMillis(m.busy_for)), i = static_cast<double>(ToMillis(m.idle_for));
      mean_ = (m.busy * b + m.idle * i) / (b + i);
      break;
    }
    case UtilizationModel::Kind::kTrace: {
      double sum = 0;
      for (double v : *series_) sum += v;
      mean_ = series_->empty() ? 0 : sum / static_cast<double>(series_->size());
      break;
    }
  }
}

double Utilization::At(Duration t) const {
  const Duration x = t + phase_;
  switch (model_.kind) {
    case UtilizationModel::Kind::kConstant: return model_.busy;
    case UtilizationModel::Kind::kBursty: {
      const Duration cycle = model_.busy_for + model_.idle_for;
      return x % cycle < model_.busy_for ? model_.busy : model_.idle;
    }
    case UtilizationModel::Kind::kTrace: {
      const auto i = static_cast<size_t>(x / kSample) % series_->size();
      return (*series_)[i];
    }
  }
  return 0;
}

Duration Utilization::SegmentStart(Duration t) const {
  const Duration x = t + phase_;
  switch (model_.kind) {
    case UtilizationModel::Kind::kConstant: return Duration(0);
    case UtilizationModel::Kind::kBursty: {
      const Duration cycle = model_.busy_for + model_.idle_for;
      const Duration in_cycle = x % cycle;
      const Duration start = x - (in_cycle < model_.busy_for ? in_cycle : in_cycle - model_.busy_for);
      return std::max(Duration(0), start - phase_);
    }
    case UtilizationModel::Kind::kTrace: {
      // Walk back over equal samples: a segment is a run of equal values.
      int64_t i = x / kSample;
      const double v = (*series_)[static_cast<size_t>(i) % series_->size()];
      while (i > 0 && (*series_)[static_cast<size_t>(i - 1) % series_->size()] == v &&
             i * kSample - phase_ > Duration(0)) {
        --i;
      }
      return std::max(Duration(0), i * kSample - phase_);
    }
  }
  return Duration(0);
}

Duration Utilization::NextChange(Duration t) const {
  const Duration x = t + phase_;
  switch (model_.kind) {
    case UtilizationModel::Kind::kConstant: return Duration::max();
    case UtilizationModel::Kind::kBursty: {
      const Duration cycle = model_.busy_for + model_.idle_for;
      const Duration in_cycle = x % cycle;
      const Duration next = in_cycle < model_.busy_for ? x - in_cycle + model_.busy_for : x - in_cycle + cycle;
      return next - phase_;
    }
    case UtilizationModel::Kind::kTrace: return (x / kSample + 1) * kSample - phase_;
  }
  return Duration::max();
}

size_t Utilization::period_segments() const {
  switch (model_.kind) {
    case UtilizationModel::Kind::kConstant: return 1;
    case UtilizationModel::Kind::kBursty: return 3;
    case UtilizationModel::Kind::kTrace: return series_->size() + 1;
  }
  return 1;
}

template <typename Pred>
Duration Utilization::NextWhere(Duration t, Pred pred) const {
  // One period holds every value the model takes: not found by then, never.
  const size_t steps = period_segments();
  for (size_t i = 0; i <= steps; ++i) {
    if (pred(At(t))) return t;
    t = NextChange(t);
    if (t == Duration::max()) break;
  }
  return Duration::max();
}

Duration Utilization::NextBelow(Duration t, double threshold) const {
  return NextWhere(t, [threshold](double v) { return v < threshold; });
}

Duration Utilization::NextAtOrAbove(Duration t, double threshold) const {
  return NextWhere(t, [threshold](double v) { return v >= threshold; });
}

Duration Utilization::BelowSince(Duration t, double threshold) const {
  Duration start = SegmentStart(t);
  for (size_t i = 0; i < period_segments() && start > Duration(0); ++i) {
    const Duration before = start - Duration(1);
    if (At(before) >= threshold) break;
    start = SegmentStart(before);
  }
  return start;
}

Duration Utilization::TimeBelow(Duration a, Duration b, double threshold) const {
  Duration below{0};
  for (Duration t = a; t < b;) {
    const Duration next = std::min(b, NextChange(t));
    if (At(t) < threshold) below += next - t;
    if (next == Duration::max()) break;
    t = next;
  }
  return below;
}

bool Utilization::CanDropBelow(double threshold) const {
  switch (model_.kind) {
    case UtilizationModel::Kind::kConstant: return model_.busy < threshold;
    case UtilizationModel::Kind::kBursty: return std::min(model_.busy, model_.idle) < threshold;
    case UtilizationModel::Kind::kTrace:
      return std::any_of(series_->begin(), series_->end(), [&](double v) { return v < threshold; });
  }
  return false;
}

}  // namespace gpupool
