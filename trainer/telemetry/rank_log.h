// Per-rank log file (RUN_DIR/logs/rank-N.log), optionally echoed to stdout (rank 0's
// progress lines reach the user through mpirun and the front end). Every line is
// `TIME LEVEL message`, TIME in base::FormatLogTime's format (ISO 8601, UTC, milliseconds)
// and LEVEL one of INFO, WARN, FATAL; `ringpilot logs` shows them as they are.
#pragma once

#include <cstdio>
#include <mutex>
#include <string>

namespace ringpilot::trainer::telemetry {

/// Thread-safe: every method may be called from any thread (one line at a time).
///
/// The log never stops the rank: when `path` cannot be opened or a line cannot be written
/// (disk full, I/O error), one line on stderr names the path and errno, and from then on
/// every line goes to stderr instead (mpirun carries it into launcher.log). The condition
/// that broke the log (a full disk) fails the next checkpoint with its own FATAL.
class RankLog {
 public:
  /// Opens `path` for appending (resumed runs keep earlier attempts' lines). With
  /// `echo_stdout`, Info lines are echoed to stdout; Detail lines only with `echo_detail`
  /// too (`ringpilot run --verbose`).
  RankLog(const std::string& path, int rank, bool echo_stdout, bool echo_detail = false);
  ~RankLog();
  RankLog(const RankLog&) = delete;
  RankLog& operator=(const RankLog&) = delete;

  void Info(const std::string& line);
  /// An INFO line of start-up detail (cluster view, placement plan): in the log always,
  /// on the terminal only when verbose.
  void Detail(const std::string& line);
  /// To the log and stderr.
  void Warn(const std::string& line);
  /// `TIME FATAL message` (newlines in `line` become "; ", so it stays one line): the
  /// front end finds the first failing rank by it (launcher/failure_report.h).
  void Fatal(const std::string& line);

 private:
  void Write(const char* level, const std::string& line, FILE* echo,
             const std::string& echo_prefix);
  std::string Prefix() const;  // of echoed INFO/WARN lines
  // The log file is lost: says why once (path, errno) and closes it.
  void GiveUpFile(const char* what, int error);
  std::mutex mu_;
  std::string path_;
  FILE* file_ = nullptr;
  int rank_;
  bool echo_;
  bool echo_detail_;
};

}  // namespace ringpilot::trainer::telemetry
