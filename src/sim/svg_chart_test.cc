#include "src/sim/svg_chart.h"

#include <gtest/gtest.h>

#include <cmath>
#include <string>

namespace gpupool {
namespace {

size_t Count(const std::string& text, const std::string& what) {
  size_t n = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

TEST(SvgChartTest, TickStepsAreOneTwoOrFiveTimesAPowerOfTen) {
  EXPECT_DOUBLE_EQ(TickStep(100, 5), 20);
  EXPECT_DOUBLE_EQ(TickStep(12, 8), 2);
  EXPECT_DOUBLE_EQ(TickStep(0.9, 5), 0.2);
  EXPECT_DOUBLE_EQ(TickStep(4200, 5), 1000);
  EXPECT_DOUBLE_EQ(TickStep(0, 5), 1);  // no span: a step of one, never a division by zero
}

TEST(SvgChartTest, EveryNameIsEscaped) {
  EXPECT_EQ(EscapeXml("a<b>&\"c'"), "a&lt;b&gt;&amp;&quot;c&#39;");
  const std::string svg = LineChartSvg({{"<script>alert(1)</script>", {{0, 1}, {1, 2}}}}, {"x & y", "\"y\""});
  EXPECT_EQ(svg.find("<script>"), std::string::npos);
  EXPECT_NE(svg.find("&lt;script&gt;alert(1)&lt;/script&gt;"), std::string::npos);
  EXPECT_NE(svg.find("x &amp; y"), std::string::npos);
  const std::string bars = BarChartSvg({{"<t>", {1}}}, {"a&b"}, "y");
  EXPECT_EQ(bars.find("<t>"), std::string::npos);
  EXPECT_NE(bars.find("&lt;t&gt;"), std::string::npos);
}

TEST(SvgChartTest, OnePolylinePerSeriesAndStepsDoubleThePoints) {
  const std::vector<ChartSeries> two = {{"a", {{0, 0}, {1, 1}, {2, 4}}}, {"b", {{0, 2}, {2, 2}}}};
  const std::string lines = LineChartSvg(two, {"x", "y"});
  EXPECT_EQ(Count(lines, "<polyline"), 2u);
  EXPECT_EQ(lines.rfind("<svg", 0), 0u);
  EXPECT_EQ(lines.substr(lines.size() - 6), "</svg>");
  ChartAxes steps{"x", "y"};
  steps.steps = true;
  const std::string stepped = LineChartSvg({two[0]}, steps);
  const size_t points = stepped.find("points=\"");
  const std::string list = stepped.substr(points, stepped.find('"', points + 8) - points);
  EXPECT_EQ(Count(list, ","), 5u);  // 3 points, 2 risers
}

TEST(SvgChartTest, NonFinitePointsAreSkippedAndNoDataIsSaid) {
  EXPECT_NE(LineChartSvg({}, {"x", "y"}).find("no data"), std::string::npos);
  EXPECT_NE(LineChartSvg({{"a", {{NAN, 1}, {1, INFINITY}}}}, {"x", "y"}).find("no data"), std::string::npos);
  const std::string svg = LineChartSvg({{"a", {{0, 1}, {NAN, 3}, {2, 2}}}}, {"x", "y"});
  EXPECT_EQ(svg.find("nan"), std::string::npos);
  EXPECT_EQ(svg.find("inf"), std::string::npos);
  EXPECT_NE(BarChartSvg({}, {"a"}, "y").find("no data"), std::string::npos);
}

TEST(SvgChartTest, LongSeriesAreThinnedAndExtraSeriesLeftOut) {
  ChartSeries big{"big", {}};
  for (int i = 0; i < 50'000; ++i) big.points.emplace_back(i, i % 7);
  const std::string svg = LineChartSvg({big}, {"x", "y"});
  const size_t points = svg.find("points=\"");
  const std::string list = svg.substr(points, svg.find('"', points + 8) - points);
  EXPECT_EQ(Count(list, ","), kMaxChartPoints);
  std::vector<ChartSeries> many(kMaxChartSeries + 5, ChartSeries{"s", {{0, 1}, {1, 2}}});
  EXPECT_EQ(Count(LineChartSvg(many, {"x", "y"}), "<polyline"), kMaxChartSeries);
}

TEST(SvgChartTest, TheSameDataGivesTheSameText) {
  const std::vector<ChartSeries> s = {{"a", {{0, 0.1234567}, {3.3, 99.99}}}};
  EXPECT_EQ(LineChartSvg(s, {"x", "y"}), LineChartSvg(s, {"x", "y"}));
}

}  // namespace
}  // namespace gpupool
