#include "src/config/alibaba_gpu_trace.h"

#include <array>
#include <functional>
#include <set>

#include "src/base/csv.h"

namespace gpupool {
namespace {

constexpr std::array<std::string_view, 5> kNodeHeader = {"sn", "cpu_milli", "memory_mib", "gpu", "model"};
constexpr std::array<std::string_view, 11> kPodHeader = {
    "name",     "cpu_milli", "memory_mib",    "num_gpu",       "gpu_milli",     "gpu_spec",
    "qos",      "pod_phase", "creation_time", "deletion_time", "scheduled_time"};
constexpr size_t kPodShortColumns = 5;

// Largest sizes we accept: far above any real machine, low enough that sums
// over a large cluster cannot overflow int64.
constexpr int64_t kMaxCpuMilli = int64_t{1} << 32;
constexpr int64_t kMaxMemoryMib = int64_t{1} << 40;
constexpr int64_t kMaxTimeS = int64_t{1} << 40;

std::string JoinHeader(std::span<const std::string_view> names) {
  std::string out;
  for (auto n : names) {
    if (!out.empty()) out += ",";
    out += n;
  }
  return out;
}

bool HeaderIs(std::span<const std::string_view> got, std::span<const std::string_view> want) {
  if (got.size() != want.size()) return false;
  for (size_t i = 0; i < got.size(); ++i) {
    if (got[i] != want[i]) return false;
  }
  return true;
}

// Parses "A|B|C" into a model mask; every name must be in the catalog.
Result<GpuModelMask> ParseGpuSpec(const CsvFieldRef& f, const Catalog& catalog) {
  if (f.text.empty()) return kAnyGpuModel;
  GpuModelMask mask = 0;
  std::string_view rest = f.text;
  while (true) {
    const size_t bar = rest.find('|');
    const std::string_view name = rest.substr(0, bar);
    auto id = catalog.Find(name);
    if (!id) {
      return InvalidArgument(CsvFieldError(
          f, "unknown GPU model '" + std::string(name) + "' (known: " + catalog.Names() + ")"));
    }
    mask |= GpuModelMask{1} << *id;
    if (bar == std::string_view::npos) break;
    rest.remove_prefix(bar + 1);
  }
  return mask;
}

Result<std::vector<NodeSpec>> ParseNodes(const Catalog& catalog, std::string_view source,
                                         const std::function<Status(const CsvRecordFn&)>& read) {
  std::vector<NodeSpec> nodes;
  std::set<std::string, std::less<>> names;
  bool header_seen = false;
  Status st = read([&](const CsvRecord& r) -> Status {
    if (!header_seen) {
      header_seen = true;
      if (!HeaderIs(r.fields, kNodeHeader)) {
        return InvalidArgument(std::string(source) + ":" + std::to_string(r.line) +
                               ": not an openb node list: expected header '" + JoinHeader(kNodeHeader) + "'");
      }
      return {};
    }
    if (r.fields.size() != kNodeHeader.size()) {
      return InvalidArgument(std::string(source) + ":" + std::to_string(r.line) + ": expected " +
                             std::to_string(kNodeHeader.size()) + " columns, got " + std::to_string(r.fields.size()));
    }
    auto field = [&](int c) { return CsvFieldRef{source, r.line, c + 1, kNodeHeader[c], r.fields[c]}; };
    NodeSpec n;
    n.name = std::string(r.fields[0]);
    if (n.name.empty()) return InvalidArgument(CsvFieldError(field(0), "node name is empty"));
    if (names.contains(n.name)) return InvalidArgument(CsvFieldError(field(0), "duplicate node '" + n.name + "'"));
    GP_ASSIGN_OR_RETURN(auto cpu, CsvInt(field(1), 0, kMaxCpuMilli));
    GP_ASSIGN_OR_RETURN(auto mem, CsvInt(field(2), 0, kMaxMemoryMib));
    GP_ASSIGN_OR_RETURN(auto gpus, CsvInt(field(3), 0, kMaxGpusPerNode));
    n.cpu_milli = cpu;
    n.memory_mib = mem;
    n.gpu_count = static_cast<int>(gpus);
    const std::string_view model = r.fields[4];
    if (n.gpu_count > 0) {
      auto id = catalog.Find(model);
      if (model.empty()) return InvalidArgument(CsvFieldError(field(4), "a node with GPUs needs a model"));
      if (!id) {
        return InvalidArgument(CsvFieldError(
            field(4), "unknown GPU model '" + std::string(model) + "' (known: " + catalog.Names() + ")"));
      }
      n.gpu_model = *id;
    } else if (!model.empty()) {
      return InvalidArgument(CsvFieldError(field(4), "a node without GPUs must have an empty model"));
    }
    names.insert(n.name);
    nodes.push_back(std::move(n));
    return {};
  });
  if (!st) return std::unexpected(st.error());
  if (!header_seen) return InvalidArgument(std::string(source) + ": empty file, expected an openb node list");
  return nodes;
}

Result<std::vector<TracePod>> ParsePods(const Catalog& catalog, std::string_view source,
                                        const std::function<Status(const CsvRecordFn&)>& read) {
  std::vector<TracePod> pods;
  std::set<std::string, std::less<>> names;
  size_t columns = 0;
  Status st = read([&](const CsvRecord& r) -> Status {
    if (columns == 0) {
      const std::span<const std::string_view> full(kPodHeader);
      if (HeaderIs(r.fields, full)) {
        columns = kPodHeader.size();
      } else if (HeaderIs(r.fields, full.first(kPodShortColumns))) {
        columns = kPodShortColumns;
      } else {
        return InvalidArgument(std::string(source) + ":" + std::to_string(r.line) +
                               ": not an openb pod list: expected header '" + JoinHeader(kPodHeader) + "' or '" +
                               JoinHeader(full.first(kPodShortColumns)) + "'");
      }
      return {};
    }
    if (r.fields.size() != columns) {
      return InvalidArgument(std::string(source) + ":" + std::to_string(r.line) + ": expected " +
                             std::to_string(columns) + " columns, got " + std::to_string(r.fields.size()));
    }
    auto field = [&](int c) { return CsvFieldRef{source, r.line, c + 1, kPodHeader[c], r.fields[c]}; };
    TracePod p;
    p.name = std::string(r.fields[0]);
    if (p.name.empty()) return InvalidArgument(CsvFieldError(field(0), "pod name is empty"));
    if (names.contains(p.name)) return InvalidArgument(CsvFieldError(field(0), "duplicate pod '" + p.name + "'"));
    GP_ASSIGN_OR_RETURN(auto cpu, CsvInt(field(1), 0, kMaxCpuMilli));
    GP_ASSIGN_OR_RETURN(auto mem, CsvInt(field(2), 0, kMaxMemoryMib));
    GP_ASSIGN_OR_RETURN(auto num_gpu, CsvInt(field(3), 0, kMaxGpusPerNode));
    GP_ASSIGN_OR_RETURN(auto gpu_milli, CsvInt(field(4), 0, kMilliPerGpu));
    p.demand.cpu_milli = cpu;
    p.demand.memory_mib = mem;
    p.demand.gpu_count = static_cast<int32_t>(num_gpu);
    p.demand.gpu_milli = static_cast<int32_t>(gpu_milli);
    if (columns == kPodHeader.size()) {
      GP_ASSIGN_OR_RETURN(auto spec, ParseGpuSpec(field(5), catalog));
      p.demand.allowed_models = spec;
      p.qos = std::string(r.fields[6]);
      p.pod_phase = std::string(r.fields[7]);
      GP_ASSIGN_OR_RETURN(auto created, CsvIntOr(field(8), 0, kMaxTimeS, -1));
      GP_ASSIGN_OR_RETURN(auto deleted, CsvIntOr(field(9), 0, kMaxTimeS, -1));
      GP_ASSIGN_OR_RETURN(auto scheduled, CsvIntOr(field(10), 0, kMaxTimeS, -1));
      if (created >= 0) p.creation_time_s = created;
      if (deleted >= 0) p.deletion_time_s = deleted;
      if (scheduled >= 0) p.scheduled_time_s = scheduled;
      if (p.creation_time_s && p.deletion_time_s && *p.deletion_time_s < *p.creation_time_s) {
        return InvalidArgument(CsvFieldError(field(9), "deletion_time is before creation_time"));
      }
    }
    if (auto valid = ValidateDemand(p.demand); !valid) {
      // ValidateDemand's message starts with the field it blames ("num_gpu: ..."
      // or "gpu_milli: ..."): point at that column and drop the repeated name.
      std::string_view message = valid.error().message;
      const int column = message.starts_with("num_gpu") ? 3 : 4;
      const std::string_view prefix = kPodHeader[column];
      if (message.starts_with(prefix) && message.substr(prefix.size()).starts_with(": ")) {
        message.remove_prefix(prefix.size() + 2);
      }
      return InvalidArgument(CsvFieldError(field(column), message));
    }
    names.insert(p.name);
    pods.push_back(std::move(p));
    return {};
  });
  if (!st) return std::unexpected(st.error());
  if (columns == 0) return InvalidArgument(std::string(source) + ": empty file, expected an openb pod list");
  return pods;
}

}  // namespace

Result<std::vector<NodeSpec>> LoadOpenbNodesFile(const std::string& path, const Catalog& catalog) {
  return ParseNodes(catalog, path, [&](const CsvRecordFn& fn) { return ReadCsvFile(path, fn); });
}

Result<std::vector<NodeSpec>> ParseOpenbNodes(std::string_view text, std::string_view source,
                                              const Catalog& catalog) {
  return ParseNodes(catalog, source, [&](const CsvRecordFn& fn) { return ReadCsvText(text, source, fn); });
}

Result<std::vector<TracePod>> LoadOpenbPodsFile(const std::string& path, const Catalog& catalog) {
  return ParsePods(catalog, path, [&](const CsvRecordFn& fn) { return ReadCsvFile(path, fn); });
}

Result<std::vector<TracePod>> ParseOpenbPods(std::string_view text, std::string_view source,
                                             const Catalog& catalog) {
  return ParsePods(catalog, source, [&](const CsvRecordFn& fn) { return ReadCsvText(text, source, fn); });
}

}  // namespace gpupool
