// The side-by-side replay report (see replay_report.h).
#include "src/sim/replay_report.h"

#include <cstdio>
#include <sstream>

#include "src/base/time_text.h"

namespace gpupool {
namespace {

std::string Num(double v, int digits = 1) {
  char b[64];
  std::snprintf(b, sizeof b, "%.*f", digits, v);
  return b;
}

std::string Waits(const ClassReport& c) { return Num(c.wait_s.p50) + " / " + Num(c.wait_s.p95); }

// Rows of `a` and `b` keyed alike (classes, tenants): each key of either.
template <class Map, class F>
void KeyedRows(std::vector<ReplayRow>& rows, const std::string& prefix, const Map& a, const Map* b, F value) {
  std::map<std::string, int> keys;
  for (const auto& [k, v] : a) keys[k] = 0;
  if (b != nullptr) {
    for (const auto& [k, v] : *b) keys[k] = 0;
  }
  for (const auto& [k, unused] : keys) {
    auto ia = a.find(k);
    ReplayRow r{prefix + k, ia == a.end() ? "-" : value(ia->second), ""};
    if (b != nullptr) {
      auto ib = b->find(k);
      r.next = ib == b->end() ? "-" : value(ib->second);
    }
    rows.push_back(std::move(r));
  }
}

std::string Escape(const std::string& s) {
  std::string out;
  for (const char c : s) {
    switch (c) {
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '&': out += "&amp;"; break;
      case '"': out += "&quot;"; break;
      default: out += c;
    }
  }
  return out;
}

std::vector<std::pair<std::string, std::string>> FidelityLines(const Fidelity& f) {
  return {{"jobs compared", std::to_string(f.compared)},
          {"start-time error p50 / p99 / max (s)",
           Num(f.start_error_p50_s, 3) + " / " + Num(f.start_error_p99_s, 3) + " / " + Num(f.start_error_max_s, 3)},
          {"jobs placed elsewhere", std::to_string(f.placement_differs)},
          {"jobs started in another order", std::to_string(f.order_differs)},
          {"jobs started in only one of the two", std::to_string(f.started_in_one_only)}};
}

}  // namespace

std::vector<ReplayRow> ReplayRows(const SimReport& a, const SimReport* b) {
  std::vector<ReplayRow> rows;
  const auto both = [&](const std::string& m, auto value) {
    rows.push_back({m, value(a), b ? value(*b) : ""});
  };
  both("wait p50 / p95 (s), all jobs", [](const SimReport& r) { return Waits(r.all); });
  KeyedRows(rows, "wait p50 / p95 (s), priority ", a.by_priority, b ? &b->by_priority : nullptr,
            [](const ClassReport& c) { return Waits(c); });
  KeyedRows(rows, "wait p50 / p95 (s), tenant ", a.by_tenant, b ? &b->by_tenant : nullptr,
            [](const TenantReport& t) { return Waits(t.jobs); });
  KeyedRows(rows, "GPU share received (%), tenant ", a.by_tenant, b ? &b->by_tenant : nullptr,
            [](const TenantReport& t) { return Num(t.share_received_pct); });
  both("GPU allocation, mean (%)", [](const SimReport& r) { return Num(r.allocation_pct_mean); });
  both("preemptions", [](const SimReport& r) { return std::to_string(r.preemptions); });
  both("idle reclaims", [](const SimReport& r) { return std::to_string(r.reclaim.idle_reclaims); });
  both("deadline evictions", [](const SimReport& r) { return std::to_string(r.reclaim.deadline_evictions); });
  both("jobs completed", [](const SimReport& r) { return std::to_string(r.all.completed); });
  both("jobs unfinished at the end", [](const SimReport& r) { return std::to_string(r.unfinished); });
  both("GPUs busy, mean (%)", [](const SimReport& r) { return Num(r.sharing.gpu_busy_pct_mean); });
  both("GPU-hours lost to preemption", [](const SimReport& r) { return Num(r.gpu_hours_lost, 2); });
  both("scale-outs / nodes added", [](const SimReport& r) {
    return std::to_string(r.scaling.scale_outs) + " / " + std::to_string(r.scaling.nodes_added);
  });
  both("node cost (provider's price x node-hours)", [](const SimReport& r) { return Num(r.scaling.cost, 2); });
  both("forecasts / mean abs error (GPUs)", [](const SimReport& r) {
    return std::to_string(r.scaling.forecasts) + " / " + Num(r.scaling.forecast_mae_gpus, 2);
  });
  return rows;
}

std::string FormatReplayReport(const ReplayReportInput& in) {
  std::ostringstream o;
  const History& h = *in.history;
  o << "replay of " << in.source << ": " << h.jobs.size() << " jobs over " << FormatDuration(h.end - h.origin)
    << "; in force: " << in.in_force_name << "\n";
  size_t width = 10;
  const auto rows = ReplayRows(*in.in_force, in.next);
  for (const ReplayRow& r : rows) width = std::max(width, r.measure.size());
  char b[512];
  std::snprintf(b, sizeof b, "%-*s  %18s  %18s\n", static_cast<int>(width), "", "in force",
                in.next ? "new" : "");
  o << b;
  for (const ReplayRow& r : rows) {
    std::snprintf(b, sizeof b, "%-*s  %18s  %18s\n", static_cast<int>(width), r.measure.c_str(), r.in_force.c_str(),
                  r.next.c_str());
    o << b;
  }
  if (in.next) o << "new: " << in.new_name << "\n";
  o << "fidelity (replay in force against what happened):\n";
  for (const auto& [k, v] : FidelityLines(in.fidelity)) o << "  " << k << ": " << v << "\n";
  for (const std::string& c : in.caveats) o << "not faithful: " << c << "\n";
  return o.str();
}

nlohmann::json ReplayReportJson(const ReplayReportInput& in) {
  nlohmann::json j;
  j["source"] = in.source;
  j["in_force_config"] = in.in_force_name;
  j["jobs"] = in.history->jobs.size();
  j["hours"] = ToSeconds(in.history->end - in.history->origin) / 3600.0;
  j["in_force"] = ToJson(*in.in_force);
  if (in.next) {
    j["new_config"] = in.new_name;
    j["new"] = ToJson(*in.next);
  }
  const Fidelity& f = in.fidelity;
  j["fidelity"] = {{"compared", f.compared},
                   {"start_error_p50_s", f.start_error_p50_s},
                   {"start_error_p99_s", f.start_error_p99_s},
                   {"start_error_max_s", f.start_error_max_s},
                   {"placement_differs", f.placement_differs},
                   {"order_differs", f.order_differs},
                   {"started_in_one_only", f.started_in_one_only}};
  j["not_replayed"] = in.history->not_replayed;
  j["caveats"] = in.caveats;
  return j;
}

std::string HtmlReplayReport(const ReplayReportInput& in) {
  std::ostringstream o;
  o << "<!DOCTYPE html><html><head><meta charset=\"utf-8\"><title>gpupool replay</title><style>"
       "body{font-family:sans-serif;margin:2em}table{border-collapse:collapse}td,th{border:1px solid #ccc;"
       "padding:4px 8px;text-align:right}td:first-child{text-align:left}</style></head><body>";
  o << "<h1>What if: replay of " << Escape(in.source) << "</h1>";
  o << "<p>In force: " << Escape(in.in_force_name);
  if (in.next) o << "; new: " << Escape(in.new_name);
  o << "</p><table><tr><th></th><th>in force</th>" << (in.next ? "<th>new</th>" : "") << "</tr>";
  for (const ReplayRow& r : ReplayRows(*in.in_force, in.next)) {
    o << "<tr><td>" << Escape(r.measure) << "</td><td>" << Escape(r.in_force) << "</td>";
    if (in.next) o << "<td>" << Escape(r.next) << "</td>";
    o << "</tr>";
  }
  o << "</table><h2>Fidelity</h2><table>";
  for (const auto& [k, v] : FidelityLines(in.fidelity)) o << "<tr><td>" << Escape(k) << "</td><td>" << v << "</td></tr>";
  o << "</table><h2>Not faithful</h2><ul>";
  for (const std::string& c : in.caveats) o << "<li>" << Escape(c) << "</li>";
  o << "</ul></body></html>\n";
  return o.str();
}

}  // namespace gpupool
