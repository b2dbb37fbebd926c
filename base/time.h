// Wall-clock helpers shared by the launcher and the ranks.
#pragma once

#include <chrono>
#include <string>

namespace ringpilot::base {

/// Seconds from `a` to `b`.
double Seconds(std::chrono::steady_clock::time_point a, std::chrono::steady_clock::time_point b);

/// Unix time in seconds (system clock).
double UnixNow();

/// "42s", "3m05s", "1.5h".
std::string FormatDuration(double seconds);

}  // namespace ringpilot::base
