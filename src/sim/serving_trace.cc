#include "src/sim/serving_trace.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <map>

#include "src/base/csv.h"

namespace gpupool {
namespace {

// Seconds from the trace start as the file writes them ("475.00000000000006");
// empty: nullopt.
Result<std::optional<int64_t>> Seconds(const CsvFieldRef& f) {
  if (f.text.empty()) return std::optional<int64_t>();
  double v = 0;
  const auto [end, ec] = std::from_chars(f.text.data(), f.text.data() + f.text.size(), v);
  if (ec != std::errc() || end != f.text.data() + f.text.size() || !std::isfinite(v) || v < 0 || v > 1e12) {
    return InvalidArgument(CsvFieldError(f, "expected seconds from the trace start (a number >= 0) or nothing"));
  }
  return std::optional<int64_t>(static_cast<int64_t>(v));
}

}  // namespace

Result<std::vector<DlrmInstance>> LoadDlrmTrace(const std::string& path) {
  std::vector<DlrmInstance> out;
  std::map<std::string, int> column;
  const char* const kNeeded[] = {"role", "gpu_request", "creation_time", "deletion_time"};
  auto ok = ReadCsvFile(path, [&](const CsvRecord& r) -> Status {
    if (column.empty()) {
      for (size_t i = 0; i < r.fields.size(); ++i) column[std::string(r.fields[i])] = static_cast<int>(i);
      for (const char* name : kNeeded) {
        if (!column.contains(name)) return InvalidArgument(path + ":" + std::to_string(r.line) + ": no column " + name);
      }
      return {};
    }
    auto field = [&](const char* name) {
      const int c = column.at(name);
      return CsvFieldRef{path, r.line, c + 1, name,
                         c < static_cast<int>(r.fields.size()) ? r.fields[c] : std::string_view()};
    };
    DlrmInstance d;
    const CsvFieldRef role = field("role");
    if (role.text != "HN" && role.text != "CN") return InvalidArgument(CsvFieldError(role, "expected HN or CN"));
    d.gpu = role.text == "HN";
    GP_ASSIGN_OR_RETURN(auto gpus, CsvInt(field("gpu_request"), 0, 64));
    d.gpus = static_cast<int32_t>(gpus);
    GP_ASSIGN_OR_RETURN(auto created, Seconds(field("creation_time")));
    GP_ASSIGN_OR_RETURN(auto deleted, Seconds(field("deletion_time")));
    d.created_s = created;
    d.deleted_s = deleted;
    if (d.created_s && d.deleted_s && *d.deleted_s < *d.created_s) {
      return InvalidArgument(CsvFieldError(field("deletion_time"), "before creation_time"));
    }
    out.push_back(d);
    return {};
  });
  if (!ok) return std::unexpected(ok.error());
  if (column.empty()) return InvalidArgument(path + ": empty (expected a header line)");
  return out;
}

std::vector<double> LiveGpuSeries(const std::vector<DlrmInstance>& instances, int64_t bin_s) {
  int64_t end = 0;
  for (const DlrmInstance& d : instances) {
    if (d.created_s) end = std::max(end, *d.created_s);
    if (d.deleted_s) end = std::max(end, *d.deleted_s);
  }
  const size_t bins = static_cast<size_t>(end / bin_s + 1);
  std::vector<double> delta(bins + 1, 0.0);  // GPUs joining (+) and leaving (-) at each bin start
  for (const DlrmInstance& d : instances) {
    if (!d.gpu || d.gpus == 0) continue;
    // Live at a bin's start t when created <= t < deleted.
    const size_t from = d.created_s ? static_cast<size_t>((*d.created_s + bin_s - 1) / bin_s) : 0;
    const size_t to = d.deleted_s ? static_cast<size_t>((*d.deleted_s + bin_s - 1) / bin_s) : bins;
    if (from >= to) continue;
    delta[from] += d.gpus;
    delta[to] -= d.gpus;
  }
  std::vector<double> live(bins);
  double now = 0;
  for (size_t b = 0; b < bins; ++b) live[b] = now += delta[b];
  return live;
}

std::vector<double> ServingLifetimes(const std::vector<DlrmInstance>& instances) {
  std::vector<double> out;
  for (const DlrmInstance& d : instances) {
    if (d.gpu && d.created_s && d.deleted_s && *d.deleted_s > *d.created_s) {
      out.push_back(static_cast<double>(*d.deleted_s - *d.created_s));
    }
  }
  return out;
}

}  // namespace gpupool
