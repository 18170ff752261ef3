// Charts as inline SVG text, for self-contained HTML reports (`gpupool sim
// ... --report`): no script, no external resource, every label escaped, and
// the same text for the same data (fixed number formatting), so a report is
// reproducible byte for byte.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace gpupool {

struct ChartSeries {
  std::string name;
  std::vector<std::pair<double, double>> points;  // (x, y) with x ascending; non-finite points are skipped
};

struct ChartAxes {
  std::string x_label, y_label;
  double y_min = 0;
  std::optional<double> y_max;  // default: the data's maximum, rounded up to a tick
  bool steps = false;           // a step function (CDFs, counts per bucket) rather than straight lines
};

// Limits: a series longer than this is thinned to it (evenly, first and last
// point kept); series past kMaxChartSeries are left out of the chart.
inline constexpr size_t kMaxChartPoints = 2000;
inline constexpr size_t kMaxChartSeries = 12;

// Lines on shared axes, with ticks, axis labels and a legend. No series or
// no finite point gives a chart that says "no data".
std::string LineChartSvg(const std::vector<ChartSeries>& series, const ChartAxes& axes, int width_px = 720,
                         int height_px = 280);

// Grouped bars from zero: one group per label along x, in each one bar per
// entry of `bar_names` (values[i] is bar_names[i]'s), and a legend.
struct BarGroup {
  std::string label;
  std::vector<double> values;
};
std::string BarChartSvg(const std::vector<BarGroup>& groups, const std::vector<std::string>& bar_names,
                        const std::string& y_label, int width_px = 720, int height_px = 280);

// Text safe in XML/HTML text and attribute values (& < > " ').
std::string EscapeXml(std::string_view text);

// A round tick step (1, 2 or 5 times a power of ten) giving about `ticks`
// intervals over `span` (> 0).
double TickStep(double span, int ticks);

}  // namespace gpupool
