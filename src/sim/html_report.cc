#include "src/sim/html_report.h"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <type_traits>
#include <variant>

#include "src/base/time.h"
#include "src/sim/svg_chart.h"

namespace gpupool {
namespace {

constexpr const char* kStyle =
    "body{font-family:sans-serif;margin:24px auto;max-width:980px;color:#222;line-height:1.4}"
    "h1{font-size:22px}h2{font-size:17px;margin-top:28px;border-bottom:1px solid #ccc}"
    "table{border-collapse:collapse;margin:8px 0;font-size:13px}"
    "td,th{border:1px solid #ccc;padding:3px 8px;text-align:right;vertical-align:top}"
    "th{background:#f3f3f3}td.l,th.l{text-align:left}"
    ".note{color:#555;font-size:13px}.assumed{background:#fff6d9;font-size:13px;margin:2px 0;padding:2px 6px}.skipped{color:#777}"
    "svg.chart{display:block;margin:6px 0 14px;max-width:100%;height:auto}";

std::string Num(double v, int decimals = 1) {
  if (!std::isfinite(v)) return "-";
  char b[48];
  std::snprintf(b, sizeof b, "%.*f", decimals, v);
  return b;
}

std::string Page(const std::string& title, const std::string& body) {
  return "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>" + EscapeXml(title) +
         "</title><style>" + kStyle + "</style></head><body><h1>" + EscapeXml(title) + "</h1>\n" + body +
         "\n</body></html>\n";
}

// A table: `header` then `rows`, cells already escaped; the first column
// left-aligned.
std::string Table(const std::vector<std::string>& header, const std::vector<std::vector<std::string>>& rows) {
  std::string s = "<table><tr>";
  for (size_t i = 0; i < header.size(); ++i) s += (i == 0 ? "<th class=\"l\">" : "<th>") + EscapeXml(header[i]) + "</th>";
  s += "</tr>";
  for (const auto& row : rows) {
    s += "<tr>";
    for (size_t i = 0; i < row.size(); ++i) s += (i == 0 ? "<td class=\"l\">" : "<td>") + row[i] + "</td>";
    s += "</tr>";
  }
  return s + "</table>\n";
}

std::string H2(const std::string& text) { return "<h2>" + EscapeXml(text) + "</h2>\n"; }
std::string Note(const std::string& text) { return "<p class=\"note\">" + EscapeXml(text) + "</p>\n"; }

// Per-hour counts as step-chart series, one per name, each over `hours`
// (or longer, when it has more).
std::vector<ChartSeries> HourlySeries(const std::map<std::string, std::vector<int64_t>>& by_name,
                                      const std::string& prefix, size_t hours) {
  std::vector<ChartSeries> out;
  for (const auto& [name, counts] : by_name) {
    ChartSeries s{prefix + name, {}};
    const size_t n = std::max(hours, counts.size());
    for (size_t h = 0; h < n; ++h) s.points.emplace_back(static_cast<double>(h), h < counts.size() ? counts[h] : 0);
    s.points.emplace_back(static_cast<double>(n), n > 0 && n <= counts.size() ? counts[n - 1] : 0);
    out.push_back(std::move(s));
  }
  return out;
}

std::string SummarySection(const SimReport& r) {
  const std::vector<std::vector<std::string>> rows = {
      {"jobs submitted / started / completed",
       std::to_string(r.all.submitted) + " / " + std::to_string(r.all.started) + " / " + std::to_string(r.all.completed)},
      {"unfinished at the horizon / ended (reclaimed or evicted)",
       std::to_string(r.unfinished) + " / " + std::to_string(r.ended)},
      {"GPU allocation, time-weighted mean", Num(r.allocation_pct_mean) + " %"},
      {"GPUs busy, time-weighted mean", Num(r.sharing.gpu_busy_pct_mean) + " %"},
      {"wait p50 / p95 / p99", Num(r.all.wait_s.p50, 0) + " / " + Num(r.all.wait_s.p95, 0) + " / " +
                                   Num(r.all.wait_s.p99, 0) + " s"},
      {"preemptions / GPU-hours lost to them", std::to_string(r.preemptions) + " / " + Num(r.gpu_hours_lost, 2)},
      {"idle reclaims / deadline evictions",
       std::to_string(r.reclaim.idle_reclaims) + " / " + std::to_string(r.reclaim.deadline_evictions)},
      {"events / event log SHA-256", std::to_string(r.events) + " / " + EscapeXml(r.event_log_sha256)},
  };
  return Table({"over " + Num(r.horizon_h) + " simulated hours", "value"}, rows);
}

std::string AllocationSection(const SimReport& r) {
  std::vector<ChartSeries> series = {{"allocated", r.allocation_series}, {"busy", r.busy_series}};
  std::string s = H2("GPUs allocated and busy over time") +
                  LineChartSvg(series, {"simulated hours", "% of the GPUs in service", 0, 100.0, false}) +
                  Note("Allocated: GPUs (or shares of them) held by jobs. Busy: the work those jobs' load models "
                       "put on them (at most one GPU's worth each). Sampled at the scenario's sample_every.");
  std::vector<std::vector<std::string>> rows;
  for (const auto& [name, p] : r.pools) {
    rows.push_back({EscapeXml(name), Num(p.allocation_pct_mean), Num(p.gpu_hours_used, 1),
                    std::to_string(p.at_end.total_milli / 1000), std::to_string(p.at_end.available_milli / 1000)});
  }
  return s + Table({"pool", "allocation mean %", "GPU-hours used", "GPUs at the end", "available at the end"}, rows);
}

std::string WaitSection(const SimReport& r) {
  std::vector<ChartSeries> series;
  std::vector<std::vector<std::string>> rows;
  for (const auto& [name, c] : r.by_priority) {
    ChartSeries s{name.empty() ? "(no class)" : name, {}};
    for (size_t q = 0; q < c.wait_quantiles_s.size(); ++q) {
      s.points.emplace_back(c.wait_quantiles_s[q] / 60.0, static_cast<double>(q));
    }
    series.push_back(std::move(s));
    rows.push_back({EscapeXml(name.empty() ? "(no class)" : name), std::to_string(c.submitted),
                    std::to_string(c.started), std::to_string(c.completed), Num(c.wait_s.p50, 0),
                    Num(c.wait_s.p95, 0), Num(c.wait_s.p99, 0), Num(c.jct_s.p50 / 60.0, 1)});
  }
  return H2("Waiting time by priority class") +
         LineChartSvg(series, {"wait, minutes (submit to first start)", "% of the class's jobs", 0, 100.0, true}) +
         Note("A job still waiting at the horizon counts with the wait it had so far.") +
         Table({"class", "submitted", "started", "completed", "wait p50 s", "p95 s", "p99 s", "JCT p50 min"}, rows);
}

std::string TenantSection(const SimReport& r) {
  std::vector<BarGroup> groups;
  std::vector<std::vector<std::string>> rows;
  for (const auto& [name, t] : r.by_tenant) {
    groups.push_back({name, {t.share_received_pct, t.entitlement_guaranteed_pct, t.entitlement_weight_pct}});
    rows.push_back({EscapeXml(name), Num(t.share_received_pct), Num(t.entitlement_guaranteed_pct),
                    Num(t.entitlement_weight_pct), std::to_string(t.jobs.submitted), std::to_string(t.preemptions),
                    Num(t.gpu_hours_lost, 2)});
  }
  return H2("Each tenant's share against its entitlement") +
         BarChartSvg(groups, {"received", "guaranteed", "by weight"}, "% of the cluster's GPUs") +
         Note("Received: the tenant's time-averaged GPU usage over the cluster's GPUs. Guaranteed: its guarantee "
              "over the GPUs of its pools. By weight: its weight over the weights of all tenants.") +
         Table({"tenant", "received %", "guaranteed %", "by weight %", "jobs", "preempted", "GPU-hours lost"}, rows);
}

std::string DisruptionSection(const SimReport& r, const ReportTimeline& t) {
  const auto hours = static_cast<size_t>(std::ceil(std::clamp(r.horizon_h, 0.0, double{ReportTimeline::kMaxHours})));
  std::vector<ChartSeries> series = HourlySeries(t.preemptions(), "preempted: ", hours);
  for (ChartSeries& s : HourlySeries(t.reclaims(), "reclaimed: ", hours)) series.push_back(std::move(s));
  std::string s = H2("Preemptions and reclaims over time");
  if (series.empty()) return s + Note("None in this run.");
  s += LineChartSvg(series, {"simulated hours", "started in the hour", 0, std::nullopt, true});
  if (!r.scaling.node_series.empty()) {
    s += H2("Nodes in service") +
         LineChartSvg({{"nodes", r.scaling.node_series}}, {"simulated hours", "nodes", 0, std::nullopt, true});
  }
  return s;
}

// A JSON value as a cell: numbers and strings bare, the rest as JSON.
std::string Cell(const nlohmann::json& v) {
  if (v.is_null()) return "-";
  if (v.is_string()) return EscapeXml(v.get<std::string>());
  return EscapeXml(v.dump());
}

// One claim: what the seeds say, then each named figure of ours beside the
// baseline's (the names of both, sorted), then how, and what is assumed.
std::string ClaimBlock(const ClaimResult& c) {
  std::string s = H2(c.id) + "<p>The seeds say: " + EscapeXml(c.seed_claim) + "</p>\n";
  if (c.skipped) return s + "<p class=\"skipped\">skipped: " + EscapeXml(c.skip_reason) + "</p>\n";
  std::map<std::string, std::pair<nlohmann::json, nlohmann::json>> figures;
  if (c.measured.is_object()) {
    for (const auto& [k, v] : c.measured.items()) figures[k].first = v;
  }
  if (c.baseline.is_object()) {
    for (const auto& [k, v] : c.baseline.items()) figures[k].second = v;
  }
  std::vector<std::vector<std::string>> rows;
  for (const auto& [name, v] : figures) rows.push_back({EscapeXml(name), Cell(v.first), Cell(v.second)});
  s += Table({"figure", "ours", "baseline"}, rows) + Note("How: " + c.note);
  for (const std::string& a : c.assumptions) s += "<p class=\"assumed\">assumed: " + EscapeXml(a) + "</p>\n";
  return s;
}

}  // namespace

void ReportTimeline::Count(std::vector<int64_t>& per_hour, Instant at) {
  const auto hour = static_cast<size_t>(std::max<int64_t>(0, ToMillis(at)) / 3'600'000);
  const size_t index = std::min(hour, kMaxHours - 1);
  if (per_hour.size() <= index) per_hour.resize(index + 1, 0);
  ++per_hour[index];
}

void ReportTimeline::Observe(const Event& e) {
  if (const auto* p = std::get_if<PreemptionStarted>(&e.body)) Count(preemptions_[PreemptReasonName(p->reason)], e.at);
  if (const auto* c = std::get_if<ReclaimStarted>(&e.body)) Count(reclaims_[ReclaimReasonName(c->reason)], e.at);
}

std::string HtmlSimReport(const SimReport& r, const ReportTimeline& timeline) {
  const std::string body = Note("Scenario " + r.scenario + ". Every input is the scenario file's; the simulator and "
                                "the policies know only what the daemon would know at each moment.") +
                           SummarySection(r) + AllocationSection(r) + WaitSection(r) + TenantSection(r) +
                           DisruptionSection(r, timeline);
  return Page("gpupool simulation: " + r.scenario, body);
}

std::string HtmlClaimsReport(const std::vector<ClaimResult>& claims) {
  std::string blocks;
  size_t skipped = 0;
  for (const ClaimResult& c : claims) {
    blocks += ClaimBlock(c);
    skipped += c.skipped;
  }
  const std::string body =
      Note(std::to_string(claims.size()) + " claims, " + std::to_string(skipped) +
           " skipped. Each is measured by its scenario (scenarios/claims/ID.yaml) against a baseline run of the same "
           "scenario; inputs nothing here measured are marked as assumed, with where they come from.") +
      blocks;
  return Page("gpupool claims", body);
}

std::string HtmlFgdReport(const FgdReportInput& in) {
  std::vector<ChartSeries> curves;
  std::vector<std::vector<std::string>> rows;
  for (const FgdPolicySummary& p : in.policies) {
    ChartSeries s{p.policy, {}};
    for (int k = 0; k < kFgdBins; ++k) s.points.emplace_back(k, p.allocated_pct[k]);
    curves.push_back(std::move(s));
    const auto published = in.published_unallocated_pct_at_100.find(p.policy);
    rows.push_back({EscapeXml(p.policy), Num(p.unallocated_pct_at_100, 2), Num(p.unallocated_pct_sd_at_100, 2),
                    Num(p.fragmentation_pct_at_100, 2), Num(p.pods_failed_mean, 0),
                    published == in.published_unallocated_pct_at_100.end() ? "-" : Num(published->second, 2)});
  }
  // The curves part where the cluster fills up (80 % arrived and more), magnified.
  std::vector<ChartSeries> tails;
  double low = 100;
  for (const ChartSeries& c : curves) {
    ChartSeries t{c.name, {c.points.begin() + std::min<size_t>(80, c.points.size()), c.points.end()}};
    for (const auto& [x, y] : t.points) low = std::isfinite(y) ? std::min(low, y) : low;
    tails.push_back(std::move(t));
  }
  const std::string body =
      Note(in.setup) + H2("GPU allocation against the arrived workload") +
      LineChartSvg(curves, {"arrived GPU requests, % of the cluster's GPUs", "GPUs allocated, %", 0, 100.0, false}) +
      LineChartSvg(tails, {"arrived GPU requests, % (from 80)", "GPUs allocated, %", std::floor(low / 5) * 5, 100.0,
                           false}) +
      H2("At 100 % arrived (lower unallocated is better)") +
      Table({"policy", "unallocated %", "sd", "fragmentation %", "pods failed", "published unallocated %"}, rows);
  return Page("gpupool FGD protocol: " + in.workload, body);
}

Status WriteHtmlReport(const std::string& path, const std::string& html) {
  const std::string tmp = path + ".tmp";
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    if (!out) return IoError(path + ": cannot write the report (" + std::strerror(errno) + ")");
    out << html;
    out.close();
    if (!out) {
      std::remove(tmp.c_str());
      return IoError(path + ": cannot write the report (" + std::strerror(errno) + ")");
    }
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    const std::string why = std::strerror(errno);
    std::remove(tmp.c_str());
    return IoError(path + ": cannot write the report (" + why + ")");
  }
  return {};
}

}  // namespace gpupool
