#include "base/time.h"

#include <cmath>
#include <cstdio>
#include <ctime>

namespace ringpilot::base {

double Seconds(std::chrono::steady_clock::time_point a, std::chrono::steady_clock::time_point b) {
  return std::chrono::duration<double>(b - a).count();
}

double UnixNow() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

namespace {
int64_t ClockNs(clockid_t clock) {
  timespec ts{};
  ::clock_gettime(clock, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1'000'000'000 + ts.tv_nsec;
}
}  // namespace

int64_t UnixNowNs() { return ClockNs(CLOCK_REALTIME); }

int64_t MonotonicNs() { return ClockNs(CLOCK_MONOTONIC); }

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

std::string FormatLogTime(std::chrono::system_clock::time_point t) {
  const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(t.time_since_epoch());
  // Floor division, so that times before 1970 (never expected) still print sensibly.
  int64_t secs = ms.count() / 1000;
  int64_t milli = ms.count() % 1000;
  if (milli < 0) milli += 1000, secs -= 1;
  const std::time_t tt = static_cast<std::time_t>(secs);
  std::tm tm{};
  ::gmtime_r(&tt, &tm);
  char buf[48];
  std::snprintf(buf, sizeof buf, "%04d-%02d-%02dT%02d:%02d:%02d.%03dZ", tm.tm_year + 1900,
                tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec,
                static_cast<int>(milli));
  return buf;
}

std::string LogTimeNow() { return FormatLogTime(std::chrono::system_clock::now()); }

std::string FormatLogTime(double unix_seconds) {
  // To the nearest millisecond: a double of seconds rarely holds a whole number of them.
  return FormatLogTime(std::chrono::system_clock::time_point(
      std::chrono::milliseconds(std::llround(unix_seconds * 1000.0))));
}

std::optional<int64_t> ParseLogTimeNs(const std::string& text) {
  // YYYY-MM-DDTHH:MM:SS.mmmZ
  static constexpr char kShape[] = "dddd-dd-ddTdd:dd:dd.dddZ";
  if (text.size() < kLogTimeLength) return std::nullopt;
  for (std::size_t i = 0; i < kLogTimeLength; ++i) {
    const char want = kShape[i];
    const char got = text[i];
    if (want == 'd' ? (got < '0' || got > '9') : got != want) return std::nullopt;
  }
  const auto num = [&text](std::size_t pos, std::size_t len) {
    int v = 0;
    for (std::size_t i = pos; i < pos + len; ++i) v = v * 10 + (text[i] - '0');
    return v;
  };
  std::tm tm{};
  tm.tm_year = num(0, 4) - 1900;
  tm.tm_mon = num(5, 2) - 1;
  tm.tm_mday = num(8, 2);
  tm.tm_hour = num(11, 2);
  tm.tm_min = num(14, 2);
  tm.tm_sec = num(17, 2);
  if (tm.tm_mon < 0 || tm.tm_mon > 11 || tm.tm_mday < 1 || tm.tm_mday > 31 || tm.tm_hour > 23 ||
      tm.tm_min > 59 || tm.tm_sec > 60) {
    return std::nullopt;
  }
  const std::time_t secs = ::timegm(&tm);
  return static_cast<int64_t>(secs) * 1'000'000'000 + static_cast<int64_t>(num(20, 3)) * 1'000'000;
}

}  // namespace ringpilot::base
