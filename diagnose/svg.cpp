// Hand-written SVG plots of `ringpilot diagnose --svg-dir`: bus bandwidth against message
// size (per op, with the expected bandwidth dashed) and step time per rank (p50 bars with
// p99 marks, the straggler in red).
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>

#include "diagnose/diagnose.h"

namespace ringpilot::diagnose {
namespace {

constexpr double kWidth = 720, kHeight = 420;
constexpr double kLeft = 80, kRight = 160, kTop = 40, kBottom = 60;
constexpr double kPlotW = kWidth - kLeft - kRight, kPlotH = kHeight - kTop - kBottom;
const char* const kColors[] = {"#1f77b4", "#ff7f0e", "#2ca02c", "#9467bd", "#8c564b", "#17becf"};

std::string Num(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f", v);
  return buf;
}

std::string Short(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.3g", v);
  return buf;
}

std::string Escape(const std::string& s) {
  std::string out;
  for (char c : s) {
    switch (c) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '"':
        out += "&quot;";
        break;
      default:
        out += c;
    }
  }
  return out;
}

std::string Text(double x, double y, const std::string& s, const char* anchor = "start",
                 const std::string& extra = "") {
  return "<text x=\"" + Num(x) + "\" y=\"" + Num(y) + "\" text-anchor=\"" + anchor + "\"" + extra +
         ">" + Escape(s) + "</text>\n";
}

std::string Line(double x1, double y1, double x2, double y2, const std::string& style) {
  return "<line x1=\"" + Num(x1) + "\" y1=\"" + Num(y1) + "\" x2=\"" + Num(x2) + "\" y2=\"" +
         Num(y2) + "\" " + style + "/>\n";
}

std::string Header(const std::string& title) {
  return "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
         "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" +
         Num(kWidth) + "\" height=\"" + Num(kHeight) + "\" viewBox=\"0 0 " + Num(kWidth) + " " +
         Num(kHeight) +
         "\" font-family=\"sans-serif\" font-size=\"12\">\n"
         "<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n" +
         Text(kWidth / 2, 22, title, "middle", " font-size=\"15\"");
}

// Axes with a linear y scale from 0 to y_max, five grid lines.
std::string YAxis(double y_max, const std::string& label) {
  std::string s = Line(kLeft, kTop, kLeft, kTop + kPlotH, "stroke=\"black\"") +
                  Line(kLeft, kTop + kPlotH, kLeft + kPlotW, kTop + kPlotH, "stroke=\"black\"");
  for (int i = 0; i <= 5; ++i) {
    const double v = y_max * i / 5;
    const double y = kTop + kPlotH - kPlotH * i / 5;
    if (i > 0) s += Line(kLeft, y, kLeft + kPlotW, y, "stroke=\"#ddd\"");
    s += Text(kLeft - 6, y + 4, Short(v), "end");
  }
  s += "<text transform=\"translate(18," + Num(kTop + kPlotH / 2) +
       ") rotate(-90)\" text-anchor=\"middle\">" + Escape(label) + "</text>\n";
  return s;
}

double NiceMax(double v) {
  if (v <= 0) return 1;
  const double p = std::pow(10.0, std::floor(std::log10(v)));
  for (double m : {1.0, 2.0, 2.5, 5.0, 10.0}) {
    if (m * p >= v) return m * p;
  }
  return 10 * p;
}

std::string SizeLabel(double bytes) {
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  int u = 0;
  while (bytes >= 1024 && u < 4) {
    bytes /= 1024;
    ++u;
  }
  return Short(bytes) + units[u];
}

// Representative size of a bucket: the geometric middle of its bounds.
double BucketSize(const std::string& label) {
  const auto [lo, hi] = ParseSizeBucket(label);
  if (lo > 0 && hi > 0) return std::sqrt(lo * hi);
  if (hi > 0) return hi / 2;
  return lo > 0 ? lo : 1;
}

}  // namespace

std::string BusbwSvg(const Diagnosis& d) {
  std::string s = Header("Bus bandwidth vs message size (mean over ranks)");
  std::map<std::string, std::vector<std::pair<double, const CollectiveRow*>>> by_op;
  double y_max = 0, x_min = 1e300, x_max = 0;
  for (const CollectiveRow& row : d.collectives) {
    const double x = BucketSize(row.size_bucket);
    by_op[row.op].push_back({x, &row});
    y_max = std::max({y_max, row.busbw_mean / 1e9, row.expected / 1e9});
    x_min = std::min(x_min, x);
    x_max = std::max(x_max, x);
  }
  y_max = NiceMax(y_max);
  if (by_op.empty()) {
    s += YAxis(y_max, "busbw (GB/s)");
    s += Text(kLeft + kPlotW / 2, kTop + kPlotH / 2, "no collectives recorded", "middle");
    return s + "</svg>\n";
  }
  const double lx_min = std::log2(x_min) - 0.5, lx_max = std::log2(x_max) + 0.5;
  auto px = [&](double x) { return kLeft + kPlotW * (std::log2(x) - lx_min) / (lx_max - lx_min); };
  auto py = [&](double y) { return kTop + kPlotH - kPlotH * y / y_max; };
  s += YAxis(y_max, "busbw (GB/s)");
  for (double e = std::ceil(lx_min); e <= lx_max; e += 2) {
    const double x = px(std::pow(2.0, e));
    s += Line(x, kTop + kPlotH, x, kTop + kPlotH + 5, "stroke=\"black\"");
    s += Text(x, kTop + kPlotH + 18, SizeLabel(std::pow(2.0, e)), "middle");
  }
  s += Text(kLeft + kPlotW / 2, kHeight - 14, "message size (bucket middle, log scale)", "middle");
  int color = 0, legend = 0;
  for (auto& [op, points] : by_op) {
    std::sort(points.begin(), points.end(),
              [](const auto& a, const auto& b) { return a.first < b.first; });
    const std::string c = kColors[color++ % 6];
    std::string measured, expected;
    for (const auto& [x, row] : points) {
      measured += Num(px(x)) + "," + Num(py(row->busbw_mean / 1e9)) + " ";
      if (row->expected > 0) expected += Num(px(x)) + "," + Num(py(row->expected / 1e9)) + " ";
      s += "<circle cx=\"" + Num(px(x)) + "\" cy=\"" + Num(py(row->busbw_mean / 1e9)) +
           "\" r=\"4\" fill=\"" + (row->low ? std::string("#d62728") : c) + "\"><title>" +
           Escape(op + " " + row->size_bucket + ": " + Short(row->busbw_mean / 1e9) + " GB/s") +
           "</title></circle>\n";
    }
    s += "<polyline fill=\"none\" stroke=\"" + c + "\" stroke-width=\"2\" points=\"" + measured +
         "\"/>\n";
    const double ly = kTop + 12 + 18 * legend++;
    s += Line(kLeft + kPlotW + 12, ly, kLeft + kPlotW + 36, ly,
              "stroke=\"" + c + "\" stroke-width=\"2\"");
    s += Text(kLeft + kPlotW + 40, ly + 4, op);
    if (!expected.empty()) {
      s += "<polyline fill=\"none\" stroke=\"" + c +
           "\" stroke-width=\"1.5\" stroke-dasharray=\"6,4\" points=\"" + expected + "\"/>\n";
      const double ey = kTop + 12 + 18 * legend++;
      s += Line(kLeft + kPlotW + 12, ey, kLeft + kPlotW + 36, ey,
                "stroke=\"" + c + "\" stroke-dasharray=\"6,4\"");
      s += Text(kLeft + kPlotW + 40, ey + 4, op + " expected");
    }
  }
  return s + "</svg>\n";
}

std::string StepTimeSvg(const Diagnosis& d) {
  std::string s = Header("Step time per rank (bar: p50, mark: p99)");
  const auto& ranks = d.data.ranks;
  double y_max = 0;
  for (const RankStats& r : ranks) y_max = std::max({y_max, r.step_p50, r.step_p99});
  y_max = NiceMax(y_max);
  s += YAxis(y_max, "step time (s)");
  if (ranks.empty()) {
    s += Text(kLeft + kPlotW / 2, kTop + kPlotH / 2, "no per-rank statistics", "middle");
    return s + "</svg>\n";
  }
  const double slot = kPlotW / static_cast<double>(ranks.size());
  const double bar = std::min(60.0, slot * 0.6);
  auto py = [&](double y) { return kTop + kPlotH - kPlotH * y / y_max; };
  for (std::size_t i = 0; i < ranks.size(); ++i) {
    const RankStats& r = ranks[i];
    const bool culprit = d.straggler && d.straggler->rank == r.rank;
    const double cx = kLeft + slot * (static_cast<double>(i) + 0.5);
    const std::string fill = culprit ? "#d62728" : "#1f77b4";
    s += "<rect x=\"" + Num(cx - bar / 2) + "\" y=\"" + Num(py(r.step_p50)) + "\" width=\"" +
         Num(bar) + "\" height=\"" + Num(kTop + kPlotH - py(r.step_p50)) + "\" fill=\"" + fill +
         "\"><title>" +
         Escape("rank " + std::to_string(r.rank) + " (" + r.node + "): p50 " + Short(r.step_p50) +
                " s, p99 " + Short(r.step_p99) + " s") +
         "</title></rect>\n";
    s += Line(cx - bar / 2, py(r.step_p99), cx + bar / 2, py(r.step_p99),
              "stroke=\"black\" stroke-width=\"2\"");
    s += Line(cx, py(r.step_p50), cx, py(r.step_p99), "stroke=\"black\"");
    s += Text(cx, kTop + kPlotH + 18, std::to_string(r.rank), "middle");
  }
  s += Text(kLeft + kPlotW / 2, kHeight - 14, "rank", "middle");
  s += "<rect x=\"" + Num(kLeft + kPlotW + 12) + "\" y=\"" + Num(kTop + 4) +
       "\" width=\"14\" height=\"14\" fill=\"#1f77b4\"/>\n" +
       Text(kLeft + kPlotW + 32, kTop + 16, "p50") +
       Line(kLeft + kPlotW + 12, kTop + 32, kLeft + kPlotW + 26, kTop + 32,
            "stroke=\"black\" stroke-width=\"2\"") +
       Text(kLeft + kPlotW + 32, kTop + 36, "p99");
  if (d.straggler) {
    s += "<rect x=\"" + Num(kLeft + kPlotW + 12) + "\" y=\"" + Num(kTop + 44) +
         "\" width=\"14\" height=\"14\" fill=\"#d62728\"/>\n" +
         Text(kLeft + kPlotW + 32, kTop + 56, "straggler");
  }
  return s + "</svg>\n";
}

std::vector<std::string> WriteDiagnosisSvgs(const Diagnosis& d, const std::string& dir) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) throw std::runtime_error(dir + ": cannot create directory: " + ec.message());
  std::vector<std::string> written;
  for (const auto& [name, content] : {std::pair{"busbw-vs-size.svg", BusbwSvg(d)},
                                      std::pair{"step-time-per-rank.svg", StepTimeSvg(d)}}) {
    const std::string path = (std::filesystem::path(dir) / name).string();
    const std::string tmp = path + ".tmp";
    {
      std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
      out << content;
      out.flush();
      if (!out) throw std::runtime_error(path + ": cannot write");
    }
    std::filesystem::rename(tmp, path, ec);
    if (ec) throw std::runtime_error(path + ": cannot write: " + ec.message());
    written.push_back(path);
  }
  return written;
}

}  // namespace ringpilot::diagnose
