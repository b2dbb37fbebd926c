// RUN_DIR/logs/rank-N.program.json: a launch.command rank as `ringpilot exec --log-dir`
// sees it (launcher/rank_program.h rewrites it about once a second while the program runs
// and once when it ended): the process, and the progress the program reported with a
// progress line (docs/programs.md, "Progress and checkpoints"). The launcher's view where
// the program sends no heartbeat of its own; read by `ringpilot status`, `stop` and
// `diagnose`.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>

namespace ringpilot::history {

/// logs/rank-N<this>.
inline constexpr const char* kProgramBeatSuffix = ".program.json";

/// What a program reported with its last progress line.
struct ProgramProgress {
  int64_t step = 0;            ///< steps done
  int64_t steps = 0;           ///< its target; 0 when the line gave none
  std::optional<double> loss;  ///< finite, when the line gave one
  double unix = 0;             ///< when the line was printed (the wrapper's clock)
};

struct ProgramBeat {
  int rank = -1;
  int pid = 0;          ///< the program's process
  std::string command;  ///< its command line, shell-quoted
  std::string state;    ///< "running", or "exited" (the last beat)
  double started_unix = 0;
  double unix = 0;                    ///< when this beat was written
  std::optional<double> cpu_seconds;  ///< user + system CPU time of the process
  std::optional<int64_t> rss_bytes;   ///< its resident memory
  std::optional<ProgramProgress> progress;
  std::optional<int> status;  ///< the exit status as a shell gives it, once exited
};

/// logs_dir/rank-N.program.json.
std::string ProgramBeatPath(const std::string& logs_dir, int rank);

/// The file's text (one JSON object and a newline).
std::string ProgramBeatJson(const ProgramBeat& beat);

/// Every rank's beat in `logs_dir` written at or after `since_unix`, by rank; unreadable or
/// malformed files are left out.
std::map<int, ProgramBeat> ReadProgramBeats(const std::string& logs_dir, double since_unix);

}  // namespace ringpilot::history
