#include "src/sim/runtime_samples.h"

#include <charconv>
#include <cmath>

#include "src/base/csv.h"

namespace gpupool {

Result<std::vector<double>> LoadRuntimeSamples(const std::string& path) {
  std::vector<double> out;
  bool header = false;
  Status st = ReadCsvFile(path, [&](const CsvRecord& r) -> Status {
    if (!header) {
      header = true;
      if (r.fields.size() != 1 || r.fields[0] != "runtime") {
        return InvalidArgument(path + ":" + std::to_string(r.line) + ": expected the header 'runtime'");
      }
      return {};
    }
    const CsvFieldRef f{path, r.line, 1, "runtime", r.fields.empty() ? std::string_view() : r.fields[0]};
    if (r.fields.size() != 1) return InvalidArgument(CsvFieldError(f, "expected one column"));
    double v = 0;
    auto [ptr, ec] = std::from_chars(f.text.data(), f.text.data() + f.text.size(), v);
    if (f.text.empty() || ec != std::errc() || ptr != f.text.data() + f.text.size() || !std::isfinite(v) || v < 0) {
      return InvalidArgument(CsvFieldError(f, "expected a non-negative number of seconds, got '" +
                                                  std::string(f.text) + "'"));
    }
    out.push_back(v);
    return {};
  });
  if (!st) return std::unexpected(st.error());
  if (out.empty()) return InvalidArgument(path + ": no run times");
  return out;
}

}  // namespace gpupool
