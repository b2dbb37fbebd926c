// RUN_DIR/logs/rank-N.heartbeat: where a trainer rank is. trainer/telemetry/heartbeat.h
// rewrites it (write + rename) once a second from a thread of its own, so a rank blocked
// in a collective keeps beating while a stopped one does not; the launcher's failure
// report and hang watch, and `ringpilot status`, read it (launcher/failure_report.h).
// This file is the format's one definition: the writer formats through it, every reader
// parses through it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <string>

namespace ringpilot::history {

/// logs/rank-N<this>.
inline constexpr const char* kTrainerBeatSuffix = ".heartbeat";

struct TrainerBeat {
  int rank = -1;
  int64_t step = 0;          ///< 0-based step it was running (or had just run)
  std::string phase;         ///< "start", "step", "eval", "checkpoint", "done", "abort"
  double unix = 0;           ///< when it was written (the rank's host clock)
  double max_silence_s = 0;  ///< longest gap between its beats: a stopped rank's is long
  uint64_t collectives_started = 0;
  uint64_t collectives_completed = 0;
  int64_t steps = 0;                          ///< the attempt's step target; 0 when not known yet
  std::optional<double> loss = std::nullopt;  ///< the latest loss it logged, when finite
};

/// logs_dir/rank-N.heartbeat.
std::string TrainerBeatPath(const std::string& logs_dir, int rank);

/// The file's text (one JSON object and a newline) into `buffer`; its length, or 0 when it
/// does not fit. Allocates nothing and does not throw (phase names are short: no
/// allocation copying them either), so a fatal-error path may call it.
size_t FormatTrainerBeat(const TrainerBeat& beat, char* buffer, size_t size);

/// Every rank's beat in `logs_dir` written at or after `since_unix`, by rank; unreadable or
/// malformed files, and a missing folder, give none.
std::map<int, TrainerBeat> ReadTrainerBeats(const std::string& logs_dir, double since_unix);

}  // namespace ringpilot::history
