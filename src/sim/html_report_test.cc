#include "src/sim/html_report.h"

#include <gtest/gtest.h>

#include <chrono>
#include <string>

namespace gpupool {
namespace {

Event At(int64_t ms, EventBody body) { return Event{1, Instant{Duration{ms}}, std::move(body)}; }

TEST(HtmlReportTest, TheTimelineCountsPreemptionsAndReclaimsHourByHourByReason) {
  ReportTimeline t;
  t.Observe(At(10, PreemptionStarted{1, 2, PreemptReason::kPriority, false}));
  t.Observe(At(3'600'000 * 2 + 5, PreemptionStarted{3, 4, PreemptReason::kPriority, true}));
  t.Observe(At(3'600'000 * 2 + 9, PreemptionStarted{5, 6, PreemptReason::kPriority, true}));
  t.Observe(At(100, ReclaimStarted{7, ReclaimReason::kIdle, true}));
  t.Observe(At(100, JobCancelled{8}));  // not counted
  ASSERT_EQ(t.preemptions().size(), 1u);
  EXPECT_EQ(t.preemptions().at("priority"), (std::vector<int64_t>{1, 0, 2}));
  EXPECT_EQ(t.reclaims().at("idle"), (std::vector<int64_t>{1}));
  // Past the limit, the last hour counts.
  t.Observe(At(int64_t{3'600'000} * 100'000, ReclaimStarted{9, ReclaimReason::kDeadline, false}));
  EXPECT_EQ(t.reclaims().at("deadline").size(), ReportTimeline::kMaxHours);
  EXPECT_EQ(t.reclaims().at("deadline").back(), 1);
}

SimReport SmallReport() {
  SimReport r;
  r.scenario = "s<1>";
  r.horizon_h = 3;
  r.allocation_series = {{0, 0}, {1, 50}, {2, 75}};
  r.busy_series = {{0, 0}, {1, 40}, {2, 60}};
  r.by_priority["high"].wait_quantiles_s = std::vector<double>(101, 30.0);
  r.by_priority["high"].submitted = 4;
  r.by_tenant["team<a>"].share_received_pct = 12.5;
  r.pools["p"].gpu_hours_used = 3;
  return r;
}

TEST(HtmlReportTest, ASimulationReportHasEverySectionAndNothingFromOutside) {
  ReportTimeline t;
  t.Observe(At(10, PreemptionStarted{1, 2, PreemptReason::kPriority, false}));
  const std::string html = HtmlSimReport(SmallReport(), t);
  EXPECT_EQ(html.rfind("<!DOCTYPE html>", 0), 0u);
  for (const char* section : {"GPUs allocated and busy over time", "Waiting time by priority class",
                              "Each tenant&#39;s share against its entitlement", "Preemptions and reclaims over time",
                              "preempted: priority"}) {
    EXPECT_NE(html.find(section), std::string::npos) << section;
  }
  EXPECT_NE(html.find("team&lt;a&gt;"), std::string::npos);
  EXPECT_EQ(html.find("team<a>"), std::string::npos);
  EXPECT_EQ(html.find("<script"), std::string::npos);
  EXPECT_EQ(html.find("http://"), std::string::npos);  // self-contained: no link, font or image to fetch
  EXPECT_EQ(html.find("https://"), std::string::npos);
  EXPECT_EQ(HtmlSimReport(SmallReport(), t), html);  // reproducible
}

TEST(HtmlReportTest, AClaimsReportLabelsAssumptionsAndSkippedClaims) {
  ClaimResult measured;
  measured.id = "C-ONE";
  measured.seed_claim = "it is 30% better";
  measured.measured = {{"x", 1.5}};
  measured.baseline = {{"x", 1.0}};
  measured.assumptions = {"checkpoint write 60 s (the seeds' figure)"};
  ClaimResult skipped;
  skipped.id = "C-TWO";
  skipped.skipped = true;
  skipped.skip_reason = "the trace is not here";
  const std::string html = HtmlClaimsReport({measured, skipped});
  EXPECT_NE(html.find("assumed: checkpoint write 60 s (the seeds&#39; figure)"), std::string::npos);
  EXPECT_NE(html.find("skipped: the trace is not here"), std::string::npos);
  EXPECT_NE(html.find("2 claims, 1 skipped"), std::string::npos);
  EXPECT_NE(html.find("<td class=\"l\">x</td><td>1.5</td><td>1.0</td>"), std::string::npos) << html;
}

TEST(HtmlReportTest, AnFgdReportHasOneCurvePerPolicyAndThePublishedFigure) {
  FgdReportInput in{"openb", "setup", {}, {{"FGD", 7.5}}};
  in.policies.resize(2);
  in.policies[0].policy = "FGD";
  in.policies[1].policy = "BestFit";
  const std::string html = HtmlFgdReport(in);
  size_t curves = 0;
  for (size_t at = html.find("<polyline"); at != std::string::npos; at = html.find("<polyline", at + 1)) ++curves;
  EXPECT_EQ(curves, 4u);  // the whole curve and its magnified top, per policy
  EXPECT_NE(html.find("<td>7.50</td>"), std::string::npos);
}

TEST(HtmlReportTest, WritingToAMissingFolderFailsNamingThePath) {
  auto written = WriteHtmlReport("/nonexistent-dir/r.html", "x");
  ASSERT_FALSE(written);
  EXPECT_NE(written.error().message.find("/nonexistent-dir/r.html: cannot write the report"), std::string::npos);
}

}  // namespace
}  // namespace gpupool
