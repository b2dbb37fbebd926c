// Root cause of a job that failed for good: which rank failed first, how, and its last
// log lines -- written as RUN_DIR/failure.json and summarised in a few printed lines.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace ringpilot::launcher {

/// Lines of each rank log kept in failure.json.
inline constexpr int kFailureTailLines = 10;

/// A trainer's last word before it exits on error, one line in logs/rank-N.log:
/// `FATAL <unix_time_ns> <message>`.
struct FatalLine {
  int rank = -1;
  int64_t time_ns = 0;
  std::string message;
};

/// Parses one log line; nullopt unless it starts with `FATAL `, a decimal time and a space
/// (or the end of the line). `rank` is left at -1.
std::optional<FatalLine> ParseFatalLine(const std::string& line);

/// The earliest FATAL line at or after `since_ns` over every `rank-N.log` in `logs_dir`;
/// lines before `since_ns` belong to an earlier attempt and are ignored.
std::optional<FatalLine> FindFirstFatal(const std::string& logs_dir, int64_t since_ns);

/// The failing rank named in mpirun's own output: OpenMPI's "Process name: [[J,S],R]"
/// first, else the first "rank R" phrase (e.g. "MPI_ABORT was invoked on rank R",
/// "process rank R ... exited on signal"); -1 when neither occurs.
int RankFromMpirunOutput(const std::vector<std::string>& lines);

/// The last `n` lines of a text file (fewer when it is shorter; empty when unreadable).
std::vector<std::string> TailLines(const std::string& path, int n);

/// Last lines of every rank-N.log in `logs_dir`, by rank.
std::map<int, std::vector<std::string>> RankLogTails(const std::string& logs_dir, int n);

/// How a job ended for good.
struct FailureReport {
  int attempts = 0;
  int exit_code = -1;   ///< mpirun's exit status; -1 when it was killed by a signal
  int term_signal = 0;  ///< signal that killed mpirun; 0 when it exited
  int first_failing_rank = -1;
  std::string rank_source;  ///< "fatal_line", "mpirun_output" or "unknown"
  std::optional<FatalLine> fatal;
  std::map<int, std::vector<std::string>> last_lines;  ///< rank -> last log lines
  std::vector<std::string> mpirun_last_lines;
};

/// Finds the first failing rank (FATAL lines since `attempt_start_ns`, else mpirun's
/// output, else -1) and collects the log tails.
FailureReport AnalyzeFailure(const std::string& logs_dir, int64_t attempt_start_ns,
                             const std::vector<std::string>& mpirun_output, int attempts,
                             int exit_code, int term_signal);

/// failure.json: {attempts, exit_code | signal + signal_name, first_failing_rank,
/// first_failing_rank_source, fatal_message, fatal_time_ns, last_lines: {"R": [...]},
/// mpirun_last_lines}.
std::string FailureJson(const FailureReport& report);

/// A few `ringpilot: ...` lines for the terminal; `failure_json_path` is where the
/// details are.
std::vector<std::string> FailureSummary(const FailureReport& report,
                                        const std::string& failure_json_path);

/// "SIGKILL" for 9 etc.; "signal N" when unnamed.
std::string SignalName(int sig);

}  // namespace ringpilot::launcher
