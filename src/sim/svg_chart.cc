#include "src/sim/svg_chart.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

namespace gpupool {
namespace {

// Okabe and Ito's palette: told apart by most colour-blind readers.
constexpr const char* kColours[] = {"#0072B2", "#E69F00", "#009E73", "#D55E00",
                                    "#CC79A7", "#56B4E9", "#8C6D1F", "#000000"};
constexpr int kLeftPx = 60, kRightPx = 16, kTopPx = 28, kBottomPx = 44;

const char* Colour(size_t i) { return kColours[i % (sizeof kColours / sizeof kColours[0])]; }

// A coordinate: one decimal.
std::string Px(double v) {
  char b[32];
  std::snprintf(b, sizeof b, "%.1f", v);
  return b;
}

// A tick label: at most 4 significant digits, no exponent for the usual sizes.
std::string Label(double v) {
  char b[32];
  if (std::fabs(v) < 1e-9) return "0";
  std::snprintf(b, sizeof b, std::fabs(v) >= 1e5 || std::fabs(v) < 1e-3 ? "%.3g" : "%.4g", v);
  return b;
}

struct Frame {
  int width = 0, height = 0;
  double x0 = 0, x1 = 1, y0 = 0, y1 = 1;
  double X(double x) const { return kLeftPx + (x - x0) / (x1 - x0) * (width - kLeftPx - kRightPx); }
  double Y(double y) const { return height - kBottomPx - (y - y0) / (y1 - y0) * (height - kTopPx - kBottomPx); }
};

std::string Open(int width, int height) {
  return "<svg class=\"chart\" viewBox=\"0 0 " + std::to_string(width) + " " + std::to_string(height) +
         "\" width=\"" + std::to_string(width) + "\" height=\"" + std::to_string(height) +
         "\" role=\"img\" font-family=\"sans-serif\" font-size=\"11\">";
}

std::string Text(double x, double y, const std::string& text, const char* anchor, const char* extra = "") {
  return "<text x=\"" + Px(x) + "\" y=\"" + Px(y) + "\" text-anchor=\"" + anchor + "\"" + extra + ">" +
         EscapeXml(text) + "</text>";
}

// Grid lines and tick labels on y; ticks on x unless `x_ticks` is false (bars label their groups).
std::string Axes(const Frame& f, const std::string& x_label, const std::string& y_label, bool x_ticks) {
  std::string s;
  const double ystep = TickStep(f.y1 - f.y0, 5);
  for (double y = std::ceil(f.y0 / ystep) * ystep; y <= f.y1 + ystep * 1e-9; y += ystep) {
    s += "<line x1=\"" + Px(kLeftPx) + "\" x2=\"" + Px(f.width - kRightPx) + "\" y1=\"" + Px(f.Y(y)) + "\" y2=\"" +
         Px(f.Y(y)) + "\" stroke=\"#ddd\"/>";
    s += Text(kLeftPx - 4, f.Y(y) + 4, Label(y), "end");
  }
  if (x_ticks) {
    const double xstep = TickStep(f.x1 - f.x0, 8);
    for (double x = std::ceil(f.x0 / xstep) * xstep; x <= f.x1 + xstep * 1e-9; x += xstep) {
      s += Text(f.X(x), f.height - kBottomPx + 14, Label(x), "middle");
    }
  }
  s += "<line x1=\"" + Px(kLeftPx) + "\" x2=\"" + Px(f.width - kRightPx) + "\" y1=\"" + Px(f.Y(f.y0)) +
       "\" y2=\"" + Px(f.Y(f.y0)) + "\" stroke=\"#444\"/>";
  s += Text((kLeftPx + f.width - kRightPx) / 2.0, f.height - 6, x_label, "middle");
  s += Text(14, (kTopPx + f.height - kBottomPx) / 2.0, y_label, "middle",
            (" transform=\"rotate(-90 14 " + Px((kTopPx + f.height - kBottomPx) / 2.0) + ")\"").c_str());
  return s;
}

std::string Legend(const std::vector<std::string>& names, int width) {
  std::string s;
  double x = kLeftPx;
  for (size_t i = 0; i < names.size(); ++i) {
    s += "<rect x=\"" + Px(x) + "\" y=\"8\" width=\"10\" height=\"10\" fill=\"" + Colour(i) + "\"/>";
    s += Text(x + 14, 17, names[i], "start");
    x += 24 + 6.5 * static_cast<double>(std::min<size_t>(names[i].size(), 40));
    if (x > width - 80) break;
  }
  return s;
}

std::vector<std::pair<double, double>> Finite(const std::vector<std::pair<double, double>>& in) {
  std::vector<std::pair<double, double>> out;
  for (const auto& p : in) {
    if (std::isfinite(p.first) && std::isfinite(p.second)) out.push_back(p);
  }
  if (out.size() <= kMaxChartPoints) return out;
  std::vector<std::pair<double, double>> thin;
  for (size_t i = 0; i < kMaxChartPoints; ++i) thin.push_back(out[i * (out.size() - 1) / (kMaxChartPoints - 1)]);
  return thin;
}

// At most `bytes` bytes of `text`, not cutting a UTF-8 sequence.
std::string Clip(const std::string& text, size_t bytes) {
  if (text.size() <= bytes) return text;
  while (bytes > 0 && (static_cast<unsigned char>(text[bytes]) & 0xC0) == 0x80) --bytes;
  return text.substr(0, bytes);
}

std::string NoData(int width, int height) {
  return Open(width, height) + Text(width / 2.0, height / 2.0, "no data", "middle") + "</svg>";
}

std::string Polyline(const Frame& f, const std::vector<std::pair<double, double>>& pts, bool steps, size_t i) {
  std::string s = "<polyline fill=\"none\" stroke-width=\"1.8\" stroke=\"" + std::string(Colour(i)) + "\" points=\"";
  for (size_t k = 0; k < pts.size(); ++k) {
    if (steps && k > 0) s += Px(f.X(pts[k].first)) + "," + Px(f.Y(pts[k - 1].second)) + " ";
    s += Px(f.X(pts[k].first)) + "," + Px(f.Y(pts[k].second)) + " ";
  }
  if (!pts.empty()) s.pop_back();
  return s + "\"/>";
}

}  // namespace

std::string EscapeXml(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (char c : text) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&quot;"; break;
      case '\'': out += "&#39;"; break;
      default: out += c;
    }
  }
  return out;
}

double TickStep(double span, int ticks) {
  if (!(span > 0) || ticks < 1) return 1;
  const double raw = span / ticks;
  const double power = std::pow(10.0, std::floor(std::log10(raw)));
  for (double m : {1.0, 2.0, 5.0}) {
    if (m * power >= raw) return m * power;
  }
  return 10 * power;
}

std::string LineChartSvg(const std::vector<ChartSeries>& series, const ChartAxes& axes, int width_px, int height_px) {
  std::vector<std::vector<std::pair<double, double>>> pts;
  std::vector<std::string> names;
  Frame f{width_px, height_px, INFINITY, -INFINITY, axes.y_min, axes.y_min};
  for (size_t i = 0; i < series.size() && i < kMaxChartSeries; ++i) {
    pts.push_back(Finite(series[i].points));
    names.push_back(series[i].name);
    for (const auto& [x, y] : pts.back()) {
      f.x0 = std::min(f.x0, x);
      f.x1 = std::max(f.x1, x);
      f.y1 = std::max(f.y1, y);
    }
  }
  if (!(f.x0 <= f.x1)) return NoData(width_px, height_px);
  if (f.x1 == f.x0) f.x1 = f.x0 + 1;
  if (axes.y_max) {
    f.y1 = *axes.y_max;
  } else {
    const double step = TickStep(std::max(f.y1 - f.y0, 1e-9), 5);
    f.y1 = std::max(f.y0 + step, std::ceil(f.y1 / step) * step);
  }
  std::string s = Open(width_px, height_px) + Axes(f, axes.x_label, axes.y_label, true);
  for (size_t i = 0; i < pts.size(); ++i) s += Polyline(f, pts[i], axes.steps, i);
  return s + Legend(names, width_px) + "</svg>";
}

std::string BarChartSvg(const std::vector<BarGroup>& groups, const std::vector<std::string>& bar_names,
                        const std::string& y_label, int width_px, int height_px) {
  double top = 0;
  for (const BarGroup& g : groups) {
    for (double v : g.values) top = std::isfinite(v) ? std::max(top, v) : top;
  }
  if (groups.empty() || bar_names.empty()) return NoData(width_px, height_px);
  const double step = TickStep(std::max(top, 1e-9), 5);
  const Frame f{width_px, height_px, 0, static_cast<double>(groups.size()), 0,
                std::max(step, std::ceil(top / step) * step)};
  std::string s = Open(width_px, height_px) + Axes(f, "", y_label, false);
  const double group_px = f.X(1) - f.X(0), bar_px = group_px * 0.8 / static_cast<double>(bar_names.size());
  for (size_t g = 0; g < groups.size(); ++g) {
    for (size_t b = 0; b < bar_names.size() && b < groups[g].values.size(); ++b) {
      const double v = std::isfinite(groups[g].values[b]) ? std::max(0.0, groups[g].values[b]) : 0;
      const double x = f.X(static_cast<double>(g)) + group_px * 0.1 + bar_px * static_cast<double>(b);
      s += "<rect x=\"" + Px(x) + "\" y=\"" + Px(f.Y(v)) + "\" width=\"" + Px(bar_px) + "\" height=\"" +
           Px(f.Y(0) - f.Y(v)) + "\" fill=\"" + Colour(b) + "\"><title>" + EscapeXml(groups[g].label) + ", " +
           EscapeXml(bar_names[b]) + ": " + Label(v) + "</title></rect>";
    }
    s += Text(f.X(static_cast<double>(g) + 0.5), height_px - kBottomPx + 14, Clip(groups[g].label, 24), "middle");
  }
  return s + Legend(bar_names, width_px) + "</svg>";
}

}  // namespace gpupool
