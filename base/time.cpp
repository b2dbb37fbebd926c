#include "base/time.h"

#include <cmath>
#include <cstdio>

namespace ringpilot::base {

double Seconds(std::chrono::steady_clock::time_point a, std::chrono::steady_clock::time_point b) {
  return std::chrono::duration<double>(b - a).count();
}

double UnixNow() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

std::string FormatDuration(double s) {
  char buf[32];
  if (s < 120) {
    std::snprintf(buf, sizeof(buf), "%.0fs", s);
  } else if (s < 7200) {
    std::snprintf(buf, sizeof(buf), "%.0fm%02.0fs", std::floor(s / 60), std::fmod(s, 60));
  } else {
    std::snprintf(buf, sizeof(buf), "%.1fh", s / 3600);
  }
  return buf;
}

}  // namespace ringpilot::base
