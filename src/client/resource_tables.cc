#include "src/client/resource_tables.h"

#include <set>
#include <vector>

#include "src/client/json_yaml.h"
#include "src/client/table.h"

namespace gpupool {
namespace {

using nlohmann::json;

const json& Field(const json& object, const char* key) {
  static const json kNull;
  if (!object.is_object()) return kNull;
  auto it = object.find(key);
  return it == object.end() ? kNull : *it;
}

// A scalar as text; "-" when absent or null.
std::string Text(const json& v) {
  switch (v.type()) {
    case json::value_t::string:
      return v.get<std::string>().empty() ? "-" : v.get<std::string>();
    case json::value_t::number_integer:
    case json::value_t::number_unsigned:
      return v.dump();
    case json::value_t::number_float:
      return FormatNumber(v.get<double>());
    case json::value_t::boolean:
      return v.get<bool>() ? "true" : "false";
    case json::value_t::array: {
      if (v.empty()) return "-";
      std::string out;
      for (const auto& item : v) {
        if (!out.empty()) out += ",";
        out += Text(item);
      }
      return out;
    }
    case json::value_t::null:
      return "-";
    default:
      return v.dump();
  }
}

std::string Text(const json& object, const char* key) { return Text(Field(object, key)); }

// Seconds as hours ("-" when absent).
std::string Hours(const json& row, const char* key) {
  const json& v = Field(row, key);
  return v.is_number() ? FormatNumber(v.get<double>() / 3600.0) : "-";
}

const json& Items(const json& list) {
  static const json kEmpty = json::array();
  return list.is_array() ? list : kEmpty;
}

std::string Age(const json& job, int64_t now_unix_ms) {
  const json& at = Field(job, "submitted_at");
  if (!at.is_string()) return "-";
  auto t = ParseTimeMillis(at.get<std::string>());
  return t ? FormatAge(now_unix_ms - *t) : "-";
}

std::string Nodes(const json& job) {
  std::vector<std::string> names;
  std::set<std::string> seen;
  for (const auto& p : Items(Field(job, "placements"))) {
    const std::string n = Text(p, "node");
    if (seen.insert(n).second) names.push_back(n);
  }
  if (names.empty()) return "-";
  std::string out;
  for (size_t i = 0; i < names.size() && i < 3; ++i) out += (i ? "," : "") + names[i];
  if (names.size() > 3) out += ",+" + std::to_string(names.size() - 3);
  return out;
}

std::string Reason(const json& job) {
  for (const char* key : {"waiting", "reason"}) {
    const json& v = Field(job, key);
    if (v.is_string() && !v.get<std::string>().empty()) return v.get<std::string>();
  }
  return "";
}

// GPUs of one replica or stage: gpu_fraction, else gpus; nullopt if neither.
std::optional<double> UnitGpus(const json& r) {
  const json& f = Field(r, "gpu_fraction");
  if (f.is_number()) return f.get<double>();
  const json& g = Field(r, "gpus");
  if (g.is_number()) return g.get<double>();
  return std::nullopt;
}

std::string Time(const json& v, int64_t now_unix_ms) {
  if (!v.is_string()) return "-";
  const std::string s = v.get<std::string>();
  auto t = ParseTimeMillis(s);
  return t ? s + " (" + FormatAge(now_unix_ms - *t) + " ago)" : s;
}

}  // namespace

std::string JobGpus(const json& job) {
  const json& request = Field(job, "request");
  const json& stages = Field(request, "stages");
  if (stages.is_array() && !stages.empty()) {
    double total = 0;
    for (const auto& s : stages) total += UnitGpus(s).value_or(0);
    return FormatNumber(total) + " (" + std::to_string(stages.size()) + " stages)";
  }
  auto unit = UnitGpus(request);
  if (!unit) return "-";
  const json& replicas = Field(request, "replicas").is_number() ? Field(request, "replicas") : Field(job, "replicas");
  const int64_t n = replicas.is_number_integer() ? replicas.get<int64_t>() : 1;
  return (n > 1 ? std::to_string(n) + "x" : "") + FormatNumber(*unit);
}

std::string FormatJobsTable(const json& jobs, int64_t now_unix_ms) {
  std::vector<std::vector<std::string>> rows;
  for (const auto& j : Items(jobs)) {
    rows.push_back({Text(j, "id"), Text(j, "name"), Text(j, "tenant"), Text(j, "state"), Text(j, "priority"),
                    JobGpus(j), Age(j, now_unix_ms), Nodes(j), Reason(j)});
  }
  return FormatTable({"ID", "NAME", "TENANT", "STATE", "PRIORITY", "GPUS", "AGE", "NODES", "REASON"}, rows);
}

std::string FormatJobDetail(const json& job, int64_t now_unix_ms) {
  std::vector<std::pair<std::string, std::string>> kv = {
      {"id", Text(job, "id")},
      {"name", Text(job, "name")},
      {"tenant", Text(job, "tenant")},
      {"state", Text(job, "state")},
      {"kind", Text(job, "kind")},
      {"priority", Text(job, "priority")},
      {"gpus", JobGpus(job)},
      {"pool", Text(job, "pool")},
      {"borrowed", Text(job, "borrowed")},
      {"submitted", Time(Field(job, "submitted_at"), now_unix_ms)},
      {"started", Time(Field(job, "started_at"), now_unix_ms)},
      {"ended", Time(Field(job, "ended_at"), now_unix_ms)},
      {"preemptions", Text(job, "preemptions")},
      {"interruptions", Text(job, "interruptions")},
  };
  if (const json& u = Field(job, "usage"); u.is_object()) {
    kv.push_back({"gpu hours", Hours(u, "gpu_seconds") + " (GPU memory " + Hours(u, "gpu_memory_gib_seconds") + " GiB-hours)"});
  }
  if (const json& w = Field(job, "waiting"); w.is_string()) kv.push_back({"waiting", w.get<std::string>()});
  if (const json& r = Field(job, "reason"); r.is_string()) kv.push_back({"reason", r.get<std::string>()});
  if (const json& stop = Field(job, "last_stop"); stop.is_object()) {
    std::string text = Text(stop, "cause") + " (" + Text(stop, "reason") + ")";
    if (Field(stop, "by_job").is_number_integer()) text += " for job " + Text(stop, "by_job");
    kv.push_back({"last stop", text + ", " + Time(Field(stop, "at"), now_unix_ms)});
  }
  const json& placements = Items(Field(job, "placements"));
  if (placements.empty()) {
    kv.push_back({"placements", "-"});
  } else {
    for (size_t i = 0; i < placements.size(); ++i) {
      const json& p = placements[i];
      kv.push_back({i == 0 ? "placements" : "", Text(p, "node") + " GPUs " + Text(p, "gpus")});
    }
  }
  std::string out = FormatKeyValues(kv);
  const json& request = Field(job, "request");
  if (request.is_object()) {
    out += "request:\n";
    const std::string yaml = JsonToYaml(request);
    size_t s = 0;
    while (s < yaml.size()) {
      size_t e = yaml.find('\n', s);
      if (e == std::string::npos) e = yaml.size();
      out += "  " + yaml.substr(s, e - s) + "\n";
      s = e + 1;
    }
  }
  return out;
}

namespace {
// "operator:draining,hotspot", or - when nothing holds the node.
std::string CordonedBy(const json& node) {
  std::string out;
  for (const auto& c : Items(Field(node, "cordons"))) {
    if (!out.empty()) out += ",";
    out += Text(c, "by");
    if (c.contains("drain")) out += ":" + Text(c, "drain");
  }
  return out.empty() ? "-" : out;
}
}  // namespace

std::string FormatNodesTable(const json& nodes) {
  std::vector<std::vector<std::string>> rows;
  for (const auto& n : Items(nodes)) {
    rows.push_back({Text(n, "name"), Text(n, "pool"), Text(n, "model"), Text(n, "gpus"), Text(n, "free_gpus"),
                    Text(n, "cpu_cores"), Text(n, "memory_gib"), Text(n, "region"), Text(n, "zone"), Text(n, "rack"),
                    Text(n, "condition"), CordonedBy(n), Text(n, "unhealthy_gpus"),
                    Text(Field(n, "agent"), "isolation")});
  }
  // CORDONED_BY: who holds the node cordoned (issue 19: operator, with a
  // drain's progress; hotspot; scale-in). UNHEALTHY: the GPUs that take no
  // new work (EXEC-11; `node get` shows the agent's reason). ISOLATION: how
  // the node's agent runs tasks (container or none); - until an agent
  // registers after the server starts.
  return FormatTable({"NAME", "POOL", "MODEL", "GPUS", "FREE", "CPU", "MEMORY_GIB", "REGION", "ZONE", "RACK",
                      "CONDITION", "CORDONED_BY", "UNHEALTHY", "ISOLATION"},
                     rows);
}

std::string FormatCordons(const json& node) {
  std::string out;
  for (const auto& c : Items(Field(node, "cordons"))) {
    out += "cordoned by " + Text(c, "by");
    if (c.contains("actor")) out += " (" + Text(c, "actor") + ")";
    out += " since " + Text(c, "since");
    if (c.contains("drain")) out += ", " + Text(c, "drain") + " (deadline " + Text(c, "drain_deadline") + ")";
    const std::string reason = c.value("reason", "");
    out += reason.empty() ? "\n" : ": " + reason + "\n";
  }
  return out;
}

std::string FormatPoolsTable(const json& pools) {
  std::vector<std::vector<std::string>> rows;
  for (const auto& p : Items(pools)) {
    const json& c = Field(p, "capacity");
    rows.push_back({Text(p, "name"), Text(p, "models"), Text(p, "regions"), Text(p, "nodes"), Text(c, "total_gpus"),
                    Text(c, "allocated_gpus"), Text(c, "reserved_gpus"), Text(c, "fragmented_gpus"),
                    Text(c, "available_gpus"), Text(p, "dedicated_to")});
  }
  return FormatTable({"NAME", "MODELS", "REGIONS", "NODES", "TOTAL", "ALLOCATED", "RESERVED", "FRAGMENTED", "AVAILABLE",
                      "DEDICATED_TO"},
                     rows);
}

std::string FormatRegionsTable(const json& table) {
  std::vector<std::vector<std::string>> regions;
  for (const auto& r : Items(Field(table, "regions"))) {
    std::string latency;
    const json& l = Field(r, "latency_ms");
    if (l.is_object()) {
      for (const auto& [location, ms] : l.items()) latency += (latency.empty() ? "" : ",") + location + "=" + Text(ms);
    }
    regions.push_back({Text(r, "name"), Text(r, "price_per_gpu_hour"), latency.empty() ? "-" : latency});
  }
  std::string out = "policy: " + Text(table, "policy") + "\n";
  out += FormatTable({"REGION", "PRICE_PER_GPU_HOUR", "LATENCY_MS"}, regions);
  std::vector<std::vector<std::string>> users;
  for (const auto& u : Items(Field(table, "users"))) {
    users.push_back({Text(u, "tenant"), Text(u, "location"), Text(u, "latency_budget_ms")});
  }
  if (!users.empty()) out += "\n" + FormatTable({"TENANT", "LOCATION", "LATENCY_BUDGET_MS"}, users);
  return out;
}

std::string FormatTenantsTable(const json& tenants) {
  std::vector<std::vector<std::string>> rows;
  for (const auto& t : Items(tenants)) {
    const json& quota = Field(t, "quota");
    const json& usage = Field(t, "usage");
    std::set<std::string> pools;
    for (const json* m : {&quota, &usage}) {
      if (m->is_object()) {
        for (const auto& [pool, v] : m->items()) pools.insert(pool);
      }
    }
    if (pools.empty()) {
      rows.push_back({Text(t, "name"), "-", "-", "-", "-", "-", "-", "-", "-"});
      continue;
    }
    for (const std::string& pool : pools) {
      const json& q = Field(quota, pool.c_str());
      const json& u = Field(usage, pool.c_str());
      rows.push_back({Text(t, "name"), pool, Text(q, "guaranteed_gpus"), Text(q, "limit_gpus"), Text(q, "weight"),
                      Text(q, "reserved"), Text(u, "used_gpus"), Text(u, "borrowed_gpus"), Text(u, "lent_gpus")});
    }
  }
  return FormatTable({"NAME", "POOL", "GUARANTEED", "LIMIT", "WEIGHT", "RESERVED", "USED", "BORROWED", "LENT"}, rows);
}

std::string FormatTokensTable(const json& tokens) {
  std::vector<std::vector<std::string>> rows;
  for (const auto& t : Items(tokens)) {
    std::string whose = Text(t, "tenant");
    if (whose == "-") whose = Text(t, "node");
    if (whose == "-") whose = "(pool)";
    rows.push_back({Text(t, "id"), Text(t, "name"), Text(t, "role"), whose, Text(t, "created_at"), Text(t, "expires_at"),
                    Text(t, "revoked_at")});
  }
  return FormatTable({"ID", "NAME", "ROLE", "FOR", "CREATED", "EXPIRES", "REVOKED"}, rows);
}

std::string FormatAuditTable(const json& entries) {
  std::vector<std::vector<std::string>> rows;
  for (const auto& e : Items(entries)) {
    rows.push_back({Text(e, "seq"), Text(e, "at"), Text(e, "type"), Text(e, "actor"), Text(e, "request_id")});
  }
  return FormatTable({"SEQ", "AT", "TYPE", "ACTOR", "REQUEST_ID"}, rows);
}

namespace {

std::string Day(const json& row, const char* key) {
  const json& v = Field(row, key);
  return v.is_string() ? v.get<std::string>().substr(0, 10) : "-";
}

std::string CsvField(const json& v) {
  std::string s = v.is_string() ? v.get<std::string>() : v.is_null() ? "" : v.dump();
  if (s.find_first_of(",\"\r\n") == std::string::npos) return s;
  std::string q = "\"";
  for (char c : s) q += c == '"' ? std::string("\"\"") : std::string(1, c);
  return q + "\"";
}

}  // namespace

std::string FormatUsageTable(const json& rows) {
  std::vector<std::vector<std::string>> out;
  for (const auto& r : Items(rows)) {
    out.push_back({Text(r, "tenant"), Text(r, "pool"), Day(r, "period_start"), Day(r, "period_end"),
                   Hours(r, "gpu_seconds"), Hours(r, "guaranteed_gpu_seconds"), Hours(r, "borrowed_gpu_seconds"),
                   Hours(r, "lent_gpu_seconds"), Hours(r, "gpu_memory_gib_seconds"), Text(r, "jobs_started")});
  }
  return FormatTable({"TENANT", "POOL", "FROM", "TO", "GPU_HOURS", "GUARANTEED_H", "BORROWED_H", "LENT_H",
                      "GPU_MEM_GIB_H", "JOBS"},
                     out);
}

std::string FormatUsageCsv(const json& rows) {
  static const char* const kFields[] = {"tenant", "pool", "period_start", "period_end", "gpu_seconds",
                                        "guaranteed_gpu_seconds", "borrowed_gpu_seconds", "lent_gpu_seconds",
                                        "gpu_memory_gib_seconds", "jobs_started"};
  std::string out;
  for (const char* f : kFields) out += std::string(out.empty() ? "" : ",") + f;
  out += "\n";
  for (const auto& r : Items(rows)) {
    std::string line;
    for (const char* f : kFields) line += (line.empty() && f == kFields[0] ? "" : ",") + CsvField(Field(r, f));
    out += line + "\n";
  }
  return out;
}

}  // namespace gpupool
