#include "doctor/detail_text.h"

#include <sstream>

namespace ringpilot::doctor {

std::string LastLine(const std::string& text) {
  std::string last;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) {
    if (!line.empty()) last = line;
  }
  return last;
}

std::string Join(const std::vector<std::string>& parts, const std::string& sep) {
  std::string out;
  for (std::size_t i = 0; i < parts.size(); ++i) out += (i ? sep : "") + parts[i];
  return out;
}

std::string NcclVersionText(int v) {
  if (v >= 10000) {
    return std::to_string(v / 10000) + "." + std::to_string((v % 10000) / 100) + "." +
           std::to_string(v % 100);
  }
  return std::to_string(v / 1000) + "." + std::to_string((v % 1000) / 100) + "." +
         std::to_string(v % 100);
}

std::string FormatBytes(std::uint64_t bytes) {
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  double v = static_cast<double>(bytes);
  int u = 0;
  while (v >= 1024 && u < 4) {
    v /= 1024;
    ++u;
  }
  std::ostringstream out;
  out.precision(v == static_cast<double>(static_cast<std::uint64_t>(v)) ? 0 : 1);
  out << std::fixed << v << " " << units[u];
  return out.str();
}

}  // namespace ringpilot::doctor
