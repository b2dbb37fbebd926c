#include "diagnose/report_format.h"

#include <algorithm>
#include <cstdio>

namespace ringpilot::diagnose::detail {

using nlohmann::json;

std::string Fmt(double v, int digits) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*f", digits, v);
  return buf;
}

void PrintTable(std::ostream& out, const std::vector<std::vector<std::string>>& rows,
                const std::string& indent) {
  std::vector<std::size_t> width;
  for (const auto& row : rows) {
    for (std::size_t i = 0; i < row.size(); ++i) {
      if (width.size() <= i) width.push_back(0);
      width[i] = std::max(width[i], row[i].size());
    }
  }
  for (const auto& row : rows) {
    std::string line = indent;
    for (std::size_t i = 0; i < row.size(); ++i) {
      line += row[i];
      if (i + 1 < row.size()) line += std::string(width[i] - row[i].size() + 2, ' ');
    }
    while (!line.empty() && line.back() == ' ') line.pop_back();
    out << line << "\n";
  }
}

json CollectiveJson(const CollectiveRow& row) {
  return {
      {"op", row.op},
      {"size_bucket", row.size_bucket},
      {"count", row.count},
      {"bytes_total", row.bytes_total},
      {"seconds_total", row.seconds_total},
      {"busbw_bytes_per_second", row.busbw_mean},
      {"busbw_min_bytes_per_second", row.busbw_min},
      {"busbw_min_rank", row.busbw_min_rank},
      {"expected_busbw_bytes_per_second", row.expected > 0 ? json(row.expected) : json(nullptr)},
      {"ratio", row.expected > 0 ? json(row.busbw_mean / row.expected) : json(nullptr)},
      {"below_half_of_expected", row.low}};
}

}  // namespace ringpilot::diagnose::detail
