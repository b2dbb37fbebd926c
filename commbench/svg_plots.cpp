#include "commbench/svg_plots.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <sstream>
#include <utility>

#include "base/text.h"
#include "commbench/command.h"

namespace ringpilot::commbench {
namespace {

std::string XmlEscaped(const std::string& text) {
  std::string o;
  for (char c : text) {
    if (c == '<') {
      o += "&lt;";
    } else if (c == '>') {
      o += "&gt;";
    } else if (c == '&') {
      o += "&amp;";
    } else {
      o += c;
    }
  }
  return o;
}

// The document's head: size, white background, the title centred on top.
void OpenSvg(std::ostream& o, double width, double height, const std::string& title) {
  o << "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
    << "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" << width << "\" height=\"" << height
    << "\" viewBox=\"0 0 " << width << " " << height
    << "\" font-family=\"sans-serif\" font-size=\"12\">\n"
    << "<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n"
    << "<text x=\"" << width / 2 << "\" y=\"22\" text-anchor=\"middle\" font-size=\"15\">"
    << XmlEscaped(title) << "</text>\n";
}

}  // namespace

std::string RenderBusBandwidthSvg(const nlohmann::json& results, const std::string& title) {
  struct Series {
    std::string name;
    bool in_place = false;
    std::vector<std::pair<double, double>> points;  // log2(bytes), busbw
  };
  std::vector<Series> series;
  std::map<std::string, std::size_t> index;
  double x_min = 1e300, x_max = -1e300, y_max = 0;
  for (const nlohmann::json& r : results) {
    const std::size_t bytes = r.at("bytes").get<std::size_t>();
    if (bytes == 0) continue;
    const bool in_place = r.at("in_place").get<bool>();
    const std::string key = r.at("op").get<std::string>() + (in_place ? " (in-place)" : "");
    if (!index.count(key)) {
      index[key] = series.size();
      series.push_back({key, in_place, {}});
    }
    const double x = std::log2(static_cast<double>(bytes));
    const double y = r.at("busbw_gbps").get<double>();
    series[index[key]].points.emplace_back(x, y);
    x_min = std::min(x_min, x);
    x_max = std::max(x_max, x);
    y_max = std::max(y_max, y);
  }
  if (series.empty()) x_min = x_max = 0;
  if (x_max <= x_min) x_max = x_min + 1;
  if (y_max <= 0) y_max = 1;
  y_max *= 1.1;
  constexpr double kW = 800, kH = 480, kLeft = 70, kRight = 190, kTop = 40, kBottom = 60;
  const double pw = kW - kLeft - kRight, ph = kH - kTop - kBottom;
  auto px = [&](double x) { return kLeft + (x - x_min) / (x_max - x_min) * pw; };
  auto py = [&](double y) { return kTop + ph - y / y_max * ph; };
  static const char* colors[] = {"#1f77b4", "#ff7f0e", "#2ca02c", "#d62728",
                                 "#9467bd", "#8c564b", "#e377c2", "#17becf"};
  std::ostringstream o;
  OpenSvg(o, kW, kH, title);
  // Axes, grid and ticks: every power of two on x (every other one when crowded).
  o << "<g stroke=\"#888\" fill=\"none\"><rect x=\"" << kLeft << "\" y=\"" << kTop << "\" width=\""
    << pw << "\" height=\"" << ph << "\"/></g>\n";
  const int first = static_cast<int>(std::ceil(x_min));
  const int last = static_cast<int>(std::floor(x_max));
  const int step = last - first > 12 ? 2 : 1;
  for (int e = first; e <= last; e += step) {
    const double x = px(e);
    o << "<line x1=\"" << x << "\" y1=\"" << kTop << "\" x2=\"" << x << "\" y2=\"" << kTop + ph
      << "\" stroke=\"#eee\"/>\n<text x=\"" << x << "\" y=\"" << kTop + ph + 16
      << "\" text-anchor=\"middle\">" << FormatByteSize(std::size_t{1} << e) << "</text>\n";
  }
  for (int i = 0; i <= 5; ++i) {
    const double v = y_max * i / 5, y = py(v);
    o << "<line x1=\"" << kLeft << "\" y1=\"" << y << "\" x2=\"" << kLeft + pw << "\" y2=\"" << y
      << "\" stroke=\"#eee\"/>\n<text x=\"" << kLeft - 6 << "\" y=\"" << y + 4
      << "\" text-anchor=\"end\">" << base::FormatFixed(v, v < 10 ? 2 : 1) << "</text>\n";
  }
  o << "<text x=\"" << kLeft + pw / 2 << "\" y=\"" << kH - 18
    << "\" text-anchor=\"middle\">size (bytes, log2 scale)</text>\n"
    << "<text x=\"18\" y=\"" << kTop + ph / 2
    << "\" text-anchor=\"middle\" transform=\"rotate(-90 18 " << kTop + ph / 2
    << ")\">busbw (GB/s)</text>\n";
  for (std::size_t s = 0; s < series.size(); ++s) {
    const char* color = colors[s % 8];
    o << "<polyline fill=\"none\" stroke=\"" << color << "\" stroke-width=\"2\""
      << (series[s].in_place ? " stroke-dasharray=\"6 3\"" : "") << " points=\"";
    for (std::size_t i = 0; i < series[s].points.size(); ++i) {
      o << (i ? " " : "") << base::FormatFixed(px(series[s].points[i].first), 1) << ","
        << base::FormatFixed(py(series[s].points[i].second), 1);
    }
    const double ly = kTop + 10 + 18 * static_cast<double>(s);
    o << "\"/>\n<line x1=\"" << kW - kRight + 15 << "\" y1=\"" << ly << "\" x2=\""
      << kW - kRight + 40 << "\" y2=\"" << ly << "\" stroke=\"" << color << "\" stroke-width=\"2\""
      << (series[s].in_place ? " stroke-dasharray=\"6 3\"" : "") << "/>\n<text x=\""
      << kW - kRight + 46 << "\" y=\"" << ly + 4 << "\">" << series[s].name << "</text>\n";
  }
  o << "</svg>\n";
  return o.str();
}

std::string RenderPairwiseSvg(const std::vector<std::vector<double>>& gbps, std::size_t bytes,
                              const std::string& title) {
  const std::size_t n = gbps.size();
  const auto slow = FindSlowPairs(gbps);
  double top = 0;
  for (std::size_t s = 0; s < n; ++s) {
    for (std::size_t d = 0; d < gbps[s].size(); ++d) {
      if (s != d) top = std::max(top, gbps[s][d]);
    }
  }
  // Cells shrink with the rank count to keep the map near 480 px; values are written only
  // where they fit.
  const double cell =
      std::max(6.0, std::min(56.0, 480.0 / static_cast<double>(std::max<std::size_t>(n, 1))));
  const bool numbers = cell >= 40;
  constexpr double kLeft = 90, kTop = 80;
  const double side = cell * static_cast<double>(n);
  const double width = std::max(kLeft + side + 140, 640.0);
  const double height =
      kTop + side + 60 + 16 * static_cast<double>(std::min<std::size_t>(slow.size(), 16));
  std::ostringstream o;
  OpenSvg(o, width, height, title);
  o << "<text x=\"" << width / 2 << "\" y=\"42\" text-anchor=\"middle\">send/recv GB/s, "
    << FormatByteSize(bytes) << " per transfer; rows send, columns receive; red: below 50% of "
    << "the median (" << base::FormatFixed(OffDiagonalMedian(gbps), 2) << ")</text>\n"
    << "<text x=\"" << kLeft + side / 2 << "\" y=\"" << kTop - 22
    << "\" text-anchor=\"middle\">receiving rank</text>\n"
    << "<text x=\"20\" y=\"" << kTop + side / 2
    << "\" text-anchor=\"middle\" transform=\"rotate(-90 20 " << kTop + side / 2
    << ")\">sending rank</text>\n";
  const int label_step = cell >= 14 ? 1 : static_cast<int>(std::ceil(14 / cell));
  for (std::size_t r = 0; r < n; r += static_cast<std::size_t>(label_step)) {
    const double c = static_cast<double>(r) * cell + cell / 2;
    o << "<text x=\"" << kLeft + c << "\" y=\"" << kTop - 6 << "\" text-anchor=\"middle\">" << r
      << "</text>\n<text x=\"" << kLeft - 6 << "\" y=\"" << kTop + c + 4
      << "\" text-anchor=\"end\">" << r << "</text>\n";
  }
  // Shade: white (0) to dark blue (the fastest pair), linear in GB/s.
  auto shade = [&](double v) {
    const double f = top > 0 ? std::clamp(v / top, 0.0, 1.0) : 0.0;
    const int red = static_cast<int>(std::lround(255 - f * (255 - 8)));
    const int green = static_cast<int>(std::lround(255 - f * (255 - 48)));
    const int blue = static_cast<int>(std::lround(255 - f * (255 - 107)));
    char buf[8];
    std::snprintf(buf, sizeof(buf), "#%02x%02x%02x", red, green, blue);
    return std::string(buf);
  };
  for (std::size_t s = 0; s < n; ++s) {
    for (std::size_t d = 0; d < n && d < gbps[s].size(); ++d) {
      const double x = kLeft + static_cast<double>(d) * cell;
      const double y = kTop + static_cast<double>(s) * cell;
      const bool flagged = IsSlowPair(slow, s, d);
      o << "<rect class=\"pair\" x=\"" << x << "\" y=\"" << y << "\" width=\"" << cell
        << "\" height=\"" << cell << "\" fill=\"" << (s == d ? "#dddddd" : shade(gbps[s][d]))
        << "\" stroke=\"" << (flagged ? "#d62728" : "#ffffff") << "\" stroke-width=\""
        << (flagged ? 3 : 1) << "\"><title>" << s << " -> " << d << ": "
        << (s == d ? std::string("-") : base::FormatFixed(gbps[s][d], 2) + " GB/s")
        << "</title></rect>\n";
      if (numbers && s != d) {
        const bool dark = top > 0 && gbps[s][d] / top > 0.55;
        o << "<text x=\"" << x + cell / 2 << "\" y=\"" << y + cell / 2 + 4
          << "\" text-anchor=\"middle\" font-size=\"11\" fill=\"" << (dark ? "white" : "black")
          << "\">" << base::FormatFixed(gbps[s][d], gbps[s][d] < 100 ? 1 : 0) << "</text>\n";
      }
    }
  }
  // Colour scale beside the map.
  const double bx = kLeft + side + 30;
  o << "<defs><linearGradient id=\"scale\" x1=\"0\" y1=\"1\" x2=\"0\" y2=\"0\"><stop offset=\"0\" "
    << "stop-color=\"" << shade(0) << "\"/><stop offset=\"1\" stop-color=\"" << shade(top)
    << "\"/></linearGradient></defs>\n<rect x=\"" << bx << "\" y=\"" << kTop
    << "\" width=\"16\" height=\"" << side
    << "\" fill=\"url(#scale)\" stroke=\"#888\"/>\n<text x=\"" << bx + 22 << "\" y=\"" << kTop + 10
    << "\">" << base::FormatFixed(top, 1) << " GB/s</text>\n<text x=\"" << bx + 22 << "\" y=\""
    << kTop + side << "\">0</text>\n";
  double ly = kTop + side + 28;
  for (std::size_t i = 0; i < slow.size() && i < 16; ++i, ly += 16) {
    const auto [s, d] = slow[i];
    o << "<text x=\"" << kLeft << "\" y=\"" << ly << "\" fill=\"#d62728\">slow: rank " << s
      << " -> rank " << d << ": "
      << base::FormatFixed(gbps[static_cast<std::size_t>(s)][static_cast<std::size_t>(d)], 2)
      << " GB/s</text>\n";
  }
  if (slow.empty()) {
    o << "<text x=\"" << kLeft << "\" y=\"" << ly << "\">no pair below 50% of the median</text>\n";
  }
  o << "</svg>\n";
  return o.str();
}

}  // namespace ringpilot::commbench
