#include "src/sim/fgd_reference.h"

#include <charconv>
#include <vector>

#include "src/base/csv.h"

namespace gpupool {
namespace {

Result<double> ParseDouble(std::string_view path, int line, int column, std::string_view name,
                           std::string_view text) {
  double v = 0;
  auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (text.empty() || ec != std::errc() || ptr != text.data() + text.size()) {
    return InvalidArgument(CsvFieldError(CsvFieldRef{path, line, column, name, text},
                                         "expected a number, got '" + std::string(text) + "'"));
  }
  return v;
}

}  // namespace

Result<FgdReference> LoadFgdReference(const std::string& path) {
  FgdReference ref;
  std::vector<std::string> header;
  int c_workload = -1, c_policy = -1, c_unalloc = -1, c_sd = -1, c_frag = -1;
  Status st = ReadCsvFile(path, [&](const CsvRecord& r) -> Status {
    if (header.empty()) {
      for (size_t i = 0; i < r.fields.size(); ++i) {
        header.emplace_back(r.fields[i]);
        const auto& h = header.back();
        if (h == "workload") c_workload = static_cast<int>(i);
        if (h == "policy") c_policy = static_cast<int>(i);
        if (h == "unalloc_pct_mean_at_100") c_unalloc = static_cast<int>(i);
        if (h == "alloc_pct_sd_at_100") c_sd = static_cast<int>(i);
        if (h == "frag_amount_pct_of_cluster_mean_at_100") c_frag = static_cast<int>(i);
      }
      if (c_workload < 0 || c_policy < 0 || c_unalloc < 0 || c_sd < 0 || c_frag < 0) {
        return InvalidArgument(path + ":" + std::to_string(r.line) +
                               ": expected columns workload, policy, unalloc_pct_mean_at_100, "
                               "alloc_pct_sd_at_100, frag_amount_pct_of_cluster_mean_at_100");
      }
      return {};
    }
    if (r.fields.size() != header.size()) {
      return InvalidArgument(path + ":" + std::to_string(r.line) + ": expected " + std::to_string(header.size()) +
                             " columns, got " + std::to_string(r.fields.size()));
    }
    FgdReferenceRow row;
    for (auto [col, out] : {std::pair{c_unalloc, &row.unallocated_pct_at_100},
                            std::pair{c_sd, &row.allocated_pct_sd_at_100},
                            std::pair{c_frag, &row.frag_amount_pct_at_100}}) {
      GP_ASSIGN_OR_RETURN(auto v, ParseDouble(path, r.line, col + 1, header[col], r.fields[col]));
      *out = v;
    }
    ref[{std::string(r.fields[c_workload]), std::string(r.fields[c_policy])}] = row;
    return {};
  });
  if (!st) return std::unexpected(st.error());
  return ref;
}

}  // namespace gpupool
