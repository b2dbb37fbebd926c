// Wall-clock helpers shared by the launcher and the ranks.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>

namespace ringpilot::base {

/// Seconds from `a` to `b`.
double Seconds(std::chrono::steady_clock::time_point a, std::chrono::steady_clock::time_point b);

/// Unix time in seconds (system clock).
double UnixNow();

/// CLOCK_REALTIME in nanoseconds since the Unix epoch.
int64_t UnixNowNs();

/// CLOCK_MONOTONIC in nanoseconds: deadlines and intervals (async-signal-safe).
int64_t MonotonicNs();

/// "42s", "3m05s", "1.5h".
std::string FormatDuration(double seconds);

/// The one time format of every log line ringpilot writes (rank logs, FATAL lines included,
/// and launcher.log) and of the times in its JSON files: ISO 8601 in UTC with milliseconds,
/// "2026-11-22T09:15:02.347Z" (24 characters, kLogTimeLength).
inline constexpr std::size_t kLogTimeLength = 24;
std::string FormatLogTime(std::chrono::system_clock::time_point t);
/// FormatLogTime of now.
std::string LogTimeNow();
/// FormatLogTime of a Unix time in seconds, to the nearest millisecond.
std::string FormatLogTime(double unix_seconds);
/// Unix time in ns of a FormatLogTime text (exactly that shape: the first kLogTimeLength
/// characters of `text` are read, the rest ignored); nullopt for anything else.
std::optional<int64_t> ParseLogTimeNs(const std::string& text);

}  // namespace ringpilot::base
